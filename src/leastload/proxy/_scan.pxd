# Augmenting declarations for _scan.py (Cython's pure-Python mode; see _http1.pxd): what the
# request side (_http1) and the response side (_response) share. They cimport the classes and
# functions declared here; a C global cannot be cimported, so each binds the constants it reads
# to a global of its own (the same objects: header names are compared by identity). The
# functions they call are cpdef: the .py imports the name (the pure path), the compiled module
# calls the C function.
cimport cython
from libc.string cimport memcmp

cdef bint _COMPILED

cdef object _PARSE_ERRORS
cdef frozenset _REQUEST_DROP, _RESPONSE_DROP, _PROTECTED, _NO_NAMES, _REQUEST_SPECIAL, _RESPONSE_SPECIAL
cdef bytes _TOKEN_TABLE, _VISIBLE_TABLE, _VALUE_TABLE, _DIGIT_TABLE
cdef dict _FIELD_NAMES
cdef list _NAME_SLOTS
cdef bytes _HOST_NAME, _CONTENT_LENGTH_NAME, _LOAD_REPORT_NAME
cdef int _NOT_PLAIN_REQUEST, _NOT_PLAIN_RESPONSE, _LOAD_REPORT
cdef Py_ssize_t _MAX_CHUNK_LINE
cdef tuple _PLAIN_METHODS
cdef bytes _HTTP11_END


@cython.final
cdef class Limits:
    cdef public Py_ssize_t max_request_line, max_header_size, max_headers, max_body


@cython.final
cdef class _Chunks:
    cdef object left            # a chunk size can be up to 2**64 - 1: kept a Python int
    cdef bint in_data, in_trailers, bad
    cdef bytearray line
    cdef Py_ssize_t trailers, trailer_bytes

    @cython.locals(n=Py_ssize_t, nl=Py_ssize_t, take=object)
    cdef Py_ssize_t scan(self, object buf, Py_ssize_t i) except -2


cdef class _HeadReader:
    cdef public Limits limits
    cdef int _line_flags            # the flags of the names the last scan read, ORed
    cdef Py_ssize_t _wanted_end     # where the value of the wanted name that scan found ends

    @cython.locals(at=Py_ssize_t, lines=Py_ssize_t, flags=int, i=Py_ssize_t, j=Py_ssize_t, name_end=Py_ssize_t,
                   seen=tuple)
    cdef Py_ssize_t _plain_lines(self, bytes data, Py_ssize_t start, Py_ssize_t stop, int not_plain,
                                 bytes wanted) except -2


@cython.locals(known=tuple, lowered=bytes, flags=int)
cdef tuple _field_name(bytes name)
# data is read through a pointer in these (after the bounds are checked)
@cython.locals(p=cython.p_uchar, allowed=cython.p_uchar, i=Py_ssize_t)
cpdef bint _all_in(bytes data, Py_ssize_t start, Py_ssize_t stop, bytes table) except -1
@cython.locals(n=Py_ssize_t, p=cython.p_uchar, q=cython.p_uchar, i=Py_ssize_t)
cpdef bint _equal_at(bytes data, Py_ssize_t at, bytes text) except -1
@cython.locals(p=cython.p_uchar, i=Py_ssize_t, c=cython.uchar)
cpdef Py_ssize_t _head_end(bytes data, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, i=Py_ssize_t)
cpdef Py_ssize_t _line_end(bytes data, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, number=cython.longlong, c=cython.uchar, i=Py_ssize_t)
cpdef cython.longlong _decimal(bytes data, Py_ssize_t start, Py_ssize_t stop) except -2
# the plain line's helpers read without bounds checks: their callers checked `stop`
@cython.locals(p=cython.p_uchar, token=cython.p_uchar, visible=cython.p_uchar, j=Py_ssize_t)
cdef Py_ssize_t _name_end(bytes data, Py_ssize_t i, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, in_value=cython.p_uchar)
cpdef Py_ssize_t _value_end(bytes data, Py_ssize_t j, Py_ssize_t stop) except -2
@cython.locals(p=cython.p_uchar, slot=Py_ssize_t, seen=tuple, name=bytes, known=tuple)
cdef tuple _known_name(bytes data, Py_ssize_t i, Py_ssize_t name_end)
@cython.locals(p=cython.p_uchar, token=cython.p_uchar, space=Py_ssize_t, version_at=Py_ssize_t, known=bytes)
cpdef bytes _plain_request_line(bytes data, Py_ssize_t first)
@cython.locals(p=cython.p_uchar, i=Py_ssize_t, j=Py_ssize_t, name_end=Py_ssize_t, seen=tuple)
cpdef _plain_fields(bytes data, Py_ssize_t start, Py_ssize_t stop, list fields)
