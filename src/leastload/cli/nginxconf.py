"""`leastload nginx-conf CONFIG`: nginx `upstream` blocks for the vservers of a config.

One block per `add lb vserver` (NetScaler lines, or TOML when the name ends in
.toml), for ngx_http_upstream_leastload_module (docs/nginx.md): the method, slow
start, the hash length, then one `server` per binding with its weight, `down` for
a DISABLED service. The blocks go inside nginx's `http {}`; a `server {}` that
proxies to each is printed as a comment. An IPv6 address is bracketed; a method
the module cannot feed (LRTM, CUSTOMLOAD, the vendor's methods the engine lacks)
is an error naming the vserver.
"""
from __future__ import annotations

import re
import sys
from typing import List, Optional, Sequence

from ..cmdline import OneLineParser, UserError
from ..config import load
from ..config.model import Config, VServer

# what the module takes (its `leastload METHOD`): the engine's methods that nginx can feed
NGINX_METHODS = ("LEASTCONNECTION", "ROUNDROBIN", "LEASTRESPONSETIME", "LEASTBANDWIDTH", "LEASTPACKETS",
                 "LEASTREQUEST", "SOURCEIPHASH", "DESTINATIONIPHASH", "SRCIPDESTIPHASH", "SRCIPSRCPORTHASH",
                 "URLHASH", "DOMAINHASH")


def upstream_name(vserver: str) -> str:
    """The vserver's name as an nginx upstream name (characters nginx's parser would split on: _)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", vserver)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def upstream_block(config: Config, vs: VServer) -> str:
    if vs.lb_method not in NGINX_METHODS:
        raise UserError(f"lb vserver {vs.name}: -lbMethod {vs.lb_method} is not one the nginx module takes"
                        f" ({', '.join(NGINX_METHODS)})")
    lines: List[str] = [f"upstream {upstream_name(vs.name)} {{", f"    leastload {vs.lb_method};"]
    if vs.new_service_request:
        unit = "percent" if vs.new_service_request_unit == "PERCENT" else "per_second"
        lines.append(f"    leastload_slow_start {vs.new_service_request} {unit}"
                     f" interval={vs.new_service_request_increment_interval};")
    if vs.hash_length is not None:
        lines.append(f"    leastload_hashlength {vs.hash_length};")
    if vs.netmask is not None:
        lines.append(f"    # -netmask {vs.netmask}: not applied (the module hashes its key, $remote_addr, as text)")
    for binding in vs.bindings:
        service = config.service(binding.service)
        if service is None:  # the parser requires services to exist: a backstop
            raise UserError(f"bind lb vserver {vs.name}: no service {binding.service}")
        server = config.server(service.host)
        host = server.address if server is not None else service.host
        weight = config.weight_of(vs, binding)
        down = " down" if service.state != "ENABLED" else ""
        lines.append(f"    server {_address(host, service.port)} weight={weight}{down};  # {service.name}")
    if not vs.bindings:
        raise UserError(f"lb vserver {vs.name}: no services bound (nginx needs a server in each upstream)")
    lines.append("}")
    listen = _address(vs.address or "127.0.0.1", vs.port or 80)
    lines.append(f"# server {{ listen {listen}; location / {{ proxy_pass http://{upstream_name(vs.name)}; }} }}")
    return "\n".join(lines) + "\n"


def nginx_conf(config: Config, only: Optional[str] = None) -> str:
    vservers = [vs for vs in config.vservers if only is None or vs.name == only]
    if only is not None and not vservers:
        raise UserError(f"--vserver {only}: no such lb vserver in {config.source}")
    if not vservers:
        raise UserError(f"{config.source}: no lb vserver to write an upstream for")
    return "\n".join(upstream_block(config, vs) for vs in vservers)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = OneLineParser(prog="leastload nginx-conf", description=(__doc__ or "").splitlines()[0])
    p.add_argument("config", metavar="CONFIG", help="NetScaler CLI lines, or TOML when the name ends in .toml")
    p.add_argument("--vserver", metavar="NAME", help="only this lb vserver's block")
    args = p.parse_args(argv)
    config = load(args.config)
    for warning in config.warnings:
        print(warning, file=sys.stderr)
    blocks = nginx_conf(config, args.vserver)
    print("# load_module .../ngx_http_upstream_leastload_module.so;  (nginx/build.sh prints the line)")
    print(blocks, end="")
    return 0
