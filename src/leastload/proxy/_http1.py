# cython: annotation_typing=False
"""The proxy's HTTP/1.1 without I/O: bytes in, events and bytes out (RFC 9112).

Nothing here touches a socket or a clock, so every limit and framing rule
can be tested by feeding bytes (tests/proxy/test_http1.py, and a fuzz target in tests/proxy/test_http1_fuzz.py).

- `RequestReader`: a client's byte stream -> one checked request at a time
  (`next_event()`: HEAD, then COMPLETE with the body buffered, or ERROR with
  the status to answer). After COMPLETE it reads no further until
  `start_next()`: whatever the client sent meanwhile stays in `buffered`
  bytes, which the connection bounds by pausing its reads.
- `encode_request()`: a checked request as a backend gets it (HTTP/1.1,
  hop-by-hop headers dropped, forwarding headers added, Content-Length).
- `ResponseReader`: a backend's byte stream for one request -> the bytes the
  client gets (hop-by-hop headers stripped, framing chosen for the client),
  the status, and whether the backend connection may carry another request.

httptools (llhttp) parses and validates; it is only ever fed the bytes of
one message, because it cannot say where in a buffer a message ended. The
end is found here: a head ends at its empty line, a body after
Content-Length bytes or at the chunked encoding's last empty line (the
`_Chunks` tracker reads the chunk sizes; llhttp checks the same bytes).
Every limit is checked as the bytes arrive, and the work is linear in them:
a partial line is kept in a bytearray, and llhttp is fed whole lines only,
so it never accumulates a header piece by piece.
"""

import re
from typing import Dict, List, Optional, Set, Tuple, Union, cast

import httptools

from ..config.proxy_settings import DEFAULT as _DEFAULT  # the limits' defaults: the proxy's

# (each compiled module needs its own: a cdef global cannot be imported from another module)
try:
    import cython
    _COMPILED = cython.compiled  # True only in the built module (a C constant there)
except ImportError:  # no Cython installed: this file runs as plain Python
    _COMPILED = False

Buffer = Union[bytes, bytearray]
Piece = Union[bytes, bytearray, memoryview]  # what llhttp is fed and what a client is sent

# next_event() results
NEED_DATA = "need-data"  # feed more bytes
HEAD = "head"            # .head is a checked RequestHead; its body follows
COMPLETE = "complete"    # .head and .body: the request is whole; reading stops until start_next()
PAUSED = "paused"        # a request was completed and start_next() was not called yet
ERROR = "error"          # .error = (status, text): answer it and close; the stream is unusable
_BODY = "body"           # (a state) reading the body of a head already returned

REASONS = {100: b"Continue", 400: b"Bad Request", 408: b"Request Timeout", 413: b"Content Too Large",
           414: b"URI Too Long", 431: b"Request Header Fields Too Large", 501: b"Not Implemented",
           502: b"Bad Gateway", 503: b"Service Unavailable", 504: b"Gateway Timeout"}
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

# Hop-by-hop headers (RFC 9110 7.6.1), and the ones the proxy frames itself, never forwarded as sent.
_REQUEST_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                           b"transfer-encoding", b"upgrade", b"expect", b"content-length"})
_RESPONSE_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                            b"transfer-encoding", b"upgrade"})
# a Connection header may name headers as hop-by-hop, but never these (they frame the message)
_PROTECTED = frozenset({b"host", b"content-length", b"transfer-encoding"})
_CONNECTION_OPTIONS = frozenset({b"close", b"keep-alive"})
_BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})
_HOST = re.compile(rb"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+;=%]*)(:[0-9]*)?\Z")
_ABSOLUTE = re.compile(rb"(?i:https?)://([^/?#]*)(.*)\Z", re.S)
_MAX_CHUNK_LINE = 4096  # a chunk-size line with its extensions
_BAD_REQUEST_LINE = "the request line is not METHOD SP TARGET SP HTTP/1.x"


class Limits:
    """What one request (or response) may take before it is refused."""

    __slots__ = ("max_request_line", "max_header_size", "max_headers", "max_body")

    def __init__(self, max_request_line: int = _DEFAULT["max_request_line"],
                 max_header_size: int = _DEFAULT["max_header_size"], max_headers: int = _DEFAULT["max_headers"],
                 max_body: int = _DEFAULT["max_body"]) -> None:
        self.max_request_line = max_request_line  # 414 above it (the line without its CRLF)
        self.max_header_size = max_header_size    # the whole head, trailers included: 431 above it
        self.max_headers = max_headers            # header lines, trailers included: 431 above it
        self.max_body = max_body                  # 413 above it (decided from Content-Length when there is one)


# llhttp refusing; an upgrade (or CONNECT) it stops at is not an HttpParserError
_PARSE_ERRORS = (httptools.HttpParserError, httptools.HttpParserUpgrade)


class _NotFast(Exception):
    """Stops the response fast path's parse: the general path takes the bytes."""


class _Refuse(Exception):
    """Raised inside a parser callback to stop parsing with an answer."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


def error_response(status: int, text: str, close: bool = True, head_only: bool = False) -> bytes:
    """An answer the proxy writes itself (plain text; without its body to a HEAD request)."""
    body = text.encode() + b"\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, REASONS[status], len(body), b"Connection: close\r\n" if close else b"", b"" if head_only else body)


class _Chunks:
    """Where a chunked body ends in the bytes that arrive; llhttp validates the same bytes.

    `scan(buf, i)` consumes from buf[i:] and returns the index just past the
    body's last empty line, or -1 when it did not end there (all consumed).
    Trailer lines are counted (`trailers`, `trailer_bytes`) for the limits.
    """

    __slots__ = ("left", "in_data", "line", "trailers", "trailer_bytes", "in_trailers", "bad")

    def __init__(self) -> None:
        self.left = 0           # data bytes, then its CRLF, still to skip
        self.in_data = False
        self.line = bytearray()  # the current size or trailer line, while it is incomplete
        self.in_trailers = False
        self.trailers = 0
        self.trailer_bytes = 0
        self.bad = False        # a size line that is not hex: llhttp refuses it too

    def scan(self, buf: Buffer, i: int) -> int:
        n = len(buf)
        while i < n:
            if self.in_data:
                take = min(self.left, n - i)
                i += take
                self.left -= take
                if self.left == 0:
                    self.in_data = False
                continue
            nl = buf.find(b"\n", i)
            if nl < 0:
                self.line += buf[i:]
                if len(self.line) > _MAX_CHUNK_LINE and not self.in_trailers:
                    self.bad = True
                if self.in_trailers:
                    self.trailer_bytes += n - i
                return -1
            if self.in_trailers:
                self.trailer_bytes += nl + 1 - i  # the rest of the line (its start was counted as it came)
            if self.line:
                self.line += buf[i:nl]
                line: Buffer = self.line
            else:
                line = buf[i:nl]
            i = nl + 1
            if self.in_trailers:
                self.line = bytearray()
                if line == b"\r" or line == b"":
                    return i
                self.trailers += 1
                continue
            self.line = bytearray()
            size_text = bytes(line).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                self.bad = True
                return -1
            if size == 0:
                self.in_trailers = True
            else:
                self.in_data, self.left = True, size + 2  # the data, then its CRLF
        return -1


class RequestHead:
    """A request head that passed every check: what the proxy forwards and how it answers.

    Every attribute is set in __init__ (a compiled build makes this a cdef class, which
    cannot take class-level defaults)."""

    def __init__(self) -> None:
        self.method = b""
        self.target = b""                 # origin-form (an absolute-form target rewritten), or * for OPTIONS
        self.version = 11                 # 10 or 11
        self.host: Optional[bytes] = None  # the authority: the Host header's, or an absolute-form target's
        self.keep_alive = True
        self.expect_continue = False
        self.content_length: Optional[int] = None
        self.chunked = False
        self.upgrade = b""  # the Upgrade header's value when the client asked for an upgrade (_tunnel.py)
        self.dropped: "frozenset[bytes] | Set[bytes]" = _NO_NAMES  # names a Connection header declared hop-by-hop
        self.tokens: "frozenset[bytes] | Set[bytes]" = _NO_NAMES   # the Connection headers' tokens, lowercase
        # the head as received when it can be forwarded as it is (HTTP/1.1, origin-form, no
        # header the proxy drops or rewrites): the common case costs no rebuilding
        self.raw: Optional[Buffer] = None
        # made when first asked for: a plain head's from its lines in `raw` (_lines_at to _lines_end)
        self._headers: Optional[List[Tuple[bytes, bytes, bytes]]] = None
        self._hosts: Optional[List[bytes]] = None
        self._lines_at = self._lines_end = 0

    @property
    def headers(self) -> List[Tuple[bytes, bytes, bytes]]:
        """(lowercase name, name, value) of each header line, in order."""
        if self._headers is None:
            self._headers = []
            if self._lines_end:  # a plain head (RequestReader._plain_head): its lines, read now
                _plain_fields(cast(bytes, self.raw), self._lines_at, self._lines_end, self._headers)
        return self._headers

    @property
    def hosts(self) -> List[bytes]:
        """Each Host header's value, in order (trimmed)."""
        if self._hosts is None:
            self._hosts = [self.host] if self._lines_end and self.host is not None else []
        return self._hosts

    def header(self, name: bytes) -> Optional[bytes]:
        """The first header of that lowercase name."""
        for lowered, _, value in self.headers:
            if lowered == name:
                return value
        return None


