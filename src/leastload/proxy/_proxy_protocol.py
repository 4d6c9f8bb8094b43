"""The PROXY protocol's header (versions 1 and 2) as a listener reads it: bytes in, no I/O.

An L4 balancer in front of the proxy (HAProxy's `send-proxy` / `send-proxy-v2`, an
AWS NLB, ...) writes one header before the client's first byte, naming the client it
relayed. `ProxyHeaderReader().feed(data)` takes the connection's bytes as they arrive and
answers None (a correct start: send more), a `ProxyHeader` (the header is complete; the
bytes after it, the client's own, are in `.rest`), or raises `ProxyProtocolError` with the
reason (the connection is to be closed). A wrong start, a lone CR or LF, a bad version,
command or family byte and an oversized header are refused at the byte that shows them; a
version 1 line's fields are read once its CRLF has come (the spec's rule: decode a complete
line only). It never holds more than a header's worth:

    version 1   one line of text, `PROXY TCP4|TCP6|UNKNOWN ...\\r\\n`, at most 107 bytes with its
                CRLF; a lone CR or LF refused at once; addresses in canonical form (IPv4 without
                leading zeroes, IPv6 without a zone), ports 0..65535 without leading zeroes;
                UNKNOWN's rest of line ignored, as the spec says
    version 2   a 16-byte header (12-byte signature, version 2, command LOCAL or PROXY, family
                and transport, length) and `length` bytes more, refused at the 16th byte when
                16 + length exceeds `max_v2_length`; TCP over IPv4 or IPv6 gives the address,
                LOCAL, UNSPEC, UDP and UNIX fall back to the connection's own (`source` None),
                TLVs are read for their form (each within the block) and skipped, but for
                PP2_TYPE_CRC32C, whose checksum of the header is verified (the spec's MUST for a
                receiver that knows the type)

`ProxyHeader.source` is the client's (host, port), or None where the spec says to use the
connection's real endpoints (LOCAL, UNKNOWN, UNSPEC, and the families a TCP listener does
not take: UDP, UNIX).
"""

import re
import socket
import struct
from typing import Optional, Tuple

V1_MAX = 107                    # the longest version 1 line, CRLF included (the spec's worst case)
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V2_HEADER = 16                  # signature, version and command, family and transport, length
MAX_V2_LENGTH = 16 + 2048       # a v2 header's default bound (addresses 216 bytes at most, TLVs the rest)
V1_PREFIX = b"PROXY "

LOCAL, PROXY = "LOCAL", "PROXY"

# version 2's family and transport byte: (family name, address block size, whether it carries
# a TCP address the listener takes); the spec's valid combinations, any other byte is refused
_V2_FAMILIES = {
    0x00: ("UNSPEC", 0, False),
    0x11: ("TCP4", 12, True), 0x12: ("UDP4", 12, False),
    0x21: ("TCP6", 36, True), 0x22: ("UDP6", 36, False),
    0x31: ("UNIX_STREAM", 216, False), 0x32: ("UNIX_DGRAM", 216, False),
}

_V4 = re.compile(rb"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\Z")
_V6_CHARS = re.compile(rb"[0-9A-Fa-f:.]{2,45}\Z")
_PORT = re.compile(rb"(0|[1-9][0-9]{0,4})\Z")

Address = Tuple[str, int]


class ProxyProtocolError(ValueError):
    """A header that is not the PROXY protocol's; the message says what is wrong."""


class ProxyHeader:
    """A complete header: `version` 1 or 2, `command` "PROXY" or "LOCAL" (version 1 has only
    PROXY), `family` as sent ("TCP4", "TCP6", "UNKNOWN" for version 1; "TCP4", "TCP6", "UDP4",
    "UDP6", "UNIX_STREAM", "UNIX_DGRAM", "UNSPEC" for version 2), `source` and `destination`
    as (host, port) or None (use the connection's own), `size` its bytes on the wire, `tlvs`
    how many TLVs version 2 carried (skipped)."""

    __slots__ = ("version", "command", "family", "source", "destination", "size", "tlvs", "rest")

    def __init__(self, version: int, command: str, family: str, source: Optional[Address],
                 destination: Optional[Address], size: int, tlvs: int = 0) -> None:
        self.version, self.command, self.family = version, command, family
        self.source, self.destination, self.size, self.tlvs = source, destination, size, tlvs
        self.rest = b""  # the bytes after the header that came with it (the reader sets them)

    def __repr__(self) -> str:
        return (f"ProxyHeader(version={self.version}, command={self.command!r}, family={self.family!r}, "
                f"source={self.source!r}, destination={self.destination!r}, size={self.size}, tlvs={self.tlvs})")


