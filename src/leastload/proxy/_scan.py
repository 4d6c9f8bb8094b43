# cython: annotation_typing=False
"""What the HTTP/1.1 layer's request and response sides share, without I/O: the byte
scanner of a plain head, its byte tables and header-name cache, the limits, the chunked
body's tracker and the refusal a parser callback raises.

The request side (_http1: RequestReader, encode_request) and the response side
(_response: ResponseReader) cimport these in the compiled build (_scan.pxd); a module's C
globals cannot be cimported, so what they read on the hot path is a function or class here,
or a constant they bind once to a global of their own (the same object: header names are
compared by identity).
"""

from typing import Dict, List, Optional, Tuple, Union

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

# Hop-by-hop headers (RFC 9110 7.6.1), and the ones the proxy frames itself, never forwarded as sent.
_REQUEST_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                           b"transfer-encoding", b"upgrade", b"expect", b"content-length"})
_RESPONSE_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                            b"transfer-encoding", b"upgrade"})
# a Connection header may name headers as hop-by-hop, but never these (they frame the message)
_PROTECTED = frozenset({b"host", b"content-length", b"transfer-encoding"})
_MAX_CHUNK_LINE = 4096  # a chunk-size line with its extensions


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


class _Refuse(Exception):
    """Raised inside a parser callback to stop parsing with an answer."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


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


_NO_NAMES: "frozenset[bytes]" = frozenset()
# headers whose presence needs a look when a request head is read (the rest pass as they are)
_REQUEST_SPECIAL = _REQUEST_DROP | frozenset({b"host", b"x-forwarded-for", b"x-forwarded-proto", b"forwarded"})
_RESPONSE_SPECIAL = _RESPONSE_DROP | frozenset({b"content-length"})
# What a plain head (read without llhttp: RequestReader._plain_head, ResponseReader._plain_response)
# is made of: 256-byte tables, 1 for a byte in the set. Each set is a subset of what llhttp
# takes: RFC 9110 5.6.2's token; visible ASCII; a field value's bytes without obs-text.
def _table(allowed: bytes) -> bytes:
    return bytes(1 if c in allowed else 0 for c in range(256))


_TOKEN_TABLE = _table(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_VISIBLE_TABLE = _table(bytes(range(0x21, 0x7f)))
_VALUE_TABLE = _table(bytes(range(0x21, 0x7f)) + b" \t")
_DIGIT_TABLE = _table(b"0123456789")

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

# A plain request line (RequestReader._plain_head): a known method, each to itself (the head
# keeps this one object), a space, an origin-form target of visible ASCII, " HTTP/1.1" CRLF.
_PLAIN_METHODS = (b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"PATCH")  # the commonest first
_HTTP11_END = b" HTTP/1.1\r\n"   # a plain request line's end


def _plain_request_line(data: bytes, first: int) -> Optional[bytes]:
    """The method of the request line data[:first + 1] (its LF at `first`) when the line is
    plain, as the object of _PLAIN_METHODS; None for any other line (llhttp reads it)."""
    if not 0 < first < len(data):
        return None
    p = data
    if p[first] != 10:
        return None
    token = _TOKEN_TABLE
    space = 0
    while token[p[space]]:  # stops at the request line's LF at the latest
        space += 1
    version_at = first - 10
    if p[space] != 32 or version_at <= space + 1 or p[space + 1] != 47:  # " /"
        return None
    for known in _PLAIN_METHODS:
        if len(known) == space and _equal_at(data, 0, known):
            if _equal_at(data, version_at, _HTTP11_END) and _all_in(data, space + 1, version_at, _VISIBLE_TABLE):
                return known
            return None
    return None


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


class _HeadReader:
    """What RequestReader and ResponseReader share: their limits, and the scan of a plain
    head's header lines."""

    limits: Limits

    def _plain_lines(self, data: bytes, start: int, stop: int, not_plain: int, wanted: bytes) -> int:
        """The header lines in data[start:stop], each checked (see _name_end) and kept
        nowhere: where the value of their one line named `wanted` (a lowercase name, the
        object _field_name gives) starts; -1 when there is not exactly one, when a name has
        a flag of `not_plain`, or when the lines are not plain or more than max_headers
        (then llhttp reads the head). That value ends at `_wanted_end` (its line's CR)."""
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
                self._wanted_end = j
            flags |= seen[2]
            lines += 1
            i = j + 2
        self._line_flags = flags
        return -1 if flags & not_plain else at


# The constants _http1 and _response read, under names an import sees (a cdef global is not
# visible to one): each binds them to C globals of its own, the same objects.
PARSE_ERRORS = _PARSE_ERRORS
REQUEST_DROP = _REQUEST_DROP
RESPONSE_DROP = _RESPONSE_DROP
PROTECTED = _PROTECTED
NO_NAMES = _NO_NAMES
REQUEST_SPECIAL = _REQUEST_SPECIAL
RESPONSE_SPECIAL = _RESPONSE_SPECIAL
TOKEN_TABLE = _TOKEN_TABLE
VISIBLE_TABLE = _VISIBLE_TABLE
VALUE_TABLE = _VALUE_TABLE
DIGIT_TABLE = _DIGIT_TABLE
HOST_NAME = _HOST_NAME
CONTENT_LENGTH_NAME = _CONTENT_LENGTH_NAME
LOAD_REPORT_NAME = _LOAD_REPORT_NAME
NOT_PLAIN_REQUEST = _NOT_PLAIN_REQUEST
NOT_PLAIN_RESPONSE = _NOT_PLAIN_RESPONSE
LOAD_REPORT = _LOAD_REPORT
