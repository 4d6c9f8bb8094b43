"""The plain-head path of the HTTP/1.1 layer against its general path (llhttp).

A head in the form nearly every client and backend sends is read without
llhttp (RequestReader._plain_head, ResponseReader._plain_response). That path
must give exactly what llhttp's would, and take nothing llhttp refuses. The
general path is reached with the same bytes fed in two pieces (the plain path
only takes a whole head from its first byte), so each example is read both
ways and every field compared. Heads are drawn from the plain form, and then
mutated (a byte changed, inserted or dropped), so the examples straddle the
form's edge: the near misses must fall back and still agree.
"""

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

TOKEN = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# LEASTLOAD_HYPOTHESIS_EXAMPLES lowers the examples of each test (the quick loop's and CI's
# later stages: 150); unset, they take the numbers below
EXAMPLES = int(os.environ.get("LEASTLOAD_HYPOTHESIS_EXAMPLES", "600"))
VISIBLE = bytes(range(0x21, 0x7F))
METHODS = [b"GET", b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"TRACE", b"get"]
NAMES = [b"Accept", b"User-Agent", b"X-Request-Id", b"Cookie", b"content-length", b"Connection",
         b"Transfer-Encoding", b"X-Forwarded-For", b"Host", b"Expect", b"Keep-Alive", b"Content-Type",
         b"Endpoint-Load-Metrics"]


def _bytes_of(alphabet, min_size=0, max_size=12):
    return st.lists(st.sampled_from(alphabet), min_size=min_size, max_size=max_size).map(bytes)


# ordinary names most of the time, so that many heads are plain; the rest near the edge
names = st.one_of(_bytes_of(TOKEN, 1, 10), _bytes_of(TOKEN, 1, 10), st.sampled_from(NAMES))
values = st.one_of(st.sampled_from([b"1", b"0", b"close", b"chunked", b"100-continue", b"a, b"]),
                   st.builds(lambda a, b: a + b, _bytes_of(VISIBLE, 1, 1), _bytes_of(VISIBLE + b" \t", 0, 10)))
hosts = st.sampled_from([b"example.test", b"127.0.0.1:8080", b"[::1]:80", b"example.test", b"a b", b""])


def _mutate(data, mutation):
    """Changes, inserts or drops one byte (or none)."""
    kind, at, byte = mutation
    if kind == "keep" or not data:
        return data
    at %= len(data)
    if kind == "change":
        return data[:at] + bytes([byte]) + data[at + 1:]
    if kind == "insert":
        return data[:at] + bytes([byte]) + data[at:]
    return data[:at] + data[at + 1:]


mutations = st.tuples(st.sampled_from(["keep", "keep", "keep", "change", "insert", "drop"]),
                      st.integers(0, 400), st.sampled_from(b"\x00\t\n\r :/\x7f\x80AZaz09"))


@st.composite
def request_heads(draw):
    method = draw(st.sampled_from(METHODS))
    target = b"/" + draw(_bytes_of(VISIBLE, 0, 16))
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]))
    fields = [(b"Host", draw(hosts))] if draw(st.integers(0, 7)) else []
    fields += draw(st.lists(st.tuples(names, values), max_size=3))
    order = draw(st.permutations(range(len(fields))))
    lines = b"".join(fields[i][0] + b": " + fields[i][1] + b"\r\n" for i in order)
    head = method + b" " + target + b" " + version + b"\r\n" + lines + b"\r\n"
    return _mutate(head, draw(mutations))


def _request_fields(reader, event):
    head = reader.head
    if event == "error":
        return (event, reader.error[0])
    if head is None:  # still reading the head
        return (event,)
    return (event, head.method, head.target, head.version, head.host, head.keep_alive, head.expect_continue,
            head.content_length, head.chunked, sorted(head.dropped), sorted(head.tokens), head.headers, head.hosts)


def _read_request(http1, pieces):
    reader = http1.RequestReader(http1.Limits(max_headers=4))
    event = http1.NEED_DATA
    for piece in pieces:
        reader.feed(piece)
        event = reader.next_event()
    return reader, event


