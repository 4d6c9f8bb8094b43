"""The leastload proxy's own CPU per request, split by stage, timed in-process.

proxy_vs_haproxy.py measures what a request costs the whole proxy process on
real sockets; this module says where, inside that, the proxy's own work goes.
Each stage is timed with timeit (best of `repeat` runs of `number` requests),
on the proxy's real objects from `leastload.proxy`, with the request wrk sends
(`GET / HTTP/1.1` and its Host) and the answer of `python -m leastload.cli.backends`
(200, Content-Length, Content-Type, a body of `size` bytes, in one piece):

- parse: the client side reading one request: `RequestReader.feed(request)`,
  `next_event()` (COMPLETE at once: wrk's request comes whole) and
  `start_next()`, on one reader, as the client connection uses it.
- pick: the engine's choice, `acquire(None, None)` on a 3-service VirtualServer
  (outlier_failures=5). Acquires are timed in batches of up to 1000, each kept
  in a list by `append` (whose cost, timed alone, is taken off); the batch's
  transactions are finished in the next batch's setup, outside the timed part.
  The pool's take() and put() are not in it: compiled, they are C-only methods
  that Python cannot call, so they fall in "other work of the path".
- forward: the request made for the backend (`encode_request`, as the client
  connection calls it) and the answer's way back (`ResponseReader.start()`
  then `feed(response)`, which returns the bytes for the client).
- account: the engine's records and finish for the request (the figure of
  engine_ns_per_request, the same statement, less the
  acquire timed in pick), and the proxy's counters for the answer
  (`Stats.of(name)`, requests, bytes_in, bytes_out, `add_ttfb`, by_class[2]).
- whole: one request through a started `Proxy` with stand-in transports that
  drop the bytes (as benchmarks/test_bench_proxy_path.py does): every line of
  the per-request path, without the event loop, system calls and kernel.

"other" is whole - (parse + pick + forward + account): the connections' and
the exchange's own code around the stages (dispatch, the Exchange, the pool,
the writes to the stand-in transports, the TCP_INFO estimate, the next
request's reset). What the proxy spends beyond `whole` on real sockets
(proxy_vs_haproxy.py's CPU per request less `whole`) is the event loop, the
system calls and the kernel.

Limits: the stages are called here from Python, through the objects' Python
interface; in the compiled build the proxy's calls between its own modules are
C calls, so each stage's figure carries some tens of ns of calling that the
proxy does not pay (and "other" is that much smaller): the stages are upper
bounds there, "other" a lower one. The counters differ most: compiled, their
fields are C integers that the exchange adds to directly, and that Python
reads and writes here as objects. A stage's objects are warm and alone in
the caches here, as they are not between a real request's system calls;
`whole` shares that limit. Figures of different runs on a busy machine move
by 10 % and more.

    python -m benchmarks.proxy_stages [--method ROUNDROBIN] [--size 1024] [--quick]
"""

import argparse
import asyncio
import contextlib
import os
import sys
import timeit

STAGES = ("parse", "pick", "forward", "account")
BATCH = 1000  # acquires timed at once, their transactions finished afterwards
NAMES = ("fast1", "fast2", "slow")
PEER = b"127.0.0.1"  # the client's address as the client connection has it
TTFB = 0.002


def wrk_request(port=40000):
    """What wrk sends for http://127.0.0.1:PORT/ (its default request)."""
    return b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port


def backend_response(size):
    """A 200 of `python -m leastload.cli.backends` to a keep-alive request (its send_head and body)."""
    return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n" % size) + b"x" * size


class DropTransport:
    """Enough of an asyncio transport for the proxy's protocols; writes go nowhere."""

    def __init__(self):
        self.closing = False

    def write(self, data):
        pass

    def is_closing(self):
        return self.closing

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def close(self):
        self.closing = True

    abort = close

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


