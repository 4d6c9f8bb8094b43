"""The runtime API: its commands (Control), the admin port's token, and `leastload ctl`.

Real backend processes and real sockets on 127.0.0.1 for what goes over
the network; every wait bounded.
"""

import asyncio
import collections
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import httpx
import pytest

from leastload.proxy import Proxy
from leastload.proxy._control import Control
from servers import run_loop, start_backend


def proxies(**more):
    web = Proxy(["a=127.0.0.1:1", "b=127.0.0.1:2"], "ROUNDROBIN", listen=("127.0.0.1", 0), health_check="none", name="web",
                **more)
    api = Proxy(["b=127.0.0.1:2", "c=127.0.0.1:3:2"], listen=("127.0.0.1", 0), health_check="none", name="api",
                **more)
    return {"web": web, "api": api}


def test_disable_and_enable_a_service_in_every_vserver_that_binds_it():
    site = proxies()
    control = Control(site)
    status, answer = control.run(["disable", "service", "b"])
    assert status == 200 and answer["ok"] and answer["vservers"] == ["web", "api"] and answer["delay"] == 0
    assert site["web"].vserver.state("b") == site["api"].vserver.state("b") == "OUT_OF_SERVICE"
    assert {site["web"].vserver.select() for _ in range(10)} == {"a"}  # no new picks of b, at once
    status, answer = control.run(["enable", "service", "b"])
    assert status == 200 and site["web"].vserver.state("b") == "UP"
    assert {site["web"].vserver.select() for _ in range(10)} == {"a", "b"}
    assert control.run(["disable", "service", "b", "30"])[1]["delay"] == 30


def test_weights_binds_and_drains():
    site = proxies(new_service_request=5)
    control = Control(site)
    assert control.run(["set", "service", "b", "-weight", "7"])[0] == 200
    assert site["web"].vserver.weight("b") == site["api"].vserver.weight("b") == 7
    assert control.run(["add", "service", "d", "127.0.0.1", "HTTP", "4"])[0] == 200
    status, answer = control.run(["bind", "lb", "vserver", "web", "d", "-weight", "3"])
    assert status == 200 and answer["slow_start"] is True  # a new service under the vserver's slow start
    assert site["web"].vserver.weight("d") == 3 and site["web"].vserver.slow_start("d") is not None
    assert control.run(["bind", "lb", "vserver", "api", "a"])[0] == 200  # a service another vserver has
    assert site["api"].vserver.services == ("b", "c", "a")
    assert control.run(["unbind", "lb", "vserver", "web", "d"])[0] == 200
    assert "d" not in site["web"].vserver  # nothing in flight: unbound at once
    assert control.run(["drain", "service", "a"])[1]["vservers"] == ["web", "api"]
    assert "a" not in site["web"].vserver and "a" not in site["api"].vserver


def test_show_and_stat():
    site = proxies()
    control = Control(site)
    status, answer = control.run(["show", "lb", "vserver", "api"])
    assert status == 200 and list(answer["vservers"]) == ["api"]
    assert [s["name"] for s in answer["vservers"]["api"]["services"]] == ["b", "c"]
    assert set(control.run(["show", "lb", "vserver"])[1]["vservers"]) == {"web", "api"}
    assert Control.is_read(["show", "lb", "vserver"]) and not Control.is_read(["disable", "service", "a"])


@pytest.mark.parametrize("words, status, says", [
    (["disable", "service", "nosuch"], 404, "service 'nosuch' is not bound to any lb vserver"),
    (["disable", "service", "b", "soon"], 400, "DELAY must be whole seconds in 0..86400, got 'soon'"),
    (["set", "service", "b", "-weight", "101"], 400, "weight must be a whole number in 1..100, got '101'"),
    (["set", "service", "b", "-weight"], 400, "usage: set service NAME -weight W"),
    (["bind", "lb", "vserver", "nosuch", "a"], 404, "no lb vserver 'nosuch' (there are: web, api)"),
    (["bind", "lb", "vserver", "web", "zz"], 404, "no service 'zz': add service zz IP HTTP PORT first"),
    (["bind", "lb", "vserver", "web", "a"], 400, "service 'a' is bound to 'web' already"),
    (["add", "service", "a", "127.0.0.1", "HTTP", "9"], 400, "service 'a' exists already"),
    (["add", "service", "e", "127.0.0.1", "TCP", "9"], 400, "the proxy forwards HTTP, got 'TCP'"),
    (["add", "service", "e", "127.0.0.1", "HTTP", "99999"], 400, "port must be in 1..65535"),
    (["unbind", "lb", "vserver", "web", "c"], 404, "service 'c' is not bound to lb vserver 'web'"),
    (["reboot"], 400, "unknown command 'reboot'"),
])
def test_a_wrong_command_says_what_and_changes_nothing(words, status, says):
    site = proxies()
    before = {name: (p.vserver.services, [p.vserver.weight(s) for s in p.vserver.services],
                     [p.vserver.state(s) for s in p.vserver.services]) for name, p in site.items()}
    got, answer = Control(site).run(words)
    assert got == status and answer["ok"] is False and says in answer["error"]
    after = {name: (p.vserver.services, [p.vserver.weight(s) for s in p.vserver.services],
                    [p.vserver.state(s) for s in p.vserver.services]) for name, p in site.items()}
    assert after == before
