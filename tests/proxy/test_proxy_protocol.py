"""The PROXY protocol reader (_proxy_protocol.py): every form of the spec's versions 1 and 2,
fed whole and byte by byte, and every malformed form refused with its reason, as early as
the bytes allow; then properties over random bytes and random splits (Hypothesis;
LEASTLOAD_HYPOTHESIS_EXAMPLES lowers the number of examples, 300 at most)."""

import os
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from leastload.proxy._proxy_protocol import (
    LOCAL, MAX_V2_LENGTH, PROXY, V1_MAX, V2_SIGNATURE, ProxyHeaderReader, ProxyProtocolError, crc32c, parse)

REQUEST = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"


def v2(command=1, family=0x11, block=b"", length=None, version=2):
    return (V2_SIGNATURE + bytes([version << 4 | command, family])
            + struct.pack("!H", len(block) if length is None else length) + block)


def v2_tcp4(src="192.0.2.1", dst="198.51.100.2", sport=56324, dport=443, tlvs=b"", **kw):
    block = socket.inet_pton(socket.AF_INET, src) + socket.inet_pton(socket.AF_INET, dst)
    return v2(block=block + struct.pack("!HH", sport, dport) + tlvs, **kw)


def v2_tcp6(src="2001:db8::1", dst="2001:db8::2", sport=1, dport=65535, tlvs=b""):
    block = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    return v2(family=0x21, block=block + struct.pack("!HH", sport, dport) + tlvs)


def tlv(kind, value):
    return struct.pack("!BH", kind, len(value)) + value


def read_in_pieces(data, step):
    """Feeds `data` `step` bytes at a time: the header (None until it is complete)."""
    reader = ProxyHeaderReader()
    for i in range(0, len(data), step):
        header = reader.feed(data[i:i + step])
        if header is not None:
            return header, i + step
    return None, len(data)


# ---- version 1 --------------------------------------------------------------------------------


@pytest.mark.parametrize("line, family, source, destination", [
    (b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n", "TCP4", ("192.168.0.1", 56324), ("192.168.0.11", 443)),
    (b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", "TCP4",
     ("255.255.255.255", 65535), ("255.255.255.255", 65535)),
    (b"PROXY TCP4 0.0.0.0 10.0.0.1 0 0\r\n", "TCP4", ("0.0.0.0", 0), ("10.0.0.1", 0)),
    (b"PROXY TCP6 2001:db8::1 2001:DB8::2 1 2\r\n", "TCP6", ("2001:db8::1", 1), ("2001:db8::2", 2)),
    (b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ::1 65535 80\r\n", "TCP6",
     ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535), ("::1", 80)),
    (b"PROXY UNKNOWN\r\n", "UNKNOWN", None, None),
    # UNKNOWN: the rest of the line is ignored, whatever it is (the spec's worst case: 107 bytes)
    (b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
     b"65535 65535\r\n", "UNKNOWN", None, None),
    (b"PROXY UNKNOWN whatever it says 99999\r\n", "UNKNOWN", None, None),
])
def test_version_1_forms(line, family, source, destination):
    data = line + REQUEST
    for step in (len(data), 1, 7):
        header, fed = read_in_pieces(data, step)
        assert header is not None
        assert (header.version, header.command, header.family) == (1, PROXY, family)
        assert (header.source, header.destination, header.size) == (source, destination, len(line))
        assert header.rest + data[fed:] == REQUEST  # what came after the header: the client's own


def test_the_longest_version_1_line_is_107_bytes_and_one_more_is_refused():
    longest = b"PROXY UNKNOWN " + b"f" * (V1_MAX - 16) + b"\r\n"
    assert len(longest) == V1_MAX
    assert parse(longest).size == V1_MAX
    too_long = b"PROXY UNKNOWN " + b"f" * (V1_MAX - 15) + b"\r\n"
    with pytest.raises(ProxyProtocolError, match="no CRLF within 107 bytes"):
        parse(too_long)
    # refused once 107 bytes came without a CRLF, not later
    assert parse(too_long[:V1_MAX - 1]) is None
    with pytest.raises(ProxyProtocolError, match="no CRLF within 107"):
        parse(too_long[:V1_MAX])


def test_version_1_waits_for_its_crlf():
    line = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"
    for end in range(len(line)):
        assert parse(line[:end]) is None, line[:end]


