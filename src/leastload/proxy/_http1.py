"""The proxy's HTTP/1.1 without I/O: bytes in, events and bytes out (RFC 9112).

Nothing here touches a socket or a clock, so every limit and framing rule
can be tested by feeding bytes (tests/proxy/test_http1.py, and a fuzz target).

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
from typing import List, Optional, Set, Tuple, Union

import httptools

Buffer = Union[bytes, bytearray]

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


class Limits:
    """What one request (or response) may take before it is refused."""

    __slots__ = ("max_request_line", "max_header_size", "max_headers", "max_body")

    def __init__(self, max_request_line: int = 8 << 10, max_header_size: int = 32 << 10,
                 max_headers: int = 100, max_body: int = 16 << 20) -> None:
        self.max_request_line = max_request_line  # 414 above it
        self.max_header_size = max_header_size    # the whole head, trailers included: 431 above it
        self.max_headers = max_headers            # header lines, trailers included: 431 above it
        self.max_body = max_body                  # 413 above it (decided from Content-Length when there is one)


class _Refuse(Exception):
    """Raised inside a parser callback to stop parsing with an answer."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


def error_response(status: int, text: str, close: bool = True) -> bytes:
    """An answer the proxy writes itself (plain text)."""
    body = text.encode() + b"\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, REASONS[status], len(body), b"Connection: close\r\n" if close else b"", body)


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
            if self.line:
                self.line += buf[i:nl]
                line: Buffer = self.line
            else:
                line = buf[i:nl]
            i = nl + 1
            if self.in_trailers:
                self.trailer_bytes += len(line) + 1 - len(self.line)
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
    """A request head that passed every check: what the proxy forwards and how it answers."""

    __slots__ = ("method", "target", "version", "headers", "host", "keep_alive", "expect_continue",
                 "content_length", "chunked", "dropped")

    def __init__(self) -> None:
        self.method = b""
        self.target = b""             # origin-form (an absolute-form target rewritten), or * for OPTIONS
        self.version = 11             # 10 or 11
        self.headers: List[Tuple[bytes, bytes, bytes]] = []  # (lowercase name, name, value), in order
        self.host: Optional[bytes] = None  # the authority: the Host header's, or an absolute-form target's
        self.keep_alive = True
        self.expect_continue = False
        self.content_length: Optional[int] = None
        self.chunked = False
        self.dropped: Set[bytes] = set()  # lowercase names a Connection header declared hop-by-hop

    def header(self, name: bytes) -> Optional[bytes]:
        """The first header of that lowercase name."""
        for lowered, _, value in self.headers:
            if lowered == name:
                return value
        return None


class RequestReader:
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
        self._begin()

    def _begin(self) -> None:
        self._url: List[bytes] = []
        self._url_size = 0
        self._raw: List[Tuple[bytes, bytes]] = []
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
            self._state = HEAD
            self.head = None
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
        except _Refuse as exc:
            return self._fail(exc.status, exc.text)
        except httptools.HttpParserUpgrade:
            return self._fail(501, "upgrade and CONNECT are not supported by this proxy")
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if isinstance(cause, _Refuse):
                return self._fail(cause.status, cause.text)
            return self._fail(400, "malformed request")
        return None

    def _read_head(self) -> str:
        limits = self.limits
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
                    if not self._line_done and self._head_bytes + len(buf) > limits.max_request_line:
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
                    if self._head_bytes + first > limits.max_request_line:
                        return self._fail(414, f"request line longer than {limits.max_request_line} bytes")
                    self._line_done = True
            self._head_bytes += len(piece)
            failed = self._feed_parser(piece)
            if failed:
                return failed
            if self._headers_done:
                head = self.head
                assert head is not None  # set by on_headers_complete
                if head.content_length is not None and head.content_length > limits.max_body:
                    return self._fail(413, f"request body larger than {limits.max_body} bytes")
                if head.chunked:
                    self._chunks = _Chunks()
                else:
                    self._body_left = head.content_length or 0
                self._state = _BODY
                if self._complete and self._body_left == 0 and self._chunks is None:
                    return self._finish()
                return HEAD

    def _over_head_limit(self, buf: Buffer) -> str:
        if not self._line_done and buf.find(b"\n") < 0:
            return self._fail(414, f"request line longer than {self.limits.max_request_line} bytes")
        return self._fail(431, f"request head larger than {self.limits.max_header_size} bytes")

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
            limits = self.limits
            if chunks.bad:
                return self._fail(400, "malformed chunked body")
            if self._head_bytes + chunks.trailer_bytes > limits.max_header_size:
                return self._fail(431, f"request head and trailers larger than {limits.max_header_size} bytes")
            if len(self._raw) + chunks.trailers > limits.max_headers:
                return self._fail(431, f"more than {limits.max_headers} header and trailer lines")
        piece, self._buf = (buf, b"") if take == len(buf) else (buf[:take], buf[take:])
        failed = self._feed_parser(piece)
        if failed:
            return failed
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
        if len(self._raw) >= self.limits.max_headers:
            raise _Refuse(431, f"more than {self.limits.max_headers} header lines")
        self._raw.append((name, value))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self.head = _check_head(self._parser, b"".join(self._url), self._raw)

    def on_body(self, body: bytes) -> None:
        if len(self.body) + len(body) > self.limits.max_body:
            raise _Refuse(413, f"request body larger than {self.limits.max_body} bytes")
        self.body += body

    def on_message_complete(self) -> None:
        self._complete = True