@settings(max_examples=min(600, EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=request_heads())
def test_a_request_head_reads_the_same_with_and_without_llhttp(http1, head):
    whole, whole_event = _read_request(http1, [head])
    event(f"plain path: {bool(whole.plain_heads)}")
    # cut inside the first CRLFCRLF: no piece holds a whole head (a mutation can add bytes after it)
    end = head.find(b"\r\n\r\n")
    cut = end + 3 if end >= 0 else len(head) - 1
    pieces, pieces_event = _read_request(http1, [head[:cut], head[cut:]])
    assert pieces.plain_heads == 0  # fed in two pieces: always the general path
    if not whole.plain_heads:
        # both read it through llhttp; where the general path itself depends on the pieces
        # (which limit speaks first, a bare LF before the request line) is test_http1_fuzz's
        return
    assert _request_fields(whole, whole_event) == _request_fields(pieces, pieces_event)
    assert whole_event == http1.COMPLETE and whole.head.raw == head[:end + 4]  # (what follows: the next request's)


@settings(max_examples=min(400, EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.tuples(st.one_of(st.just(b""), st.integers(1, 4).map(lambda n: b"X-A: " + b"v" * n)),
                                st.sampled_from([b"\r\n", b"\r\n", b"\n", b"\r", b"\r\n\r", b"\n\r\n", b"\r\r\n"])),
                      max_size=3))
def test_a_whole_head_ends_at_its_first_crlfcrlf_whatever_cr_and_lf_come_before(http1, lines):
    # the plain path finds a head's end skipping ahead by the byte a match would end with:
    # runs of CR and LF in every order (and at every alignment: values of 1 to 4 bytes) must
    # neither hide the first CRLFCRLF nor fake one
    head = b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(text + end for text, end in lines) + b"\r\n"
    end = head.find(b"\r\n\r\n") + 4
    form = head[:end - 4].split(b"\r\n")
    plain = not any(b"\r" in line or b"\n" in line or not line for line in form)
    event(f"plain: {plain}")
    whole, whole_event = _read_request(http1, [head + b"GET"])
    assert whole.plain_heads == plain
    if plain:
        assert whole_event == http1.COMPLETE and whole.head.raw == head[:end]
        pieces, pieces_event = _read_request(http1, [head[:end - 1], head[end - 1:] + b"GET"])
        assert _request_fields(whole, whole_event) == _request_fields(pieces, pieces_event)


@pytest.mark.parametrize("head", [
    b"GET /a?b=c HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\nUser-Agent: x/1 \r\n\r\n",
    b"DELETE / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
])
def test_the_heads_clients_send_take_the_plain_path(http1, head):
    reader, event = _read_request(http1, [head + b"GET / HTTP/1.1\r\n"])
    assert (event, reader.plain_heads, reader.head.raw) == (http1.COMPLETE, 1, head)
    assert reader.head.headers[-1][2] in (b"x/1 ", b"127.0.0.1:8080")  # trailing space kept, as llhttp does
    assert reader.buffered == len(b"GET / HTTP/1.1\r\n")  # the next request waits


def test_names_that_share_a_cache_slot_keep_their_own_meaning(http1):
    # the plain path keeps the names it saw in slots picked by length and end bytes: "Host"
    # and "Hist", "Content-Length" and "Content-Lungth" share one; each head, read after
    # the other's name sits in the slot, must read as llhttp reads it
    heads = [b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
             b"GET / HTTP/1.1\r\nHist: b\r\nHost: a\r\nContent-Lungth: 0\r\n\r\n",
             b"GET / HTTP/1.1\r\nHist: b\r\n\r\n",
             b"POST / HTTP/1.1\r\nHost: a\r\nContent-Lungth: 0\r\n\r\n",
             b"GET / HTTP/1.1\r\nhost: a\r\nHost: b\r\n\r\n"]
    for head in heads * 2:
        whole, whole_event = _read_request(http1, [head])
        pieces, pieces_event = _read_request(http1, [head[:-1], head[-1:]])
        assert _request_fields(whole, whole_event) == _request_fields(pieces, pieces_event), head
    plain = [_read_request(http1, [head])[0].plain_heads for head in heads]
    assert plain == [0, 1, 0, 1, 0]  # a Content-Length, no Host, two Hosts: llhttp's


@pytest.mark.parametrize("head", [
    b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",          # two Hosts: 400
    b"GET / HTTP/1.1\r\nAccept: x\r\n\r\n",                   # no Host: 400
    b"GET / HTTP/1.1\r\nAccept: x\r\nA: 1\r\nB: 2\r\n\r\n",   # no Host, 3 of the 4 lines allowed: 400, not 431
    b"GET / HTTP/1.1\r\nHost: a\r\nX:  two spaces\r\n\r\n",   # llhttp strips them
    b"GET / HTTP/1.1\r\nHost: a\r\nX: \x80\r\n\r\n",          # obs-text
    b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",             # absolute form
    b"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
    b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n",
])
def test_heads_outside_the_form_go_to_llhttp(http1, head):
    reader, event = _read_request(http1, [head])
    assert reader.plain_heads == 0
    pieces, pieces_event = _read_request(http1, [head[:-1], head[-1:]])
    assert _request_fields(reader, event) == _request_fields(pieces, pieces_event)


# ---- responses -------------------------------------------------------------------------

@st.composite
def responses(draw):
    status = draw(st.sampled_from([200, 200, 201, 204, 304, 404, 503, 100, 101, 600]))
    reason = draw(st.sampled_from([b"OK", b"", b"Not Found", b"A\tB"]))
    body = draw(_bytes_of(b"ab\r\n", 0, 8))
    fields = [(b"Content-Length", b"%d" % (len(body) + draw(st.sampled_from([0, 0, 0, 1, -1]))))]
    fields += draw(st.lists(st.tuples(names, values), max_size=3))
    order = draw(st.permutations(range(len(fields))))
    lines = b"".join(fields[i][0] + b": " + fields[i][1] + b"\r\n" for i in order)
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]))
    data = version + b" %d " % status + reason + b"\r\n" + lines + b"\r\n" + body
    return _mutate(data, draw(mutations))


