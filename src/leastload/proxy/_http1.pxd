# Augmenting declarations for _http1.py (Cython's pure-Python mode): the build compiles
# _http1.py itself with these types (CMakeLists.txt); the .py stays plain Python and is
# what runs where there is no compiled module (or under LEASTLOAD_IMPLEMENTATION=python).
# Every attribute and method below must follow _http1.py: an attribute the .py sets that
# is not declared here fails at run time in the compiled module only (the suite runs both).
# Sizes that can exceed Py_ssize_t (a chunk size, a Content-Length) stay Python ints.
cimport cython
from libc.string cimport memcmp

cdef bint _COMPILED

cdef object _PARSE_ERRORS
cdef frozenset _REQUEST_DROP, _RESPONSE_DROP, _PROTECTED, _CONNECTION_OPTIONS, _BODY_METHODS
cdef frozenset _NO_NAMES, _REQUEST_SPECIAL, _RESPONSE_SPECIAL, _CLIENT_FORWARDING
cdef dict _HOSTS_SEEN, _FORWARDED_TAILS
cdef object _HOST, _ABSOLUTE
cdef bytes _TOKEN_TABLE, _VISIBLE_TABLE, _VALUE_TABLE, _DIGIT_TABLE
cdef tuple _PLAIN_METHODS
cdef dict _FIELD_NAMES
cdef list _NAME_SLOTS
cdef bytes _HTTP11_END, _HTTP11_START, _HOST_NAME, _CONTENT_LENGTH_NAME, _LOAD_REPORT_NAME
cdef int _NOT_PLAIN_REQUEST, _NOT_PLAIN_RESPONSE, _LOAD_REPORT
cdef Py_ssize_t _MAX_CHUNK_LINE, _KEEP_WHOLE
cdef bytes _LENGTH_PRIMER, _CHUNKED_PRIMER
cdef str _BAD_REQUEST_LINE


@cython.final
cdef class Limits:
    cdef public Py_ssize_t max_request_line, max_header_size, max_headers, max_body


@cython.final
cdef class Forwarding:
    cdef public bint replace, forwarded, via, https


@cython.final
cdef class _Chunks:
    cdef object left            # a chunk size can be up to 2**64 - 1: kept a Python int
    cdef bint in_data, in_trailers, bad
    cdef bytearray line
    cdef Py_ssize_t trailers, trailer_bytes

    @cython.locals(n=Py_ssize_t, nl=Py_ssize_t, take=object)
    cdef Py_ssize_t scan(self, object buf, Py_ssize_t i) except -2


@cython.final
@cython.freelist(64)  # one a request (as _exchange.Exchange)
cdef class RequestHead:
    cdef public bytes method, target, host, upgrade
    cdef public int version
    cdef public bint keep_alive, expect_continue, chunked
    cdef public object content_length  # a Python int: up to 2**64 - 1 (llhttp's limit)
    cdef public object dropped, tokens, raw
    cdef list _headers, _hosts        # the `headers` and `hosts` properties'
    cdef Py_ssize_t _lines_at, _lines_end

    cpdef object header(self, object name)


cdef class _HeadReader:
    cdef public Limits limits
    cdef int _line_flags

    @cython.locals(at=Py_ssize_t, lines=Py_ssize_t, flags=int, i=Py_ssize_t, j=Py_ssize_t, name_end=Py_ssize_t,
                   seen=tuple)
    cdef Py_ssize_t _plain_lines(self, bytes data, Py_ssize_t start, Py_ssize_t stop, int not_plain,
                                 bytes wanted) except -2


@cython.final
cdef class RequestReader(_HeadReader):
    cdef object _parser
    cdef object _buf
    cdef Py_ssize_t _scan
    cdef object _state
    cdef public RequestHead head
    cdef public bytearray body
    cdef public object error
    cdef public Py_ssize_t requests, plain_heads
    cdef list _url
    cdef RequestHead _next_head
    cdef bint _plain, _line_done, _headers_done, _complete, _reparse
    cdef public bint started
    cdef object _line
    cdef bytes _good_host
    cdef Py_ssize_t _lines, _head_bytes, _skipped
    cdef Py_ssize_t _body_left  # at most max_body (checked before it is set)
    cdef _Chunks _chunks

    cdef _begin(self)
    cpdef feed(self, object data)
    cpdef start_next(self)
    cpdef str next_event(self)
    cdef str _fail(self, int status, str text)
    cdef object _feed_parser(self, object data)
    cdef str _parse_error(self, object exc)
    cdef str _upgrade_asked(self)
    cpdef bytes take_buffered(self)
    @cython.locals(limits=Limits, end=Py_ssize_t, first=Py_ssize_t, stop=Py_ssize_t, nl=Py_ssize_t,
                   head=RequestHead)
    cdef str _read_head(self)
    @cython.locals(data=bytes, p=cython.p_uchar, token=cython.p_uchar, space=Py_ssize_t, method=bytes,
                   version_at=Py_ssize_t, stop=Py_ssize_t, at=Py_ssize_t, host=bytes, head=RequestHead, known=bytes)
    cdef bint _plain_head(self, object piece, Py_ssize_t first) except -1
    @cython.locals(length=object)
    cdef str _after_head(self, RequestHead head)
    @cython.locals(first=Py_ssize_t, line=Py_ssize_t)
    cdef str _over_head_limit(self, object buf)
    @cython.locals(limit=Py_ssize_t)
    cdef bint _line_too_long(self, Py_ssize_t size, object buf) except -1
    @cython.locals(chunks=_Chunks, limits=Limits, end=Py_ssize_t, take=Py_ssize_t, done=bint)
    cdef str _read_body(self)
    cdef str _finish(self)


