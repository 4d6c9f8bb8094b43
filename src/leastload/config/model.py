"""The plain data model of a config: what the NetScaler lines and the TOML form
both parse into, what `leastload show` prints and what the engine is built from.

It is the state after every line has been applied (not the list of commands),
so parse -> print -> parse gives an equal model. Line numbers are kept for
error messages only and take no part in equality.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import proxy_settings
from ..engine.settings import UNITS as UNITS  # new_service_request_unit's, from the settings table

# The vendor's load-balancing methods. The engine implements some of them
# (leastload.engine.errors.METHODS); the others are kept in the model and printed
# back, and building an engine from them is a clear error.
LB_METHODS = (
    "ROUNDROBIN", "LEASTCONNECTION", "LEASTRESPONSETIME", "URLHASH", "DOMAINHASH",
    "DESTINATIONIPHASH", "SOURCEIPHASH", "SRCIPDESTIPHASH", "LEASTBANDWIDTH", "LEASTPACKETS",
    "TOKEN", "SRCIPSRCPORTHASH", "LRTM", "CALLIDHASH", "CUSTOMLOAD", "LEASTREQUEST",
    "AUDITLOGHASH", "STATICPROXIMITY", "USER_TOKEN",
)

SERVICE_TYPES = (
    "HTTP", "FTP", "TCP", "UDP", "SSL", "SSL_BRIDGE", "SSL_TCP", "DTLS", "NNTP", "DNS", "DHCPRA",
    "ANY", "SIP_UDP", "SIP_TCP", "SIP_SSL", "DNS_TCP", "RTSP", "PUSH", "SSL_PUSH", "RADIUS", "RDP",
    "MYSQL", "MSSQL", "DIAMETER", "SSL_DIAMETER", "TFTP", "ORACLE", "SMPP", "SYSLOGTCP",
    "SYSLOGUDP", "FIX", "SSL_FIX", "PROXY", "USER_TCP", "USER_SSL_TCP", "QUIC", "IPFIX",
    "LOGSTREAM", "MONGO", "MONGO_TLS", "MQTT", "MQTT_TLS", "QUIC_BRIDGE", "HTTP_QUIC",
)

SERVICE_STATES = ("ENABLED", "DISABLED")

# Ranges of the vendor's CLI (and the engine's, where they are narrower).
MAX_WEIGHT = 100
MAX_INCREMENT_INTERVAL = 3600
MAX_HASH_LENGTH = 4096
MAX_NEW_SERVICE_REQUEST = 0xFFFFFFFE
MAX_TTFB = 3600.0
MAX_BYTES = 10**9

# Monitors: the types leastload models (the vendor has many more: a line of
# another type is a warning), and the vendor's ranges, in seconds.
MONITOR_TYPES = ("HTTP", "TCP")
TIME_UNITS = ("SEC", "MSEC", "MIN")  # the vendor's units of -interval and -resptimeout
MAX_INTERVAL = 20940
MAX_RESPTIMEOUT = 20939
MAX_RETRIES = 127
MAX_SUCCESS_RETRIES = 32
DEFAULT_RESP_CODES: tuple[tuple[int, int], ...] = ((200, 200),)
DEFAULT_HTTP_REQUEST = ("HEAD", "/")
# The vendor's built-in monitors. `http` and `tcp` are modelled (the defaults
# of their type): services may be bound to them without an `add lb monitor`
# (which cannot redefine them). Binding one of the others is a warning.
BUILTIN_MONITOR_TYPES = {"http": "HTTP", "tcp": "TCP"}
MIN_RESP_CODE, MAX_RESP_CODE = 100, 599
UNMODELLED_BUILTIN_MONITORS = (
    "ping", "ping-default", "tcp-default", "arp", "nd6", "tcp-ecv", "http-ecv", "udp-ecv", "dns", "ftp",
    "tcps", "https", "tcps-ecv", "https-ecv", "ldns-ping", "ldns-tcp", "ldns-dns", "stasecure", "sta",
    "xdm", "xnc", "mqtt", "mqtt-tls", "http2direct", "http2ssl",
)

# The TOML form's [proxy] table: its keys, in the order they are printed (the proxy's settings table's)
PROXY_KEYS = proxy_settings.TOML_KEYS


@dataclass
class Server:
    """`add server NAME ADDRESS`."""

    name: str
    address: str
    line: int = field(default=0, compare=False)


@dataclass
class Service:
    """`add service NAME HOST TYPE PORT`; HOST is an IP address or a server's name.

    weight: `set service -weight`, the weight a binding without its own takes.
    ttfb, request_bytes, response_bytes: leastload's simulation options (not
    the vendor's): the service's time to first byte in seconds and the sizes
    of one request and one response in bytes.
    monitors: the names of the monitors bound to it (`bind service NAME
    -monitorName M`), in bind order; the vendor's rule: the service is UP
    when every one of them says UP.
    """

    name: str
    host: str
    service_type: str
    port: int
    weight: Optional[int] = None
    state: str = "ENABLED"
    ttfb: Optional[float] = None
    request_bytes: Optional[int] = None
    response_bytes: Optional[int] = None
    monitors: list[str] = field(default_factory=list)
    line: int = field(default=0, compare=False)


@dataclass
class Monitor:
    """`add lb monitor NAME TYPE [options]`, TYPE HTTP or TCP.

    resp_codes: the HTTP status ranges (low, high) that say UP, as given
    (`-respCode 200 300-302`: ((200, 200), (300, 302))); http_request: the
    probe's (method, path), `-httpRequest "HEAD /"`. Both apply to HTTP
    monitors only (a TCP monitor keeps the defaults). interval and
    resptimeout are in seconds (whole milliseconds: the vendor's units are
    SEC, MSEC and MIN); resptimeout < interval. retries: failed probes in a
    row that mark the service DOWN; success_retries: passed probes in a row
    that mark it UP again.
    """

    name: str
    monitor_type: str
    resp_codes: tuple[tuple[int, int], ...] = DEFAULT_RESP_CODES
    http_request: tuple[str, str] = DEFAULT_HTTP_REQUEST
    interval: float = 5.0
    resptimeout: float = 2.0
    retries: int = 3
    success_retries: int = 1
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class CertKey:
    """A certificate and its key (`add ssl certKey NAME -cert FILE -key FILE`; the TOML form's
    vserver `tls_cert`/`tls_key` pairs, which have no name of their own)."""

    cert: str
    key: str
    name: str = field(default="", compare=False)
    line: int = field(default=0, compare=False)


@dataclass
class Binding:
    """`bind lb vserver VS SERVICE [-weight W]`: weight None takes the service's.

    slow_start: the vserver had slow start on (newServiceRequest > 0) when the
    line bound the service, so the service starts in slow start, as on a
    live appliance; services bound before slow start was set are established.
    """

    service: str
    weight: Optional[int] = None
    slow_start: bool = False
    line: int = field(default=0, compare=False)


@dataclass
class VServer:
    """`add lb vserver NAME TYPE [IP PORT]` and its options; bindings in bind order."""

    name: str
    service_type: str
    address: Optional[str] = None
    port: Optional[int] = None
    lb_method: str = "LEASTCONNECTION"
    new_service_request: int = 0
    new_service_request_unit: str = "PER_SECOND"
    new_service_request_increment_interval: int = 0
    hash_length: Optional[int] = None
    netmask: Optional[str] = None
    bindings: list[Binding] = field(default_factory=list)
    # TLS: its certificates in bind order (`bind ssl vserver VS -certkeyName NAME`), the first the default
    cert_keys: list[CertKey] = field(default_factory=list)
    accept_proxy: bool = False  # the PROXY protocol on its listener (TOML form only)
    line: int = field(default=0, compare=False)
    # option name -> the line that set it last, for errors found later (building the engine)
    option_lines: dict[str, int] = field(default_factory=dict, compare=False)


@dataclass
class Config:
    """Everything a config file says, in the order it said it."""

    servers: list[Server] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    vservers: list[VServer] = field(default_factory=list)
    monitors: list[Monitor] = field(default_factory=list)
    cert_keys: list[CertKey] = field(default_factory=list)  # `add ssl certKey`, in order
    # the TOML form's [proxy] table: the proxy's own settings, checked (PROXY_KEYS), only those given
    proxy: dict[str, object] = field(default_factory=dict)
    source: str = field(default="<config>", compare=False)
    warnings: list[str] = field(default_factory=list, compare=False)

    def settle(self) -> "Config":
        """After parsing: with slow start off at the end, no binding is in slow start."""
        for vs in self.vservers:
            if vs.new_service_request == 0:
                for b in vs.bindings:
                    b.slow_start = False
        return self

    def service(self, name: str) -> Optional[Service]:
        for s in self.services:
            if s.name == name:
                return s
        return None

    def server(self, name: str) -> Optional[Server]:
        for s in self.servers:
            if s.name == name:
                return s
        return None

    def monitor(self, name: str) -> Optional[Monitor]:
        """An added monitor, else the vendor's built-in `http` or `tcp` (its type's defaults)."""
        for m in self.monitors:
            if m.name == name:
                return m
        if name in BUILTIN_MONITOR_TYPES:
            return Monitor(name=name, monitor_type=BUILTIN_MONITOR_TYPES[name])
        return None

    def vserver(self, name: str) -> Optional[VServer]:
        for v in self.vservers:
            if v.name == name:
                return v
        return None

    def weight_of(self, vserver: VServer, binding: Binding) -> int:
        """The binding's weight, else its service's, else 1."""
        if binding.weight is not None:
            return binding.weight
        service = self.service(binding.service)
        if service is not None and service.weight is not None:
            return service.weight
        return 1
