"""Fuzz target for the proxy's HTTP/1.1 layer (leastload.proxy._http1), with Hypothesis.

Three targets, each built from valid messages that are then mutated (bytes
inserted, deleted, flipped; lines duplicated, dropped, swapped; cut short)
and split into random pieces:

- `test_request_stream_fuzz`: pipelined client requests (GET/HEAD/POST/...,
  Content-Length and chunked bodies, chunk extensions, trailers, Expect,
  absolute-form and *, HTTP/1.0) into a RequestReader driven as the client
  connection drives it (feed; next_event until NEED_DATA, ERROR or PAUSED;
  start_next after COMPLETE, sometimes after more bytes were read ahead).
  Checked after every step:
  * nothing but the documented events comes out; an ERROR's status is 400,
    413, 414, 431 or 501, and the stream stays in ERROR with nothing held;
  * bytes held (`buffered`): right after a feed, at most max_header_size plus
    that piece; once next_event() returns NEED_DATA while a head is read, at
    most max_header_size, and at most max_request_line + 1 (the line's CR)
    while the request line has no end yet; 0 while a body is read (its bytes
    go to the parser as they come); in PAUSED, exactly the bytes after the
    completed request;
  * the body never exceeds max_body;
  * every HEAD and COMPLETE head: version 10 or 11, exactly one Host line for
    1.1 (at most one for 1.0) and `host` set for 1.1, target origin-form (or
    * for OPTIONS), no more than max_headers header lines, Connection-named
    drops never Host/Content-Length/Transfer-Encoding; COMPLETE: a
    Content-Length body has exactly that length, never both CL and chunked;
  * unmutated streams against a model: each request comes out as it was
    built (method, target rewritten to origin-form, Host, version, body, no
    trailer among the headers), or the first one over a limit is refused
    with its status (414 request line, 431 head/count with trailers, 413
    body); a request within every limit (by a byte's margin on the request
    line, whose CR the unit tests pin) is never refused.
- `test_response_reader_fuzz`: one backend response (1xx interims, each
  framing, HTTP/1.0 or 1.1 backend, hop-by-hop headers, trailers, extra
  bytes) for a GET or HEAD from an HTTP/1.1 or HTTP/1.0 client. Checked: no
  exception escapes; the flags agree (never complete and failed; reusable
  only when complete without extra bytes or a close-delimited body); the
  client's bytes are judged by h11 as the client: exactly one final response
  (1xx only to HTTP/1.1 clients, never chunked to HTTP/1.0 ones), the
  reader's status, nothing after it, EOF needed only when close_client; when
  the reader failed, what was passed is a clean prefix (h11 raises nothing
  before the EOF). Differentially, h11 reads the backend's own bytes: when
  both complete, the status and the body the client gets are the ones the
  backend sent. Unmutated responses: the exact status, body and reusability.
- `test_pooled_backend_connection_fuzz`: several clients' requests, each
  answered by a response carrying a unique tag (in its body and an X-Tag
  header), on a model of a pooled backend connection as _backend.py and
  _exchange.py use it: a ResponseReader is reused for the next request only
  when `reusable`, else the connection is dropped and the next response
  comes on a fresh stream; a reused stream that is found closed is retried
  on a fresh one (the stale-connection retry). Two backends: one that sends
  each response when its request arrives, and one that sends them all at
  once, concatenated and split at random points. Checked: every client's
  bytes are well framed per h11 across its requests (one response per
  request, in order, EOF only where the proxy closes; a response cut after
  bytes were passed ends the client connection; nothing passed -> the
  proxy's 502), and contain no tag but their own (for the all-at-once
  backend: no tag that the backend sent outside the bytes read during that
  exchange).

Time-bound: LEASTLOAD_FUZZ_SECONDS (default 5) is the whole file's budget,
shared by the three targets; each runs Hypothesis in batches until its share
has passed (findings are shrunk only when a target's share is 300 s or more:
shrinking can take minutes). Distinct failures (by where they are raised and
what they say) are collected; one already found counts as a pass afterwards,
so the search goes on for others. Each is printed to stderr as found, with
the bytes to replay it, and appended to the file LEASTLOAD_FUZZ_FINDINGS
names, if set; the test fails at the end if any was found.
"""

import os
import re
import sys
import time
import traceback

import h11
import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from hypothesis import strategies as st

# The layer under test is conftest.py's http1 fixture, the compiled module and the pure
# _http1.py in turn: _layer binds these names to the one each test runs against.
LAYER_NAMES = ("COMPLETE", "ERROR", "HEAD", "NEED_DATA", "PAUSED", "Limits", "RequestReader", "ResponseReader",
               "error_response")


@pytest.fixture(autouse=True)
def _layer(http1):
    globals().update({name: getattr(http1, name) for name in LAYER_NAMES})


QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
         HealthCheck.large_base_example]
SECONDS = float(os.environ.get("LEASTLOAD_FUZZ_SECONDS", "5"))
# set (CI's minute): batch k of 200 examples drawn from seed SEED + k, so that a run replays a
# prefix of the same inputs wherever it runs; unset: fresh inputs each run (the long searches)
SEED = os.environ.get("LEASTLOAD_FUZZ_SEED")
FINDINGS = os.environ.get("LEASTLOAD_FUZZ_FINDINGS")
REFUSALS = {400, 413, 414, 431, 501}


# ---- the time-bound runner ---------------------------------------------------------------------

_QUOTED = re.compile(r"""b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*"|0x[0-9a-f]+""")


def _failure_key(exc):
    """What a failure is: where it was raised (the innermost frame in this file or in the layer)
    and the first line of its message with the bytes it quotes left out."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if f.filename.endswith(("_http1.py", "_response.py", "_scan.py",
                                                      "test_http1_fuzz.py"))]
    where = ours[-1] if ours else (frames[-1] if frames else None)
    message = (str(exc).splitlines() or [""])[0]
    message = _QUOTED.sub("'?'", message)
    return (type(exc).__name__, where.filename if where else "", where.lineno if where else 0, message[:120])


def _report(text):
    print(text, file=sys.stderr, flush=True)
    if FINDINGS:
        with open(FINDINGS, "a") as findings:
            findings.write(text + "\n")


def fuzz_for(seconds, target):
    """Runs the Hypothesis test body `target(data)` in batches until `seconds` have passed."""
    end = time.monotonic() + seconds
    failures = {}
    examples, batches, total = 20, 0, 0

    def known_passes(data):  # a failure already found passes, so the search finds the others
        try:
            target(data)
        except Exception as exc:
            if _failure_key(exc) in failures:
                return
            raise
    known_passes.__name__ = target.__name__
    # shrinking a finding may take Hypothesis minutes: long runs only (a short one shows it as drawn)
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if seconds >= 300 else [])

    while True:
        started = time.monotonic()
        if SEED is not None:
            examples = 200
        test = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                        report_multiple_bugs=False, phases=phases,
                        suppress_health_check=QUIET)(given(st.data())(known_passes))
        if SEED is not None:
            test = seed(int(SEED) + batches)(test)
        try:
            test()
        except Exception as exc:  # a finding: kept, and the search goes on
            key = _failure_key(exc)
            if key not in failures:
                failures[key] = "".join(traceback.format_exception(exc))
                _report(f"==== {target.__name__}: finding {len(failures)} at {time.strftime('%H:%M:%S')} "
                        f"({key[0]} at {os.path.basename(key[1])}:{key[2]})\n{failures[key]}")
        batches += 1
        total += examples
        now = time.monotonic()
        if now >= end:
            break
        per_example = max((now - started) / examples, 1e-4)
        examples = max(10, min(2000, int(min(end - now, 30.0) / per_example)))
    _report(f"{target.__name__}: {batches} batches, about {total} examples in {seconds:.0f} s, "
            f"{len(failures)} distinct failure(s)")
    if failures:
        raise AssertionError(f"{len(failures)} distinct failure(s):\n\n" + "\n\n".join(failures.values()))


# ---- mutations and splits -----------------------------------------------------------------------

INSERTS = [b"\r", b"\n", b"\r\n", b" ", b"\t", b":", b";", b",", b"0", b"9", b"a", b"f", b"x", b"-", b"\x00",
           b"\x7f", b"\xff", b"\r\n\r\n", b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n",
           b"Connection: close\r\n", b"Host: other\r\n", b"0\r\n\r\n", b"HTTP/1.1 200 OK\r\n",
           b"GET / HTTP/1.1\r\n"]


def mutate(data, draw_, max_mutations=3):
    """Applies 0..max_mutations random edits to data; returns (bytes, list of edits done)."""
    done = []
    for _ in range(draw_(st.integers(0, max_mutations))):
        n = len(data)
        op = draw_(st.sampled_from(["insert", "delete", "flip", "dup_line", "drop_line", "swap_lines", "truncate",
                                    "digit"]))
        if op == "insert":
            at = draw_(st.integers(0, n))
            what = draw_(st.sampled_from(INSERTS))
            data = data[:at] + what + data[at:]
        elif n == 0:
            continue
        elif op == "delete":
            at = draw_(st.integers(0, n - 1))
            data = data[:at] + data[at + draw_(st.integers(1, 4)):]
        elif op == "flip":
            at = draw_(st.integers(0, n - 1))
            data = data[:at] + bytes([data[at] ^ (1 << draw_(st.integers(0, 7)))]) + data[at + 1:]
        elif op == "digit":  # a digit changed: lengths and chunk sizes
            digits = [i for i, c in enumerate(data) if 48 <= c <= 57]
            if not digits:
                continue
            at = draw_(st.sampled_from(digits))
            data = data[:at] + draw_(st.sampled_from([b"0", b"1", b"2", b"9", b"99", b""])) + data[at + 1:]
        elif op == "truncate":
            data = data[:draw_(st.integers(0, n - 1))]
        else:
            lines = data.split(b"\r\n")
            if len(lines) < 2:
                continue
            a = draw_(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(a, lines[a])
            elif op == "drop_line":
                del lines[a]
            else:
                b = draw_(st.integers(0, len(lines) - 1))
                lines[a], lines[b] = lines[b], lines[a]
            data = b"\r\n".join(lines)
        done.append(op)
    return data, done


def pieces_of(data, sizes):
    """data cut into pieces of the given sizes, cycled."""
    out, i, k = [], 0, 0
    while i < len(data):
        out.append(data[i:i + sizes[k % len(sizes)]])
        i += sizes[k % len(sizes)]
        k += 1
    return out


def draw_sizes(draw_):
    return draw_(st.one_of(st.lists(st.integers(1, 12), min_size=1, max_size=12),
                           st.lists(st.integers(1, 400), min_size=1, max_size=6),
                           st.just([1]), st.just([1 << 20])))


# ---- requests: generation and the model -----------------------------------------------------------

PATH = st.text(alphabet="abcxyz0189-._~%/?=&", max_size=24).map(lambda s: ("/" + s).encode())
HOSTS = [b"h", b"h.example:8080", b"[::1]:81", b"10.0.0.7", b"Example.COM"]
REQUEST_EXTRAS = [(b"X-A", b"1"), (b"User-Agent", b"fuzz/1.0"), (b"Accept", b"*/*"), (b"Cookie", b"a=b; c=d"),
                  (b"X-Forwarded-For", b"192.0.2.1"), (b"Via", b"1.1 edge"), (b"X-Empty", b""),
                  (b"Connection", b"keep-alive"), (b"Connection", b"close"), (b"Connection", b"X-A, keep-alive"),
                  (b"Keep-Alive", b"timeout=5"), (b"TE", b"trailers"), (b"Upgrade", b"h2c"),
                  (b"X-Long", b"v" * 60)]


class BuiltRequest:
    """A valid request's bytes and what the reader must make of it."""

    def __init__(self, data, expected, line_len, head_len, count, body_len, chunked, trailer_count, trailer_len,
                 upgrade=False):
        self.data, self.expected, self.upgrade = data, expected, upgrade
        self.line_len, self.head_len, self.count, self.body_len = line_len, head_len, count, body_len
        self.chunked, self.trailer_count, self.trailer_len = chunked, trailer_count, trailer_len

    def verdict(self, limits):
        """(must, may): the status it must get ('ok' or a refusal), and one it may get instead
        (the request line exactly at the limit: the unit tests decide that byte)."""
        if self.line_len > limits.max_request_line:
            return 414, 414
        may = 414 if self.line_len == limits.max_request_line else None
        if self.head_len > limits.max_header_size or self.count > limits.max_headers:
            return 431, may
        if self.body_len > limits.max_body:
            return 413, may
        if self.chunked and (self.head_len + self.trailer_len > limits.max_header_size
                             or self.count + self.trailer_count > limits.max_headers):
            return 431, may
        return "ok", may


