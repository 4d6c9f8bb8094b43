# cython: annotation_typing=False
"""The proxy's HTTP/1.1 response side without I/O: a backend's bytes for one request in,
the bytes its client gets out (RFC 9112).

Nothing here touches a socket or a clock: tests/proxy/test_http1.py and the fuzz target
feed it bytes. The scanner, limits and chunk tracker it shares with the request side are
in _scan; _http1 re-exports `ResponseReader`.
"""

import re
from typing import List, Optional, Set, Tuple

import httptools

from ._scan import Limits, Piece, _Chunks, _decimal, _equal_at, _head_end, _HeadReader, _plain_fields, _Refuse
from ._scan import (CONTENT_LENGTH_NAME as _CONTENT_LENGTH_NAME, DIGIT_TABLE as _DIGIT_TABLE,
                    LOAD_REPORT as _LOAD_REPORT, LOAD_REPORT_NAME as _LOAD_REPORT_NAME, NO_NAMES as _NO_NAMES,
                    NOT_PLAIN_RESPONSE as _NOT_PLAIN_RESPONSE, PARSE_ERRORS as _PARSE_ERRORS,
                    PROTECTED as _PROTECTED, RESPONSE_DROP as _RESPONSE_DROP,
                    RESPONSE_SPECIAL as _RESPONSE_SPECIAL, VALUE_TABLE as _VALUE_TABLE)

# A plain response up to this size is kept whole for header() until the next one starts (no
# copy); of a larger one, only its head is (a copy: an idle pooled connection holds little).
_KEEP_WHOLE = 4096
_HTTP11_START = b"HTTP/1.1 "  # a plain status line's start
_CR_LF = (b"\r", b"\n")
# what a status line must not hold (RFC 9112 4: reason-phrase = *( HTAB / SP / VCHAR / obs-text ))
_STATUS_LINE_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class _NotFast(Exception):
    """Stops the response fast path's parse: the general path takes the bytes."""


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
    answers other than 100 go to HTTP/1.1 clients. A 101 completes the
    response when `upgrade_asked` was set after start() (the request asked
    for an upgrade: _tunnel.py takes the connection on, the bytes after the
    101's head in `rest`); otherwise it fails. Bytes after the end of the response, or a
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
        length = _decimal(data, at, self._wanted_end)
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


def _reason_of(head: Piece) -> bytes:
    """The reason phrase of a status line (llhttp checked it), b"" when there is none."""
    line = bytes(head[:512]).split(b"\r\n", 1)[0]
    parts = line.split(b" ", 2)
    return parts[2] if len(parts) == 3 else b""
