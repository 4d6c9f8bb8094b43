# Augmenting declarations for _http1.py (Cython's pure-Python mode): the build compiles
# _http1.py itself with these types (CMakeLists.txt); the .py stays plain Python and is
# what runs where there is no compiled module (or under LEASTLOAD_IMPLEMENTATION=python).
# Every attribute and method below must follow _http1.py: an attribute the .py sets that
# is not declared here fails at run time in the compiled module only (the suite runs both).
# Sizes that can exceed Py_ssize_t (a chunk size, a Content-Length) stay Python ints.
# The scanner, tables and limits shared with the response side are _scan's (_scan.pxd).
cimport cython

from leastload.proxy._scan cimport (Limits, _Chunks, _HeadReader, _all_in, _equal_at, _head_end, _line_end,
                                    _plain_fields, _plain_request_line)
from leastload.proxy._response cimport ResponseReader

# bound to _scan's objects at import (the same ones: Host's name is compared by identity)
cdef object _PARSE_ERRORS
cdef frozenset _REQUEST_DROP, _PROTECTED, _NO_NAMES, _REQUEST_SPECIAL
cdef bytes _TOKEN_TABLE, _VISIBLE_TABLE, _HOST_NAME
cdef int _NOT_PLAIN_REQUEST

cdef frozenset _CONNECTION_OPTIONS, _BODY_METHODS, _CLIENT_FORWARDING
cdef dict _HOSTS_SEEN, _FORWARDED_TAILS
cdef object _HOST, _ABSOLUTE
cdef str _BAD_REQUEST_LINE
cdef bytes _LENGTH_PRIMER, _CHUNKED_PRIMER


@cython.final
cdef class Forwarding:
    cdef public bint replace, forwarded, via, https


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
    @cython.locals(data=bytes, p=cython.p_uchar, method=bytes, stop=Py_ssize_t, at=Py_ssize_t, host=bytes,
                   head=RequestHead)
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
@cython.locals(p=cython.p_uchar, version_at=Py_ssize_t, space=Py_ssize_t)
cdef bint _request_line_ok(bytes line, Py_ssize_t first) except -1
cdef _forwarding_extras(list parts, RequestHead head, bytes client, Forwarding forwarding, object body)
@cython.locals(tail=bytes)
cpdef encode_request(RequestHead head, object body, bytes client, Forwarding forwarding)
