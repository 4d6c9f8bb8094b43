"""leastload.net.request_keys: which value of a request each hash method picks by."""
import ipaddress

import pytest

from leastload.engine.methods import TABLE
from leastload.net.request_keys import KeyRule, MissingKey, host_name, ip_or_none, split_target


class View:
    def __init__(self, target=b"/", headers=(), source=("10.0.0.7", 5060), destination="192.0.2.1"):
        self.target = target
        self.headers = [(k.lower(), v) for k, v in headers]
        self.source_ip = ip_or_none(source[0]) if source else None
        self.source_port = source[1] if source else None
        self.destination_ip = ip_or_none(destination)

    def header(self, name):
        return next((v for k, v in self.headers if k == name), None)


def test_every_hash_method_has_a_rule_and_no_other_method_gets_a_key():
    rule = KeyRule("x-token")
    view = View(b"/a?b", [(b"Host", b"h"), (b"Call-ID", b"c"), (b"X-Token", b"t")])
    for m in TABLE:
        key = rule.key(m.name, view)
        assert (key is not None) == (m.family == "hash"), m.name


def test_each_method_reads_its_part_of_the_request():
    rule = KeyRule("X-Token")
    view = View(b"/cart?id=3", [(b"Host", b"Shop.example:8443"), (b"call-id", b" a84b4c76e66710 "),
                                (b"x-token", b"abc")])
    src, dst = ipaddress.ip_address("10.0.0.7"), ipaddress.ip_address("192.0.2.1")
    assert rule.key("SOURCEIPHASH", view) == src
    assert rule.key("DESTINATIONIPHASH", view) == dst
    assert rule.key("SRCIPDESTIPHASH", view) == (src, dst)
    assert rule.key("SRCIPSRCPORTHASH", view) == (src, 5060)
    assert rule.key("URLHASH", view) == b"/cart?id=3"
    assert rule.key("DOMAINHASH", view) == b"Shop.example"  # the engine lowers the letters
    assert rule.key("CALLIDHASH", view) == b"a84b4c76e66710"
    assert rule.key("TOKEN", view) == b"abc"


def test_what_is_missing():
    rule = KeyRule("x-token")
    bare = View(b"/")
    assert rule.key("DOMAINHASH", bare) is None  # LEASTCONNECTION's pick
    with pytest.raises(MissingKey, match="Call-ID"):
        rule.key("CALLIDHASH", bare)
    assert rule.key("TOKEN", bare) == "10.0.0.7"  # no token: the client's address, as text
    assert rule.key("TOKEN", View(b"/", [(b"x-token", b"  ")])) == "10.0.0.7"  # a blank token is none
    assert KeyRule().key("TOKEN", View(b"/", [(b"x-token", b"t")])) == "10.0.0.7"  # no header named
    nowhere = View(b"/", source=None, destination=None)
    for method in ("SOURCEIPHASH", "DESTINATIONIPHASH", "SRCIPDESTIPHASH", "SRCIPSRCPORTHASH", "TOKEN"):
        with pytest.raises(MissingKey, match=method):
            rule.key(method, nowhere)


@pytest.mark.parametrize("target, path, authority", [
    (b"/a?b", b"/a?b", None), (b"*", b"*", None), (b"http://h:81/a?b", b"/a?b", b"h:81"),
    (b"http://h", b"/", b"h"), (b"http://h?q=1", b"/?q=1", b"h"), (b"https://u:p@h/x", b"/x", b"h"),
])
def test_split_target(target, path, authority):
    assert split_target(target) == (path, authority)


@pytest.mark.parametrize("authority, name", [
    (b"example.com", b"example.com"), (b"example.com:8080", b"example.com"), (b"[2001:db8::1]:80", b"2001:db8::1"),
    (b"[::1]", b"::1"), (b"host:", b"host"), (b"", None), (None, None), (b":80", None),
])
def test_host_name(authority, name):
    assert host_name(authority) == name


def test_token_header_is_checked():
    assert KeyRule("X-Session").token_header == b"x-session"
    for bad in ("", "X Session", "a:b", 5):
        with pytest.raises(ValueError, match="token_header"):
            KeyRule(bad)


def test_addresses_of_sockets():
    assert ip_or_none("::ffff:10.0.0.1") == ipaddress.ip_address("::ffff:10.0.0.1")
    assert ip_or_none("fe80::1%eth0") == ipaddress.ip_address("fe80::1")
    assert ip_or_none("/run/app.sock") is None and ip_or_none(None) is None
