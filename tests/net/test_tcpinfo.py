"""Packets from TCP_INFO (Linux) and the estimate used elsewhere; backend specs."""

import socket
import sys

import pytest

from leastload.net import tcpinfo
from leastload.net import upstream
from servers import exchange_over, tcp_pair

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TCP_INFO segment counters are Linux's")


@pytest.fixture
def connected_pair():
    client, peer = tcp_pair()
    yield client, peer
    for s in (client, peer):
        s.close()


@linux_only
def test_segments_count_what_the_connection_sent_and_received(connected_pair):
    client, peer = connected_pair
    first = tcpinfo.read_segments(client)
    assert first is not None and first[0] >= 1 and first[1] >= 1  # the handshake
    counter = tcpinfo.SegmentCounter(client)
    assert counter.exact
    exchange_over(client, peer, 100)
    small = counter.take()
    assert small >= 2  # at least the request out and the answer in
    exchange_over(client, peer, 2_000_000)
    large = counter.take()
    assert large > small  # a 2 MB answer takes more segments than 100 bytes
    assert counter.take() >= 0
    in_now, out_now = tcpinfo.read_segments(client)
    assert in_now >= first[0] + 2 and out_now >= first[1] + 1


@linux_only
def test_from_start_charges_the_handshake(connected_pair):
    client, peer = connected_pair
    fresh = tcpinfo.SegmentCounter(client, from_start=True)
    assert fresh.take() == sum(tcpinfo.read_segments(client))


def test_counters_wrap_modulo_2_to_the_32(connected_pair):
    client, _ = connected_pair
    counter = tcpinfo.SegmentCounter(client)
    if not counter.exact:
        pytest.skip("no TCP_INFO segment counters on this system")
    now_in, now_out = tcpinfo.read_segments(client)
    counter.last = ((now_in - 3) % 2**32, (now_out + 2**32 - 5) % 2**32)  # as if the counters had wrapped
    assert counter.take() == 3 + 5


def test_sockets_without_tcp_info_fall_back_to_the_estimate():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert tcpinfo.read_segments(udp) is None
        counter = tcpinfo.SegmentCounter(udp)
        assert not counter.exact
        assert counter.take(sent=100, received=3000) == 1 + 3  # MSS 1448: 100 B -> 1, 3000 B -> 3
    assert tcpinfo.read_segments(None) is None


def test_estimate_is_one_segment_per_mss_each_way():
    assert tcpinfo.estimate_packets(0, 0) == 0
    assert tcpinfo.estimate_packets(1, 0) == 1
    assert tcpinfo.estimate_packets(1448, 1449) == 1 + 2
    assert tcpinfo.estimate_packets(10_000, 0, mss=1000) == 10


# ---- backend specs ----------------------------------------------------------------------


def test_backend_specs_parse_names_hosts_ports_weights():
    assert upstream.parse_backend("app1=10.0.0.1:8080") == upstream.Backend("app1", "10.0.0.1", 8080, 1)
    assert upstream.parse_backend("b=[::1]:81:7") == upstream.Backend("b", "::1", 81, 7)
    assert upstream.parse_backends({"x": "h:1:2"}) == [upstream.Backend("x", "h", 1, 2)]
    assert str(upstream.Backend("a", "h", 1, 3)) == "a=h:1:3"


@pytest.mark.parametrize("bad, message", [
    ("nonsense", "NAME=HOST:PORT"),
    ("a=host", "NAME=HOST:PORT"),
    ("a=host:0", "port must be in 1..65535, got 0"),
    ("a=host:70000", "port must be in 1..65535, got 70000"),
    ("a=host:80:0", "weight must be in 1..100, got 0"),
    ("a=host:80:101", "weight must be in 1..100, got 101"),
    ("=host:80", "NAME=HOST:PORT"),
])
def test_bad_backend_specs_name_the_text(bad, message):
    with pytest.raises(ValueError, match=message) as info:
        upstream.parse_backend(bad)
    assert repr(bad) in str(info.value)


def test_backend_lists_must_be_non_empty_unique_lists():
    with pytest.raises(ValueError, match="at least one"):
        upstream.parse_backends([])
    with pytest.raises(ValueError, match="unique, got 'a' twice"):
        upstream.parse_backends(["a=h:1", "a=h:2"])
    with pytest.raises(TypeError, match="a list"):
        upstream.parse_backends("a=h:1")
    with pytest.raises(TypeError, match="backend must be a str"):
        upstream.parse_backend(42)


def test_make_vserver_binds_before_slow_start(impl):
    vs = upstream.make_vserver(upstream.parse_backends(["a=h:1", "b=h:2:3"]), "ROUNDROBIN",
                               engine=impl.VirtualServer, new_service_request=5)
    assert vs.services == ("a", "b") and vs.weight("b") == 3
    assert vs.new_service_request == 5
    assert vs.slow_start("a") is None and vs.slow_start("b") is None  # present at start: full share
    vs.bind("c")
    assert vs.slow_start("c") is not None  # a later one ramps
