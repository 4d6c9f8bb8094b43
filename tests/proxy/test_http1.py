"""The proxy's I/O-free HTTP/1.1 layer (leastload.proxy._http1), fed bytes, no sockets.

Covered:
- RequestReader's limits at their boundaries (exactly at the limit accepted,
  one byte over refused with its status): the request line (414, the CRLF not
  counted, as in RFC 9112's request-line), the head size and header count
  (431, trailers counted too), the body (413 from Content-Length at head time,
  413 while a chunked body arrives); fed whole, split, and one byte at a time,
  where the error must come at the byte that passes the limit, not at the
  head's end; the request-line limit against the head limit (414, not 431,
  however the bytes are split).
- Pipelining: COMPLETE, then PAUSED until start_next(), the rest in `buffered`;
  the same requests whatever the split (every byte position, and one byte at a
  time) for Content-Length and chunked bodies.
- RFC 9112's checks, one test each with its accepted and its refused form, and
  the framings that must stay 400 (CL.TE, TE.CL, duplicate Content-Length, bad
  chunk size, obs-fold, bare LF, HTTP/0.9, HTTP/2.0, HTTP/1.2, ...).
- encode_request: X-Forwarded-For order and replace mode, X-Forwarded-Proto,
  Forwarded for IPv4 and IPv6, Via, hop-by-hop and Connection-named headers
  dropped (never Host), Content-Length from the body, trailers absent; the
  output judged by h11 as a server would read it.
- ResponseReader: each framing (Content-Length, chunked, close-delimited) for
  HTTP/1.1 and HTTP/1.0 clients, bytes past the end, a body on 204/304/HEAD,
  1xx (100 kept back, 103 to HTTP/1.1 only), 101 refused, a bad
  Content-Length, the head and trailer limits, every split giving the same
  client bytes, feed_eof mid-body, close-delimited ending at EOF, reuse for a
  second response. What the client gets is judged by h11 (an independent
  parser): well framed, one response, the right status and the exact body.
"""

import types

import h11
import pytest

# The layer under test is conftest.py's http1 fixture, the compiled module and the pure
# _http1.py in turn: _layer binds these names to the one each test runs against.
LAYER_NAMES = ("COMPLETE", "CONTINUE", "ERROR", "HEAD", "NEED_DATA", "PAUSED", "Forwarding", "Limits",
               "RequestReader", "ResponseReader", "encode_request", "error_response")


@pytest.fixture(autouse=True)
def _layer(http1):
    names = globals()
    names.update({name: getattr(http1, name) for name in LAYER_NAMES})
    # small limits, so every boundary is a few bytes away (the helpers' limits=None means these)
    names["LIMITS"] = Limits(max_request_line=64, max_header_size=256, max_headers=6, max_body=32)


def test_the_layer_under_test_is_all_compiled_or_all_pure(http1, request):
    # its three modules (_scan, _response, _http1) come as one set: a pure RequestReader
    # beside a compiled ResponseReader would leave one of them untested on its path
    pure = request.node.callspec.params["http1"] == "python"
    for cls in (http1.RequestReader, http1.ResponseReader, http1.Limits):
        assert isinstance(cls.__dict__.get("__init__"), types.FunctionType) == pure, cls


CLIENT = b"10.0.0.1"


# ---- helpers: requests -----------------------------------------------------------------

def trickle(data):
    return [data[i:i + 1] for i in range(len(data))]


def split(data, *cuts):
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:])]


def summary(head, body):
    """What a checked request is, comparable across runs."""
    return (head.method, head.target, head.version, head.host, tuple(head.headers), head.keep_alive,
            head.expect_continue, head.content_length, head.chunked, frozenset(head.dropped), bytes(body))


def read_requests(pieces, limits=None):
    """Drives a RequestReader as the client connection does (feed, events until NEED_DATA,
    start_next after COMPLETE); returns the outcomes: summary() per request, then the
    error status if one came."""
    if isinstance(pieces, (bytes, bytearray)):
        pieces = [pieces]
    reader = RequestReader(limits or LIMITS)
    outcomes = []
    for piece in pieces:
        reader.feed(piece)
        while True:
            event = reader.next_event()
            if event == COMPLETE:
                outcomes.append(summary(reader.head, reader.body))
                reader.start_next()
            elif event == ERROR:
                return outcomes + [reader.error[0]]
            elif event == NEED_DATA:
                break
            else:
                assert event == HEAD
    return outcomes


def status_of(data, limits=None):
    """'ok' when every request in data is complete, else the error status (None: incomplete)."""
    outcomes = read_requests(data, limits)
    if outcomes and isinstance(outcomes[-1], int):
        return outcomes[-1]
    return "ok" if outcomes else None


def one_request(data, limits=None):
    """The single complete request in data: (head, body)."""
    reader = RequestReader(limits or LIMITS)
    reader.feed(data)
    event = reader.next_event()
    if event == HEAD:
        event = reader.next_event()
    assert event == COMPLETE, (event, reader.error)
    return reader.head, reader.body


def error_at(data, limits=None):
    """Feeds one byte at a time: (bytes fed when ERROR came, its status), or (None, None)."""
    reader = RequestReader(limits or LIMITS)
    for i in range(len(data)):
        reader.feed(data[i:i + 1])
        event = reader.next_event()
        while event == HEAD:
            event = reader.next_event()
        if event == ERROR:
            return i + 1, reader.error[0]
        if event == COMPLETE:
            reader.start_next()
    return None, None


def line_of(length):
    """A request line of `length` bytes, its CRLF not counted."""
    fixed = len(b"GET / HTTP/1.1")
    return b"GET /" + b"a" * (length - fixed) + b" HTTP/1.1"


def head_of(size, line=b"GET / HTTP/1.1"):
    """A request head of exactly `size` bytes, its final empty line included."""
    fixed = line + b"\r\nHost: h\r\nX-Pad: \r\n\r\n"
    head = line + b"\r\nHost: h\r\nX-Pad: " + b"p" * (size - len(fixed)) + b"\r\n\r\n"
    assert len(head) == size
    return head


def with_headers(count):
    """A GET with `count` header lines (Host among them)."""
    return b"GET / HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(count - 1)) + b"\r\n"


CHUNKED_HEAD = b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"  # 2 header lines


def chunked(*chunks, trailers=b""):
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n" + trailers + b"\r\n"


# ---- helpers: responses ----------------------------------------------------------------

def respond(data, pieces=None, head_only=False, http10=False, keep_alive=True, eof=False, limits=None):
    """Feeds a backend's bytes to a ResponseReader: (the client's bytes, the reader)."""
    reader = ResponseReader(limits or LIMITS)
    reader.start(head_only, http10, keep_alive)
    out = []
    for piece in pieces if pieces is not None else [data]:
        out += reader.feed(piece)
    if eof:
        out += reader.feed_eof()
    return b"".join(out), reader