def _check_head(parser: "httptools.HttpRequestParser", target: bytes,
                raw: List[Tuple[bytes, bytes]]) -> RequestHead:
    """RFC 9112's rules for a request head; raises _Refuse with the answer when one fails."""
    head = RequestHead()
    version = parser.get_http_version()
    if version not in ("1.1", "1.0"):
        raise _Refuse(400, f"HTTP/{version} requests are not served here (HTTP/1.0 and HTTP/1.1 are)")
    head.version = 11 if version == "1.1" else 10
    head.method = method = parser.get_method()
    hosts: List[bytes] = []
    tokens: Set[bytes] = set()
    for name, value in raw:
        lowered = name.lower()
        head.headers.append((lowered, name, value))
        if lowered == b"host":
            hosts.append(value.strip())
        elif lowered == b"connection":
            tokens.update(t.strip().lower() for t in value.split(b","))
        elif lowered == b"transfer-encoding":
            head.chunked = True  # llhttp accepts a request's transfer coding only when chunked ends it
        elif lowered == b"content-length":
            head.content_length = int(value)  # llhttp checked it: digits, one value
        elif lowered == b"expect" and value.strip().lower() == b"100-continue":
            head.expect_continue = True
    tokens.discard(b"")
    head.dropped = tokens - _CONNECTION_OPTIONS - _PROTECTED
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
    if host is not None and not _HOST.match(host):
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
    return head


class Forwarding:
    """How the proxy says who the client was (X-Forwarded-For and friends)."""

    __slots__ = ("replace", "forwarded", "via")

    def __init__(self, xff: str = "append", forwarded: bool = False, via: bool = False) -> None:
        self.replace = xff == "replace"  # drop what the client sent (an edge proxy)
        self.forwarded = forwarded       # add an RFC 7239 Forwarded entry
        self.via = via                   # add a Via entry


_CLIENT_FORWARDING = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"forwarded"})


def encode_request(head: RequestHead, body: Buffer, client: bytes, forwarding: Forwarding) -> bytes:
    """The request as a backend gets it: HTTP/1.1 and keep-alive, hop-by-hop headers
    dropped (and those a Connection header named), the body with a Content-Length,
    and the client's address added to X-Forwarded-For (RFC 7239's Forwarded and Via
    when asked). `client` is the client's IP address as text."""
    parts: List[bytes] = [head.method, b" ", head.target, b" HTTP/1.1\r\n"]
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
        parts.append(b"X-Forwarded-Proto: http\r\n")
    if forwarding.forwarded:
        node = b'"[' + client + b']"' if b":" in client else client
        parts += (b"Forwarded: for=", node, b";proto=http\r\n")
    if forwarding.via:
        parts.append(b"Via: %s leastload\r\n" % (b"1.1" if head.version == 11 else b"1.0"))
    if body or head.method in _BODY_METHODS:
        parts.append(b"Content-Length: %d\r\n" % len(body))
    parts.append(b"\r\n")
    if body:
        parts.append(bytes(body))
    return b"".join(parts)


# ---- responses ----------------------------------------------------------------------

