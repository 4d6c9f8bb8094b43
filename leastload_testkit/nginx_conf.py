"""nginx.conf for a proxy on 127.0.0.1 in front of one upstream block: the one writer that
tests/nginx (nginxrun.py) and benchmarks/nginx_compare.py both use.

nginx runs in the foreground with a master and `workers` workers (or alone), every path under
`directory`, no access log; one server listens on 127.0.0.1:`port` and proxies `/` to the
upstream with HTTP/1.1 to the backends (kept alive when the block has `keepalive`).
"""
from typing import Iterable, Optional

TEMPLATE = """\
{load_module}daemon off;
master_process {master};
worker_processes {workers};
{rlimit}pid {dir}/nginx.pid;
error_log {dir}/error.log {error_level};
events {{ worker_connections {worker_connections}; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{upstream}
    server {{
        listen 127.0.0.1:{port}{listen};
        location / {{
            proxy_pass http://{upstream_name};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
{location}        }}
    }}
}}
"""


def upstream_block(name: str, servers: Iterable[str], *lines: str) -> str:
    """An upstream block: `servers` are "127.0.0.1:PORT weight=N" strings, `lines` the directives
    (without their ";"), written before the servers."""
    body = "".join(f"        {line};\n" for line in lines)
    body += "".join(f"        server {s};\n" for s in servers)
    return f"    upstream {name} {{\n{body}    }}\n"


def nginx_conf(directory: str, port: int, upstream_name: str, upstream: str, workers: int = 1,
               module: Optional[str] = None, error_level: str = "notice", worker_connections: int = 1024,
               rlimit_nofile: Optional[int] = None, listen: str = "", location: Iterable[str] = (),
               master_process: bool = True) -> str:
    """The configuration's text. `upstream` is an upstream_block() named `upstream_name`;
    `module` a .so to load_module; `listen` what follows the address on the listen line
    (" reuseport", " backlog=4096"); `location` more directives of the location (without ";");
    without `master_process`, one process serves (`workers` is then ignored by nginx)."""
    return TEMPLATE.format(
        load_module=f"load_module {module};\n" if module else "", master="on" if master_process else "off",
        workers=workers,
        rlimit=f"worker_rlimit_nofile {rlimit_nofile};\n" if rlimit_nofile else "", dir=directory,
        error_level=error_level, worker_connections=worker_connections, upstream=upstream, port=port,
        listen=listen, upstream_name=upstream_name,
        location="".join(f"            {line};\n" for line in location))