@st.composite
def a_request(draw):
    method = draw(st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH"]))
    http10 = draw(st.integers(0, 3)) == 0
    host = draw(st.sampled_from(HOSTS))
    form = draw(st.sampled_from(["origin", "origin", "absolute", "asterisk"]))
    path = draw(PATH)
    if form == "asterisk" and method == b"OPTIONS":
        target = expected_target = b"*"
    elif form == "absolute":
        target, expected_target = b"http://" + host + path, path
    else:
        target = expected_target = path
    headers = [(name, value) for name, value in draw(st.lists(st.sampled_from(REQUEST_EXTRAS), max_size=4))]
    sends_host = not http10 or draw(st.booleans())
    if sends_host:
        headers.insert(draw(st.integers(0, len(headers))), (b"Host", host))
    # asks for a protocol upgrade: complete at its head without a body; with one, an ordinary request
    upgrade = not http10 and draw(st.integers(0, 9)) == 0
    if upgrade:
        headers += [(b"Connection", b"keep-alive, Upgrade"), (b"Upgrade", b"websocket")]
    kinds = ["none", "length"] if http10 else ["none", "none", "length", "chunked"]
    kind = draw(st.sampled_from(kinds))
    body = draw(st.binary(max_size=80)) if kind != "none" else b""
    framing_at = draw(st.integers(0, len(headers)))
    if kind == "length":
        headers.insert(framing_at, (b"Content-Length", b"%d" % len(body)))
    elif kind == "chunked":
        headers.insert(framing_at, (b"Transfer-Encoding", b"chunked"))
    if kind != "none" and draw(st.booleans()):
        headers.append((b"Expect", b"100-continue"))
    version = b"HTTP/1.0" if http10 else b"HTTP/1.1"
    line = method + b" " + target + b" " + version
    head = line + b"\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in headers) + b"\r\n"
    trailers = []
    encoded = b""
    if kind == "chunked":
        sizes = draw(st.lists(st.integers(1, 30), max_size=6))
        i = 0
        for size in sizes + [len(body)]:
            chunk = body[i:i + size]
            if not chunk:
                continue
            ext = draw(st.sampled_from([b"", b"", b";ext", b';a=1;b="q"']))
            encoded += b"%x%s\r\n%s\r\n" % (len(chunk), ext, chunk)
            i += len(chunk)
        trailers = [b"T-%d: t" % k for k in range(draw(st.integers(0, 3)))]
        encoded += b"0\r\n" + b"".join(t + b"\r\n" for t in trailers) + b"\r\n"
    elif kind == "length":
        encoded = body
    lead = draw(st.sampled_from([b"", b"", b"", b"\r\n"]))
    expected = (method, expected_target, 10 if http10 else 11, host if sends_host or form == "absolute" else None,
                body)
    return BuiltRequest(lead + head + encoded, expected, len(line), len(head), len(headers), len(body),
                        kind == "chunked", len(trailers), sum(len(t) + 2 for t in trailers) + 2, upgrade)


@st.composite
def request_limits(draw):
    if draw(st.integers(0, 3)) == 0:
        return Limits()
    line = draw(st.integers(16, 120))
    return Limits(max_request_line=line, max_header_size=draw(st.integers(max(line, 48), 400)),
                  max_headers=draw(st.integers(1, 12)), max_body=draw(st.integers(0, 100)))


def check_head(head, limits):
    assert head.version in (10, 11)
    hosts = [value for lowered, _, value in head.headers if lowered == b"host"]
    if head.version == 11:
        assert len(hosts) == 1 and head.host is not None, hosts
    else:
        assert len(hosts) <= 1
    assert head.target[:1] == b"/" or (head.target == b"*" and head.method == b"OPTIONS"), head.target
    assert len(head.headers) <= limits.max_headers
    assert not head.dropped & {b"host", b"content-length", b"transfer-encoding"}
    assert not (head.chunked and head.content_length is not None)


class RequestDriver:
    """Drives a RequestReader as _client.py does, checking the invariants after each step."""

    def __init__(self, limits):
        self.limits = limits
        self.reader = RequestReader(limits)
        self.stream = bytearray()  # everything fed
        self.request_start = 0     # where the current request's bytes begin in the stream
        self.in_body = False       # a HEAD event came for the current request
        self.outcomes = []         # (method, target, version, host, body, header names) per request, then a status
        self.paused = False
        self.last = None           # requests the connection serves: it closes after a non-keep-alive one

    def feed(self, piece):
        reader = self.reader
        reader.feed(piece)
        self.stream += piece
        if self.paused:
            assert reader.buffered == len(self.stream) - self.request_start
            return
        if self.outcomes and isinstance(self.outcomes[-1], int):
            assert reader.buffered == 0
            return
        if not self.in_body:
            assert reader.buffered <= self.limits.max_header_size + len(piece)

    def events(self, resume_at_once):
        """next_event until NEED_DATA, ERROR or PAUSED; start_next after COMPLETE when resume_at_once."""
        reader, limits = self.reader, self.limits
        while True:
            event = reader.next_event()
            assert event in (NEED_DATA, HEAD, COMPLETE, PAUSED, ERROR), event
            assert len(reader.body) <= limits.max_body
            if event == NEED_DATA:
                if self.in_body:
                    assert reader.buffered == 0
                else:
                    assert reader.buffered <= limits.max_header_size
                    current = bytes(self.stream[self.request_start:])
                    while current[:2] == b"\r\n":
                        current = current[2:]
                    if b"\n" not in current:  # the request line has no end yet
                        assert reader.buffered <= limits.max_request_line + 1, (reader.buffered, current[:80])
                return
            if event == HEAD:
                assert not self.in_body
                check_head(reader.head, limits)
                self.in_body = True
                continue
            if event == ERROR:
                status = reader.error[0]
                assert status in REFUSALS, reader.error
                assert reader.buffered == 0
                self.outcomes.append(status)
                return
            if event == PAUSED:
                assert self.paused
                return
            head, body = reader.head, bytes(reader.body)
            check_head(head, limits)
            if head.content_length is not None:
                assert len(body) == head.content_length
            assert reader.requests == len(self.outcomes) + 1
            self.outcomes.append((head.method, head.target, head.version, head.host, body,
                                  [lowered for lowered, _, _ in head.headers]))
            if not head.keep_alive and self.last is None:
                self.last = len(self.outcomes)  # the connection closes after answering it
            self.in_body = False
            self.request_start = len(self.stream) - reader.buffered
            self.paused = True
            if not resume_at_once:
                assert reader.next_event() == PAUSED
                return
            self.resume()

    def resume(self):
        self.paused = False
        self.reader.start_next()

    def failed(self):
        return bool(self.outcomes) and isinstance(self.outcomes[-1], int)


def request_stream_target(data):
    draw_ = data.draw
    limits = draw_(request_limits(), label="limits")
    built = draw_(st.lists(a_request(), min_size=1, max_size=4), label="requests")
    stream = b"".join(r.data for r in built)
    stream, edits = mutate(stream, draw_) if draw_(st.integers(0, 2)) else (stream, [])
    pieces = pieces_of(stream, draw_sizes(draw_))
    lazy = draw_(st.lists(st.booleans(), max_size=8))  # per request: read ahead before start_next
    note(f"limits = Limits({limits.max_request_line}, {limits.max_header_size}, {limits.max_headers}, "
         f"{limits.max_body}); edits = {edits}\npieces = {pieces!r}")
    driver = RequestDriver(limits)
    for piece in pieces:
        driver.feed(piece)
        if driver.failed():
            continue
        if driver.paused:
            driver.resume()
        driver.events(resume_at_once=lazy[len(driver.outcomes) % len(lazy)] if lazy else True)
        if driver.failed():  # further bytes are ignored
            driver.reader.feed(b"GET / HTTP/1.1\r\n")
            assert driver.reader.next_event() == ERROR and driver.reader.buffered == 0
    if driver.paused and not driver.failed():
        driver.resume()
        driver.events(resume_at_once=True)
    if edits:
        return
    # unmutated: the model (what follows a request without keep-alive is never read: llhttp refuses it)
    outcomes = driver.outcomes[:driver.last]
    for got, request in zip(outcomes, built):
        must, may = request.verdict(limits)
        if isinstance(got, int):
            assert got == must or got == may, f"refused with {got}, the model says {must}: {request.data!r}"
            break
        assert must == "ok" or may == "ok", (must, request.data)
        assert got[:5] == request.expected, (got, request.expected)
        assert not any(name.startswith(b"t-") for name in got[5]), got[5]  # trailers never headers
    else:
        assert len(outcomes) == len(built[:driver.last]), "a request stayed incomplete"


# ---- responses: generation ------------------------------------------------------------------------

RESPONSE_EXTRAS = [(b"Server", b"fuzz"), (b"Cache-Control", b"no-store"), (b"Set-Cookie", b"a=b"),
                   (b"Connection", b"keep-alive"), (b"Connection", b"close"), (b"Connection", b"X-Hop"),
                   (b"X-Hop", b"h"), (b"Keep-Alive", b"timeout=5"), (b"Proxy-Connection", b"keep-alive"),
                   (b"Trailer", b"T-0"), (b"Vary", b"Accept"), (b"X-Empty", b"")]
INTERIMS = [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n",
            b"HTTP/1.1 102 Processing\r\n\r\n"]


def tag_of(j):
    """A tag no single edit turns into another request's."""
    return b"{tag-%d-%s}" % (j, (b"%d" % j) * 6)


SWITCHING = b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"


class BuiltResponse:
    def __init__(self, data, status, body, reusable, needs_eof):
        self.data, self.status, self.body = data, status, body
        self.refused = data.startswith(SWITCHING)  # never asked for: the reader must refuse it
        self.reusable = reusable    # the backend connection may carry another request
        self.needs_eof = needs_eof  # close-delimited: complete only at EOF


@st.composite
def a_response(draw, tag=b"{tag}", head_only=False):
    interims = draw(st.lists(st.sampled_from(INTERIMS), max_size=2))
    status = draw(st.sampled_from([200, 200, 201, 204, 206, 301, 304, 404, 500]))
    http10 = draw(st.integers(0, 4)) == 0
    reason = draw(st.sampled_from([b"OK", b"", b"Some Reason"]))
    no_body = head_only or status in (204, 304)
    framing = draw(st.sampled_from(["length", "close"] if http10 else ["length", "length", "chunked", "close"]))
    if status == 204:
        framing = "none"
    body = draw(st.binary(max_size=40)) + tag + draw(st.binary(max_size=40))
    headers = [(b"X-Tag", tag)] + list(draw(st.lists(st.sampled_from(RESPONSE_EXTRAS), max_size=4)))
    tokens = b",".join(v.lower() for n, v in headers if n == b"Connection")
    if http10 and draw(st.booleans()) and b"close" not in tokens:
        headers.append((b"Connection", b"keep-alive"))
        tokens += b",keep-alive"
    encoded = b""
    if framing == "length":
        headers.insert(draw(st.integers(0, len(headers))), (b"Content-Length", b"%d" % len(body)))
        encoded = body
    elif framing == "chunked":
        headers.insert(draw(st.integers(0, len(headers))), (b"Transfer-Encoding", b"chunked"))
        start = body.index(tag)
        parts = []
        for part in (body[:start], tag, body[start + len(tag):]):  # the tag stays whole in one chunk
            sizes = draw(st.lists(st.integers(1, 20), max_size=3))
            i = 0
            for size in sizes + [len(part)]:
                if part[i:i + size]:
                    parts.append(part[i:i + size])
                    i += size
        for chunk in parts:
            encoded += b"%x%s\r\n%s\r\n" % (len(chunk), draw(st.sampled_from([b"", b";x=1"])), chunk)
        encoded += b"0\r\n" + b"".join(b"T-%d: t\r\n" % k for k in range(draw(st.integers(0, 2)))) + b"\r\n"
    elif framing == "close":
        encoded = body
    if no_body:
        encoded = b""
    head = (b"HTTP/1.0" if http10 else b"HTTP/1.1") + b" %d " % status + reason + b"\r\n"
    head += b"".join(n + b": " + v + b"\r\n" for n, v in headers) + b"\r\n"
    needs_eof = framing == "close" and not no_body
    names = tokens.split(b",")
    keep = b"close" not in names and not needs_eof and (not http10 or b"keep-alive" in names)
    switching = SWITCHING if draw(st.integers(0, 14)) == 0 else b""
    return BuiltResponse(switching + b"".join(interims) + head + encoded, status, b"" if no_body else body, keep,
                         needs_eof)


# ---- responses: the judges ----------------------------------------------------------------------

class ClientView:
    """h11 as one client connection: reads the proxy's answers, one per request, in order."""

    def __init__(self):
        self.conn = h11.Connection(h11.CLIENT)
        self.closed = False

    def ask(self, method, keep_alive):
        conn = self.conn
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        headers = [("Host", "x")] + ([] if keep_alive else [("Connection", "close")])
        conn.send(h11.Request(method=method, target="/", headers=headers))
        conn.send(h11.EndOfMessage())

    def read(self, data, closes, whole):
        """The answer's bytes (then EOF when the proxy closes). whole: the proxy finished the
        answer, so h11 must read exactly one response; else it was cut (h11 may refuse at EOF).
        Returns (informational statuses, status, headers, body), status None when cut."""
        conn = self.conn
        conn.receive_data(data)
        informational, status, headers, body, ended = [], None, [], b"", False

        def drain(eof_seen):
            nonlocal status, headers, body, ended
            while not ended:
                event = conn.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                if isinstance(event, h11.InformationalResponse):
                    informational.append(event.status_code)
                elif isinstance(event, h11.Response):
                    status, headers = event.status_code, list(event.headers)
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    ended = True
                elif isinstance(event, h11.ConnectionClosed):
                    return
        drain(False)  # never an error before the EOF: what was passed is well formed so far
        if whole and not closes:
            assert ended, "the answer is not self-delimiting and the connection stays open"
        if closes:
            self.closed = True
            if whole:
                conn.receive_data(b"")
                drain(True)
            else:
                try:
                    conn.receive_data(b"")
                    drain(True)
                except h11.RemoteProtocolError:
                    pass  # cut: the client sees the connection end mid-answer
                return informational, None, headers, body
        assert ended, "the answer is incomplete"
        assert conn.trailing_data[0] == b"", f"bytes after the answer: {conn.trailing_data[0][:80]!r}"
        if not closes:
            assert conn.their_state is h11.DONE, conn.their_state  # h11 agrees the connection goes on
        return informational, status, headers, body


def backend_view(data, method, eof):
    """h11 reading the backend's own bytes as its client would: (status, body, trailing) or None
    when h11 finds no complete response there."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    try:
        conn.receive_data(data)
        if eof:
            conn.receive_data(b"")
        status, body = None, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                return None
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return status, body, conn.trailing_data[0]
    except h11.RemoteProtocolError:
        return None


def check_flags(reader):
    assert not (reader.complete and reader.failed)
    if reader.reusable:
        assert reader.complete and not reader.extra
    if reader.extra:
        assert not reader.reusable
    if reader.complete:
        assert reader.status >= 200


def no_foreign_tags(data, own, tags):
    for other in tags:
        if other != own:
            assert other not in data, f"{other!r} in the answer for {own!r}"


def response_reader_target(data):
    draw_ = data.draw
    head_only = draw_(st.integers(0, 3)) == 0
    http10 = draw_(st.booleans())
    keep_alive = draw_(st.integers(0, 3)) != 0
    built = draw_(a_response(head_only=head_only), label="response")
    backend = built.data
    if draw_(st.integers(0, 5)) == 0:  # the backend says more than it was asked
        backend += draw_(st.sampled_from([b"x", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"\r\n"]))
    if draw_(st.integers(0, 2)) > 0:
        backend, _ = mutate(backend, draw_)
    eof = built.needs_eof or draw_(st.booleans())
    limits = Limits() if draw_(st.integers(0, 3)) else Limits(max_header_size=draw_(st.integers(40, 300)),
                                                                  max_headers=draw_(st.integers(1, 10)))
    pieces = pieces_of(backend, draw_sizes(draw_))
    note(f"start(head_only={head_only}, http10={http10}, keep_alive={keep_alive}); eof={eof}; "
         f"limits: head {limits.max_header_size}, count {limits.max_headers}\npieces = {pieces!r}")
    reader = ResponseReader(limits)
    reader.start(head_only, http10, keep_alive)
    out = []
    for piece in pieces:
        was_done = reader.complete or reader.failed
        got = reader.feed(piece)
        assert not (was_done and got), "bytes passed after the response ended"
        out += got
        check_flags(reader)
    if eof:
        out += reader.feed_eof()
        check_flags(reader)
    client = b"".join(out)
    method = "HEAD" if head_only else "GET"
    view = ClientView()
    view.ask(method, keep_alive)
    if reader.complete:
        informational, status, headers, body = view.read(client, reader.close_client, whole=True)
        assert status == reader.status
        if http10:
            assert not informational and b"transfer-encoding" not in [n for n, _ in headers]
        if not keep_alive:
            assert reader.close_client
        theirs = backend_view(backend, method, eof)
        if theirs is not None:  # h11 read a whole response from the backend too: the same one
            assert (status, body) == theirs[:2], ((status, body), theirs[:2])
            if theirs[2] and not reader.extra:  # h11 saw bytes after the response; so must the reader
                assert False, f"bytes after the response not noticed: {theirs[2][:40]!r}"
    elif client:
        view.read(client, True, whole=False)
    if backend == built.data and limits.max_header_size >= Limits().max_header_size:  # unmutated
        if built.refused:
            assert reader.failed and not client, "a 101 was not refused"
            return
        assert reader.complete or (built.needs_eof and not eof), (reader.failed, built.data)
        if reader.complete:
            assert (reader.status, body) == (built.status, built.body)
            assert reader.reusable == built.reusable


# ---- the pooled backend connection ----------------------------------------------------------------

class Stream:
    """A backend connection's bytes as they arrive: pieces (sizes cycled) of what the backend sent,
    then its close once it has said it closes."""

    def __init__(self, sizes):
        self.sizes, self.k = sizes, 0
        self.data = bytearray()
        self.pos = 0              # bytes delivered so far
        self.backend_closed = False  # the backend sends nothing more: EOF once data is read
        self.eof_seen = False

    def send(self, data, then_close):
        if not self.backend_closed:
            self.data += data
            self.backend_closed = then_close

    def next_piece(self):
        """The next piece, or None for EOF (a backend that has nothing more to say closes)."""
        if self.pos >= len(self.data):
            self.eof_seen = True
            return None
        size = self.sizes[self.k % len(self.sizes)]
        self.k += 1
        piece = bytes(self.data[self.pos:self.pos + size])
        self.pos += len(piece)
        return piece


# a chunk-size line with the CRLF before it: what de-chunking removes between two chunks' data
_CHUNK_LINE = re.compile(rb"\r\n[0-9A-Fa-f]+(?:;[^\r\n]*)?\r\n")


def tags_within(data, start, stop, tags):
    """The tags with an occurrence wholly inside data[start:stop], as sent or with its chunk-size
    lines taken out: a chunked body given to an HTTP/1.0 client is its chunks' data joined, so a
    tag split across chunks comes out whole (found by this target: a tag cut by chunk lines,
    its copy in X-Tag changed by a mutation)."""
    sent = bytes(data[start:stop])
    joined = _CHUNK_LINE.sub(b"", sent)
    return {tag for tag in tags if tag in sent or tag in joined}


def exchange(stream, reader, method, http10, keep_alive):
    """One request on a backend connection, as _backend.py reads its answer: (pieces for the client,
    whether any backend byte came)."""
    reader.start(method == "HEAD", http10, keep_alive)
    out, got_bytes = [], False
    while not (reader.complete or reader.failed):
        piece = stream.next_piece()
        if piece is None:
            out += reader.feed_eof()
            check_flags(reader)
            break
        got_bytes = True
        was_done = reader.complete or reader.failed
        got = reader.feed(piece)
        assert not (was_done and got)
        out += got
        check_flags(reader)
    return b"".join(out), got_bytes


def pooled_connection_target(data):
    draw_ = data.draw
    n_clients = draw_(st.integers(1, 3))
    clients_http10 = [draw_(st.integers(0, 3)) == 0 for _ in range(n_clients)]
    a_request_ = st.tuples(st.integers(0, n_clients - 1), st.sampled_from(["GET", "GET", "HEAD", "POST"]),
                           st.integers(0, 4).map(bool))  # (client, method, keep-alive)
    requests = draw_(st.lists(a_request_, min_size=1, max_size=6), label="requests")
    all_at_once = draw_(st.integers(0, 2)) == 0  # a backend that sends every answer at once
    tags = [tag_of(j) for j in range(len(requests))]
    responses = []  # (as built, the bytes sent, the edits)
    for j, (_, method, _) in enumerate(requests):
        built = draw_(a_response(tags[j], method == "HEAD"), label=f"response {j}")
        backend, edits = built.data, []
        if draw_(st.integers(0, 2)) == 0:
            backend, edits = mutate(backend, draw_, 2)
        if draw_(st.integers(0, 6)) == 0:
            backend += draw_(st.sampled_from([b"junk", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]))
            edits.append("extra")
        responses.append((built, backend, edits))
    sizes = draw_sizes(draw_)
    note(f"all_at_once={all_at_once}; clients http10={clients_http10}; requests (client, method, keep-alive)="
         f"{requests}; piece sizes={sizes}\n"
         + "\n".join(f"response {j}: edits={e} bytes={b!r}" for j, (_, b, e) in enumerate(responses)))

    views = [ClientView() for _ in range(n_clients)]
    stream = reader = None
    for j, (cid, method, keep_alive) in enumerate(requests):
        view, http10 = views[cid], clients_http10[cid]
        if view.closed:
            continue  # the client's connection is closed: this request is never sent
        built, backend, edits = responses[j]
        for attempt in (0, 1):
            reused = stream is not None
            if not reused:  # a fresh connection
                stream, reader = Stream(sizes), ResponseReader(Limits())
                if all_at_once:  # every answer from here on, up to one after which the backend closes
                    for k in range(j, len(requests)):
                        stream.send(responses[k][1], not responses[k][0].reusable)
            if not all_at_once:  # the answer, once the request is in
                stream.send(backend, not built.reusable)
            start = stream.pos
            answer, got_bytes = exchange(stream, reader, method, http10, keep_alive)
            if reused and not got_bytes and method != "POST":
                stream = None  # a pooled connection the backend had closed: once more on a fresh one
                continue
            break
        stop = stream.pos
        whole = reader.complete
        if whole:
            closes = not keep_alive or reader.close_client
        elif answer:
            closes = True  # cut after bytes were passed on: only the close tells the client
        elif method == "HEAD":  # nothing passed on: the proxy's own 502, whose framing for HEAD
            view.closed = True  # test_http1.py's test_the_proxys_own_answer_to_a_failed_exchange... checks
            stream = None
            continue
        else:  # nothing passed on: the proxy's own 502
            proxy_keeps = keep_alive and not http10
            answer, whole, closes = error_response(502, "backend failed", not proxy_keeps), True, not proxy_keeps
        used = stream
        if not reader.complete or not reader.reusable or stream.eof_seen or (
                not all_at_once and stream.pos < len(stream.data)):
            stream = None  # dropped (bytes left would arrive while it is idle: aborted then too)
        view.ask(method, keep_alive)
        informational, status, headers, body = view.read(answer, closes, whole)
        if http10:
            assert not informational and b"transfer-encoding" not in [n for n, _ in headers]
        if reader.complete:
            assert status == reader.status
        if all_at_once:  # no tag the backend sent outside this exchange's bytes
            allowed = tags_within(used.data, start, stop, tags)
            for tag in tags:
                assert tag in allowed or tag not in answer, f"{tag!r}, not sent in this exchange, in answer {j}"
        else:  # no tag but its own
            no_foreign_tags(answer, tags[j], tags)
            if built.refused and not edits:
                assert reader.failed and not answer.startswith(b"HTTP/1.1 101"), "a 101 was not refused"
            elif not edits and (reader.complete or attempt or not reused):  # the backend's answer as it was
                assert reader.complete, reader.failed
                assert (status, body) == (built.status, built.body)
                assert reader.reusable == built.reusable, "reusable, and the backend closes (or the reverse)"


# ---- the tests --------------------------------------------------------------------------------------

@pytest.mark.parametrize("target, share", [(request_stream_target, 0.34), (response_reader_target, 0.33),
                                           (pooled_connection_target, 0.33)],
                         ids=["requests", "responses", "pooled"])
def test_http1_fuzz(target, share):
    fuzz_for(SECONDS * share, target)