class Judged:
    def __init__(self):
        self.informational = []  # 1xx statuses
        self.status = None
        self.headers = []        # (lowercase name, value)
        self.body = b""
        self.trailers = []


def judge(data, method="GET", closed=False):
    """h11, as the client, reads one response from data (then EOF when closed): raises
    h11.RemoteProtocolError when it is not well framed, or AssertionError when it is
    incomplete or followed by more bytes."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    if closed:
        conn.receive_data(b"")
    judged = Judged()
    while True:
        event = conn.next_event()
        assert event is not h11.NEED_DATA, "the response is incomplete"
        if isinstance(event, h11.InformationalResponse):
            judged.informational.append(event.status_code)
        elif isinstance(event, h11.Response):
            judged.status, judged.headers = event.status_code, list(event.headers)
        elif isinstance(event, h11.Data):
            judged.body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            judged.trailers = list(event.headers)
            break
        else:
            raise AssertionError(f"unexpected h11 event {event!r}")
    assert conn.trailing_data[0] == b"", f"bytes after the response: {conn.trailing_data[0]!r}"
    return judged


def names(judged):
    return [name for name, _ in judged.headers]


# ---- limits: the request line --------------------------------------------------------------

@pytest.mark.parametrize("feed", ["whole", "trickle"])
def test_request_line_of_exactly_the_limit_is_accepted(feed):
    data = line_of(LIMITS.max_request_line) + b"\r\nHost: h\r\n\r\n"
    assert status_of(data if feed == "whole" else trickle(data)) == "ok"


@pytest.mark.parametrize("feed", ["whole", "trickle"])
def test_request_line_one_byte_over_the_limit_is_414(feed):
    data = line_of(LIMITS.max_request_line + 1) + b"\r\nHost: h\r\n\r\n"
    assert status_of(data if feed == "whole" else trickle(data)) == 414


def test_request_line_over_the_limit_is_414_at_the_byte_that_passes_it():
    data = line_of(200) + b"\r\nHost: h\r\n\r\n"
    assert error_at(data) == (LIMITS.max_request_line + 1, 414)


def test_leading_empty_lines_are_not_counted_in_the_request_line():
    data = b"\r\n\r\n" + line_of(LIMITS.max_request_line - 1) + b"\r\nHost: h\r\n\r\n"
    assert status_of(data) == "ok"


@pytest.mark.parametrize("cut", [None, 1, 100, 250, 300, 310])
def test_a_long_request_line_is_414_not_431_however_it_is_split(cut):
    # the line is over both limits: it is the request line that is too long
    data = line_of(300) + b"\r\nHost: h\r\n\r\n"
    assert len(data) > LIMITS.max_header_size
    assert status_of(data if cut is None else split(data, cut)) == 414


@pytest.mark.parametrize("cut", [None, 20, 100, 250, 300])
def test_a_long_header_is_431_not_414(cut):
    data = head_of(LIMITS.max_header_size + 60)
    assert status_of(data if cut is None else split(data, cut)) == 431


# ---- limits: the head ----------------------------------------------------------------------

@pytest.mark.parametrize("feed", ["whole", "trickle", "split"])
def test_head_of_exactly_the_limit_is_accepted_and_one_byte_more_is_431(feed):
    def fed(data):
        return {"whole": data, "trickle": trickle(data), "split": split(data, 17, 100, 200)}[feed]
    assert status_of(fed(head_of(LIMITS.max_header_size))) == "ok"
    assert status_of(fed(head_of(LIMITS.max_header_size + 1))) == 431


def test_head_over_the_limit_is_431_at_the_byte_that_passes_it():
    data = head_of(2 * LIMITS.max_header_size)
    assert error_at(data) == (LIMITS.max_header_size + 1, 431)


def test_leading_empty_lines_are_allowed_a_few_times_only():
    assert status_of(b"\r\n" * 4 + b"GET / HTTP/1.1\r\nHost: h\r\n\r\n") == "ok"
    assert status_of(b"\r\n" * 5 + b"GET / HTTP/1.1\r\nHost: h\r\n\r\n") == 400


@pytest.mark.parametrize("feed", ["whole", "trickle"])
def test_header_count_at_the_limit_is_accepted_and_one_more_is_431(feed):
    def fed(data):
        return data if feed == "whole" else trickle(data)
    assert status_of(fed(with_headers(LIMITS.max_headers))) == "ok"
    assert status_of(fed(with_headers(LIMITS.max_headers + 1))) == 431


def test_header_count_over_the_limit_is_431_by_the_end_of_the_line_that_passes_it():
    data = with_headers(LIMITS.max_headers + 5)
    lines = data.split(b"\r\n")
    # the request line and max_headers header lines are fine; the next line passes the limit
    passes_at = sum(len(line) + 2 for line in lines[:LIMITS.max_headers + 2])
    fed, status = error_at(data)
    assert status == 431
    assert fed <= passes_at < len(data)


# ---- limits: trailers count with the head ---------------------------------------------------

def test_trailers_count_against_the_header_count():
    # 2 header lines + 4 trailers = 6 (the limit): accepted; one more: 431
    at_limit = CHUNKED_HEAD + chunked(b"abc", trailers=b"".join(b"T-%d: v\r\n" % i for i in range(4)))
    over = CHUNKED_HEAD + chunked(b"abc", trailers=b"".join(b"T-%d: v\r\n" % i for i in range(5)))
    assert status_of(at_limit) == "ok"
    assert status_of(over) == 431
    fed, status = error_at(over + b"T-9: v\r\n" * 3)
    assert status == 431 and fed == len(over) - 2  # at the end of the fifth trailer line


def padded_trailer(total):
    """A chunked request whose head plus trailer section (lines and closing empty line) is `total` bytes."""
    pad = total - len(CHUNKED_HEAD) - len(b"T: \r\n\r\n")
    return CHUNKED_HEAD + chunked(b"abc", trailers=b"T: " + b"t" * pad + b"\r\n")


@pytest.mark.parametrize("feed", ["whole", "trickle"])
def test_trailers_count_against_the_head_size(feed):
    at_limit = padded_trailer(LIMITS.max_header_size)
    over = padded_trailer(LIMITS.max_header_size + 1)
    assert status_of(at_limit if feed == "whole" else trickle(at_limit)) == "ok"
    assert status_of(over if feed == "whole" else trickle(over)) == 431


def test_trailers_over_the_head_size_are_431_at_the_byte_that_passes_it():
    data = padded_trailer(2 * LIMITS.max_header_size)
    trailer_start = data.index(b"T: ")
    passes_at = trailer_start + (LIMITS.max_header_size - len(CHUNKED_HEAD)) + 1
    assert error_at(data) == (passes_at, 431)


@pytest.mark.parametrize("cut", [5, 50, 100, 150])
def test_a_trailer_line_split_in_two_pieces_counts_in_full(cut):
    # the second piece of a trailer line must count as much as the first
    data = padded_trailer(LIMITS.max_header_size + 100)
    trailer_start = data.index(b"T: ")
    assert status_of(split(data, trailer_start + cut)) == 431


@pytest.mark.parametrize("feed", ["whole", "trickle", "split"])
def test_a_chunked_body_over_its_limit_is_413_even_when_trailers_are_over_theirs(feed):
    # the body's bytes come first, so its limit is the one passed first: 413 however it is split
    data = CHUNKED_HEAD + chunked(b"x" * 40, trailers=b"T: " + b"t" * 250 + b"\r\n")
    fed = {"whole": data, "trickle": trickle(data), "split": split(data, len(CHUNKED_HEAD))}[feed]
    assert status_of(fed) == 413


# ---- limits: the body ----------------------------------------------------------------------

def test_content_length_at_the_limit_is_accepted():
    data = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 32\r\n\r\n" + b"b" * 32
    assert status_of(data) == "ok"


@pytest.mark.parametrize("expect", [b"", b"Expect: 100-continue\r\n"])
def test_content_length_over_the_limit_is_413_when_the_head_ends(expect):
    head = b"POST / HTTP/1.1\r\nHost: h\r\n" + expect + b"Content-Length: 33\r\n\r\n"
    reader = RequestReader(LIMITS)
    reader.feed(head)
    # no HEAD event first: the connection must not send 100 Continue for it
    assert reader.next_event() == ERROR
    assert reader.error[0] == 413
    assert error_at(head + b"b" * 33) == (len(head), 413)


def test_chunked_body_at_the_limit_is_accepted():
    assert status_of(CHUNKED_HEAD + chunked(b"a" * 16, b"b" * 16)) == "ok"


def test_chunked_body_over_the_limit_is_413_as_it_arrives():
    body = chunked(b"a" * 16, b"b" * 16, b"c", b"d" * 100)
    data = CHUNKED_HEAD + body
    passes_at = len(CHUNKED_HEAD) + body.index(b"c") + 1  # the 33rd body byte
    assert error_at(data) == (passes_at, 413)
    assert passes_at < len(data) - len(b"0\r\n\r\n")  # long before the terminating chunk
    # fed whole, the body is not read to its end either
    reader = RequestReader(LIMITS)
    reader.feed(CHUNKED_HEAD + chunked(b"a" * 16, b"b" * 16, b"c")[:-5])
    assert reader.next_event() == HEAD
    assert reader.next_event() == ERROR and reader.error[0] == 413


def test_body_never_grows_past_the_limit():
    reader = RequestReader(LIMITS)
    reader.feed(CHUNKED_HEAD)
    assert reader.next_event() == HEAD
    for piece in trickle(chunked(b"x" * 40)):
        reader.feed(piece)
        event = reader.next_event()
        assert len(reader.body) <= LIMITS.max_body
        if event == ERROR:
            break
    assert reader.error[0] == 413


# ---- pipelining ----------------------------------------------------------------------------

FIRST = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
SECOND = b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"


def test_pipelined_requests_pause_until_start_next():
    reader = RequestReader(LIMITS)
    reader.feed(FIRST + SECOND)
    assert reader.next_event() == HEAD
    assert reader.next_event() == COMPLETE
    assert (reader.head.target, bytes(reader.body)) == (b"/a", b"abc")
    assert reader.buffered == len(SECOND)
    assert reader.next_event() == PAUSED
    assert reader.next_event() == PAUSED
    reader.feed(b"GET /c HTTP/1.1\r\n")  # read ahead while the first is served: kept, not parsed
    assert reader.next_event() == PAUSED
    assert reader.buffered == len(SECOND) + len(b"GET /c HTTP/1.1\r\n")
    assert reader.head.target == b"/a"  # still the request being served
    reader.start_next()
    assert reader.started
    assert reader.next_event() == COMPLETE
    assert (reader.head.target, bytes(reader.body)) == (b"/b", b"")
    assert reader.requests == 2
    reader.start_next()
    assert reader.next_event() == NEED_DATA
    reader.feed(b"Host: h\r\n\r\n")
    assert reader.next_event() == COMPLETE and reader.head.target == b"/c"


def test_start_next_without_read_ahead_waits_for_a_new_request():
    reader = RequestReader(LIMITS)
    reader.feed(SECOND)
    assert reader.next_event() == COMPLETE
    assert reader.buffered == 0
    reader.start_next()
    assert not reader.started
    assert reader.next_event() == NEED_DATA


def test_start_next_does_nothing_before_complete():
    reader = RequestReader(LIMITS)
    reader.feed(FIRST[:-1])
    assert reader.next_event() == HEAD
    reader.start_next()
    reader.feed(FIRST[-1:])
    assert reader.next_event() == COMPLETE and bytes(reader.body) == b"abc"


def test_an_error_ends_the_stream():
    reader = RequestReader(LIMITS)
    reader.feed(b"GET / HTTP/1.1\r\n\r\n" + SECOND)
    assert reader.next_event() == ERROR
    assert reader.buffered == 0
    reader.feed(SECOND)
    assert reader.next_event() == ERROR and reader.buffered == 0


STREAMS = {
    "content-length": FIRST + SECOND,
    "chunked": (CHUNKED_HEAD + b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nT-1: x\r\nT-2: y\r\n\r\n"
                + SECOND),
    "expect, absolute-form, HTTP/1.0": (
        b"PUT http://h:81/p?q HTTP/1.1\r\nHost: h:81\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"
        + b"GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_same_requests_whatever_the_split(name):
    data = STREAMS[name]
    whole = read_requests(data)
    assert len(whole) == 2 and all(isinstance(r, tuple) for r in whole)
    for cut in range(1, len(data)):
        assert read_requests(split(data, cut)) == whole, cut
    assert read_requests(trickle(data)) == whole


def test_chunked_body_is_dechunked_and_trailers_are_never_headers():
    (request, _) = read_requests(STREAMS["chunked"])
    head_names = [name for name, _, _ in request[4]]
    assert head_names == [b"host", b"transfer-encoding"]
    assert request[-1] == b"hello world"
    assert request[8] is True  # chunked


# ---- RFC 9112 checks ------------------------------------------------------------------------

def test_http_versions_1_0_and_1_1_only():
    assert status_of(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n") == "ok"
    assert status_of(b"GET / HTTP/1.0\r\n\r\n") == "ok"
    for version in (b"HTTP/2.0", b"HTTP/1.2", b"HTTP/0.9", b"HTTP/3.0"):
        assert status_of(b"GET / " + version + b"\r\nHost: h\r\n\r\n") == 400, version


def test_http_1_1_needs_exactly_one_host():
    assert one_request(b"GET / HTTP/1.1\r\nHost: h:8\r\n\r\n")[0].host == b"h:8"
    assert status_of(b"GET / HTTP/1.1\r\n\r\n") == 400
    assert status_of(b"GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n") == 400
    assert status_of(b"GET / HTTP/1.1\r\nHost: h\r\nHost: g\r\n\r\n") == 400


def test_http_1_0_may_omit_host_but_not_repeat_it():
    assert one_request(b"GET / HTTP/1.0\r\n\r\n")[0].host is None
    assert one_request(b"GET / HTTP/1.0\r\nHost: h\r\n\r\n")[0].host == b"h"
    assert status_of(b"GET / HTTP/1.0\r\nHost: h\r\nHost: h\r\n\r\n") == 400


def test_host_must_be_a_host_and_port():
    for host in (b"h", b"h.example:8080", b"[::1]:80", b"10.0.0.1"):
        assert one_request(b"GET / HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")[0].host == host
    for host in (b"a b", b"a/b", b"u@h", b"h:8x"):
        assert status_of(b"GET / HTTP/1.1\r\nHost: " + host + b"\r\n\r\n") == 400, host


def test_absolute_form_is_rewritten_to_origin_form_with_its_authority_as_host():
    head, _ = one_request(b"GET http://Example.com:81/p/q?x=1#frag HTTP/1.1\r\nHost: example.COM:81\r\n\r\n")
    assert (head.target, head.host) == (b"/p/q?x=1", b"Example.com:81")
    head, _ = one_request(b"GET HTTPS://h?q HTTP/1.0\r\n\r\n")  # no Host: the authority is it
    assert (head.target, head.host) == (b"/?q", b"h")
    assert status_of(b"GET http://h/ HTTP/1.1\r\nHost: other\r\n\r\n") == 400
    assert status_of(b"GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n") == 400
    assert status_of(b"GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n") == 400
    assert status_of(b"GET ftp://h/p HTTP/1.1\r\nHost: h\r\n\r\n") == 400


def test_asterisk_form_for_options_only():
    assert one_request(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n")[0].target == b"*"
    assert status_of(b"GET * HTTP/1.1\r\nHost: h\r\n\r\n") == 400


def test_connection_names_come_from_every_connection_header_and_never_frame_the_message():
    head, _ = one_request(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: X-A, keep-alive\r\n"
                          b"Connection: host,content-length, x-b ,transfer-encoding\r\n\r\n")
    assert head.dropped == {b"x-a", b"x-b"}
    assert head.keep_alive


def test_keep_alive_defaults_by_version():
    cases = {b"GET / HTTP/1.1\r\nHost: h\r\n\r\n": True,
             b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n": False,
             b"GET / HTTP/1.0\r\n\r\n": False,
             b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n": True,
             b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n": False}
    for data, keep_alive in cases.items():
        assert one_request(data)[0].keep_alive is keep_alive, data


def test_expect_100_continue_is_noted():
    head, body = one_request(b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx")
    assert head.expect_continue and bytes(body) == b"x"
    assert not one_request(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx")[0].expect_continue
    assert CONTINUE == b"HTTP/1.1 100 Continue\r\n\r\n"


UPGRADE = b"GET /chat HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n"


@pytest.mark.parametrize("split", [None, 1, 7])
def test_an_upgrade_request_is_complete_and_what_follows_stays_unparsed(split):
    data = UPGRADE + b"\x81\x05hello GET / HTTP/1.1\r\n\r\n"  # the new protocol's bytes, never a request
    reader = RequestReader(LIMITS)
    pieces = [data] if split is None else [data[i:i + split] for i in range(0, len(data), split)]
    events = []
    for piece in pieces:
        reader.feed(piece)
        event = reader.next_event()
        while event == HEAD:
            event = reader.next_event()
        events.append(event)
    assert COMPLETE in events and ERROR not in events
    assert reader.head.upgrade == b"websocket" and reader.head.target == b"/chat"
    assert reader.requests == 1
    assert reader.take_buffered() == b"\x81\x05hello GET / HTTP/1.1\r\n\r\n"
    assert reader.buffered == 0


def test_an_upgrade_request_is_forwarded_without_its_hop_by_hop_headers_until_asked_again():
    head, _ = one_request(UPGRADE)
    encoded = encode_request(head, b"", b"10.0.0.1", Forwarding())
    assert b"Upgrade" not in encoded and b"Connection" not in encoded  # the tunnel module adds them back


def test_a_refused_upgrade_leaves_a_fresh_parser_for_the_next_request():
    assert status_of(UPGRADE + b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n") == "ok"
    outcomes = read_requests(UPGRADE + b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
    assert [o[1] for o in outcomes] == [b"/chat", b"/next"]


def test_upgrade_not_asked_for_is_an_ordinary_request():
    assert status_of(b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n") == "ok"
    head, _ = one_request(b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n")
    assert head.upgrade == b""


@pytest.mark.parametrize("framing", [b"Content-Length: 5\r\n\r\nhello",
                                     b"Transfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n3\r\nllo\r\n0\r\nT: t\r\n\r\n"])
@pytest.mark.parametrize("split", [None, 1])
def test_an_upgrade_request_with_a_body_is_an_ordinary_request_with_its_body(framing, split):
    """As HAProxy does: the body read by its framing, no upgrade; the next request parsed as usual."""
    data = b"POST /up HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n" + framing
    data += b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n"
    pieces = [data] if split is None else [data[i:i + split] for i in range(len(data))]
    outcomes = read_requests(pieces)
    assert [(o[0], o[1], o[-1]) for o in outcomes] == [(b"POST", b"/up", b"hello"), (b"GET", b"/next", b"")]
    head, body = one_request(data[:len(data) - len(b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n")])
    assert head.upgrade == b"" and bytes(body) == b"hello"


def test_an_upgrade_request_with_a_body_over_max_body_gets_413():
    data = b"POST / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 100\r\n\r\n"
    assert status_of(data + b"x" * 100, Limits(max_body=10)) == 413


def test_an_upgrade_request_with_content_length_0_is_an_upgrade():
    head, _ = one_request(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                          b"Content-Length: 0\r\n\r\n")
    assert head.upgrade == b"websocket"


def test_connect_is_refused_with_501():
    assert status_of(b"CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n") == 501


MUST_BE_400 = {
    "CL.TE": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "TE.CL": b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
    "duplicate Content-Length": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    "two Content-Lengths": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    "Content-Length list": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc",
    "signed Content-Length": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc",
    "hex Content-Length": b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x3\r\n\r\nabc",
    "Transfer-Encoding not ending in chunked": b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\nab",
    "bad chunk size": CHUNKED_HEAD + b"zz\r\nab\r\n0\r\n\r\n",
    "0x chunk size": CHUNKED_HEAD + b"0x2\r\nab\r\n0\r\n\r\n",
    "negative chunk size": CHUNKED_HEAD + b"-2\r\nab\r\n0\r\n\r\n",
    "chunk without its CRLF": CHUNKED_HEAD + b"2\r\nabX\r\n0\r\n\r\n",
    "obs-fold": b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
    "bare LF everywhere": b"GET / HTTP/1.1\nHost: h\n\n",
    "bare LF ends a header": b"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
    "bare LF ends the head": b"GET / HTTP/1.1\r\nHost: h\r\n\n",
    "HTTP/0.9": b"GET /\r\n\r\n",
    "HTTP/2.0": b"GET / HTTP/2.0\r\nHost: h\r\n\r\n",
    "HTTP/1.2": b"GET / HTTP/1.2\r\nHost: h\r\n\r\n",
    "space before the colon": b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
    "no header name": b"GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n",
    "control byte in a target": b"GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(MUST_BE_400))
def test_bad_framing_is_400(name):
    data = MUST_BE_400[name]
    assert status_of(data) == 400
    assert status_of(trickle(data)) == 400


# request lines that are not METHOD SP TARGET SP HTTP/1.x: refused at their own end, with nothing after
NOT_A_REQUEST_LINE = {
    "HTTP/0.9": b"GET /a\r\n",
    "no target": b"GET HTTP/1.1\r\n",
    "HTTP/2.0": b"GET / HTTP/2.0\r\n",
    "two spaces": b"GET  / HTTP/1.1\r\n",
    "a space at the end": b"GET / HTTP/1.1 \r\n",
    "a tab for a space": b"GET\t/ HTTP/1.1\r\n",
    "bare LF": b"GET / HTTP/1.1\n",
    "lowercase version": b"GET / http/1.1\r\n",
    "a version of two digits": b"GET / HTTP/1.10\r\n",
    "a method that is no token": b"G(T / HTTP/1.1\r\n",
    "after an empty line": b"\r\nGET /a\r\n",
}


@pytest.mark.parametrize("name", sorted(NOT_A_REQUEST_LINE))
def test_a_request_line_not_of_the_form_is_400_at_its_end(name):
    data = NOT_A_REQUEST_LINE[name]
    assert status_of(data) == 400
    assert status_of(trickle(data)) == 400
    reader = RequestReader(LIMITS)
    reader.feed(data)
    assert reader.next_event() == ERROR and reader.error == (400, "the request line is not METHOD SP TARGET SP HTTP/1.x")


@pytest.mark.parametrize("line", [b"GET / HTTP/1.1", b"OPTIONS * HTTP/1.1", b"GET http://h/a?b HTTP/1.1",
                                  b"M-SEARCH / HTTP/1.1", b"GET / HTTP/1.0"])
def test_a_request_line_of_the_form_waits_for_its_head(line):
    reader = RequestReader(LIMITS)
    reader.feed(line + b"\r\n")
    assert reader.next_event() == NEED_DATA


# ---- encode_request ---------------------------------------------------------------------------

def encoded(data, client=CLIENT, **forwarding):
    head, body = one_request(data, Limits())
    return encode_request(head, body, client, Forwarding(**forwarding))


def header_lines(message):
    return message.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]


def values(message, name):
    return [line.split(b": ", 1)[1] for line in header_lines(message) if line.split(b":", 1)[0].lower() == name]


def served(message):
    """h11, as the backend, reads exactly one request: (h11.Request, body)."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(message)
    request = conn.next_event()
    assert isinstance(request, h11.Request)
    body = b""
    while True:
        event = conn.next_event()
        if isinstance(event, h11.EndOfMessage):
            break
        body += bytes(event.data)
    assert conn.trailing_data[0] == b""
    return request, body


