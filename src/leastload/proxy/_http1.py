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
- `ResponseReader` (in _response): a backend's byte stream for one request ->
  the bytes the client gets (hop-by-hop headers stripped, framing chosen for
  the client), the status, and whether the backend connection may carry
  another request.

httptools (llhttp) parses and validates; it is only ever fed the bytes of
one message, because it cannot say where in a buffer a message ended. The
end is found here: a head ends at its empty line, a body after
Content-Length bytes or at the chunked encoding's last empty line (the
`_Chunks` tracker reads the chunk sizes; llhttp checks the same bytes).
Every limit is checked as the bytes arrive, and the work is linear in them:
a partial line is kept in a bytearray, and llhttp is fed whole lines only,
so it never accumulates a header piece by piece.

The layer is three modules: this one (the request side), _response (`ResponseReader`,
re-exported here) and _scan (the byte scanner, tables and limits both sides share).
"""

import re
from typing import Dict, List, Optional, Set, Tuple, cast

import httptools

from ._response import ResponseReader
from ._scan import (Buffer, Limits, Piece, _all_in, _Chunks, _equal_at, _head_end, _HeadReader, _line_end,
                    _plain_fields, _plain_request_line, _Refuse)
from ._scan import (HOST_NAME as _HOST_NAME, NO_NAMES as _NO_NAMES, NOT_PLAIN_REQUEST as _NOT_PLAIN_REQUEST,
                    PARSE_ERRORS as _PARSE_ERRORS, PROTECTED as _PROTECTED, REQUEST_DROP as _REQUEST_DROP,
                    REQUEST_SPECIAL as _REQUEST_SPECIAL, TOKEN_TABLE as _TOKEN_TABLE,
                    VISIBLE_TABLE as _VISIBLE_TABLE)

# The layer's names stay importable from here. The compiled module makes no attribute of a
# class it cimports (Limits, ResponseReader): bound by hand (a rebinding in the pure one).
globals().update(Limits=Limits, ResponseReader=ResponseReader)
__all__ = ["NEED_DATA", "HEAD", "COMPLETE", "PAUSED", "ERROR", "REASONS", "CONTINUE", "Buffer", "Piece", "Limits",
           "Forwarding", "RequestHead", "RequestReader", "ResponseReader", "encode_request", "error_response"]

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

_CONNECTION_OPTIONS = frozenset({b"close", b"keep-alive"})
_BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})
_HOST = re.compile(rb"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+;=%]*)(:[0-9]*)?\Z")
_ABSOLUTE = re.compile(rb"(?i:https?)://([^/?#]*)(.*)\Z", re.S)
_BAD_REQUEST_LINE = "the request line is not METHOD SP TARGET SP HTTP/1.x"


def error_response(status: int, text: str, close: bool = True, head_only: bool = False) -> bytes:
    """An answer the proxy writes itself (plain text; without its body to a HEAD request)."""
    body = text.encode() + b"\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, REASONS[status], len(body), b"Connection: close\r\n" if close else b"", b"" if head_only else body)


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


_HOSTS_SEEN: Dict[bytes, bool] = {}  # Host values already checked (bounded): clients repeat theirs


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


def _host_ok(host: bytes) -> bool:
    known = _HOSTS_SEEN.get(host)
    if known is None:
        known = _HOST.match(host) is not None
        if len(_HOSTS_SEEN) >= 4096:
            _HOSTS_SEEN.clear()
        _HOSTS_SEEN[host] = known
    return known


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
        method = _plain_request_line(data, first)  # (it checked 0 < first < len(data))
        if method is None:
            return False
        stop = len(data) - 2
        at = self._plain_lines(data, first + 1, stop, _NOT_PLAIN_REQUEST, _HOST_NAME)
        if at < 0:
            return False
        p = data
        host = p[at:self._wanted_end]
        if host[len(host) - 1] in (32, 9):  # llhttp keeps the whitespace after a value
            host = host.strip()
        if host != self._good_host and not _host_ok(host):
            # (a keep-alive client sends the same Host each time; verdicts are kept in _HOSTS_SEEN)
            return False
        self._good_host = host
        head = self._next_head
        head.method = method
        head.target = p[len(method) + 1:first - 10]  # between the method's space and " HTTP/1.1"
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
