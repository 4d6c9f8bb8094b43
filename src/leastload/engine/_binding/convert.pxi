# Argument conversion and the one errno mapper: Python values -> the C types the core
# takes (with leastload.engine.errors' messages), negative C return codes -> the exceptions
# the reference raises. Included by _engine.pyx.

cdef inline uint64_t _count(str arg, object value) except? 0xFFFFFFFFFFFFFFFF:
    if type(value) is not int:
        value = _errors.check_count(arg, value)
    try:
        return <uint64_t>value
    except OverflowError:
        pass
    _errors.check_count(arg, value)  # raises with the shared message
    raise SystemError(f"{arg}={value!r} passed the checks but not the conversion")


cdef inline uint32_t _ttfb_us(object ttfb) except? 0xFFFFFFFF:
    """TTFB seconds -> integer microseconds (0 for None), as _errors.check_ttfb."""
    cdef double t
    if ttfb is None:
        return 0
    if type(ttfb) is float and 0.0 <= <double>ttfb <= 3600.0:
        t = ttfb
        return <uint32_t>floor(t * 1e6 + 0.5)
    return _errors.check_ttfb(ttfb)


cdef inline long _status(object status) except -1:
    if type(status) is int and 100 <= status <= 599:
        return status
    return _errors.check_status(status)  # raises with the shared message


cdef int _raise_for(int64_t rc, str op, object name=None) except -1:
    """Maps a negative C return code to the exception the reference raises."""
    if rc == -ENOENT:
        raise _errors.no_service()
    if rc == -EOVERFLOW and name is not None:
        raise _errors.active_overflow(name)
    if rc == -ERANGE:
        raise _errors.nothing_active(name)
    if rc == -ENOMEM:
        raise MemoryError(f"leastload: out of memory in {op}")
    # -EINVAL and the rest: the checks above the C call should have caught it
    raise SystemError(f"leastload C core: {op} returned {rc} (a binding bug)")


cdef inline int _raise_for_rc(int rc, str op, object name=None) except -1:
    if rc < 0:
        _raise_for(rc, op, name)
    return 0



cdef inline uint64_t _name_hash(str name) except? 0:
    """A service's fixed hash for the hash methods (the reference's _hash.name_hash)."""
    cdef bytes data = name.encode("utf-8", "surrogatepass")
    return ll_xxh64(<const char *>data, <size_t>len(data), 0)


cdef object _exclude_names(object exclude):
    """select()'s exclude as a sized container of str: a built-in list, tuple, set or
    frozenset is used as it is (iterating it runs no Python code), anything else is
    materialized by _errors.check_exclude, which also raises the shared errors."""
    cdef type t = type(exclude)
    if t is set or t is frozenset or t is list or t is tuple:
        for item in exclude:
            if type(item) is not str:
                return _errors.check_exclude(exclude)  # raises, naming the item
        return exclude
    return _errors.check_exclude(exclude)