XFF_REQUEST = (b"GET /p HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1, 2.2.2.2\r\nX-Other: o\r\n"
               b"X-Forwarded-For: 3.3.3.3\r\nX-Forwarded-Proto: https\r\nForwarded: for=1.1.1.1\r\n\r\n")


def test_x_forwarded_for_is_appended_as_a_new_line_after_the_clients_own():
    out = encoded(XFF_REQUEST)
    assert values(out, b"x-forwarded-for") == [b"1.1.1.1, 2.2.2.2", b"3.3.3.3", CLIENT]
    assert values(out, b"x-forwarded-proto") == [b"https"]  # the client's kept, none added
    assert values(out, b"forwarded") == [b"for=1.1.1.1"]
    names_ = [line.split(b":")[0].lower() for line in header_lines(out)]
    assert names_.index(b"x-other") < names_.index(b"x-forwarded-for", names_.index(b"x-other"))
    assert out.startswith(b"GET /p HTTP/1.1\r\n")


def test_xff_replace_drops_what_the_client_said():
    out = encoded(XFF_REQUEST, xff="replace")
    assert values(out, b"x-forwarded-for") == [CLIENT]
    assert values(out, b"x-forwarded-proto") == [b"http"]
    assert values(out, b"forwarded") == []
    assert values(out, b"x-other") == [b"o"]