def parse(data: bytes, max_v2_length: int = MAX_V2_LENGTH) -> Optional[ProxyHeader]:
    """The header at the start of `data`: None while `data` is a correct beginning of one,
    else the header (its `size` bytes of `data`); raises ProxyProtocolError at the first
    byte that cannot belong to one."""
    if not data:
        return None
    if data[0] == V2_SIGNATURE[0]:
        return _parse_v2(data, max_v2_length)
    if data[0] == V1_PREFIX[0]:
        return _parse_v1(data)
    raise ProxyProtocolError(f"no PROXY protocol header: the connection starts with {bytes(data[:8])!r}")


def check_max_v2_length(value: object) -> int:
    """A bound of version 2 headers: room for the largest address block (UNIX's), at most
    what the length field can say."""
    if not isinstance(value, int) or isinstance(value, bool) or not V2_HEADER + 216 <= value <= V2_HEADER + 0xFFFF:
        raise ValueError(f"max_v2_length: must be an integer from {V2_HEADER + 216} to "
                         f"{V2_HEADER + 0xFFFF}, got {value!r}")
    return value


class ProxyHeaderReader:
    """Collects a connection's first bytes until its header is complete (parse() on them)."""

    __slots__ = ("buffer", "max_v2_length", "header")

    def __init__(self, max_v2_length: int = MAX_V2_LENGTH) -> None:
        self.buffer = b""
        self.max_v2_length = check_max_v2_length(max_v2_length)
        self.header: Optional[ProxyHeader] = None

    def feed(self, data: bytes) -> Optional[ProxyHeader]:
        """None: more bytes are needed. The header once complete (`.rest`: the bytes after it).
        Raises ProxyProtocolError; feeding after the header is an error of the caller's."""
        if self.header is not None:
            raise RuntimeError("the PROXY header was already read")
        self.buffer += data
        header = parse(self.buffer, self.max_v2_length)
        if header is not None:
            header.rest = self.buffer[header.size:]
            self.buffer = b""
            self.header = header
        return header


# ---- version 1 ------------------------------------------------------------------------------


def _parse_v1(data: bytes) -> Optional[ProxyHeader]:
    start = bytes(data[:len(V1_PREFIX)])
    if not V1_PREFIX.startswith(start):
        raise ProxyProtocolError(f"no PROXY protocol header: the connection starts with {bytes(data[:8])!r}")
    window = bytes(data[:V1_MAX])
    cr = window.find(b"\r")
    lf = window.find(b"\n")
    if lf >= 0 and (cr < 0 or lf < cr):
        raise ProxyProtocolError("PROXY v1: a line feed without a carriage return before it")
    if cr < 0:
        if len(window) >= V1_MAX:
            raise ProxyProtocolError(f"PROXY v1: no CRLF within {V1_MAX} bytes")
        return None
    if cr + 1 == len(window):
        if cr + 1 >= V1_MAX:
            raise ProxyProtocolError(f"PROXY v1: no CRLF within {V1_MAX} bytes")
        return None  # the LF may follow
    if window[cr + 1] != 0x0A:
        raise ProxyProtocolError("PROXY v1: a carriage return not followed by a line feed")
    line = window[:cr]
    size = cr + 2
    words = line.split(b" ")
    if len(words) < 2 or words[0] != b"PROXY":
        raise ProxyProtocolError(f"PROXY v1: not a PROXY line: {line!r}")
    family = words[1]
    if family == b"UNKNOWN":  # the rest of the line is ignored (the spec's rule)
        return ProxyHeader(1, PROXY, "UNKNOWN", None, None, size)
    if family not in (b"TCP4", b"TCP6"):
        raise ProxyProtocolError(f"PROXY v1: unknown protocol {family!r} (TCP4, TCP6 or UNKNOWN)")
    if len(words) != 6:
        raise ProxyProtocolError(f"PROXY v1: {family.decode()} needs exactly 4 fields after it, "
                                 f"single spaces between: {line!r}")
    check = _v4 if family == b"TCP4" else _v6
    source = (check(words[2], "source"), _port(words[4], "source"))
    destination = (check(words[3], "destination"), _port(words[5], "destination"))
    return ProxyHeader(1, PROXY, family.decode(), source, destination, size)


def _v4(text: bytes, which: str) -> str:
    match = _V4.match(text)
    if match is None or any(int(part) > 255 for part in match.groups()):
        raise ProxyProtocolError(f"PROXY v1: bad TCP4 {which} address {text!r}")
    return text.decode("ascii")


