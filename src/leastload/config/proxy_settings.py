"""The proxy's own settings, once: one row per setting (as engine/settings.py is for the vserver's).

Each row says the setting's name (the Proxy keyword, or the command's own setting
when `keyword` is False), its kind and bounds, its default, its `leastload proxy`
flag, its key in the TOML form's [proxy] table, the NetScaler word that says the
same where there is one, and the flag's help. What derives from it:

- Proxy.__init__ checks its keywords with check() (TypeError / ValueError naming
  the argument and the value);
- proxy/_cli.py makes the flags of each group from the rows (type, bounds,
  choices, default, help);
- the TOML form checks its [proxy] keys with the same kinds and bounds
  (config/toml_form.py), and model.PROXY_KEYS lists them;
- proxy/_scan.Limits, the fan-out's header timeout and the linger bound take
  their defaults from DEFAULT;
- docs/proxy-settings.md is markdown_table()'s output (`python -m
  leastload.config.proxy_settings > docs/proxy-settings.md`).

It lives in config (below proxy) because the TOML form checks these keys and
the config package may not import the proxy.
"""

import math
from typing import Any, Dict, NamedTuple, Optional, Tuple

SECONDS_MAX = 86400  # every timeout: seconds in (0, SECONDS_MAX]


class ProxySetting(NamedTuple):
    name: str
    kind: str  # "int", "seconds", "bool", "choice", "path", "text", "files" or "address"
    default: Any
    help: str  # the flag's help: "{default}" is the default
    group: str  # the flag's group in `leastload proxy --help`
    low: Optional[int] = None  # "int": the bounds, both included
    high: Optional[int] = None
    choices: Tuple[str, ...] = ()  # "choice"
    optional: bool = False  # None is accepted too (a default derived elsewhere)
    flag: Optional[str] = None  # its `leastload proxy` flag; None: no flag
    negated: bool = False  # "bool": the flag sets it to False (the setting defaults to True)
    metavar: Optional[str] = None
    toml: Optional[str] = None  # its key in the TOML form's [proxy] table; None: not there
    netscaler: Optional[str] = None  # the NetScaler word for the same thing, where there is one
    keyword: bool = True  # a Proxy keyword; False: the command's own (workers, logs)

    def expected(self) -> str:
        """What a value must be, as the error messages say it."""
        if self.kind == "int":
            return f"an int in {self.low}..{self.high}"
        if self.kind == "seconds":
            return f"a number of seconds in (0, {SECONDS_MAX}]"
        if self.kind == "bool":
            return "True or False"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "path":
            return "a path starting with '/'"
        if self.kind == "address":
            return "HOST:PORT"
        if self.kind == "files":
            return "a list of file names (non-empty str)"
        if self.kind == "header":
            return "a header name (letters, digits and -)"
        return "a non-empty str"


_R, _C, _F, _H, _E, _RUN = ("requests", "client limits (what one client may send, and how slowly)",
                            "forwarding headers", "health monitors", "passive ejection", "running")
