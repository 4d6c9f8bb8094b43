# The hash methods' key fast path: the common key forms (exact str and bytes, exact
# ipaddress objects, tuples of them) hashed without a Python call, to the same bytes as
# leastload.hashing.rendezvous.KEY_FORMS, which stays the one statement of the key forms: anything
# else goes there. Included by _engine.pyx; called with the vserver held.

# the key forms _fast_key_hash reads
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef enum:
    KEY_URL = 1
    KEY_WHOLE = 2
    KEY_DOMAIN = 3
    KEY_ONE_IP = 4
    KEY_IP_IP = 5
    KEY_IP_PORT = 6
    MAX_HASHLENGTH_BUF = 4096  # _hash.MAX_HASHLENGTH; also more than two addresses and a port

cdef dict _KEY_KINDS = {"URLHASH": KEY_URL, "CALLIDHASH": KEY_WHOLE, "TOKEN": KEY_WHOLE, "DOMAINHASH": KEY_DOMAIN,
                        "SOURCEIPHASH": KEY_ONE_IP, "DESTINATIONIPHASH": KEY_ONE_IP,
                        "SRCIPDESTIPHASH": KEY_IP_IP, "SRCIPSRCPORTHASH": KEY_IP_PORT}
assert MAX_HASHLENGTH_BUF == _hash.MAX_HASHLENGTH
cdef object _IPv4Address = ipaddress.IPv4Address
cdef object _IPv6Address = ipaddress.IPv6Address


# IPv4Address and IPv6Address keep the address as an int in the `_ip` slot
# (__slots__). The key path reads that slot at its offset in the object, as the
# slot's own descriptor does, without an attribute lookup (for IPv4 about a third
# of SOURCEIPHASH's key cost; for IPv6 it replaces `.packed`, a Python-level
# property). The offset is taken from the descriptor and checked on a sample at
# import; when anything differs (another layout, another kind of member), it is
# -1 and the key path asks getattr() or `.packed` as before.
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    bint PyLong_CheckExact(object o)
    unsigned long long PyLong_AsUnsignedLongLongMask(object o) except? <unsigned long long>-1
    long PyLong_AsLongAndOverflow(object o, int *overflow) except? -1  # SRCIPSRCPORTHASH's port

cdef enum:
    MEMBER_OBJECT_EX = 16  # T_OBJECT_EX (Py_T_OBJECT_EX): a PyObject * slot


cdef Py_ssize_t _slot_offset(object cls, str name, object sample):
    """The offset of `name`'s slot in instances of `cls`, or -1 when it cannot be trusted."""
    import sys, types
    if sys.implementation.name != "cpython":  # the descriptor's layout is CPython's
        return -1
    descr = cls.__dict__.get(name)
    if type(descr) is not types.MemberDescriptorType:
        return -1
    cdef PyMemberDef *member = (<PyMemberDescrObject *><PyObject *>descr).d_member
    if member == NULL or member.type != MEMBER_OBJECT_EX or member.offset <= 0:
        return -1
    if _read_slot(sample, member.offset) is not getattr(sample, name):
        return -1
    return member.offset


cdef inline object _read_slot(object obj, Py_ssize_t offset):
    """The object in the slot at `offset` of obj (None for an empty slot)."""
    cdef PyObject *p = (<PyObject **>((<char *><PyObject *>obj) + offset))[0]
    return None if p == NULL else <object>p


cdef Py_ssize_t _IPV4_IP_OFFSET = _slot_offset(_IPv4Address, "_ip", _IPv4Address("192.0.2.1"))
cdef Py_ssize_t _IPV6_IP_OFFSET = _slot_offset(_IPv6Address, "_ip", _IPv6Address("2001:db8::1"))



cdef int _fast_key_hash(Engine self, object key, uint64_t *out) except -1:
    """The hash of the common key forms without a Python call (exact str and bytes,
    exact ipaddress objects, tuples of them); the same bytes as _hash.KEY_FORMS.
    Returns 0 for anything else (and for a key to refuse): the general path decides."""
    cdef unsigned char buf[MAX_HASHLENGTH_BUF]
    cdef const char *text
    cdef Py_ssize_t size, n, m
    cdef long p
    cdef int overflow = 0
    cdef int kind = self._key_kind
    if kind <= KEY_DOMAIN:
        if type(key) is str and PyUnicode_IS_ASCII(key):
            text = PyUnicode_AsUTF8AndSize(key, &size)
        elif type(key) is bytes:
            text = PyBytes_AS_STRING(key)
            size = PyBytes_GET_SIZE(key)
        else:
            return 0
        if kind == KEY_WHOLE:
            if size == 0:
                return 0  # refused there
        elif kind == KEY_URL:
            if size > self._hashlength:
                size = self._hashlength
        else:
            if size and text[size - 1] == b'.':
                size -= 1  # the root's dot
            if size == 0:
                return 0  # no domain: the general path says so
            if size > self._hashlength:
                size = self._hashlength
            for n in range(size):  # ASCII letters lowered, as bytes.lower()
                buf[n] = <unsigned char>text[n] + 32 if b'A' <= text[n] <= b'Z' else <unsigned char>text[n]
            text = <const char *>buf
        out[0] = ll_xxh64(text, <size_t>size, self._hash_seed)
        return 1
    if kind == KEY_ONE_IP:
        n = _address_bytes(self, key, buf)
    elif type(key) is not tuple or len(<tuple>key) != 2:
        return 0
    elif kind == KEY_IP_IP:
        n = _address_bytes(self, (<tuple>key)[0], buf)
        if n > 0:
            m = _address_bytes(self, (<tuple>key)[1], buf + n)
            n = n + m if m > 0 else -1
    else:
        n = _address_bytes(self, (<tuple>key)[0], buf)
        port = (<tuple>key)[1]
        p = PyLong_AsLongAndOverflow(port, &overflow) if type(port) is int else -1
        if n > 0 and not overflow and 0 <= p <= 65535:
            buf[n] = <unsigned char>(p >> 8)
            buf[n + 1] = <unsigned char>(p & 0xFF)
            n += 2
        else:
            n = -1
    if n <= 0:
        return 0
    out[0] = ll_xxh64(buf, <size_t>n, self._hash_seed)
    return 1