@pytest.mark.parametrize("data, reason", [
    (b"GET / HTTP/1.1\r\n\r\n", "no PROXY protocol header"),
    (b"PROXX", "no PROXY protocol header"),
    (b"PROXY\r\n", "no PROXY protocol header"),  # "PROXY" then not a space
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "line feed without a carriage return"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", "carriage return not followed by a line feed"),
    (b"PROXY TCP4 1.2.3.4\n", "line feed without a carriage return"),
    (b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", "unknown protocol b'UDP4'"),
    (b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", "unknown protocol"),
    (b"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", "unknown protocol b''"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "exactly 4 fields"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "exactly 4 fields"),
    (b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", "exactly 4 fields"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", "exactly 4 fields"),
    (b"PROXY TCP4\r\n", "exactly 4 fields"),
    (b"PROXY\tTCP4 1.2.3.4 5.6.7.8 1 2\r\n", "no PROXY protocol header"),
    (b"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", "bad TCP4 source address"),
    (b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", "bad TCP4 source address"),
    (b"PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", "bad TCP4 source address"),
    (b"PROXY TCP4 1.2.3.4 ::1 1 2\r\n", "bad TCP4 destination address"),
    (b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n", "bad TCP6 source address"),
    (b"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", "bad TCP6 source address"),
    (b"PROXY TCP6 [::1] ::1 1 2\r\n", "bad TCP6 source address"),
    (b"PROXY TCP6 ::1 1:2:3:4:5:6:7:8:9 1 2\r\n", "bad TCP6 destination address"),
    (b"PROXY TCP6 ::1 gg::1 1 2\r\n", "bad TCP6 destination address"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", "bad source port"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n", "bad source port"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "bad source port"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n", "bad source port"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n", "bad destination port"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 0x50\r\n", "bad destination port"),
    (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 \r\n", "bad destination port"),
])
def test_malformed_version_1_is_refused_with_its_reason(data, reason):
    with pytest.raises(ProxyProtocolError, match=reason.replace("(", r"\(").replace("[", r"\[")):
        parse(data)


def test_a_bad_start_is_refused_at_the_first_byte_that_shows_it():
    with pytest.raises(ProxyProtocolError, match="no PROXY protocol header"):
        ProxyHeaderReader().feed(b"G")
    reader = ProxyHeaderReader()
    for byte in b"PROX":
        assert reader.feed(bytes([byte])) is None
    with pytest.raises(ProxyProtocolError, match="no PROXY protocol header"):
        reader.feed(b"Z")
    reader = ProxyHeaderReader()
    assert reader.feed(b"PROXY TCP4 1.2.3.4\r") is None
    with pytest.raises(ProxyProtocolError, match="not followed by a line feed"):
        reader.feed(b" ")


# ---- version 2 --------------------------------------------------------------------------------


def test_version_2_tcp4_and_tcp6():
    header = parse(v2_tcp4() + REQUEST)
    assert (header.version, header.command, header.family) == (2, PROXY, "TCP4")
    assert header.source == ("192.0.2.1", 56324) and header.destination == ("198.51.100.2", 443)
    assert header.size == 16 + 12 and header.tlvs == 0
    header = parse(v2_tcp6())
    assert header.family == "TCP6" and header.size == 16 + 36
    assert header.source == ("2001:db8::1", 1) and header.destination == ("2001:db8::2", 65535)


def test_version_2_whole_and_byte_by_byte_give_the_same_header_and_rest():
    data = v2_tcp6(tlvs=tlv(0x02, b"example.com") + tlv(0x04, b"")) + REQUEST
    for step in (1, 3, 16, len(data)):
        reader = ProxyHeaderReader()
        got, fed = None, 0
        while got is None:
            got = reader.feed(data[fed:fed + step])
            fed += step
        assert got.source == ("2001:db8::1", 1) and got.tlvs == 2
        assert got.rest + data[fed:] == REQUEST


def test_version_2_local_uses_the_connection_and_skips_its_block_whatever_it_holds():
    for family, block in ((0x00, b""), (0x11, b"\x01" * 12), (0x21, b"\x7f" * 40), (0x00, b"x" * 5)):
        header = parse(v2(command=0, family=family, block=block) + REQUEST)
        assert (header.command, header.source, header.destination) == (LOCAL, None, None)
        assert header.size == 16 + len(block)


@pytest.mark.parametrize("family, name, size", [
    (0x00, "UNSPEC", 0), (0x12, "UDP4", 12), (0x22, "UDP6", 36), (0x31, "UNIX_STREAM", 216),
    (0x32, "UNIX_DGRAM", 216)])
def test_version_2_families_a_tcp_listener_does_not_take_fall_back_to_the_connection(family, name, size):
    header = parse(v2(family=family, block=b"\x00" * size + tlv(0x05, b"id")))
    assert (header.command, header.family, header.source, header.tlvs) == (PROXY, name, None, 1)


def with_crc(header_with_zero_crc):
    """The header with its CRC32C TLV (4 zero bytes, the last 4 of a TLV 0x03) filled in."""
    at = header_with_zero_crc.index(b"\x03\x00\x04\x00\x00\x00\x00") + 3
    crc = struct.pack("!I", crc32c(header_with_zero_crc))
    return header_with_zero_crc[:at] + crc + header_with_zero_crc[at + 4:]


def test_crc32c_is_castagnolis():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
    assert crc32c(b"") == 0


def test_version_2_tlvs_are_skipped_and_their_bounds_checked():
    header = parse(v2_tcp4(tlvs=tlv(0x01, b"http/1.1") + tlv(0x05, b"\x00" * 4) + tlv(0x20, b"\x01" * 40)))
    assert header.tlvs == 3 and header.source == ("192.0.2.1", 56324)
    with pytest.raises(ProxyProtocolError, match="TLV 0x02 of 10 bytes runs past the header"):
        parse(v2_tcp4(tlvs=struct.pack("!BH", 2, 10) + b"short"))
    with pytest.raises(ProxyProtocolError, match="2 bytes after the last TLV"):
        parse(v2_tcp4(tlvs=tlv(0x04, b"") + b"\x01\x00"))


def test_version_2_crc32c_is_verified():
    good = with_crc(v2_tcp4(tlvs=tlv(0x02, b"example.com") + tlv(0x03, b"\x00" * 4) + tlv(0x04, b"pad")))
    header = parse(good + REQUEST)
    assert header.tlvs == 3 and header.source == ("192.0.2.1", 56324) and header.size == len(good)
    for i in (0, 13, 20, len(good) - 1):  # any byte of the header changed: refused
        bad = bytearray(good)
        bad[i] ^= 0x01
        with pytest.raises(ProxyProtocolError):
            parse(bytes(bad))
    with pytest.raises(ProxyProtocolError, match="CRC32C checksum does not match"):
        parse(v2_tcp4(tlvs=tlv(0x03, b"\x00" * 4)))
    with pytest.raises(ProxyProtocolError, match="CRC32C TLV must be 4 bytes, and one at most"):
        parse(v2_tcp4(tlvs=tlv(0x03, b"\x00" * 5)))
    with pytest.raises(ProxyProtocolError, match="one at most"):
        parse(with_crc(v2_tcp4(tlvs=tlv(0x03, b"\x00" * 4) + tlv(0x03, b"\x01" * 4))))


@pytest.mark.parametrize("data, reason", [
    (v2_tcp4(version=1), "version 1, not 2"),
    (v2_tcp4(version=3), "version 3, not 2"),
    (v2(command=2, block=b"\x00" * 12), "unknown command 2"),
    (v2(command=0xF, block=b"\x00" * 12), "unknown command 15"),
    (v2(family=0x13, block=b"\x00" * 12), "unknown family and transport 0x13"),
    (v2(family=0x41, block=b"\x00" * 12), "unknown family and transport 0x41"),
    (v2(family=0x01, block=b""), "unknown family and transport 0x01"),
    (v2(family=0x11, block=b"\x00" * 11), "TCP4 needs 12 address bytes, the header has 11"),
    (v2(family=0x21, block=b"\x00" * 12), "TCP6 needs 36 address bytes, the header has 12"),
    (v2(family=0x31, block=b"\x00" * 200), "UNIX_STREAM needs 216"),
    (b"\r\n\r\n\x00\r\nQUIZ\n", "no PROXY protocol header"),
    (b"\r\r", "no PROXY protocol header"),
    (v2(length=MAX_V2_LENGTH - 15), f"{MAX_V2_LENGTH + 1} bytes, more than the {MAX_V2_LENGTH} allowed"),
])
def test_malformed_version_2_is_refused_with_its_reason(data, reason):
    with pytest.raises(ProxyProtocolError, match=reason):
        parse(data)


def test_version_2_is_refused_at_the_byte_that_shows_it():
    # a bad version at the 13th byte, a bad family at the 14th: no need to wait for the length
    with pytest.raises(ProxyProtocolError, match="version 1"):
        parse(V2_SIGNATURE + b"\x11")
    with pytest.raises(ProxyProtocolError, match="unknown family"):
        parse(V2_SIGNATURE + b"\x21\x55")
    # an oversized length at the 16th byte, before any of its block arrives
    with pytest.raises(ProxyProtocolError, match="more than the 300 allowed"):
        ProxyHeaderReader(max_v2_length=300).feed(V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", 285))
    assert ProxyHeaderReader(max_v2_length=300).feed(V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", 284)) is None


def test_a_truncated_header_is_never_complete():
    for data in (v2_tcp4(), v2_tcp6(tlvs=tlv(1, b"h2")), v2(command=0, block=b"abc"),
                 b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n", b"PROXY UNKNOWN\r\n"):
        for end in range(len(data)):
            assert parse(data[:end]) is None, (data, end)
        assert parse(data) is not None


def test_the_reader_refuses_a_bad_bound_and_a_second_header():
    for bad in (0, 231, 16 + 65536, "1024", 2048.0, True):
        with pytest.raises(ValueError, match="max_v2_length: must be an integer from 232 to 65551"):
            ProxyHeaderReader(max_v2_length=bad)
    reader = ProxyHeaderReader()
    assert reader.feed(b"PROXY UNKNOWN\r\n").rest == b""
    with pytest.raises(RuntimeError, match="already read"):
        reader.feed(b"GET")


# ---- properties: any bytes, any split ---------------------------------------------------------

EXAMPLES = min(300, int(os.environ.get("LEASTLOAD_HYPOTHESIS_EXAMPLES", "300")))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(data):
    """parse()'s answer as plain data: ("need",), ("error", reason) or ("header", fields...)."""
    try:
        h = parse(data)
    except ProxyProtocolError as exc:
        return error(exc)
    if h is None:
        return ("need",)
    return ("header", h.version, h.command, h.family, h.source, h.destination, h.size, h.tlvs)


def error(exc):
    """A refusal's reason, less the bytes it quotes of what had come (a split may show fewer)."""
    return ("error", str(exc).split(": the connection starts with")[0])


# bytes that start like a header often enough to reach every branch
starts = st.sampled_from([b"", b"PROXY ", b"PROXY TCP4 ", b"PROXY TCP6 ", b"PROXY UNKNOWN", V2_SIGNATURE,
                          V2_SIGNATURE + b"\x21\x11\x00\x0c", V2_SIGNATURE + b"\x20\x00\x00\x00"])


@PROPERTY
@given(starts, st.binary(max_size=300))
def test_any_bytes_give_a_header_a_wait_or_a_refusal_never_anything_else(start, tail):
    result = outcome(start + tail)  # any other exception fails the test
    if result[0] == "header":
        assert 0 < result[6] <= len(start + tail)


@PROPERTY
@given(starts, st.binary(max_size=200), st.lists(st.integers(1, 40), max_size=20))
def test_a_split_never_changes_the_answer(start, tail, cuts):
    """Fed in pieces, the reader ends as parse() on the whole does: the same header (and the
    same rest), or a refusal at the latest when the bytes that show it arrive."""
    data = start + tail
    whole = outcome(data)
    reader, fed, got = ProxyHeaderReader(), 0, ("need",)
    pieces = []
    for cut in cuts:
        pieces.append(data[fed:fed + cut])
        fed += cut
    pieces.append(data[fed:])
    arrived = 0
    for piece in pieces:
        arrived += len(piece)
        try:
            header = reader.feed(piece)
        except ProxyProtocolError as exc:
            got = error(exc)
            break
        if header is not None:
            got = ("header", header.version, header.command, header.family, header.source, header.destination,
                   header.size, header.tlvs)
            assert header.rest == data[header.size:arrived]  # what came after it, kept for the protocol
            break
    assert got == whole


addresses4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
addresses6 = st.binary(min_size=16, max_size=16).map(lambda b: socket.inet_ntop(socket.AF_INET6, b))
ports = st.integers(0, 65535)


@PROPERTY
@given(st.sampled_from(["TCP4", "TCP6"]), st.data(), ports, ports, st.booleans())
def test_every_valid_header_reads_back_what_it_says(family, data, sport, dport, binary):
    draw = addresses4 if family == "TCP4" else addresses6
    src, dst = data.draw(draw), data.draw(draw)
    if binary:
        af = socket.AF_INET if family == "TCP4" else socket.AF_INET6
        block = socket.inet_pton(af, src) + socket.inet_pton(af, dst) + struct.pack("!HH", sport, dport)
        header = v2(family=0x11 if family == "TCP4" else 0x21, block=block)
    else:
        header = f"PROXY {family} {src} {dst} {sport} {dport}\r\n".encode()
    got = parse(header + REQUEST)
    assert (got.family, got.source, got.destination, got.size) == (family, (src, sport), (dst, dport), len(header))