_EDGE = "the edge (TLS, the PROXY protocol)"
XFF_MODES = ("append", "replace")
HEALTH_KINDS = ("none", "tcp", "http")
LOG_FORMATS = ("combined", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

# In the TOML form's order (model.PROXY_KEYS); the flags are listed by group.
SETTINGS: Tuple[ProxySetting, ...] = (
    ProxySetting("retries", "int", 2, "tries on other backends after a refused or reset connection (default {default})",
                 _R, 0, 100, flag="--retries", metavar="N", toml="retries"),
    ProxySetting("connect_timeout", "seconds", 3.0, "for the connection to a backend (default {default:g})",
                 _R, flag="--connect-timeout", metavar="SECONDS", toml="connect_timeout"),
    ProxySetting("timeout", "seconds", 30.0,
                 "for the first response byte, and between response bytes (default {default:g}): 504 after",
                 _R, flag="--timeout", metavar="SECONDS", toml="timeout", netscaler="svrTimeout"),
    ProxySetting("client_timeout", "seconds", 60.0,
                 "idle keep-alive client connections close after this (default {default:g})",
                 _C, flag="--client-timeout", metavar="SECONDS", toml="client_timeout", netscaler="cltTimeout"),
    ProxySetting("header_timeout", "seconds", 10.0,
                 "a request's whole head must arrive within this (default {default:g}): 408 after",
                 _C, flag="--header-timeout", metavar="SECONDS", toml="header_timeout"),
    ProxySetting("body_timeout", "seconds", 60.0,
                 "a request's body must arrive within this once its head is in (default {default:g}): 408 after",
                 _C, flag="--body-timeout", metavar="SECONDS", toml="body_timeout"),
    ProxySetting("tunnel_timeout", "seconds", 3600.0,
                 "a tunnel after an upgrade (a WebSocket) closes after this long with no byte either way "
                 "(default {default:g})",
                 _C, flag="--tunnel-timeout", metavar="SECONDS", toml="tunnel_timeout"),
    ProxySetting("max_body", "int", 16 << 20,
                 "largest request body accepted (default 16 MiB; bodies are buffered so they can be retried)",
                 _C, 0, 1 << 40, flag="--max-body", metavar="BYTES", toml="max_body"),
    ProxySetting("max_request_line", "int", 8 << 10, "longest request line (default {default}): 414 over it",
                 _C, 64, 1 << 20, flag="--max-request-line", metavar="BYTES", toml="max_request_line"),
    ProxySetting("max_header_size", "int", 32 << 10,
                 "largest request head, request line and headers together (default {default}): 431 over it",
                 _C, 256, 1 << 24, flag="--max-header-size", metavar="BYTES", toml="max_header_size"),
    ProxySetting("max_headers", "int", 100, "most header fields in a request (default {default}): 431 over it",
                 _C, 1, 10000, flag="--max-headers", metavar="N", toml="max_headers"),
    ProxySetting("max_connections", "int", None,
                 "most client connections open at once (default: derived from the file-descriptor limit); "
                 "at the limit a new one is taken in place of the one waiting longest for its head",
                 _C, 1, 1 << 20, optional=True, flag="--max-connections", metavar="N", toml="max_connections"),
    ProxySetting("pool_size", "int", 256, "idle keep-alive connections kept per backend (default {default})",
                 _R, 0, 1 << 20, flag="--pool-size", metavar="N", toml="pool_size"),
    ProxySetting("overload_connections", "int", None,
                 "open client connections past which the header and idle timeouts shrink, linearly "
                 "to --overload-timeout at --max-connections (default: three quarters of it)",
                 _C, 1, 1 << 20, optional=True, flag="--overload-connections", metavar="N",
                 toml="overload_connections"),
    ProxySetting("overload_timeout", "seconds", 2.0,
                 "what the header and idle timeouts shrink to at --max-connections (default {default:g})",
                 _C, flag="--overload-timeout", metavar="SECONDS", toml="overload_timeout"),
    ProxySetting("linger_bytes", "int", 256 << 10,
                 "after a last answer (413, 414, 431, a close), what the client may still send before "
                 "the connection is reset (default {default}; a quarter of it after 414 or 431; after 413, "
                 "the declared body too, up to 4 x --max-body)",
                 _C, 0, 1 << 30, flag="--linger-bytes", metavar="BYTES", toml="linger_bytes"),
    ProxySetting("xff", "choice", "append",
                 "X-Forwarded-For: append the client's address to what the client sent, or replace "
                 "what it sent (for an edge proxy) (default {default})",
                 _F, choices=XFF_MODES, flag="--xff", toml="xff"),
    ProxySetting("forwarded", "bool", False, "also add an RFC 7239 Forwarded header (default: off)",
                 _F, flag="--forwarded", toml="forwarded"),
    ProxySetting("via", "bool", False, "add a Via header (default: off)", _F, flag="--via", toml="via"),
    ProxySetting("backend_header", "header", None,
                 "add a response header NAME whose value is the service that answered (default: off)",
                 _F, optional=True, flag="--backend-header", metavar="NAME", toml="backend_header"),
    ProxySetting("tls_cert", "files", (),
                 "terminate TLS with this certificate (PEM; repeat for each, paired in order with "
                 "--tls-key; chosen by SNI, the first is the default; SIGHUP rereads them)",
                 _EDGE, flag="--tls-cert", metavar="FILE", toml="tls_cert"),
    ProxySetting("tls_key", "files", (), "the private key of the --tls-cert in the same place (PEM, unencrypted)",
                 _EDGE, flag="--tls-key", metavar="FILE", toml="tls_key"),
    ProxySetting("accept_proxy", "bool", False,
                 "every connection starts with a PROXY protocol header (v1 or v2, from an L4 balancer "
                 "such as HAProxy's send-proxy-v2): its client address is the client's; a connection "
                 "without a valid one is refused (default: off)",
                 _EDGE, flag="--accept-proxy", toml="accept_proxy"),
    ProxySetting("admin", "address", None,
                 "the admin port: status, /metrics, /healthz, the runtime API (default: off; a bare "
                 "PORT is on 127.0.0.1; another address than loopback needs --admin-token-file)",
                 _RUN, optional=True, flag="--admin", metavar="[HOST:]PORT", toml="admin"),
    ProxySetting("access_log", "text", None,
                 "one line per request, appended to FILE ('-': standard output; default: none)",
                 _RUN, optional=True, flag="--access-log", metavar="FILE|-", toml="access_log", keyword=False),
    ProxySetting("log_format", "choice", "combined",
                 "the access log's format: Apache's combined with backend, ttfb, total and "
                 "retries appended, or one JSON object per line (default {default})",
                 _RUN, choices=LOG_FORMATS, flag="--log-format", toml="log_format", keyword=False),
    ProxySetting("log_level", "choice", "WARNING", "what the log shows, from this level up (default {default})",
                 _RUN, choices=LOG_LEVELS, flag="--log-level", toml="log_level", keyword=False),
    ProxySetting("workers", "int", 1,
                 "processes sharing the port (SO_REUSEPORT) and one engine in shared memory (default {default})",
                 _RUN, 1, 256, flag="--workers", metavar="N", toml="workers", keyword=False),
    ProxySetting("health_check", "choice", "tcp",
                 "probe per backend: tcp (connect), http (GET, 2xx/3xx) or none (default {default})",
                 _H, choices=HEALTH_KINDS, flag="--health-check", netscaler="add lb monitor TYPE"),
    ProxySetting("health_path", "path", "/", "path of the http probe (default {default})",
                 _H, flag="--health-path", netscaler="-httpRequest"),
    ProxySetting("health_interval", "seconds", 5.0, "time between two probes of a backend (default {default:g})",
                 _H, flag="--health-interval", metavar="SECONDS", netscaler="-interval"),
    ProxySetting("health_timeout", "seconds", 2.0, "a probe's answer must arrive within this (default {default:g})",
                 _H, flag="--health-timeout", metavar="SECONDS", netscaler="-resptimeout"),
    ProxySetting("health_fall", "int", 3, "failed probes in a row for DOWN (default {default})",
                 _H, 1, 1000, flag="--health-fall", metavar="N", netscaler="-retries"),
    ProxySetting("health_rise", "int", 1, "passed probes in a row for UP (default {default})",
                 _H, 1, 1000, flag="--health-rise", metavar="N", netscaler="-successRetries"),
    ProxySetting("health_ends_ejection", "bool", True,
                 "an ejection lasts its whole time even when the backend's health probe passes "
                 "(default: a passed probe of an UP backend ends its ejection)",
                 _E, flag="--outlier-keep-on-health", negated=True),
)

SETTING: Dict[str, ProxySetting] = {s.name: s for s in SETTINGS}
DEFAULT: Dict[str, Any] = {s.name: s.default for s in SETTINGS}
TOML_KEYS: Tuple[str, ...] = tuple(s.toml for s in SETTINGS if s.toml is not None)
GROUPS: Tuple[str, ...] = (_R, _C, _F, _H, _E, _RUN, _EDGE)  # in `leastload proxy --help`, with the engine's between


def check(name: str, value: object) -> Any:
    """`value` for the setting `name` as the constructor keeps it (seconds as a float), or
    TypeError / ValueError naming the argument and the value. ("address" values are
    checked where they are used: their forms differ between the keyword, the flag and the
    TOML key.)"""
    s = SETTING[name]
    if value is None and s.optional:
        return None
    kind = s.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be {s.expected()}, got {type(value).__name__} {value!r}")
        assert s.low is not None and s.high is not None
        if not s.low <= value <= s.high:
            raise ValueError(f"{name} must be {s.expected()}, got {value!r}")
        return value
    if kind == "seconds":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__} {value!r}")
        if not 0 < value <= SECONDS_MAX:  # also rejects NaN
            raise ValueError(f"{name} must be {s.expected()}, got {value!r}")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
        return value
    if kind == "choice":
        if value not in s.choices:
            raise ValueError(f"{name} must be {s.expected()}, got {value!r}")
        return value
    if kind == "path":
        if not isinstance(value, str) or not value.startswith("/"):
            raise ValueError(f"{name} must be {s.expected()}, got {value!r}")
        return value
    if kind == "text":
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be {s.expected()}, got {value!r}")
        return value
    if kind == "header":
        if not isinstance(value, str) or not is_header_name(value):
            raise ValueError(f"{name} must be {s.expected()}, got {value!r}")
        return value
    if kind == "files":
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) \
                or not all(isinstance(v, str) and v for v in value):
            raise TypeError(f"{name} must be {s.expected()}, got {value!r}")
        return tuple(value)
    return value  # "address"