@pytest.mark.parametrize("client, node", [(b"192.0.2.7", b"192.0.2.7"), (b"2001:db8::1", b'"[2001:db8::1]"')])
def test_forwarded_names_the_client_ipv4_bare_and_ipv6_quoted(client, node):
    out = encoded(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", client=client, forwarded=True)
    assert values(out, b"forwarded") == [b"for=" + node + b";proto=http"]
    assert values(out, b"x-forwarded-for") == [client]
    assert values(encoded(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", client=client), b"forwarded") == []


def test_via_names_the_clients_version():
    assert values(encoded(b"GET / HTTP/1.1\r\nHost: h\r\nVia: 1.1 edge\r\n\r\n", via=True), b"via") == [
        b"1.1 edge", b"1.1 leastload"]
    assert values(encoded(b"GET / HTTP/1.0\r\n\r\n", via=True), b"via") == [b"1.0 leastload"]
    assert values(encoded(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"), b"via") == []


def test_hop_by_hop_and_connection_named_headers_are_dropped_but_never_host():
    out = encoded(b"POST / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret, host, content-length\r\n"
                  b"Keep-Alive: timeout=5\r\nProxy-Connection: x\r\nTE: trailers\r\nTrailer: T\r\n"
                  b"Expect: 100-continue\r\nX-Secret: s\r\nX-Kept: k\r\nContent-Length: 2\r\n\r\nhi")
    kept = [line.split(b":")[0].lower() for line in header_lines(out)]
    assert kept == [b"host", b"x-kept", b"x-forwarded-for", b"x-forwarded-proto", b"content-length"]
    request, body = served(out)
    assert body == b"hi" and request.http_version == b"1.1"


def test_a_plain_request_reaches_the_backend_unchanged_but_for_the_forwarding_lines():
    out = encoded(b"GET /p?q HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n")
    assert out == (b"GET /p?q HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n"
                   b"X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: http\r\n\r\n")


def test_http_1_0_requests_reach_the_backend_as_http_1_1():
    out = encoded(b"POST /p HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi")
    assert out.startswith(b"POST /p HTTP/1.1\r\n")
    request, body = served(out.replace(b"\r\n\r\n", b"\r\nHost: h\r\n\r\n", 1))  # h11 wants a Host
    assert body == b"hi"


def test_content_length_is_the_bodys_and_trailers_are_absent():
    out = encoded(CHUNKED_HEAD + chunked(b"abc", b"de", trailers=b"T-1: x\r\n"))
    assert values(out, b"content-length") == [b"5"]
    assert values(out, b"transfer-encoding") == [] and values(out, b"t-1") == []
    request, body = served(out)
    assert body == b"abcde" and request.target == b"/up"
    assert values(encoded(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"), b"content-length") == []
    assert values(encoded(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), b"content-length") == [b"0"]


def test_absolute_form_reaches_the_backend_as_origin_form_with_host():
    out = encoded(b"GET http://a.example:81/x?y HTTP/1.1\r\nHost: A.example:81\r\n\r\n")
    assert out.startswith(b"GET /x?y HTTP/1.1\r\n")
    assert values(out, b"host") == [b"a.example:81"]
    out = encoded(b"GET http://a.example/x HTTP/1.0\r\n\r\n")
    assert values(out, b"host") == [b"a.example"]
    assert served(out)[0].target == b"/x"


# ---- ResponseReader: framing for each client --------------------------------------------------

CL_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: a\r\n\r\nhello"
CHUNKED_RESPONSE = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: a\r\n\r\n"
                    b"3;ext\r\nhel\r\n2\r\nlo\r\n0\r\nT-1: t\r\n\r\n")
EOF_RESPONSE = b"HTTP/1.1 200 OK\r\nX-A: a\r\n\r\nhello"

# name: (backend bytes, http10, eof, reusable, close_client)
FRAMINGS = {
    "content-length, 1.1": (CL_RESPONSE, False, False, True, False),
    "content-length, 1.0": (CL_RESPONSE, True, False, True, False),
    "chunked, 1.1": (CHUNKED_RESPONSE, False, False, True, False),
    "chunked, 1.0 (de-chunked)": (CHUNKED_RESPONSE, True, False, True, True),
    "close-delimited, 1.1": (EOF_RESPONSE, False, True, False, True),
    "close-delimited, 1.0": (EOF_RESPONSE, True, True, False, True),
}


@pytest.mark.parametrize("name", sorted(FRAMINGS))
def test_each_framing_reaches_the_client_well_framed(name):
    data, http10, eof, reusable, close_client = FRAMINGS[name]
    out, reader = respond(data, http10=http10, eof=eof)
    assert (reader.complete, reader.failed, reader.status) == (True, None, 200)
    assert (reader.reusable, reader.close_client, reader.extra) == (reusable, close_client, False)
    judged = judge(out, closed=close_client)
    assert (judged.status, judged.body) == (200, b"hello")
    assert (b"x-a", b"a") in judged.headers
    if http10:
        assert b"transfer-encoding" not in names(judged)
        assert (b"connection", b"close" if close_client else b"keep-alive") in judged.headers
    if name == "chunked, 1.1":  # the chunks pass as they are, trailers as trailers
        assert out.endswith(CHUNKED_RESPONSE[CHUNKED_RESPONSE.index(b"\r\n\r\n"):])
        assert judged.trailers == [(b"t-1", b"t")]
    if close_client:
        assert (b"connection", b"close") in judged.headers


def test_chunked_to_http_1_0_is_plain_bytes_then_close():
    out, _ = respond(CHUNKED_RESPONSE, http10=True)
    assert out == b"HTTP/1.1 200 OK\r\nX-A: a\r\nConnection: close\r\n\r\nhello"


def test_chunks_with_extensions_join_into_one_body_for_http_1_0():
    # found by the pooled-connection fuzz target: a body whose chunks (each with an extension)
    # split a string, then a trailer and an extra CRLF. The HTTP/1.0 client gets the chunks'
    # data joined, no chunk line, extension or trailer, and the connection is closed after it
    head = b"HTTP/1.1 301 Moved\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
    chunks = b"c;x=1\r\n{tag-0-00000\r\n2;x=1\r\n0}\r\n1;x=1\r\n)\r\n0\r\nT-0: t\r\n\r\n"
    for pieces in ([head + chunks + b"\r\n"], [head + chunks[:9], chunks[9:20], chunks[20:] + b"\r\n"]):
        out, reader = respond(None, pieces, http10=True)
        assert reader.complete and reader.close_client and reader.extra and not reader.reusable
        assert out == b"HTTP/1.1 301 Moved\r\nConnection: close\r\n\r\n{tag-0-000000})"


def test_close_delimited_completes_at_eof_only():
    reader = ResponseReader(LIMITS)
    reader.start(False, False, True)
    out = reader.feed(EOF_RESPONSE)
    assert not reader.complete and reader.failed is None and reader.close_client
    out += reader.feed(b" world")
    assert not reader.complete
    out += reader.feed_eof()
    assert reader.complete and not reader.reusable
    assert judge(b"".join(out), closed=True).body == b"hello world"


@pytest.mark.parametrize("data, cut", [(CL_RESPONSE, -2), (CHUNKED_RESPONSE, -9), (CHUNKED_RESPONSE, -1),
                                       (CL_RESPONSE, 20)])
def test_eof_before_the_end_fails(data, cut):
    out, reader = respond(data[:cut], eof=True)
    assert reader.failed and not reader.complete and not reader.reusable
    if cut == 20:  # mid-head: nothing was passed on
        assert out == b""


def test_hop_by_hop_headers_are_stripped_from_responses():
    data = (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop, content-length\r\nKeep-Alive: timeout=5\r\n"
            b"Proxy-Connection: x\r\nTrailer: T\r\nUpgrade: h2c\r\nX-Hop: 1\r\nX-End: 2\r\n"
            b"Content-Length: 2\r\n\r\nok")
    out, reader = respond(data, limits=Limits())
    judged = judge(out)
    assert names(judged) == [b"x-end", b"content-length"]
    assert judged.body == b"ok" and reader.reusable


@pytest.mark.parametrize("backend, reusable", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", True),
])
def test_backend_keep_alive_decides_reuse_not_the_clients_connection(backend, reusable):
    out, reader = respond(backend)
    assert reader.complete and reader.reusable is reusable and not reader.close_client
    judged = judge(out)
    assert judged.body == b"ok" and b"connection" not in names(judged)


def test_a_client_that_asked_to_close_is_told_so():
    out, reader = respond(CL_RESPONSE, keep_alive=False)
    assert reader.close_client and reader.reusable
    assert (b"connection", b"close") in judge(out, closed=True).headers


# ---- ResponseReader: bytes past the end, bodies where none belong --------------------------------

def test_bytes_past_the_end_make_the_connection_not_reusable():
    out, reader = respond(CL_RESPONSE + b"HTTP/1.1 200 OK\r\n")
    assert reader.complete and reader.extra and not reader.reusable
    assert judge(out).body == b"hello"  # only this response reaches the client
    out, reader = respond(CL_RESPONSE, pieces=[CL_RESPONSE, b"x"])  # in a later piece too
    assert reader.extra and not reader.reusable
    assert judge(out).body == b"hello"


@pytest.mark.parametrize("status, method", [(204, "GET"), (304, "GET"), (200, "HEAD")])
def test_no_body_exchanges(status, method):
    head = b"HTTP/1.1 %d X\r\nContent-Length: 3\r\n\r\n" % status
    if status == 204:
        head = b"HTTP/1.1 204 X\r\n\r\n"
    out, reader = respond(head, head_only=method == "HEAD")
    assert reader.complete and reader.reusable and reader.status == status
    judged = judge(out, method=method)
    assert judged.status == status and judged.body == b""
    # the same with a body the framing did not announce: passed nowhere, connection not reused
    out, reader = respond(head + b"abc", head_only=method == "HEAD")
    assert reader.complete and reader.extra and not reader.reusable
    assert judge(out, method=method).body == b""


def test_204_content_length_is_not_passed():
    out, _ = respond(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    assert b"content-length" not in names(judge(out))


def test_head_answer_keeps_content_length_and_a_chunked_head_answer_has_no_body():
    out, reader = respond(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", head_only=True)
    assert (b"content-length", b"10") in judge(out, method="HEAD").headers
    out, reader = respond(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", head_only=True)
    assert reader.complete and reader.reusable and judge(out, method="HEAD").body == b""


@pytest.mark.parametrize("data, reusable", [
    (b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\n", False),
])
def test_a_head_answer_is_reusable_by_the_same_rules_as_any(data, reusable):
    # an HTTP/1.0 backend closes after its answer unless it said keep-alive, HEAD or not
    out, reader = respond(data, head_only=True)
    assert reader.complete and reader.reusable is reusable
    assert judge(out, method="HEAD").status == 200


def test_reader_is_reused_after_a_head_answer_with_content_length():
    reader = ResponseReader(LIMITS)
    reader.start(True, False, True)
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
    assert reader.complete and reader.reusable
    reader.start(False, False, True)
    out = reader.feed(CL_RESPONSE)
    assert reader.complete and reader.reusable and judge(b"".join(out)).body == b"hello"


def test_reader_is_reused_for_the_next_response():
    reader = ResponseReader(LIMITS)
    for data, http10 in [(CL_RESPONSE, False), (CHUNKED_RESPONSE, True), (CHUNKED_RESPONSE, False),
                         (b"HTTP/1.1 204 X\r\n\r\n", False), (CL_RESPONSE, True)]:
        reader.start(False, http10, True)
        out = b"".join(reader.feed(data))
        assert reader.complete and reader.reusable and not reader.extra
        judged = judge(out, closed=reader.close_client)
        assert judged.body == (b"" if b"204" in data else b"hello")


# ---- ResponseReader: 1xx -----------------------------------------------------------------------

EARLY = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
CONTINUED = b"HTTP/1.1 100 Continue\r\n\r\n"


def test_1xx_other_than_100_go_to_http_1_1_clients():
    out, reader = respond(EARLY + CONTINUED + CL_RESPONSE)
    assert reader.complete and reader.status == 200
    judged = judge(out)
    assert judged.informational == [103]
    assert judged.body == b"hello"
    assert out.startswith(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\n")


@pytest.mark.parametrize("data", [b"\r\n" + CL_RESPONSE, CONTINUED + b"\r\n" + CL_RESPONSE,
                                  EARLY + b"\r\n" + CL_RESPONSE])
def test_empty_lines_before_a_response_are_not_passed_on(data):
    out, reader = respond(data)
    assert reader.complete and reader.status == 200
    assert out.startswith(b"HTTP/1.1 ") and b"\r\n\r\n\r\n" not in out
    assert judge(out).body == b"hello"


def test_1xx_never_go_to_http_1_0_clients():
    out, reader = respond(EARLY + CONTINUED + CL_RESPONSE, http10=True)
    assert out.startswith(b"HTTP/1.1 200 OK\r\n")
    assert judge(out).informational == []


SWITCHING_HEAD = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: k\r\n\r\n"


@pytest.mark.parametrize("data", [
    SWITCHING_HEAD,
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
])
def test_101_to_a_request_that_asked_for_no_upgrade_is_refused(data):
    out, reader = respond(data)  # must not raise: the reader says it failed
    assert reader.failed and not reader.complete and not reader.reusable
    assert out == b""


def switched(pieces):
    reader = ResponseReader(LIMITS)
    reader.start(False, False, True)
    reader.upgrade_asked = True
    out = []
    for piece in pieces:
        out += reader.feed(piece)
    return b"".join(out), reader


@pytest.mark.parametrize("split", [None, 5])
def test_101_to_an_upgrade_request_completes_with_the_rest_kept(split):
    data = SWITCHING_HEAD + b"\x81\x02hi"
    out, reader = switched([data] if split is None else [data[i:i + split] for i in range(0, len(data), split)])
    assert reader.complete and not reader.failed and reader.status == 101 and not reader.reusable
    assert out.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"Connection: upgrade\r\nUpgrade: websocket\r\n" in out and b"Sec-WebSocket-Accept: k\r\n" in out
    assert out.endswith(b"\r\n\r\n") and b"\x81" not in out
    assert b"\x81\x02hi".startswith(reader.rest)  # what followed the head in the piece that ended it


def test_101_rest_in_one_piece_is_whole():
    out, reader = switched([SWITCHING_HEAD + b"\x81\x02hi"])
    assert reader.rest == b"\x81\x02hi"
    out, reader = switched([SWITCHING_HEAD])
    assert reader.rest == b""


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
])
def test_a_malformed_101_to_an_upgrade_request_fails(data):
    out, reader = switched([data])
    assert reader.failed and not reader.complete and out == b""


def test_an_ordinary_answer_to_an_upgrade_request_is_ordinary():
    out, reader = switched([CL_RESPONSE])
    assert reader.complete and reader.status == 200 and reader.reusable


# ---- ResponseReader: what is refused --------------------------------------------------------------

@pytest.mark.parametrize("status", [b"000", b"099", b"010"])
def test_a_status_below_100_is_refused(status):
    # RFC 9110 15: status codes are 100..599; these are no 1xx to pass on, and no final status
    out, reader = respond(b"HTTP/1.1 " + status + b" OK\r\nContent-Length: 2\r\n\r\nok")
    assert reader.failed and not reader.complete and out == b""

@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
    b"NOT HTTP\r\n\r\n",
])
def test_a_malformed_head_passes_nothing(data):
    out, reader = respond(data)
    assert reader.failed and out == b"" and not reader.reusable and reader.status == 0


def test_a_bad_chunk_fails_after_what_was_good():
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    out, reader = respond(data, pieces=[data + b"3\r\nabc\r\n", b"zz\r\n"])
    assert reader.failed and not reader.reusable
    assert out == data + b"3\r\nabc\r\n"  # a prefix of a well-framed response: the client is closed


def response_head_of(size):
    fixed = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: \r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: " + b"p" * (size - len(fixed)) + b"\r\n\r\n"


@pytest.mark.parametrize("feed", ["whole", "trickle"])
def test_response_head_limit(feed):
    def fed(data):
        return [data] if feed == "whole" else trickle(data)
    at_limit = response_head_of(LIMITS.max_header_size)
    out, reader = respond(at_limit, pieces=fed(at_limit))
    assert reader.complete and judge(out).status == 200
    over = response_head_of(LIMITS.max_header_size + 1)
    out, reader = respond(over, pieces=fed(over))
    assert reader.failed and out == b""


def test_response_header_count_limit():
    def response(count):
        return b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(count - 1)) + \
            b"Content-Length: 0\r\n\r\n"
    assert respond(response(LIMITS.max_headers))[1].complete
    assert respond(response(LIMITS.max_headers + 1))[1].failed


def chunked_response_with_trailer(pad):
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nT: " + b"t" * pad + b"\r\n\r\n"


@pytest.mark.parametrize("cut", [None, 5, 100])
def test_response_trailers_count_against_the_head_limit(cut):
    data = chunked_response_with_trailer(2 * LIMITS.max_header_size)
    start = data.index(b"T: ")
    _, reader = respond(data, pieces=None if cut is None else split(data, start + cut))
    assert reader.failed and not reader.complete


# ---- ResponseReader: the same client bytes whatever the split ----------------------------------

SPLIT_CASES = {
    "content-length": (CL_RESPONSE, False, False, False),
    "chunked, 1.1": (CHUNKED_RESPONSE, False, False, False),
    "chunked, 1.0": (CHUNKED_RESPONSE, True, False, False),
    "1xx then chunked": (EARLY + CONTINUED + CHUNKED_RESPONSE, False, False, False),
    "close-delimited": (EOF_RESPONSE, False, True, False),
    "head": (b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", False, False, True),
    "extra bytes": (CL_RESPONSE + b"HTTP/1.1 200 OK\r\n\r\n", False, False, False),
}


def flags(reader):
    return (reader.status, reader.complete, reader.failed, reader.reusable, reader.close_client)


@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_the_same_client_bytes_whatever_the_split(name):
    data, http10, eof, head_only = SPLIT_CASES[name]
    whole, reader = respond(data, http10=http10, eof=eof, head_only=head_only)
    expected = flags(reader)
    judged = judge(whole, method="HEAD" if head_only else "GET", closed=reader.close_client)
    assert judged.status == 200 and judged.body == (b"" if head_only else b"hello")
    extra = name == "extra bytes"
    for cut in range(1, len(data)):
        out, reader = respond(data, pieces=split(data, cut), http10=http10, eof=eof, head_only=head_only)
        assert out == whole, cut
        if extra and cut >= len(CL_RESPONSE):  # the extra bytes came in a later piece: same verdict
            assert not reader.reusable and reader.extra
        else:
            assert flags(reader) == expected, cut
    out, reader = respond(data, pieces=trickle(data), http10=http10, eof=eof, head_only=head_only)
    assert out == whole


# ---- the proxy's own answers ---------------------------------------------------------------------

@pytest.mark.parametrize("status", [400, 408, 413, 414, 431, 501, 502, 503, 504])
@pytest.mark.parametrize("close", [True, False])
def test_error_responses_are_well_framed(status, close):
    judged = judge(error_response(status, "why", close), closed=close)
    assert judged.status == status and judged.body == b"why\n"
    assert ((b"connection", b"close") in judged.headers) is close


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("keep_alive", [True, False])
def test_the_proxys_own_answer_to_a_failed_exchange_is_well_framed(method, keep_alive):
    """What _exchange writes when a backend fails before any byte was passed on (502), judged
    for the request's method: a HEAD request's answer has no body, or the client reads it
    as the start of the next response on a kept-alive connection."""
    from types import SimpleNamespace
    from collections import Counter
    from leastload.proxy._backend import ClientSide
    from leastload.proxy._core import ProxyCore
    from leastload.proxy._exchange import Exchange

    written, kept = [], []

    class Client(ClientSide):  # an exchange's client is a ClientSide (a C type when compiled)
        def exchange_done(self, keep_going):
            kept.append(keep_going)

    client = Client()
    client.gone = False
    client.transport = SimpleNamespace(write=written.append)
    client.proxy = SimpleNamespace(stats=SimpleNamespace(answered_by_proxy=Counter()), access_log=None)
    client.core = ProxyCore()  # access_log None, as the proxy's
    Exchange(client, method, b"", keep_alive, False)._answer_error(502, "backend failed")
    judged = judge(b"".join(written), method=method, closed=not kept[0])
    assert judged.status == 502
    assert kept == [keep_alive]


def test_one_reader_serves_fast_and_general_answers_in_any_order():
    # a pooled connection's reader: a fast-path answer, then general-path ones (an HTTP/1.0
    # client, a chunked answer de-chunked for it), then fast ones again; each exact
    reader = ResponseReader(LIMITS)
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    rounds = [(False, True, CL_RESPONSE), (True, False, CL_RESPONSE), (True, False, chunked),
              (False, True, chunked), (False, True, CL_RESPONSE), (True, False, chunked)]
    for http10, keep_alive, data in rounds * 2:
        reader.start(False, http10, keep_alive)
        out = b"".join(bytes(piece) for piece in reader.feed(data))
        assert reader.complete and reader.failed is None and reader.reusable, (http10, data)
        judged = judge(out, closed=reader.close_client)  # a de-chunked body ends with the close
        assert judged.status == 200 and judged.body == b"hello", (http10, out)
        assert (b"chunked" in out.lower()) == (not http10 and data is chunked)


@pytest.mark.parametrize("coding", [b"gzip, chunked", b"gzip", b"chunked\r\nTransfer-Encoding: chunked"])
def test_a_response_coded_other_than_chunked_alone_is_refused(coding):
    out, reader = respond(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + coding + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    assert reader.failed and not reader.complete and out == b""


@pytest.mark.parametrize("line", [b"HTTP/1.1 200 O\x00K", b"HTTP/1.1 200 O\x01K", b"HTTP/1.1 200 O\x7fK"])
def test_a_status_line_with_a_control_character_is_refused(line):
    out, reader = respond(line + b"\r\nContent-Length: 5\r\n\r\nhello")
    assert reader.failed and out == b""


@pytest.mark.parametrize("before", [b"\r", b"\n", b"\r\n", b"\r\n\r\n"])
def test_what_comes_before_a_status_line_is_not_passed_on(before):
    out, reader = respond(before + CL_RESPONSE)
    assert reader.complete and out == CL_RESPONSE