_NO_NAMES: "frozenset[bytes]" = frozenset()
# headers whose presence needs a look when a request head is read (the rest pass as they are)
_REQUEST_SPECIAL = _REQUEST_DROP | frozenset({b"host", b"x-forwarded-for", b"x-forwarded-proto", b"forwarded"})
_HOSTS_SEEN: Dict[bytes, bool] = {}  # Host values already checked (bounded): clients repeat theirs
# What a plain head (read without llhttp: RequestReader._plain_head, ResponseReader._plain_response)
# is made of: 256-byte tables, 1 for a byte in the set. Each set is a subset of what llhttp
# takes: RFC 9110 5.6.2's token; visible ASCII; a field value's bytes without obs-text.
def _table(allowed: bytes) -> bytes:
    return bytes(1 if c in allowed else 0 for c in range(256))


_TOKEN_TABLE = _table(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_VISIBLE_TABLE = _table(bytes(range(0x21, 0x7f)))
_VALUE_TABLE = _table(bytes(range(0x21, 0x7f)) + b" \t")
_DIGIT_TABLE = _table(b"0123456789")
# the methods a plain request may have, each to itself (the head keeps this one object)
_PLAIN_METHODS = (b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"PATCH")  # the commonest first
_HTTP11_END = b" HTTP/1.1\r\n"   # a plain request line's end
_HTTP11_START = b"HTTP/1.1 "        # a plain status line's start
# A plain response up to this size is kept whole for header() until the next one starts (no
# copy); of a larger one, only its head is (a copy: an idle pooled connection holds little).
_KEEP_WHOLE = 4096

# A header name as received -> (its lowercase form, flags), so that the names clients and
# backends repeat are lowered and classified once. The lowercase forms of Host and
# Content-Length are these very objects (compared by identity). Bounded: cleared when full.
_HOST_NAME = b"host"
_CONTENT_LENGTH_NAME = b"content-length"
_NOT_PLAIN_REQUEST = 1   # a request header the proxy drops or rewrites (Host aside)
_NOT_PLAIN_RESPONSE = 2  # a response header the proxy drops (Content-Length aside)
_LOAD_REPORT = 4         # ORCA's endpoint-load-metrics, which the proxy may read (ResponseReader.load_report)
_LOAD_REPORT_NAME = b"endpoint-load-metrics"
_FIELD_NAMES: Dict[bytes, Tuple[bytes, int]] = {}
# The names last seen, by a slot their length and end bytes pick: (name, lowercase name, flags).
# A hit is checked against the bytes and costs neither a new bytes object nor a hash of it.
_NAME_SLOTS: List[Optional[Tuple[bytes, bytes, int]]] = [None] * 256


def _field_name(name: bytes) -> Tuple[bytes, int]:
    """(lowercase name, flags) for a header name, from _FIELD_NAMES or made and kept there."""
    known = _FIELD_NAMES.get(name)
    if known is None:
        lowered = name.lower()
        if lowered == _HOST_NAME:
            lowered = _HOST_NAME
        elif lowered == _CONTENT_LENGTH_NAME:
            lowered = _CONTENT_LENGTH_NAME
        flags = 0
        if lowered in _REQUEST_SPECIAL and lowered is not _HOST_NAME:
            flags |= _NOT_PLAIN_REQUEST
        if lowered in _RESPONSE_SPECIAL and lowered is not _CONTENT_LENGTH_NAME:
            flags |= _NOT_PLAIN_RESPONSE
        if lowered == _LOAD_REPORT_NAME:
            flags |= _LOAD_REPORT
        known = (lowered, flags)
        if len(_FIELD_NAMES) >= 4096:
            _FIELD_NAMES.clear()
        _FIELD_NAMES[name] = known
    return known


# The scans below read `data` through a pointer in the compiled build (the .pxd): each
# checks its bounds against len(data) before the first read.

def _all_in(data: bytes, start: int, stop: int, table: bytes) -> bool:
    """Every byte of data[start:stop] is in the table's set."""
    if not 0 <= start <= stop <= len(data):
        return False
    p = data
    allowed = table
    for i in range(start, stop):
        if not allowed[p[i]]:
            return False
    return True


def _equal_at(data: bytes, at: int, text: bytes) -> bool:
    """data[at:at + len(text)] == text, without making the slice."""
    n = len(text)
    if not 0 <= at <= len(data) - n:
        return False
    p = data
    q = text
    if _COMPILED:
        return memcmp(p + at, q, n) == 0  # type: ignore[name-defined, operator, no-any-return]  # noqa: F821 (C)
    for i in range(n):
        if p[at + i] != q[i]:
            return False
    return True


def _head_end(data: bytes, stop: int) -> int:
    """Where the first CRLFCRLF in data[:stop] starts; -1 when there is none."""
    if not 0 <= stop <= len(data):
        return -1
    p = data
    i = 0
    # Each step reads the byte a match at i would end with. Any other byte than CR or LF
    # rules out a match at i to i + 3 (every byte of CRLFCRLF is one of the two): 4 ahead.
    # An LF rules out i + 1 and i + 3 (a CR there); a CR, only i (its LF's place).
    while i + 3 < stop:
        c = p[i + 3]
        if c == 10:
            if p[i] == 13 and p[i + 1] == 10 and p[i + 2] == 13:
                return i
            i += 2
        elif c == 13:
            i += 1
        else:
            i += 4
    return -1


def _line_end(data: bytes, stop: int) -> int:
    """Where the first LF in data[:stop] is; -1 when there is none."""
    if not 0 <= stop <= len(data):
        return -1
    p = data
    for i in range(stop):
        if p[i] == 10:
            return i
    return -1


def _request_line_ok(line: bytes, first: int) -> bool:
    """line[:first + 1], a request line with its LF at `first`, has the form RFC 9112 3 gives:
    METHOD SP TARGET SP HTTP/1.x CRLF (a token, visible ASCII, one space each). Anything else
    (HTTP/0.9's `GET /a`, another version, a stray space) is refused at its end with a 400,
    not waited on for a head that may never come."""
    version_at = first - 10  # the space before "HTTP/1.x\r\n"
    if not 2 < version_at < first < len(line):
        return False
    p = line
    if p[first - 1] != 13 or p[version_at] != 32 or not 48 <= p[first - 2] <= 57:
        return False
    if not _equal_at(line, version_at + 1, b"HTTP/1."):
        return False
    space = line.find(b" ", 0, version_at)
    return (space > 0 and _all_in(line, 0, space, _TOKEN_TABLE)
            and _all_in(line, space + 1, version_at, _VISIBLE_TABLE) and space + 1 < version_at)


def _decimal(data: bytes, start: int, stop: int) -> int:
    """data[start:stop], a Content-Length's value of 1 to 18 digits, as a number; -1 for anything else."""
    if not (0 <= start < stop <= len(data) and stop - start <= 18):
        return -1
    p = data
    number = 0
    for i in range(start, stop):
        c = p[i]
        if not 48 <= c <= 57:
            return -1
        number = number * 10 + c - 48
    return number


# A plain header line, data[i:stop] onwards, is `token: value` CRLF with one space, a value
# that starts visible and holds no control character but HTAB. llhttp reports the same
# names and values for such lines (it strips the whitespace before a value and keeps the
# whitespace after it). The value starts 2 bytes after the name's end.

def _name_end(data: bytes, i: int, stop: int) -> int:
    """Where the name of a plain line starting at `i` ends (its colon); -1: not a plain line."""
    p = data
    token = _TOKEN_TABLE
    visible = _VISIBLE_TABLE
    j = i
    while j < stop and token[p[j]]:
        j += 1
    if j == i or j + 2 >= stop or p[j] != 58 or p[j + 1] != 32 or not visible[p[j + 2]]:  # ": " then visible
        return -1
    return j


def _value_end(data: bytes, j: int, stop: int) -> int:
    """Where the value starting at `j` ends (its line's CR, an LF after it); -1: not a plain line."""
    p = data
    in_value = _VALUE_TABLE
    while j < stop and in_value[p[j]]:
        j += 1
    if j + 1 >= stop or p[j] != 13 or p[j + 1] != 10:
        return -1
    return j


def _known_name(data: bytes, i: int, name_end: int) -> Tuple[bytes, bytes, int]:
    """(name, lowercase name, flags) of the name data[i:name_end], from _NAME_SLOTS or made and kept there."""
    p = data
    slot = ((name_end - i) * 8 + p[i] * 4 + p[name_end - 1]) & 255
    seen = _NAME_SLOTS[slot]
    if seen is not None and len(seen[0]) == name_end - i and _equal_at(data, i, seen[0]):
        return seen
    name = p[i:name_end]
    known = _field_name(name)
    seen = (name, known[0], known[1])
    _NAME_SLOTS[slot] = seen
    return seen


# The scans below take the lines of a head, data[start:stop], each ending with CRLF. Each
# checks its bounds against len(data) first: the helpers above read without checks.

def _plain_fields(data: bytes, start: int, stop: int, fields: List[Tuple[bytes, bytes, bytes]]) -> None:
    """Appends the header lines, lines _HeadReader._plain_lines found plain, to `fields` as
    (lowercase name, name, value): a plain head's list, made when asked for (a request's
    `headers`, a response reader's header())."""
    if not 0 <= start <= stop <= len(data):
        return
    p = data
    i = start
    while i < stop:
        name_end = _name_end(data, i, stop)
        j = _value_end(data, name_end + 2, stop) if name_end >= 0 else -1
        if j < 0:
            return
        seen = _known_name(data, i, name_end)
        fields.append((seen[1], seen[0], p[name_end + 2:j]))
        i = j + 2


def _host_ok(host: bytes) -> bool:
    known = _HOSTS_SEEN.get(host)
    if known is None:
        known = _HOST.match(host) is not None
        if len(_HOSTS_SEEN) >= 4096:
            _HOSTS_SEEN.clear()
        _HOSTS_SEEN[host] = known
    return known


class _HeadReader:
    """What RequestReader and ResponseReader share: their limits, and the scan of a plain
    head's header lines."""

    limits: Limits
    _line_flags: int  # the flags of the names the last scan read, ORed

    def _plain_lines(self, data: bytes, start: int, stop: int, not_plain: int, wanted: bytes) -> int:
        """The header lines in data[start:stop], each checked (see _name_end) and kept
        nowhere: where the value of their one line named `wanted` (a lowercase name, the
        object _field_name gives) starts; -1 when there is not exactly one, when a name has
        a flag of `not_plain`, or when the lines are not plain or more than max_headers
        (then llhttp reads the head)."""
        if not 0 <= start <= stop <= len(data):
            return -1
        at = -1
        lines = 0
        flags = 0
        i = start
        while i < stop:
            name_end = _name_end(data, i, stop)
            if name_end < 0:
                return -1
            j = _value_end(data, name_end + 2, stop)
            if j < 0 or lines == self.limits.max_headers:
                return -1
            seen = _known_name(data, i, name_end)
            if seen[1] is wanted:
                if at >= 0:
                    return -1
                at = name_end + 2
            flags |= seen[2]
            lines += 1
            i = j + 2
        self._line_flags = flags
        return -1 if flags & not_plain else at


class _BodyOnly:
    """llhttp's callbacks for the body of an upgrade request that has one: a parser primed with
    a head of the same framing (_LENGTH_PRIMER, _CHUNKED_PRIMER) reads it into the reader."""

    def __init__(self, reader: "RequestReader") -> None:
        self.on_body = reader.on_body
        self.on_message_complete = reader.on_message_complete


_LENGTH_PRIMER = b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
_CHUNKED_PRIMER = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"


class RequestReader(_HeadReader):
    """A client's bytes -> checked requests, one at a time (see the module docstring)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._parser = httptools.HttpRequestParser(self)
        self._buf: Buffer = b""   # received and not yet fed to the parser
        self._scan = 0            # where the search for the head's end resumes in _buf
        self._state = HEAD        # reading a HEAD, its _BODY, PAUSED after COMPLETE, or ERROR
        self.head: Optional[RequestHead] = None
        self.body = bytearray()
        self.error: Optional[Tuple[int, str]] = None
        self.requests = 0         # requests completed on this stream
        self.plain_heads = 0      # of their heads, those read without llhttp (_plain_head)
        self._good_host = b""     # the Host value last found good there
        self._reparse = False     # the parser takes a body only (_upgrade_asked): replaced at start_next()
        self._url: List[bytes] = []
        self._begin()

    def _begin(self) -> None:
        if self._url:
            self._url.clear()  # the last head's pieces of its target (only llhttp's callbacks add any)
        self._next_head = RequestHead()
        self._plain = True        # no header the proxy drops or rewrites (so far)
        self._line: Buffer = b""  # the request line, while a head fed in one piece is parsed
        self._lines = 0           # head lines ended (fed in pieces)
        self._head_bytes = 0      # head bytes fed to the parser
        self._line_done = False   # the request line has its end
        self._skipped = 0         # empty lines before the request line (RFC 9112 2.2 lets us ignore them)
        self._headers_done = False
        self._complete = False
        self._body_left = 0
        self._chunks: Optional[_Chunks] = None
        self.started = False      # a byte of this request arrived

    # ---- input ------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes from the client; parsed by next_event()."""
        if self._state is ERROR or not data:
            return
        self.started = True
        if not self._buf:
            self._buf = data
        else:
            if isinstance(self._buf, bytes):
                self._buf = bytearray(self._buf)
            self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet parsed (read ahead while a request is served)."""
        return len(self._buf)

    def start_next(self) -> None:
        """The current request is done with: parse the next one."""
        if self._state is PAUSED:
            if self._reparse:  # the last body was an upgrade request's (_upgrade_asked)
                self._reparse = False
                self._parser = httptools.HttpRequestParser(self)
            self._state = HEAD
            self.head = None
            if self.body:
                self.body = bytearray()
            self._begin()
            self.started = bool(self._buf)
            self._scan = 0

    # ---- events -------------------------------------------------------------------

    def next_event(self) -> str:
        state = self._state
        if state is HEAD:
            return self._read_head()
        if state is _BODY:
            return self._read_body()
        return state  # PAUSED or ERROR

    def _fail(self, status: int, text: str) -> str:
        self._state = ERROR
        self.error = (status, text)
        self._buf = b""
        return ERROR

    def _feed_parser(self, data: Buffer) -> Optional[str]:
        """Feeds llhttp; the ERROR event if it (or a check in a callback) refuses."""
        try:
            self._parser.feed_data(data)
        except _PARSE_ERRORS as exc:
            return self._parse_error(exc)
        return None

    def _parse_error(self, exc: Exception) -> Optional[str]:
        """The ERROR event for what llhttp refused; None for an upgrade asked for (_upgrade_asked)."""
        if isinstance(exc, httptools.HttpParserUpgrade):
            return self._upgrade_asked()
        cause = exc.__context__
        if isinstance(cause, _Refuse):
            return self._fail(cause.status, cause.text)
        return self._fail(400, "malformed request")

    def _upgrade_asked(self) -> Optional[str]:
        """llhttp stopped after a head asking for an upgrade (Connection: upgrade and Upgrade).
        CONNECT is refused (501). An upgrade request with a body is an ordinary request, its
        body read by its framing and the upgrade dropped (as HAProxy does): a parser that takes
        only its body (_BodyOnly) reads on, the reader's own replacing it at start_next().
        Otherwise the request is complete with no body (head.upgrade is set) and what follows
        it stays unread in `buffered`; a fresh parser is ready for a next request, should the
        backend not switch."""
        head = self._next_head
        if not self._headers_done or head.method == b"CONNECT":
            return self._fail(501, "CONNECT is not supported by this proxy")
        if head.chunked or head.content_length:
            self._parser = httptools.HttpRequestParser(_BodyOnly(self))
            self._parser.feed_data(_CHUNKED_PRIMER if head.chunked else _LENGTH_PRIMER % head.content_length)
            self._complete = False  # (llhttp had ended the message at its head)
            self._reparse = True
            return None
        head.upgrade = head.header(b"upgrade") or b""
        self._parser = httptools.HttpRequestParser(self)
        return None

    def take_buffered(self) -> bytes:
        """What was received and not parsed, handed over (the bytes a tunnel starts with)."""
        data = bytes(self._buf)
        self._buf = b""
        return data

    def _read_head(self) -> str:
        limits = self.limits
        buf = self._buf
        if not self._head_bytes and buf[:1] != b"\r":
            # the common case: a whole head from its first byte, fed in one piece
            if isinstance(buf, bytes):  # searched within the limits only, without a method call
                end = _head_end(buf, min(len(buf), limits.max_header_size))
                first = _line_end(buf, min(len(buf), limits.max_request_line + 2))
            else:
                end = buf.find(b"\r\n\r\n")
                first = buf.find(b"\n")
            if 0 <= end <= limits.max_header_size - 4 and 0 <= first <= limits.max_request_line + 1:
                stop = end + 4
                if stop == len(buf):  # (two assignments: a conditional pair would be built as a tuple)
                    piece, self._buf = buf, b""
                else:
                    piece, self._buf = buf[:stop], buf[stop:]
                self._line_done = True
                self._head_bytes = stop
                if self._plain_head(piece, first):
                    self.requests += 1
                    self._state = PAUSED  # a plain head has no body: the request is whole
                    return COMPLETE
                if not _request_line_ok(piece if isinstance(piece, bytes) else bytes(piece[:first + 1]), first):
                    return self._fail(400, _BAD_REQUEST_LINE)
                self._line = piece[:first]  # the request line: its method and version read from it
                try:
                    self._parser.feed_data(piece)
                except _PARSE_ERRORS as exc:
                    failed = self._parse_error(exc)
                    if failed is not None:
                        return failed
                finally:
                    self._line = b""
                if self._headers_done:
                    head = self.head
                    assert head is not None  # set by on_headers_complete
                    if self._plain:
                        head.raw = piece
                    if self._complete and head.content_length is None and not head.chunked:
                        self._state = PAUSED  # no body: the request is whole
                        self.requests += 1
                        return COMPLETE
                    return self._after_head(head)
        while True:
            buf = self._buf
            while not self._head_bytes and buf[:2] == b"\r\n":
                buf = self._buf = buf[2:]
                self._skipped += 2
                if self._skipped > 8:
                    return self._fail(400, "empty lines instead of a request")
            if not buf:
                return NEED_DATA
            # the head ends with an empty line: at the start of buf (whole lines were fed), or at CRLFCRLF
            if self._head_bytes and buf[:2] == b"\r\n":
                stop = 2
            else:
                end = buf.find(b"\r\n\r\n", self._scan)
                stop = end + 4 if end >= 0 else -1
            if stop < 0:
                if self._head_bytes + len(buf) > limits.max_header_size:
                    return self._over_head_limit(buf)
                nl = buf.rfind(b"\n")
                if nl < 0:  # a partial line: keep it, search its new part next time
                    self._scan = max(0, len(buf) - 3)
                    if not self._line_done and self._line_too_long(self._head_bytes + len(buf), buf):
                        return self._fail(414, f"request line longer than {limits.max_request_line} bytes")
                    return NEED_DATA
                piece, self._buf = buf[:nl + 1], buf[nl + 1:]
                self._scan = 0
            else:
                piece, self._buf = (buf, b"") if stop == len(buf) else (buf[:stop], buf[stop:])
                self._scan = 0
                if self._head_bytes + len(piece) > limits.max_header_size:
                    return self._over_head_limit(piece)
            if not self._line_done:
                first = piece.find(b"\n")
                if first >= 0:
                    if self._head_bytes + first > limits.max_request_line + 1:
                        return self._fail(414, f"request line longer than {limits.max_request_line} bytes")
                    if not _request_line_ok(piece if isinstance(piece, bytes) else bytes(piece[:first + 1]), first):
                        return self._fail(400, _BAD_REQUEST_LINE)
                    self._line_done = True
            # header lines ended so far (not the request line, nor the head's empty line): llhttp
            # reports a header only once the next one starts, a line late for the limit
            self._lines += piece.count(b"\n")
            if self._lines - 1 - (stop >= 0) > limits.max_headers:
                return self._fail(431, f"more than {limits.max_headers} header lines")
            self._head_bytes += len(piece)
            failed = self._feed_parser(piece)
            if failed:
                return failed
            if self._headers_done:
                head = self.head
                assert head is not None  # set by on_headers_complete
                return self._after_head(head)

    def _plain_head(self, piece: Buffer, first: int) -> bool:
        """Takes a whole head (`piece`, its request line ending at `first`) without llhttp
        when it has the form nearly every client sends: True when it had (self.head is set),
        False when llhttp must read it.

        The form is a subset of what llhttp accepts, and every value is what its callbacks
        would give: HTTP/1.1, a known method with no body framing header, an origin-form
        target of visible ASCII, plain header lines (_plain_lines), one Host, no header
        the proxy drops or rewrites. Anything else, including every head the proxy
        refuses, goes the general way, which says why."""
        data = piece if isinstance(piece, bytes) else bytes(piece)
        if not 0 < first < len(data):
            return False
        p = data
        if p[first] != 10:
            return False
        token = _TOKEN_TABLE
        space = 0
        while token[p[space]]:  # stops at the request line's LF at the latest
            space += 1
        version_at = first - 10
        if p[space] != 32 or version_at <= space + 1 or p[space + 1] != 47:  # " /"
            return False
        method = None
        for known in _PLAIN_METHODS:
            if len(known) == space and _equal_at(data, 0, known):
                method = known
                break
        if (method is None or not _equal_at(data, version_at, _HTTP11_END)
                or not _all_in(data, space + 1, version_at, _VISIBLE_TABLE)):
            return False
        stop = len(data) - 2
        at = self._plain_lines(data, first + 1, stop, _NOT_PLAIN_REQUEST, _HOST_NAME)
        if at < 0:
            return False
        host = p[at:_value_end(data, at, stop)]
        if host[len(host) - 1] in (32, 9):  # llhttp keeps the whitespace after a value
            host = host.strip()
        if host != self._good_host and not _host_ok(host):
            # (a keep-alive client sends the same Host each time; verdicts are kept in _HOSTS_SEEN)
            return False
        self._good_host = host
        head = self._next_head
        head.method = method
        head.target = p[space + 1:version_at]
        head.host = host
        head.raw = data
        head._lines_at, head._lines_end = first + 1, stop  # its headers and hosts, made when asked
        self.head = head
        self._headers_done = self._complete = True
        self.plain_heads += 1
        return True

    def _after_head(self, head: RequestHead) -> str:
        """The head is in and checked: COMPLETE when there is no body, else HEAD (the body follows)."""
        if head.chunked:
            self._chunks = _Chunks()
        else:
            length = head.content_length
            if length:
                if length > self.limits.max_body:
                    return self._fail(413, f"request body larger than {self.limits.max_body} bytes")
                self._body_left = length
        self._state = _BODY
        if self._complete and self._body_left == 0 and self._chunks is None:
            return self._finish()
        return HEAD

    def _over_head_limit(self, buf: Buffer) -> str:
        """The head passed its limit: 414 when the request line came first over its own."""
        if not self._line_done:
            first = buf.find(b"\n")
            line = self._head_bytes + (first if first >= 0 else len(buf))
            if line > self.limits.max_request_line + 1 or (first < 0 and self._line_too_long(line, buf)):
                return self._fail(414, f"request line longer than {self.limits.max_request_line} bytes")
        return self._fail(431, f"request head larger than {self.limits.max_header_size} bytes")

    def _line_too_long(self, size: int, buf: Buffer) -> bool:
        """A request line not yet ended, of `size` bytes so far, is over the limit (its CR,
        which may end it, is allowed one byte past)."""
        limit = self.limits.max_request_line
        return size > limit + 1 or (size == limit + 1 and buf[-1:] != b"\r")

    def _read_body(self) -> str:
        buf = self._buf
        if self._complete:
            return self._finish()
        if not buf:
            return NEED_DATA
        chunks = self._chunks
        if chunks is None:
            take = min(self._body_left, len(buf))
            self._body_left -= take
        else:
            end = chunks.scan(buf, 0)
            take = len(buf) if end < 0 else end
        piece, self._buf = (buf, b"") if take == len(buf) else (buf[:take], buf[take:])
        failed = self._feed_parser(piece)  # first: the body's bytes come before its trailers
        if failed:
            return failed
        if chunks is not None:
            limits = self.limits
            if chunks.bad:
                return self._fail(400, "malformed chunked body")
            if self._head_bytes + chunks.trailer_bytes > limits.max_header_size:
                return self._fail(431, f"request head and trailers larger than {limits.max_header_size} bytes")
            if len(self.head.headers if self.head else ()) + chunks.trailers > limits.max_headers:
                return self._fail(431, f"more than {limits.max_headers} header and trailer lines")
        if len(self.body) > self.limits.max_body:
            return self._fail(413, f"request body larger than {self.limits.max_body} bytes")
        done = self._body_left == 0 if chunks is None else end >= 0
        if done != self._complete:  # the framing seen here and llhttp's disagree
            return self._fail(400, "malformed request body")
        return self._finish() if done else NEED_DATA

    def _finish(self) -> str:
        self._state = PAUSED
        self.requests += 1
        return COMPLETE

    # ---- llhttp callbacks -----------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:  # a trailer: counted against the limits (in _read_body), never a header
            return
        head = self._next_head
        headers = head.headers
        if len(headers) >= self.limits.max_headers:
            raise _Refuse(431, f"more than {self.limits.max_headers} header lines")
        lowered = name.lower()
        headers.append((lowered, name, value))
        if lowered in _REQUEST_SPECIAL:
            if lowered == b"host":
                head.hosts.append(value.strip())
            else:
                _special_header(head, lowered, value)
                self._plain = False

    def on_headers_complete(self) -> None:
        self._headers_done = True
        head = self.head = self._next_head
        url = self._url
        _check_head(head, self._parser, url[0] if len(url) == 1 else b"".join(url), self._line)
        if len(url) != 1 or head.target is not url[0] or head.version != 11:
            self._plain = False

    def on_body(self, body: bytes) -> None:
        if len(self.body) + len(body) > self.limits.max_body:
            raise _Refuse(413, f"request body larger than {self.limits.max_body} bytes")
        self.body += body

    def on_message_complete(self) -> None:
        self._complete = True


def _special_header(head: RequestHead, lowered: bytes, value: bytes) -> None:
    """What a request header the proxy looks at says."""
    if lowered == b"connection":
        head.tokens = head.tokens.union(t.strip().lower() for t in value.split(b","))
    elif lowered == b"transfer-encoding":
        head.chunked = True  # llhttp accepts a request's transfer coding only when chunked ends it
    elif lowered == b"content-length":
        head.content_length = int(value)  # llhttp checked it: digits, one value
    elif lowered == b"expect" and value.strip().lower() == b"100-continue":
        head.expect_continue = True


def _check_head(head: RequestHead, parser: "httptools.HttpRequestParser", target: bytes, line: Buffer) -> None:
    """RFC 9112's rules for a request head; raises _Refuse with the answer when one fails.
    `line`: the request line when the head came in one piece (llhttp checked it), else b""."""
    if line[-10:] == b" HTTP/1.1\r":  # what llhttp would say, without asking it
        method = line[:line.find(b" ")]
    else:
        version = parser.get_http_version()
        if version == "1.0":
            head.version = 10
        elif version != "1.1":
            raise _Refuse(400, f"HTTP/{version} requests are not served here (HTTP/1.0 and HTTP/1.1 are)")
        method = parser.get_method()
    head.method = bytes(method)
    tokens = head.tokens
    if tokens:
        head.dropped = tokens - _CONNECTION_OPTIONS - _PROTECTED - {b""}
    hosts = head.hosts
    if head.version == 11:
        head.keep_alive = b"close" not in tokens
        if len(hosts) != 1:
            raise _Refuse(400, "an HTTP/1.1 request needs exactly one Host header" if hosts
                          else "an HTTP/1.1 request needs a Host header")
    else:
        head.keep_alive = b"keep-alive" in tokens and b"close" not in tokens
        if len(hosts) > 1:
            raise _Refuse(400, "a request may have one Host header only")
    host = hosts[0] if hosts else None
    if host is not None and not _host_ok(host):
        raise _Refuse(400, "the Host header is not a host[:port]")
    if target[:1] == b"/":
        pass
    elif target == b"*" and method == b"OPTIONS":
        pass
    else:
        absolute = _ABSOLUTE.match(target)
        if absolute is None:
            raise _Refuse(400, "the request target is neither a path nor an absolute http URI")
        authority, rest = absolute.group(1), absolute.group(2)
        if not authority or b"@" in authority or not _HOST.match(authority):
            raise _Refuse(400, "the request target's authority is not a host[:port]")
        if host is not None and host.lower() != authority.lower():
            raise _Refuse(400, "the Host header and the request target name different hosts")
        host = authority  # RFC 9112 3.2.2: the target's authority is the Host
        target = rest if rest[:1] == b"/" else b"/" + rest
        if b"#" in target:
            target = target.split(b"#", 1)[0]
    head.host = host
    head.target = target


class Forwarding:
    """How the proxy says who the client was (X-Forwarded-For and friends)."""

    __slots__ = ("replace", "forwarded", "via", "https")

    def __init__(self, xff: str = "append", forwarded: bool = False, via: bool = False,
                 https: bool = False) -> None:
        self.replace = xff == "replace"  # drop what the client sent (an edge proxy)
        self.forwarded = forwarded       # add an RFC 7239 Forwarded entry
        self.via = via                   # add a Via entry
        self.https = https               # the clients came over TLS (the proxy terminates it): proto https


_CLIENT_FORWARDING = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"forwarded"})
_FORWARDED_TAILS: Dict[bytes, bytes] = {}  # client address -> the lines the proxy adds for it, and the empty line


def encode_request(head: RequestHead, body: Buffer, client: bytes, forwarding: Forwarding) -> Buffer:
    """The request as a backend gets it: HTTP/1.1 and keep-alive, hop-by-hop headers
    dropped (and those a Connection header named), the body with a Content-Length,
    and the client's address added to X-Forwarded-For (RFC 7239's Forwarded and Via
    when asked). `client` is the client's IP address as text."""
    raw = head.raw
    if raw is not None:  # forwarded as received, with the proxy's lines before its empty line
        if not body and not forwarding.forwarded and not forwarding.via and not forwarding.https \
                and head.method not in _BODY_METHODS:
            tail = _FORWARDED_TAILS.get(client)
            if tail is None:  # a client's lines, made once (bounded: cleared when full)
                tail = b"X-Forwarded-For: " + client + b"\r\nX-Forwarded-Proto: http\r\n\r\n"
                if len(_FORWARDED_TAILS) >= 4096:
                    _FORWARDED_TAILS.clear()
                _FORWARDED_TAILS[client] = tail
            return raw[:len(raw) - 2] + tail
        parts: List[Buffer] = [raw[:-2], b"X-Forwarded-For: ", client,
                               b"\r\nX-Forwarded-Proto: https\r\n" if forwarding.https
                               else b"\r\nX-Forwarded-Proto: http\r\n"]
        _forwarding_extras(parts, head, client, forwarding, body)
        return b"".join(parts)
    parts = [head.method, b" ", head.target, b" HTTP/1.1\r\n"]
    dropped = head.dropped
    replace = forwarding.replace
    proto_seen = False
    host_written = False
    for lowered, name, value in head.headers:
        if lowered in _REQUEST_DROP or (dropped and lowered in dropped):
            continue
        if lowered in _CLIENT_FORWARDING:
            if replace:
                continue
            if lowered == b"x-forwarded-proto":
                proto_seen = True
        elif lowered == b"host":
            value = head.host or value  # an absolute-form target's authority
            host_written = True
        parts += (name, b": ", value, b"\r\n")
    if head.host is not None and not host_written:
        parts += (b"Host: ", head.host, b"\r\n")
    parts += (b"X-Forwarded-For: ", client, b"\r\n")
    if not proto_seen:
        parts.append(b"X-Forwarded-Proto: https\r\n" if forwarding.https else b"X-Forwarded-Proto: http\r\n")
    _forwarding_extras(parts, head, client, forwarding, body)
    return b"".join(parts)