def is_header_name(text: str) -> bool:
    """A header name the proxy may add: ASCII letters, digits and '-', not empty."""
    return bool(text) and text.isascii() and all(c.isalnum() or c == "-" for c in text)


def _bounds(s: ProxySetting) -> str:
    if s.kind == "int":
        return f"{s.low}..{s.high}" + (" or none" if s.optional else "")
    if s.kind == "seconds":
        return f"(0, {SECONDS_MAX}]"
    if s.kind == "choice":
        return ", ".join(s.choices)
    return ""


def _is_finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def markdown_table() -> str:
    """docs/proxy-settings.md: the table as a page."""
    lines = [
        "# The proxy's settings",
        "",
        "Generated from `leastload.config.proxy_settings` (`python -m leastload.config.proxy_settings`);",
        "a test checks that this page is what the table gives. Each setting is a `Proxy` keyword",
        "(those marked (command) are the command's own), a `leastload proxy` flag, and where named a",
        "key of a TOML config's `[proxy]` table. The vserver's own settings (method, slow start,",
        "ejection, hash options) are the engine's: `leastload proxy --help` lists their flags too.",
        "",
        "| setting | kind | default | bounds | flag | TOML key | NetScaler | what it does |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        name = f"`{s.name}`" + ("" if s.keyword else " (command)")
        default = "derived" if s.default is None and s.kind == "int" else (
            "none" if s.default is None else f"`{s.default!r}`")
        help_text = s.help.format(default=s.default) if s.default is not None and _is_finite(s.default) else s.help
        help_text = help_text.replace("|", "\\|")
        lines.append(f"| {name} | {s.kind} | {default} | {_bounds(s)} | "
                     f"{'`' + s.flag + '`' if s.flag else ''} | {'`' + s.toml + '`' if s.toml else ''} | "
                     f"{'`' + s.netscaler + '`' if s.netscaler else ''} | {help_text} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