def _best(stmt, names, number, repeat, setup="pass"):
    """ns per run of stmt: best of `repeat` timeit runs of `number`, after a warm-up."""
    timer = timeit.Timer(stmt, setup, globals=names)
    timer.timeit(max(1, number // 10))
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def _acquire_ns(vs, number, repeat):
    """ns of acquire(None, None), timed in batches whose transactions are finished untimed."""
    held = []

    def finish_held():
        for t in held:
            if t is not None:  # (None: the list's part timed alone)
                t.finish(TTFB, 200)
        held.clear()

    names = {"acquire": vs.acquire, "append": held.append, "finish_held": finish_held}
    batch = min(BATCH, number)
    rounds = max(1, number // batch)

    def per_call(stmt):
        timer = timeit.Timer(stmt, "finish_held()", globals=names)  # the setup runs before each batch
        timer.timeit(batch)  # warm-up
        best = min(sum(timer.timeit(batch) for _ in range(rounds)) for _ in range(repeat))
        finish_held()
        return best / (rounds * batch) * 1e9

    with_acquire = per_call("append(acquire(None, None))")
    held_none = per_call("append(None)")  # the list's part alone
    return with_acquire - held_none


@contextlib.contextmanager
def started_proxy(method, engine):
    """A started Proxy with one pooled connection to each of three backends and one client
    connection, all on stand-in transports: yields (proxy, client), and closes the proxy after.
    `client.data_received(request)` then `client.backend.data_received(response)` is one
    whole request (the benchmark suite's proxy-path test times the same)."""
    from leastload.proxy import Proxy, _backend, _client

    loop = asyncio.new_event_loop()
    proxy = Proxy([f"{name}=127.0.0.1:{i + 1}" for i, name in enumerate(NAMES)], method,
                  listen=("127.0.0.1", 0), health_check="none", engine=engine)
    try:
        loop.run_until_complete(proxy.start())
        for pool in proxy.pools.values():
            conn = _backend.BackendConnection(pool)
            conn.connection_made(DropTransport())
            pool.idle.append(conn)
        client = _client.ClientConnection(proxy)
        client.connection_made(DropTransport())
        yield proxy, client
    finally:
        loop.run_until_complete(proxy.close(grace=0))
        loop.close()


def _whole_path(method, engine, request, response, number, repeat):
    """ns of one request through a started Proxy over stand-in transports, and the requests
    pushed through it with how many were answered 2xx."""
    with started_proxy(method, engine) as (proxy, client):
        names = {"data_received": client.data_received, "client": client, "REQUEST": request,
                 "RESPONSE": response}
        ns = _best("data_received(REQUEST); client.backend.data_received(RESPONSE)", names, number, repeat)
        sent = sum(c.requests for c in proxy.stats.backends.values())
        answered = sum(c.by_class[2] for c in proxy.stats.backends.values())
        active = sum(proxy.vserver.info(name)["active"] for name in proxy.vserver.services)
    return ns, sent, answered, active


# ---- the engine's calls for one request ---------------------------------------------------------

def engine_ns_per_request(method, number, repeat, req_bytes, resp_bytes, packets, engine=None):
    """ns for the engine calls of one proxied request on a 3-service C VirtualServer (best of
    repeat), made as the proxy makes them: positional arguments, the request's bytes as sent,
    the response's (one chunk here, the last: recorded as the exchange ends, with the TCP_INFO
    segments when they are read), the finish. The segments are read after every answer for a
    method that picks by packets, after one in PACKETS_EVERY otherwise (that fraction of the
    difference is charged). engine: another VirtualServer class (the default is
    leastload.VirtualServer)."""
    from leastload import VirtualServer
    from leastload.engine.methods import BY_PACKETS
    from leastload.proxy._backend import PACKETS_EVERY
    vs = (engine or VirtualServer)(method, outlier_failures=5)
    for name in ("fast1", "fast2", "slow"):
        vs.bind(name)

    def best(stmt):
        timer = timeit.Timer(stmt, globals={"vs": vs})
        timer.timeit(number // 10)  # warm up
        return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9

    base = f"t = vs.acquire(); t.record({req_bytes}); t.record({resp_bytes}); t.finish(0.002, 200)"
    with_packets = base.replace(f"t.record({resp_bytes})", f"t.record({resp_bytes}, {packets})")
    every = 1 if method in BY_PACKETS else PACKETS_EVERY
    ns_base, ns_packets = best(base), best(with_packets)
    stmt = f"{base}, the second record with {packets} packets once in {every}"
    return ns_base + (ns_packets - ns_base) / every, f"{type(vs).__module__}.{type(vs).__name__}", stmt




def stages_ns_per_request(method, size, number, repeat, engine=None, engine_ns=None):
    """ns per request of each stage (see the module docstring), with what was measured.

    engine: the VirtualServer class (default leastload.VirtualServer, the C engine unless
    LEASTLOAD_IMPLEMENTATION=python); engine_ns: engine_ns_per_request's
    figure when the caller has it (else it is timed here with the same engine)."""
    import leastload
    import leastload.proxy
    from leastload.proxy import _http1, _stats

    engine = engine or leastload.VirtualServer
    request, response = wrk_request(), backend_response(size)
    limits = _http1.Limits()

    # parse: one reader taking request after request
    reader = _http1.RequestReader(limits)
    reader.feed(request)
    if reader.next_event() is not _http1.COMPLETE:
        raise RuntimeError(f"wrk's request is not complete in one piece: {reader.error}")
    head, body = reader.head, bytes(reader.body)
    reader.start_next()
    done = reader.requests
    parse = _best("feed(REQUEST); next_event(); start_next()",
                  {"feed": reader.feed, "next_event": reader.next_event, "start_next": reader.start_next,
                   "REQUEST": request}, number, repeat)
    if reader.error is not None or reader.requests - done < number * repeat:
        raise RuntimeError(f"the reader did not complete every request: {reader.error}")

    # pick
    vs = engine(method, outlier_failures=5)
    for name in NAMES:
        vs.bind(name)
    acquire = _acquire_ns(vs, number, repeat)
    if any(vs.info(name)["active"] for name in NAMES):
        raise RuntimeError("a timed acquire was not finished")

    # forward: the backend's request, then the answer read for the client
    payload = _http1.encode_request(head, body, PEER, _http1.Forwarding())
    encode = _best("encode(head, body, PEER, forwarding)",
                   {"encode": _http1.encode_request, "head": head, "body": body, "PEER": PEER,
                    "forwarding": _http1.Forwarding()}, number, repeat)
    answer = _http1.ResponseReader(limits)
    names = {"start": answer.start, "feed": answer.feed, "RESPONSE": response}
    read = _best("start(False, False, True); feed(RESPONSE)", names, number, repeat)
    answer.start(False, False, True)
    if b"".join(answer.feed(response)) != response or not (answer.complete and answer.reusable):
        raise RuntimeError("the backend's answer was not read whole, as it came, on a reusable connection")

    # account: the engine's records and finish, the counters
    if engine_ns is None:
        engine_ns = engine_ns_per_request(method, number, repeat, len(payload), len(response), packets=4,
                                          engine=engine)[0]
    counters = _stats.Stats(NAMES)
    count = _best("c = of('fast1'); c.requests += 1; c.bytes_in += SENT; c.bytes_out += RECEIVED; "
                  "c.add_ttfb(TTFB); c.by_class[2] += 1",
                  {"of": counters.of, "SENT": len(payload), "RECEIVED": len(response), "TTFB": TTFB},
                  number, repeat)

    whole, sent, answered, active = _whole_path(method, engine, request, response, number, repeat)
    stages = {"parse": parse, "pick": acquire, "forward": encode + read, "account": engine_ns - acquire + count}
    return {
        **stages,
        "whole": whole,
        "other": whole - sum(stages.values()),
        "parts": {"acquire": acquire, "encode_request": encode, "response_read": read,
                  "engine_calls": engine_ns, "engine_records_and_finish": engine_ns - acquire, "counters": count},
        "http_layer": leastload.proxy.HTTP_LAYER, "http1_file": _http1.__file__,
        "engine": f"{engine.__module__}.{engine.__name__}", "method": method, "body_bytes": size,
        "request_bytes": len(request), "response_bytes": len(response), "number": number, "repeat": repeat,
        "whole_requests": sent, "whole_answered_2xx": answered, "whole_active_after": active,
    }


def stage_rows(stages, proxy_cpu_us=None):
    """(label, ns) for the table: the four stages, the rest of the path, and with the proxy's
    measured CPU per request (us), the event loop's, system calls' and kernel's part and the total."""
    rows = [("parse: RequestReader feed, next_event, start_next", stages["parse"]),
            ("pick: the engine's acquire", stages["pick"]),
            ("forward: encode_request, ResponseReader start and feed", stages["forward"]),
            ("account: the engine's records and finish, the counters", stages["account"]),
            ("other work of the path (whole path, no sockets, less the above)", stages["other"])]
    if proxy_cpu_us:
        rows += [("event loop, system calls, kernel (measured less whole path)", proxy_cpu_us * 1000 - stages["whole"]),
                 ("the proxy's measured CPU per request", proxy_cpu_us * 1000)]
    else:
        rows.append(("whole path without sockets", stages["whole"]))
    return rows


def stage_table(stages, proxy_cpu_us=None):
    """A markdown table: stage, us per request, and % of the measured CPU per request when given."""
    head = ["stage", "us/req"] + (["% of measured"] if proxy_cpu_us else [])
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, ns in stage_rows(stages, proxy_cpu_us):
        share = [f"{100 * ns / (proxy_cpu_us * 1000):.1f} %"] if proxy_cpu_us else []
        lines.append("| " + " | ".join([name, f"{ns / 1000:.2f}", *share]) + " |")
    return "\n".join(lines)


def describe(stages):
    """One line: which per-request path and engine were measured."""
    return (f"per-request path {stages['http_layer']} ({os.path.basename(stages['http1_file'])}), "
            f"engine {stages['engine']}, method {stages['method']}, {stages['body_bytes']} B bodies; "
            f"best of {stages['repeat']} x {stages['number']:,}")


def main(argv=None):
    p = argparse.ArgumentParser(description="The leastload proxy's CPU per request by stage, without sockets.")
    p.add_argument("--method", default="LEASTCONNECTION")
    p.add_argument("--size", type=int, default=1024, help="response body bytes (default 1024)")
    p.add_argument("--quick", action="store_true", help="5,000 requests a run, best of 5")
    p.add_argument("--proxy-cpu-us", type=float, help="the proxy's measured CPU per request, for the % column")
    args = p.parse_args(argv)
    number, repeat = (5_000, 5) if args.quick else (20_000, 7)
    stages = stages_ns_per_request(args.method, args.size, number, repeat)
    print(describe(stages))
    print(stage_table(stages, args.proxy_cpu_us))
    return 0 if stages["whole_answered_2xx"] == stages["whole_requests"] else 1


if __name__ == "__main__":
    sys.exit(main())