cdef Py_ssize_t _address_bytes(Engine self, object addr, unsigned char *out) except -2:
    """An exact IPv4Address or IPv6Address as _hash hashes it (a tag byte and the masked
    address; IPv4-mapped IPv6 as IPv4), written to out; its length, or -1: not one."""
    cdef uint32_t v
    cdef uint64_t hi, lo
    cdef const unsigned char *p
    cdef int i
    if type(addr) is _IPv4Address:
        # the stdlib keeps the address as the int int(addr) returns, without int()'s call
        ip = _read_slot(addr, _IPV4_IP_OFFSET) if _IPV4_IP_OFFSET > 0 else getattr(addr, "_ip", None)
        v = (<uint32_t>ip if PyLong_CheckExact(ip) else <uint32_t>int(addr)) & self._v4mask
    elif type(addr) is _IPv6Address:
        ip = _read_slot(addr, _IPV6_IP_OFFSET) if _IPV6_IP_OFFSET > 0 else None
        if PyLong_CheckExact(ip):  # the address's int, in two 64-bit halves
            lo = PyLong_AsUnsignedLongLongMask(ip)
            hi = PyLong_AsUnsignedLongLongMask(ip >> 64)
        else:
            packed = addr.packed
            p = <const unsigned char *>PyBytes_AS_STRING(packed)
            hi = lo = 0
            for i in range(8):
                hi = hi << 8 | p[i]
                lo = lo << 8 | p[8 + i]
        if hi == 0 and lo >> 32 == 0xFFFF:  # IPv4-mapped
            v = <uint32_t>lo & self._v4mask
        else:
            # the first v6len bits kept
            hi &= 0 if self._v6len == 0 else ~(<uint64_t>0) << (64 - self._v6len) if self._v6len < 64 else ~(<uint64_t>0)
            lo &= 0 if self._v6len <= 64 else ~(<uint64_t>0) << (128 - self._v6len) if self._v6len < 128 else ~(<uint64_t>0)
            out[0] = 6
            for i in range(8):
                out[1 + i] = <unsigned char>(hi >> (56 - 8 * i))
                out[9 + i] = <unsigned char>(lo >> (56 - 8 * i))
            return 17
    else:
        return -1
    out[0] = 4
    out[1] = <unsigned char>(v >> 24)
    out[2] = <unsigned char>(v >> 16)
    out[3] = <unsigned char>(v >> 8)
    out[4] = <unsigned char>v
    return 5


# ---- the hash methods' picks and settings, the vserver held ----------------

cdef int64_t _pick_key(Engine self, object names, object key) except -1:
    """select()'s work on a hash method: the key checked and hashed before the clock
    is read, then the rendezvous pick (DOMAINHASH without a domain: _pick)."""
    cdef uint64_t h
    cdef int64_t slot
    if not _fast_key_hash(self, key, &h):
        data = self._key_form(key, self._key_settings)  # checks the key; the rules' one place
        if data is None:
            return self._pick(names)
        h = ll_xxh64(<const char *>data, <size_t>len(<bytes>data), self._hash_seed)
    if names is None:
        slot = ll_select_hash(self._vs, self._tick(), h, NULL, 0)
    else:
        slot = self._pick_excluding(names, h, True)
    if slot < 0:
        self._raise_select(slot)
    return slot


cdef int _hash_names(Engine self, str method) except -1:
    """Before a hash method is set: every bound service's name hash to the C core,
    which keeps them from then on (a vserver that never hashes has none)."""
    cdef Py_ssize_t slot
    if method in _hash.KEY_FORMS:
        for slot in range(len(self._names)):
            name = self._names[slot]
            if name is not None and ll_set_name_hash(self._vs, <uint32_t>slot, _name_hash(name)) < 0:
                raise MemoryError("leastload: cannot allocate the services' name hashes")
    return 0


cdef int _set_key_form(Engine self, str method) except -1:
    self._key_form = _hash.KEY_FORMS.get(method)
    self._method_name = method
    self._key_kind = _KEY_KINDS.get(method, 0)
    self._peak = method == "PEAKEWMA"
    return 0