def _read_response(http1, pieces):
    reader = http1.ResponseReader(http1.Limits(max_headers=4))
    reader.start(False, False, True)
    out = b"".join(bytes(p) for piece in pieces for p in reader.feed(piece))
    result = (out, reader.status, reader.complete, reader.failed, reader.reusable, reader.close_client, reader.extra)
    if reader.failed:  # the headers of a refused response are not read
        return reader, result
    return reader, result + (reader.header(b"content-type"), reader.header(b"x-request-id"), reader.load_report())


@settings(max_examples=min(600, EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=responses())
def test_a_response_reads_the_same_with_and_without_llhttp(http1, data):
    whole, whole_result = _read_response(http1, [data])
    event(f"plain path: {bool(whole.plain_heads)}")
    cut = max(1, data.find(b"\r\n"))  # inside the status line: the general path from the start
    pieces, pieces_result = _read_response(http1, [data[:cut], data[cut:]])
    assert pieces.plain_heads == 0
    if not whole.plain_heads:
        return  # both read through llhttp (see the request test)
    assert whole_result == pieces_result
    assert whole_result[:3] == (data, whole.status, True)


def test_the_responses_backends_send_take_the_plain_path(http1):
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nabc"
    reader, result = _read_response(http1, [data])
    assert (reader.plain_heads, result[:5]) == (1, (data, 200, True, None, True))
    assert reader.header(b"content-type") == b"text/plain"
    reader.start(False, False, True)  # the next response on the same connection, through llhttp
    assert b"".join(reader.feed(data[:5]) + reader.feed(data[5:])) == data and reader.complete
    assert reader.plain_heads == 1


def test_a_response_left_to_llhttp_after_its_headers_counts_each_header_once(http1):
    # the plain path reads all three header lines, then finds the body still to come and
    # leaves the response to llhttp: the lines it read must not count again (4 allowed)
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Type: a\r\nX-Request-Id: 1\r\n\r\nabcdef"
    whole, whole_result = _read_response(http1, [data[:-3], data[-3:]])
    pieces, pieces_result = _read_response(http1, [data[:3], data[3:-3], data[-3:]])
    assert whole.plain_heads == 0 and whole_result == pieces_result
    assert whole_result[:4] == (data, 200, True, None)
    assert whole_result[-3:] == (b"a", b"1", None)


def test_a_response_refused_in_one_piece_says_why_as_in_pieces(http1):
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + b"X-A: 1\r\n" * 4 + b"\r\n"  # 5 lines, 4 allowed
    whole, _ = _read_response(http1, [data])
    pieces, _ = _read_response(http1, [data[:3], data[3:]])
    assert whole.failed == pieces.failed == "response has more than 4 header lines"


@pytest.mark.parametrize("size", [10, 5000])  # kept whole, and its head only (over 4 KiB)
def test_a_plain_responses_headers_are_read_when_asked_until_the_next_starts(http1, size):
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nEndpoint-Load-Metrics: TEXT cpu_utilization=0.5 \r\n\r\n" % size
    reader = http1.ResponseReader(http1.Limits())
    reader.start(False, False, True)
    assert b"".join(reader.feed(head + b"x" * size)) == head + b"x" * size
    assert reader.plain_heads == 1
    # the value as llhttp gives it (the whitespace after it kept), from either lookup
    assert reader.load_report() == reader.header(b"endpoint-load-metrics") == b"TEXT cpu_utilization=0.5 "
    assert (reader.header(b"content-length"), reader.header(b"content-type")) == (b"%d" % size, None)
    reader.start(False, False, True)  # the next response: nothing of the last one is left
    assert (reader.load_report(), reader.header(b"content-length")) == (None, None)
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    assert reader.feed(plain) == [plain] and reader.plain_heads == 2
    assert (reader.load_report(), reader.header(b"content-length")) == (None, b"0")


def test_a_plain_response_has_at_most_max_headers_lines(http1):
    lines = b"Content-Length: 0\r\nA: 1\r\nB: 2\r\n"
    for limit, plain in ((3, 1), (2, 0)):
        reader = http1.ResponseReader(http1.Limits(max_headers=limit))
        reader.start(False, False, True)
        reader.feed(b"HTTP/1.1 200 OK\r\n" + lines + b"\r\n")
        assert (reader.plain_heads, reader.complete) == (plain, bool(plain))  # llhttp's path: 502