class ResponseReader:
    """A backend's bytes for one request -> what its client gets.

    `start(head_only, http10, keep_alive)` before each request is sent;
    `feed(data)` and `feed_eof()` return the bytes to pass on. After each call:
    `status` (the final response's, 0 until its head is in), `complete`,
    `failed` (why the response is unusable: nothing more is passed on),
    `reusable` (the backend connection may carry another request) and
    `close_client` (the client connection must close after this answer).

    To the client: the head is rewritten (HTTP/1.1 status line, hop-by-hop
    headers dropped); a Content-Length body passes as it is; a chunked body
    passes as it is to an HTTP/1.1 client (its trailers as trailers) and is
    de-chunked for an HTTP/1.0 client, which then gets the end of the body
    from the close; a body delimited by the backend's close is delimited by
    the client connection's close too. 1xx answers other than 100 go to
    HTTP/1.1 clients; 101 is refused (the proxy never asks for an upgrade).
    Bytes after the end of the response, or a response body on a HEAD, 204 or
    304 exchange, make the backend connection unusable (`reusable` False).
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._parser = httptools.HttpResponseParser(self)
        self._fresh = True  # the parser has seen nothing since it was made
        self.start(False, False, True)

    def start(self, head_only: bool, http10: bool, keep_alive: bool) -> None:
        self.head_only, self.http10, self.client_keep_alive = head_only, http10, keep_alive
        self.status = 0
        self.complete = False
        self.failed: Optional[str] = None
        self.reusable = False
        self.close_client = False
        self.extra = False          # bytes came after the response's end
        self._buf = bytearray()     # a partial head
        self._scan = 0
        self._begin_message()

    def _begin_message(self) -> None:
        self._head_bytes = 0
        self._status_text = b""
        self._lines: List[Tuple[bytes, bytes]] = []  # (lowercase name, the header line)
        self._tokens: Set[bytes] = set()
        self._length: Optional[int] = None
        self._chunked = False
        self._in_body = False
        self._headers_done = False
        self._message_done = False
        self._until_eof = False
        self._body_left = 0
        self._chunks: Optional[_Chunks] = None
        self._dechunk = False
        self._no_body = False
        self._out: List[bytes] = []  # de-chunked pieces for an HTTP/1.0 client

    # ---- input --------------------------------------------------------------------

    def feed(self, data: bytes) -> List[bytes]:
        """The backend's bytes; returns the pieces to write to the client, in order."""
        out: List[bytes] = []
        if self.complete or self.failed:
            if data:
                self.extra = True
                self.reusable = False
            return out
        i = 0
        n = len(data)
        while i < n and not self.complete and not self.failed:
            if not self._in_body:
                i = self._head_step(data, i, out)
            else:
                i = self._body_step(data, i, out)
        if i < n and self.complete:
            self.extra = True
            self.reusable = False
        return out

    def feed_eof(self) -> List[bytes]:
        """The backend closed its side."""
        out: List[bytes] = []
        if self.complete or self.failed:
            return out
        if self._in_body and self._until_eof:
            self._done()
        else:
            self.failed = "the backend closed the connection mid-response"
        return out

    # ---- the head -------------------------------------------------------------------

    def _head_step(self, data: bytes, i: int, out: List[bytes]) -> int:
        """Consumes head bytes from data[i:]; returns where it stopped."""
        limits = self.limits
        if self._buf:
            start = len(self._buf)
            self._buf += data[i:]
            buf: Buffer = self._buf
            base = start  # data[i] is buf[start]
            scan = max(0, start - 3)
        else:
            buf, base, scan = data, i, i
        end = buf.find(b"\r\n\r\n", scan)
        if end < 0:
            size = len(buf) - (0 if buf is self._buf else i)
            if size > limits.max_header_size:
                self.failed = f"response head larger than {limits.max_header_size} bytes"
                return len(data)
            if buf is not self._buf:
                self._buf = bytearray(data[i:])
            return len(data)
        stop = end + 4
        if buf is self._buf:
            head = bytes(self._buf[:stop])
            consumed = i + (stop - base)
            self._buf = bytearray()
        else:
            head = data[i:stop] if (i or stop != len(data)) else data
            consumed = stop
        if len(head) > limits.max_header_size:
            self.failed = f"response head larger than {limits.max_header_size} bytes"
            return len(data)
        self._head_bytes = len(head)
        if not self._feed_parser(head):
            return len(data)
        if not self._headers_done:  # leading empty lines, or a head llhttp still reads: go on
            return consumed
        self._on_head(out)
        return consumed

    def _feed_parser(self, data: Buffer) -> bool:
        self._fresh = False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            self.failed = cause.text if isinstance(cause, _Refuse) else "malformed response"
            return False
        return True

    def _on_head(self, out: List[bytes]) -> None:
        """The head is parsed: decide the framing, pass the rewritten head on."""
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            if status == 101:
                self.failed = "101 Switching Protocols, which this proxy never asks for"
                return
            if status != 100 and not self.http10:
                out.append(self._rewrite_head(status, b""))
            # llhttp ended the interim message at its head; the final response follows
            self._begin_message()
            return
        self.status = status
        if self.head_only or status == 204 or status == 304:
            framing = b""  # no body whatever the head says; a Content-Length after HEAD is kept
            self._no_body = True
        else:
            if self._chunked:
                if self.http10:
                    self._dechunk = True
                    self.close_client = True
                    framing = b""
                else:
                    framing = b"Transfer-Encoding: chunked\r\n"
                self._chunks = _Chunks()
            elif self._length is not None:
                framing = b""  # its Content-Length line is kept
                self._body_left = self._length
            else:
                self._until_eof = True
                self.close_client = True
                framing = b""
        if not self.client_keep_alive:
            self.close_client = True
        out.append(self._rewrite_head(status, framing))
        if self._no_body:
            if self.head_only and not self._message_done:
                # llhttp waits for the body the head announces: a new parser for the next response
                self._parser = httptools.HttpResponseParser(self)
            self._done()
            return
        self._in_body = True
        if self._message_done:  # Content-Length: 0
            self._done()

    def _rewrite_head(self, status: int, framing: bytes) -> bytes:
        dropped = self._tokens - _PROTECTED
        parts = [b"HTTP/1.1 %d " % status, self._status_text, b"\r\n"]
        for lowered, line in self._lines:
            if lowered in _RESPONSE_DROP or (dropped and lowered in dropped):
                continue
            if lowered == b"content-length" and (status < 200 or status == 204):
                continue  # no body, and none announced
            parts.append(line)
        parts.append(framing)
        if self.close_client and status >= 200:
            parts.append(b"Connection: close\r\n")
        elif self.http10 and status >= 200:
            parts.append(b"Connection: keep-alive\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    # ---- the body --------------------------------------------------------------------

    def _body_step(self, data: bytes, i: int, out: List[bytes]) -> int:
        n = len(data)
        if self._until_eof:
            piece = data if i == 0 else data[i:]
            if not self._feed_parser(piece):
                return n
            out.append(piece)
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
                    or len(self._lines) + chunks.trailers > self.limits.max_headers):
                self.failed = "response head and trailers over the limits"
                return n
        piece = data if (i == 0 and stop == n) else data[i:stop]
        if not self._feed_parser(piece):
            return n
        if self._dechunk:
            out.extend(self._out)
            self._out.clear()
        else:
            out.append(piece)
        if done != self._message_done:  # the framing seen here and llhttp's disagree
            self.failed = "malformed response body"
            return n
        if done:
            self._done()
        return stop

    def _done(self) -> None:
        self.complete = True
        keep = b"close" not in self._tokens and not self._until_eof
        if self._parser.get_http_version() == "1.0":
            keep = keep and b"keep-alive" in self._tokens
        self.reusable = keep and not self.extra

    # ---- llhttp callbacks -------------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._status_text += status

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:  # a trailer: passed on raw with a chunked body, else dropped
            return
        if len(self._lines) >= self.limits.max_headers:
            raise _Refuse(502, f"response has more than {self.limits.max_headers} header lines")
        lowered = name.lower()
        self._lines.append((lowered, name + b": " + value + b"\r\n"))
        if lowered == b"connection":
            self._tokens.update(t.strip().lower() for t in value.split(b","))
        elif lowered == b"content-length":
            self._length = int(value)  # llhttp checked it
        elif lowered == b"transfer-encoding":
            self._chunked = value.strip().lower().endswith(b"chunked")

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        if self._dechunk:
            self._out.append(body)

    def on_message_complete(self) -> None:
        self._message_done = True