def _v6(text: bytes, which: str) -> str:
    if _V6_CHARS.match(text) is None:  # no zone (%eth0), no brackets, nothing but the address
        raise ProxyProtocolError(f"PROXY v1: bad TCP6 {which} address {text!r}")
    try:  # the C library's reading, and its canonical form back (a few times faster than the ipaddress module)
        return socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, text.decode("ascii")))
    except (OSError, ValueError):
        raise ProxyProtocolError(f"PROXY v1: bad TCP6 {which} address {text!r}") from None


def _port(text: bytes, which: str) -> int:
    if _PORT.match(text) is None or int(text) > 65535:
        raise ProxyProtocolError(f"PROXY v1: bad {which} port {text!r} (0..65535, no leading zeroes)")
    return int(text)


# ---- version 2 ------------------------------------------------------------------------------


def _parse_v2(data: bytes, max_length: int) -> Optional[ProxyHeader]:
    seen = bytes(data[:len(V2_SIGNATURE)])
    if not V2_SIGNATURE.startswith(seen):
        raise ProxyProtocolError(f"no PROXY protocol header: the connection starts with {bytes(data[:8])!r}")
    if len(data) > 12 and data[12] >> 4 != 2:
        raise ProxyProtocolError(f"PROXY v2: version {data[12] >> 4}, not 2")
    if len(data) > 12 and data[12] & 0x0F > 1:
        raise ProxyProtocolError(f"PROXY v2: unknown command {data[12] & 0x0F} (0 LOCAL, 1 PROXY)")
    if len(data) > 13 and data[13] not in _V2_FAMILIES:
        raise ProxyProtocolError(f"PROXY v2: unknown family and transport 0x{data[13]:02x}")
    if len(data) < V2_HEADER:
        return None
    (length,) = struct.unpack_from("!H", data, 14)
    size = V2_HEADER + length
    if size > max_length:
        raise ProxyProtocolError(f"PROXY v2: a header of {size} bytes, more than the {max_length} allowed")
    if len(data) < size:
        return None
    command = LOCAL if data[12] & 0x0F == 0 else PROXY
    family, needed, tcp = _V2_FAMILIES[data[13]]
    if command == LOCAL:  # the block is skipped whole, its family ignored (the spec's rule)
        return ProxyHeader(2, LOCAL, family, None, None, size)
    if length < needed:
        raise ProxyProtocolError(f"PROXY v2: {family} needs {needed} address bytes, the header has {length}")
    block = bytes(data[V2_HEADER:size])
    tlvs, crc_at = _read_tlvs(block, needed)
    if crc_at is not None:
        _check_crc32c(bytes(data[:size]), V2_HEADER + crc_at)
    if not tcp:
        return ProxyHeader(2, PROXY, family, None, None, size, tlvs)
    if family == "TCP4":
        src, dst, sport, dport = struct.unpack_from("!4s4sHH", block)
        return ProxyHeader(2, PROXY, family, (socket.inet_ntop(socket.AF_INET, src), sport),
                           (socket.inet_ntop(socket.AF_INET, dst), dport), size, tlvs)
    src, dst, sport, dport = struct.unpack_from("!16s16sHH", block)
    return ProxyHeader(2, PROXY, family, (socket.inet_ntop(socket.AF_INET6, src), sport),
                       (socket.inet_ntop(socket.AF_INET6, dst), dport), size, tlvs)


def _read_tlvs(block: bytes, offset: int) -> Tuple[int, Optional[int]]:
    """The TLVs after the addresses, each checked to lie within the block: how many, and where
    in the block a CRC32C TLV's value is (None: there is none)."""
    count, crc_at = 0, None
    while offset < len(block):
        if len(block) - offset < 3:
            raise ProxyProtocolError(f"PROXY v2: {len(block) - offset} bytes after the last TLV, "
                                     "too few for another")
        kind, length = struct.unpack_from("!BH", block, offset)
        if kind == _CRC32C:
            if length != 4 or crc_at is not None:
                raise ProxyProtocolError("PROXY v2: a CRC32C TLV must be 4 bytes, and one at most")
            crc_at = offset + 3
        offset += 3 + length
        if offset > len(block):
            raise ProxyProtocolError(f"PROXY v2: TLV 0x{kind:02x} of {length} bytes runs past the header")
        count += 1
    return count, crc_at


_CRC32C = 0x03


def _crc32c_table() -> Tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli's polynomial, reflected
        table.append(c)
    return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc, table = 0xFFFFFFFF, _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _check_crc32c(header: bytes, at: int) -> None:
    """The header's checksum, computed with the checksum's own 4 bytes as zeroes (the spec's way)."""
    (sent,) = struct.unpack_from("!I", header, at)
    if crc32c(header[:at] + b"\0\0\0\0" + header[at + 4:]) != sent:
        raise ProxyProtocolError("PROXY v2: the CRC32C checksum does not match the header")
