"""A small OpenAI-compatible replica for the LiteLLM tests and benchmark (127.0.0.1 only).

`python -m leastload_testkit.llm_replica [--port N]` serves, in one asyncio process:

- POST /v1/chat/completions: a chat completion of `completion_tokens` tokens,
  as one JSON answer after `delay` seconds, or (`"stream": true`) as
  server-sent events whose first chunk comes after `ttfb` seconds and whose
  last comes `delay` seconds after generation started (usage in a final chunk when
  `stream_options.include_usage` asks). A call fails with a 500 at the rate
  `error_rate` (a seeded draw: the same run, the same failures). With
  `slots` > 0 at most that many calls generate at once (an LLM server's
  batch); the others wait in line first, as on a loaded server.
- POST /control: JSON of settings to change (delay, ttfb, completion_tokens,
  error_rate, slots, seed); GET /stats: what it served (requests, in_flight,
  max_in_flight, errors, prompt_tokens, completion_tokens).

Prompt tokens are counted as the whitespace-separated words of the messages.
`start_replica(**settings)` runs one in a child process and returns a handle
(`.port`, `.url`, `.set()`, `.stats()`, `.stop()`). Every wait is bounded.
"""
import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
import urllib.request

from .processes import Server, kit_module

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
READ_TIMEOUT = 30.0
START_TIMEOUT = 20.0


class Replica:
    def __init__(self) -> None:
        self.settings = {"delay": 0.01, "ttfb": 0.005, "completion_tokens": 8, "error_rate": 0.0, "slots": 0}
        self.generating = 0  # calls holding a slot now
        self.waiting: "asyncio.Queue[asyncio.Future[None]]" = asyncio.Queue()
        self.random = random.Random(0)
        self.stats = {"requests": 0, "in_flight": 0, "max_in_flight": 0, "errors": 0,
                      "prompt_tokens": 0, "completion_tokens": 0}

    def control(self, changes: dict) -> None:
        for name, value in changes.items():
            if name == "seed":
                self.random = random.Random(value)
            elif name in self.settings:
                self.settings[name] = type(self.settings[name])(value)
            else:
                raise ValueError(f"unknown setting {name!r}")

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another, until the client closes
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                        ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0"))
                if length > MAX_BODY or "chunked" in headers.get("transfer-encoding", ""):
                    await self.answer(writer, 413, {"error": "body too large or chunked"}, close=True)
                    return
                body = await asyncio.wait_for(reader.readexactly(length), READ_TIMEOUT) if length else b""
                if path.endswith("/chat/completions") and method == "POST":
                    await self.completion(json.loads(body or b"{}"), writer)
                elif path == "/control" and method == "POST":
                    try:
                        self.control(json.loads(body))
                    except (ValueError, TypeError) as exc:
                        await self.answer(writer, 400, {"error": str(exc)})
                    else:
                        await self.answer(writer, 200, self.settings)
                elif path == "/stats":
                    await self.answer(writer, 200, self.stats)
                else:
                    await self.answer(writer, 404, {"error": f"no {method} {path}"})
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            return
        finally:
            writer.close()

    async def answer(self, writer, status, obj, close=False, content_type="application/json") -> None:
        body = json.dumps(obj).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large",
                  500: "Internal Server Error"}[status]
        close_line = "Connection: close\r\n" if close else ""
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                     f"Content-Length: {len(body)}\r\n{close_line}\r\n".encode() + body)
        await asyncio.wait_for(writer.drain(), READ_TIMEOUT)

    async def completion(self, request: dict, writer: asyncio.StreamWriter) -> None:
        s, stats = dict(self.settings), self.stats
        stats["requests"] += 1
        stats["in_flight"] += 1
        stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        await self.take_slot(s["slots"])
        started = time.monotonic()  # generation starts: `delay` counts from here
        try:
            words = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
            n = s["completion_tokens"]
            model = request.get("model", "replica")
            if self.random.random() < s["error_rate"]:
                await asyncio.sleep(s["ttfb"])
                stats["errors"] += 1
                await self.answer(writer, 500, {"error": {"message": "replica error", "type": "server_error"}})
                return
            usage = {"prompt_tokens": words, "completion_tokens": n, "total_tokens": words + n}
            stats["prompt_tokens"] += words
            stats["completion_tokens"] += n
            ident = f"chatcmpl-{stats['requests']}"
            if not request.get("stream"):
                await asyncio.sleep(s["delay"])
                await self.answer(writer, 200, {
                    "id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": " ".join(["tok"] * n)}}],
                    "usage": usage})
                return
            await asyncio.sleep(s["ttfb"])
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

            def event(obj) -> bytes:
                data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
                return b"%x\r\n%s\r\n" % (len(data), data)

            def chunk(delta, finish=None) -> dict:
                return {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            gap = max(0.0, s["delay"] - s["ttfb"]) / max(1, n)
            for i in range(n):
                if i:
                    await asyncio.sleep(gap)
                writer.write(event(chunk({"role": "assistant", "content": "tok "} if i == 0 else {"content": "tok "})))
                await asyncio.wait_for(writer.drain(), READ_TIMEOUT)
            await asyncio.sleep(max(0.0, started + s["delay"] - time.monotonic()))
            writer.write(event(chunk({}, "stop")))
            if (request.get("stream_options") or {}).get("include_usage"):
                last = chunk({})
                last["choices"], last["usage"] = [], usage
                writer.write(event(last))
            writer.write(event(b"[DONE]") + b"0\r\n\r\n")
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT)
        finally:
            stats["in_flight"] -= 1
            self.give_slot()

    async def take_slot(self, slots: int) -> None:
        if slots and self.generating >= slots:
            turn = asyncio.get_running_loop().create_future()
            self.waiting.put_nowait(turn)
            await turn  # handed over by give_slot(): the count stays as it is
        else:
            self.generating += 1

    def give_slot(self) -> None:
        while not self.waiting.empty():
            turn = self.waiting.get_nowait()
            if not turn.done():
                turn.set_result(None)  # the slot passes to the next in line
                return
        self.generating -= 1