def _forwarding_extras(parts: List[Buffer], head: RequestHead, client: bytes, forwarding: Forwarding,
                       body: Buffer) -> None:
    """Forwarded and Via when asked, Content-Length, the empty line, the body."""
    if forwarding.forwarded:
        node = b'"[' + client + b']"' if b":" in client else client
        parts += (b"Forwarded: for=", node, b";proto=https\r\n" if forwarding.https else b";proto=http\r\n")
    if forwarding.via:
        parts.append(b"Via: %s leastload\r\n" % (b"1.1" if head.version == 11 else b"1.0"))
    if body or head.method in _BODY_METHODS:
        parts.append(b"Content-Length: %d\r\n" % len(body))
    parts.append(b"\r\n")
    if body:
        parts.append(body)


# ---- responses ----------------------------------------------------------------------

class ResponseReader(_HeadReader):
    """A backend's bytes for one request -> what its client gets.

    `start(head_only, http10, keep_alive)` before each request is sent;
    `feed(data)` and `feed_eof()` return the bytes to pass on. After each call:
    `status` (the final response's, 0 until its head is in), `complete`,
    `failed` (why the response is unusable: nothing more is passed on),
    `reusable` (the backend connection may carry another request) and
    `close_client` (the client connection must close after this answer).

    To the client: the head is rewritten (HTTP/1.1 status line, hop-by-hop
    headers dropped) unless it can go as it is; a Content-Length body passes
    as it is; a chunked body passes as it is to an HTTP/1.1 client (its
    trailers as trailers) and is de-chunked for an HTTP/1.0 client, which
    then gets the end of the body from the close; a body delimited by the
    backend's close is delimited by the client connection's close too. 1xx
    answers other than 100 go to HTTP/1.1 clients; 101 is refused (the proxy
    never asks for an upgrade). Bytes after the end of the response, or a
    body on a HEAD, 204 or 304 exchange, make the backend connection
    unusable (`reusable` False).
    """

    _headers: List[Tuple[bytes, bytes, bytes]]   # (lowercase name, name, value)
    _tokens: "frozenset[bytes] | Set[bytes]"      # the Connection headers' tokens, lowercase
    _length: Optional[int]                        # the Content-Length
    _kept: Optional[bytes]                        # a plain response (or its head), for header()

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        # a line the proxy adds to every final response head (--backend-header), b"": none;
        # set once per backend connection (add_to_head), so a response without it costs nothing more
        self.added_head = b""
        self._adds = False
        self._parser = httptools.HttpResponseParser(self)
        self._data = b""
        self._clean = False
        self.plain_heads = 0  # responses read without llhttp (_plain_response)
        self.start(head_only=False, http10=False, keep_alive=True)

    def start(self, head_only: bool, http10: bool, keep_alive: bool) -> None:
        self.upgrade_asked = False  # set after start() for a request that asks for an upgrade
        self.rest: bytes = b""  # after a 101: the bytes that followed its head in the same piece
        self.head_only, self.http10, self.client_keep_alive = head_only, http10, keep_alive
        self._fresh = not (head_only or http10 or not keep_alive or self._adds)  # the fast path may take the first bytes
        self.status = 0
        if self._clean:  # the last response took the fast path: only what it changed is reset
            self._clean = False  # this one may take the general path
            self.complete = self.reusable = self._headers_done = self._message_done = False
            self._kept = None  # the last response's, for header()
            if self._headers:  # its headers (llhttp's, or header()'s): nothing reads them after start()
                del self._headers[:]  # (a slice, not a method call)
            self._tokens = _NO_NAMES
            self._length = None
            self._plain = True
            return
        self.complete = False
        self.failed: Optional[str] = None
        self.reusable = False
        self.close_client = False
        self.extra = False          # bytes came after the response's end
        self._buf = bytearray()     # a partial head
        self._fast_size = 0  # while the fast path feeds: the bytes it has; else 0
        self._begin_message()

    def _begin_message(self) -> None:
        self._clean = False
        self._headers = []
        self._kept = None  # a plain response, whose header lines header() reads
        self._kept_lines = self._kept_end = 0
        self._kept_report = False
        self._tokens = _NO_NAMES
        self._length = None
        self._chunked = False
        self._plain = True          # no header to drop: the head can go as it is
        self._in_body = False
        self._headers_done = False
        self._message_done = False
        self._until_eof = False
        self._body_left = 0
        self._chunks: Optional[_Chunks] = None
        self._dechunk = False
        self._backend10 = False
        self._skipped = 0           # empty lines before the head
        self._out: List[bytes] = []  # de-chunked pieces for an HTTP/1.0 client

    def load_report(self) -> Optional[bytes]:
        """header(b"endpoint-load-metrics"), which the proxy asks of every response: a plain
        one's lines are read for it only when they hold one."""
        if self._kept is not None and not self._kept_report:
            return None
        return self.header(_LOAD_REPORT_NAME)

    def header(self, lowered: bytes) -> Optional[bytes]:
        """The value of the response's first header named `lowered` (lowercase), None if
        it has none: read after the head came in, before the next start()."""
        if self._kept is not None and not self._headers:  # a plain response's: its list, made now
            _plain_fields(self._kept, self._kept_lines, self._kept_end, self._headers)
        for name, _, value in self._headers:
            if name == lowered:
                return value
        return None

    # ---- input --------------------------------------------------------------------

    def feed(self, data: bytes) -> List[Piece]:
        """The backend's bytes; returns the pieces to write to the client, in order."""
        if self.complete or self.failed:
            if data:
                self.extra = True
                self.reusable = False
            return []
        if self._fresh:
            fast = self._fast(data)
            if fast is not None:
                return fast
        out: List[Piece] = []
        self._data = data
        self._from = self._to = 0  # data[_from:_to]: a run of bytes passed on as they came
        i = 0
        n = len(data)
        while i < n and not self.complete and not self.failed:
            if not self._in_body:
                i = self._head_step(data, i, out)
            else:
                i = self._body_step(data, i, out)
        if self._to > self._from:
            out.append(data if self._to - self._from == n else data[self._from:self._to])
        self._data = b""
        if i < n and self.complete:
            if self.status == 101:
                self.rest = data[i:]  # the new protocol's first bytes (_tunnel.py)
            else:
                self.extra = True
                self.reusable = False
        return out

    def _fast(self, data: bytes) -> Optional[List[Piece]]:
        """The common case in one llhttp call: `data` is exactly one final response with a
        Content-Length body. on_headers_complete stops the parse (_NotFast) as soon as the
        head shows otherwise; the general path then starts again on a fresh parser."""
        self._fresh = False
        end = _head_end(data, min(len(data), self.limits.max_header_size))
        if not 0 < end <= self.limits.max_header_size - 4:
            return None
        if self._plain_response(data, end + 4):
            return [data]
        if data[:5] != b"HTTP/" or _STATUS_LINE_CTL.search(data, 0, data.find(b"\r\n")):
            return None  # the general path skips what comes before a status line, or refuses it
        self._fast_end = end + 4
        self._fast_size = len(data)
        self._fast_http11 = data[:9] == b"HTTP/1.1 "
        try:
            self._parser.feed_data(data)
        except _PARSE_ERRORS as exc:
            self._parser = httptools.HttpResponseParser(self)
            self._begin_message()
            cause = exc.__context__
            if not isinstance(cause, _NotFast):  # refused: as the general path would say it
                self.failed = cause.text if isinstance(cause, _Refuse) else "malformed response"
                return []
            return None
        finally:
            self._fast_size = 0
        if not self._message_done:
            self.failed = "malformed response body"
            return []
        self.complete = self._clean = True
        self.reusable = b"close" not in self._tokens
        if self._plain:  # HTTP/1.1 with nothing to drop: as it came
            return [data]
        self._reason = _reason_of(data)
        return [self._rewrite_head(self.status, b""), data[end + 4:]]

    def _plain_response(self, data: bytes, stop: int) -> bool:
        """`data` is exactly one response (its head `stop` bytes) in the form nearly every
        backend sends, read without llhttp: True when it was (then it is complete and goes
        on as it came).

        The form is a subset of what llhttp accepts, with the values its callbacks would
        give: an HTTP/1.1 status line of a final status with a body (not 1xx, 204, 304),
        a reason of visible ASCII, spaces and tabs, plain header lines (_plain_lines),
        one Content-Length of digits that ends the body exactly at the end of `data`, no
        header the proxy drops. Anything else goes to llhttp, which says what is wrong, if
        anything."""
        if not 13 < stop <= len(data) or not _equal_at(data, 0, _HTTP11_START) or data[12] != 32:
            return False
        p = data
        digit = _DIGIT_TABLE
        in_value = _VALUE_TABLE
        if not (digit[p[9]] and digit[p[10]] and digit[p[11]]):
            return False
        status = (p[9] - 48) * 100 + (p[10] - 48) * 10 + p[11] - 48
        if status < 200 or status > 599 or status == 204 or status == 304:
            return False
        first = 13
        while in_value[p[first]]:  # the reason; stops at the head's CR at the latest
            first += 1
        if first + 2 > stop or p[first] != 13 or p[first + 1] != 10:
            return False
        at = self._plain_lines(data, first + 2, stop - 2, _NOT_PLAIN_RESPONSE, _CONTENT_LENGTH_NAME)
        if at < 0:
            return False
        length = _decimal(data, at, _value_end(data, at, stop - 2))
        if length < 0 or stop + length != len(data):
            return False
        self._kept_report = (self._line_flags & _LOAD_REPORT) != 0
        # no header list is made: header() reads the lines when asked (a small response is
        # kept whole, a larger one its head only, until the next start())
        self._kept = data if len(data) <= _KEEP_WHOLE else data[:stop]
        self._kept_lines, self._kept_end = first + 2, stop - 2
        self._length = length
        self.status = status
        self._headers_done = self._message_done = True
        self.complete = self._clean = self.reusable = True
        self.plain_heads += 1
        return True

    def _emit(self, start: int, stop: int, out: List[Piece]) -> None:
        """data[start:stop] goes on as it came."""
        if start != self._to:
            if self._to > self._from:
                out.append(self._data[self._from:self._to])
            self._from = start
        self._to = stop

    def _emit_bytes(self, piece: Piece, out: List[Piece]) -> None:
        """Bytes of the proxy's own go on."""
        if self._to > self._from:
            out.append(self._data[self._from:self._to])
        self._from = self._to = 0
        out.append(piece)

    def feed_eof(self) -> List[Piece]:
        """The backend closed its side."""
        if not (self.complete or self.failed):
            if self._in_body and self._until_eof:
                self._done()
            else:
                self.failed = "the backend closed the connection mid-response"
        return []

    # ---- the head -------------------------------------------------------------------

    def _head_step(self, data: bytes, i: int, out: List[Piece]) -> int:
        """Consumes head bytes from data[i:]; returns where it stopped."""
        limits = self.limits
        if self._buf:
            start = len(self._buf)
            self._buf += data[i:]
            end = self._buf.find(b"\r\n\r\n", max(0, start - 3))
            if end < 0:
                if len(self._buf) > limits.max_header_size:
                    self.failed = f"response head larger than {limits.max_header_size} bytes"
                return len(data)
            stop = end + 4
            head: Piece = bytes(self._buf[:stop]).lstrip(b"\r\n")
            consumed = i + stop - start
            self._buf = bytearray()
            raw_at = -1  # the head is not in data as one run
        else:
            if data[i:i + 1] in _CR_LF:  # empty lines before a head (after a 1xx, say): not passed on
                rest = len(data) - len(data[i:].lstrip(b"\r\n"))
                self._skipped += rest - i
                if self._skipped > limits.max_header_size:
                    self.failed = "empty lines instead of a response"
                    return len(data)
                i = rest
                if i == len(data):
                    return i
            end = data.find(b"\r\n\r\n", i)
            if end < 0:
                if len(data) - i > limits.max_header_size:
                    self.failed = f"response head larger than {limits.max_header_size} bytes"
                else:
                    self._buf = bytearray(data[i:])
                return len(data)
            consumed = stop = end + 4
            head = data if (i == 0 and stop == len(data)) else memoryview(data)[i:stop]
            raw_at = i
        if len(head) > limits.max_header_size:
            self.failed = f"response head larger than {limits.max_header_size} bytes"
            return len(data)
        self._head_bytes = len(head)
        self._reason = _reason_of(head)
        if _STATUS_LINE_CTL.search(self._reason):
            self.failed = "a control character in the status line"
            return len(data)
        if not self._feed_parser(head):
            return len(data)
        if self._headers_done:
            self._on_head(head, raw_at, consumed, out)
        return consumed  # else leading empty lines, or a head llhttp still reads: go on

    def _feed_parser(self, data: Piece) -> bool:
        try:
            self._parser.feed_data(data)
        except _PARSE_ERRORS as exc:
            if isinstance(exc, httptools.HttpParserUpgrade) and self._parser.get_status_code() == 101:
                return True  # llhttp stops after a 101's head: _switch() decides
            cause = exc.__context__
            self.failed = cause.text if isinstance(cause, _Refuse) else "malformed response"
            return False
        return True

    def _on_head(self, head: Piece, raw_at: int, stop: int, out: List[Piece]) -> None:
        """The head is parsed: decide the framing, pass the head on."""
        status = self._parser.get_status_code()
        version = self._parser.get_http_version()
        if version not in ("1.1", "1.0") or not 100 <= status <= 599:
            self.failed = "not an HTTP/1.x response with a status in 100..599"
            return
        self._backend10 = version == "1.0"
        if status < 200:
            if status == 101:
                self._switch(out)
                return
            if status != 100 and not self.http10:
                self._emit_bytes(self._rewrite_head(status, b""), out)
            # llhttp ended the interim message at its head; the final response follows
            self._begin_message()
            return
        self.status = status
        no_body = self.head_only or status == 204 or status == 304
        framing = b""
        if no_body:
            pass  # no body whatever the head says; a Content-Length after HEAD is kept
        elif self._chunked:
            if self.http10:
                self._dechunk = self.close_client = True
            else:
                framing = b"Transfer-Encoding: chunked\r\n"
            self._chunks = _Chunks()
        elif self._length is not None:
            self._body_left = self._length
        else:
            self._until_eof = self.close_client = True
        if not self.client_keep_alive:
            self.close_client = True
        if self._plain and not self.close_client and not self.http10 and status != 204 and not self._backend10 \
                and not self._adds:
            if raw_at >= 0:  # the head as it came
                self._emit(raw_at, stop, out)
            else:
                self._emit_bytes(head, out)
        else:
            self._emit_bytes(self._rewrite_head(status, framing), out)
        if no_body:
            if self.head_only and not self._message_done:
                # llhttp waits for the body the head announces: a new parser for the next response
                self._parser = httptools.HttpResponseParser(self)
            self._done()
            return
        self._in_body = True
        if self._message_done:  # Content-Length: 0
            self._done()

    def _switch(self, out: List[Piece]) -> None:
        """A 101: complete (the rest is the new protocol's, `rest`) when the request asked for an
        upgrade and the head is a proper one; else the response failed (a 502)."""
        upgrade = self.header(b"upgrade")
        if not self.upgrade_asked:
            self.failed = "101 Switching Protocols to a request that asked for no upgrade"
        elif self._length is not None or self._chunked:
            self.failed = "101 Switching Protocols with a Content-Length or Transfer-Encoding"
        elif upgrade is None or b"upgrade" not in self._tokens:
            self.failed = "101 Switching Protocols without Connection: upgrade and Upgrade"
        else:
            self.status = 101
            self._emit_bytes(self._rewrite_head(101, b"Connection: upgrade\r\nUpgrade: " + upgrade + b"\r\n"), out)
            self.complete = True
            self.reusable = False

    def add_to_head(self, line: bytes) -> None:
        """`line` ("Name: value\r\n") is added to every final response head from now on."""
        self.added_head, self._adds = line, bool(line)
        self._fresh = self._fresh and not self._adds

    def _rewrite_head(self, status: int, framing: bytes) -> bytes:
        dropped = self._tokens - _PROTECTED if self._tokens else _NO_NAMES
        parts = [b"HTTP/1.1 %d " % status, self._reason, b"\r\n"]
        for lowered, name, value in self._headers:
            if lowered in _RESPONSE_DROP or lowered in dropped:
                continue
            if lowered == b"content-length" and (status < 200 or status == 204):
                continue  # no body, and none announced
            parts += (name, b": ", value, b"\r\n")
        parts.append(framing)
        if self._adds and status >= 200:
            parts.append(self.added_head)
        if self.close_client and status >= 200:
            parts.append(b"Connection: close\r\n")
        elif self.http10 and status >= 200:
            parts.append(b"Connection: keep-alive\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    # ---- the body --------------------------------------------------------------------

    def _body_step(self, data: bytes, i: int, out: List[Piece]) -> int:
        n = len(data)
        if self._until_eof:
            if self._feed_parser(data if i == 0 else memoryview(data)[i:]):
                self._emit(i, n, out)
            return n
        chunks = self._chunks
        if chunks is None:
            take = min(self._body_left, n - i)
            self._body_left -= take
            stop = i + take
            done = self._body_left == 0
        else:
            end = chunks.scan(data, i)
            stop = n if end < 0 else end
            done = end >= 0
            if chunks.bad:
                self.failed = "malformed chunked response body"
                return n
            if (self._head_bytes + chunks.trailer_bytes > self.limits.max_header_size
                    or len(self._headers) + chunks.trailers > self.limits.max_headers):
                self.failed = "response head and trailers over the limits"
                return n
        if not self._feed_parser(data if (i == 0 and stop == n) else memoryview(data)[i:stop]):
            return n
        if self._dechunk:
            for piece in self._out:
                self._emit_bytes(piece, out)
            self._out.clear()
        else:
            self._emit(i, stop, out)
        if done != self._message_done:  # the framing seen here and llhttp's disagree
            self.failed = "malformed response body"
            return n
        if done:
            self._done()
        return stop

    def _done(self) -> None:
        self.complete = True
        tokens = self._tokens
        keep = b"close" not in tokens and not self._until_eof
        if keep and self._backend10:
            keep = b"keep-alive" in tokens
        self.reusable = keep and not self.extra

    # ---- llhttp callbacks -------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:  # a trailer: passed on raw with a chunked body, else dropped
            return
        headers = self._headers
        if len(headers) >= self.limits.max_headers:
            raise _Refuse(502, f"response has more than {self.limits.max_headers} header lines")
        lowered = name.lower()
        headers.append((lowered, name, value))
        if lowered in _RESPONSE_SPECIAL:
            if lowered == b"content-length":
                self._length = int(value)  # llhttp checked it
                return
            if lowered == b"transfer-encoding":
                # chunked alone, once: another coding would reach an HTTP/1.0 client (or a cache)
                # still coded, and few clients take one (HAProxy's h1 neither forwards nor decodes it)
                if self._chunked or value.strip().lower() != b"chunked":
                    raise _Refuse(502, "a response transfer coding other than chunked")
                self._chunked = True
                if value == b"chunked":
                    return  # kept as it is when the head goes as it came
            elif lowered == b"connection":
                self._tokens = self._tokens.union(t.strip().lower() for t in value.split(b","))
            self._plain = False

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if self._fast_size:
            parser = self._parser
            status = parser.get_status_code()
            length = self._length
            if (length is None or self._chunked or self._fast_end + length != self._fast_size
                    or status < 200 or status == 204 or status == 304 or status > 599):
                raise _NotFast()
            self.status = status
            if not self._fast_http11:
                self._plain = False
                if b"keep-alive" not in self._tokens:
                    self._tokens = self._tokens.union((b"close",))  # an HTTP/1.0 backend closes

    def on_body(self, body: bytes) -> None:
        if self._dechunk:
            self._out.append(body)

    def on_message_complete(self) -> None:
        self._message_done = True


_RESPONSE_SPECIAL = _RESPONSE_DROP | frozenset({b"content-length"})


_CR_LF = (b"\r", b"\n")
# what a status line must not hold (RFC 9112 4: reason-phrase = *( HTAB / SP / VCHAR / obs-text ))
_STATUS_LINE_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def _reason_of(head: Piece) -> bytes:
    """The reason phrase of a status line (llhttp checked it), b"" when there is none."""
    line = bytes(head[:512]).split(b"\r\n", 1)[0]
    parts = line.split(b" ", 2)
    return parts[2] if len(parts) == 3 else b""
