# Augmenting declarations for _response.py (Cython's pure-Python mode; see _http1.pxd).
cimport cython

from leastload.proxy._scan cimport Limits, _Chunks, _HeadReader, _decimal, _equal_at, _head_end, _plain_fields

# bound to _scan's objects at import (the same ones: Content-Length's name is compared by identity)
cdef object _PARSE_ERRORS
cdef frozenset _RESPONSE_DROP, _PROTECTED, _NO_NAMES, _RESPONSE_SPECIAL
cdef bytes _DIGIT_TABLE, _VALUE_TABLE, _CONTENT_LENGTH_NAME, _LOAD_REPORT_NAME
cdef int _NOT_PLAIN_RESPONSE, _LOAD_REPORT

cdef bytes _HTTP11_START
cdef Py_ssize_t _KEEP_WHOLE


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