async def main(port: int, exit_on_eof: bool) -> None:
    replica = Replica()
    server = await asyncio.start_server(replica.serve, "127.0.0.1", port, limit=MAX_HEAD, backlog=1024)
    print(f"listening on 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    if exit_on_eof:  # the parent holds our stdin: when it dies, the pipe closes and we go too
        loop = asyncio.get_running_loop()
        loop.add_reader(sys.stdin.fileno(), lambda: sys.stdin.buffer.read1(4096) or server.close())
    async with server:
        try:
            await server.serve_forever()
        except asyncio.CancelledError:  # closed: the parent has gone
            pass


class ReplicaProcess(Server):
    """A replica in a child process (a Server); `settings` as /control takes them."""

    def __init__(self, **settings: object) -> None:
        cmd, env = kit_module("llm_replica", "--port", "0", "--exit-on-eof")
        super().__init__("replica", cmd, env=env, stdin=subprocess.PIPE)
        try:
            self.wait_listening(START_TIMEOUT)
        except RuntimeError:
            self.stop()
            raise
        self.url = f"http://127.0.0.1:{self.port}/v1"
        if settings:
            self.set(**settings)

    def _call(self, path: str, data: object = None) -> dict:
        body = None if data is None else json.dumps(data).encode()
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body),
                                    timeout=10) as response:
            return json.loads(response.read())

    def set(self, **settings: object) -> dict:
        return self._call("/control", settings)

    def stats(self) -> dict:
        return self._call("/stats")


start_replica = ReplicaProcess

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--exit-on-eof", action="store_true", help="exit when stdin closes (the parent died)")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.port, args.exit_on_eof))
    except KeyboardInterrupt:
        pass