cdef _special_header(RequestHead head, bytes lowered, bytes value)
cdef _check_head(RequestHead head, object parser, bytes target, object line)
cdef bint _host_ok(bytes host) except -1
@cython.locals(known=tuple, lowered=bytes, flags=int)
cdef tuple _field_name(bytes name)
# data is read through a pointer in these (after the bounds are checked)
@cython.locals(p=cython.p_uchar, allowed=cython.p_uchar, i=Py_ssize_t)
cdef bint _all_in(bytes data, Py_ssize_t start, Py_ssize_t stop, bytes table) except -1
@cython.locals(n=Py_ssize_t, p=cython.p_uchar, q=cython.p_uchar, i=Py_ssize_t)
cdef bint _equal_at(bytes data, Py_ssize_t at, bytes text) except -1
@cython.locals(p=cython.p_uchar, i=Py_ssize_t, c=cython.uchar)
cdef Py_ssize_t _head_end(bytes data, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, i=Py_ssize_t)
cdef Py_ssize_t _line_end(bytes data, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, version_at=Py_ssize_t, space=Py_ssize_t)
cdef bint _request_line_ok(bytes line, Py_ssize_t first) except -1
@cython.locals(p=cython.p_uchar, number=cython.longlong, c=cython.uchar, i=Py_ssize_t)
cdef cython.longlong _decimal(bytes data, Py_ssize_t start, Py_ssize_t stop) except -2
# the plain line's helpers read without bounds checks: their callers checked `stop`
@cython.locals(p=cython.p_uchar, token=cython.p_uchar, visible=cython.p_uchar, j=Py_ssize_t)
cdef Py_ssize_t _name_end(bytes data, Py_ssize_t i, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, in_value=cython.p_uchar)
cdef Py_ssize_t _value_end(bytes data, Py_ssize_t j, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, slot=Py_ssize_t, seen=tuple, name=bytes, known=tuple)
cdef tuple _known_name(bytes data, Py_ssize_t i, Py_ssize_t name_end)
@cython.locals(p=cython.p_uchar, i=Py_ssize_t, j=Py_ssize_t, name_end=Py_ssize_t, seen=tuple)
cdef _plain_fields(bytes data, Py_ssize_t start, Py_ssize_t stop, list fields)
cdef _forwarding_extras(list parts, RequestHead head, bytes client, Forwarding forwarding, object body)
@cython.locals(tail=bytes)
cpdef encode_request(RequestHead head, object body, bytes client, Forwarding forwarding)


@cython.final
cdef class ResponseReader(_HeadReader):
    cdef object _parser
    cdef object _data
    cdef bint _clean, _fresh, _headers_done, _message_done, _plain, _chunked, _in_body, _until_eof
    cdef bint _dechunk, _fast_http11, _backend10, _adds
    cdef public bytes added_head
    cdef public bint head_only, http10, client_keep_alive, complete, reusable, close_client, extra
    cdef public bint upgrade_asked  # the request asked for an upgrade: a 101 switches (else it fails)
    cdef public bytes rest          # after a 101: the bytes that followed its head
    cdef public int status
    cdef public Py_ssize_t plain_heads
    cdef public object failed
    cdef list _headers
    cdef bytes _kept            # a plain response (or its head), for header()
    cdef Py_ssize_t _kept_lines, _kept_end
    cdef bint _kept_report      # its lines hold a load report
    cdef object _tokens
    cdef object _length         # a Content-Length can be up to 2**64 - 1
    cdef bytearray _buf
    cdef Py_ssize_t _fast_size, _fast_end, _from, _to, _head_bytes, _skipped
    cdef object _body_left      # a Content-Length can be up to 2**64 - 1
    cdef _Chunks _chunks
    cdef list _out
    cdef bytes _reason

    cpdef start(self, bint head_only, bint http10, bint keep_alive)
    cpdef add_to_head(self, bytes line)
    cpdef object load_report(self)
    cpdef object header(self, object lowered)
    cpdef list feed(self, object data)
    cdef _begin_message(self)
    @cython.locals(end=Py_ssize_t)
    cdef object _fast(self, bytes data)
    cdef inline _emit(self, Py_ssize_t start, Py_ssize_t stop, list out)
    cdef _emit_bytes(self, object piece, list out)
    @cython.locals(p=cython.p_uchar, digit=cython.p_uchar, in_value=cython.p_uchar, first=Py_ssize_t, status=int,
                   at=Py_ssize_t, length=cython.longlong)
    cdef bint _plain_response(self, bytes data, Py_ssize_t stop) except -1
    @cython.locals(limits=Limits, start=Py_ssize_t, end=Py_ssize_t, stop=Py_ssize_t, consumed=Py_ssize_t,
                   raw_at=Py_ssize_t, rest=Py_ssize_t)
    cdef Py_ssize_t _head_step(self, bytes data, Py_ssize_t i, list out) except -1
    cdef bint _feed_parser(self, object data) except -1
    @cython.locals(status=int, no_body=bint)
    cdef _on_head(self, object head, Py_ssize_t raw_at, Py_ssize_t stop, list out)
    cdef bytes _rewrite_head(self, int status, bytes framing)
    cdef _switch(self, list out)
    @cython.locals(n=Py_ssize_t, chunks=_Chunks, end=Py_ssize_t, stop=Py_ssize_t, done=bint, take=object)
    cdef Py_ssize_t _body_step(self, bytes data, Py_ssize_t i, list out) except -1
    @cython.locals(keep=bint)
    cdef _done(self)


cdef bytes _reason_of(object head)
