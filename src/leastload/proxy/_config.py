"""What `leastload proxy --config FILE` serves: the plan of each vserver, read from a config.

The file is read by the same parser as `leastload show` and `simulate`
(leastload.config: NetScaler lines, or the TOML form for a name ending in
.toml). From it the proxy takes:

- each `add lb vserver NAME HTTP IP PORT`: a listener on IP:PORT, with its
  `-lbMethod`, slow start (`-newServiceRequest...`) and hash options
  (`-hashLength`, `-netmask`); a vserver of another type, or without an
  address, is not served (one warning each);
- each `bind lb vserver VS SERVICE [-weight W]`: a backend of VS at the
  service's address (`add service NAME IP|SERVER HTTP PORT`, the server's
  address for a server name), its weight the binding's, else the
  service's, else 1; a disabled service is bound OUT_OF_SERVICE;
- the monitors bound to each service (`add lb monitor`, `bind service SVC
  -monitorName M`): its health probe (HTTP: the request line and the
  response codes; TCP: a connect), every `-interval`, answered within
  `-resptimeout`, DOWN after `-retries` failures, UP after `-successRetries`
  passes. A service without a monitor gets the vendor's default, a TCP
  connect every 5 s (2 s to answer, 3 failures, 1 success); several
  monitors: the first one is probed (the others get a warning);
- the TOML form's `[proxy]` table: the proxy's own settings (timeouts,
  limits, admin, logs), under the command-line flags given explicitly.

`plan()` turns a parsed config into VServerPlans and warnings, and raises
ConfigError (`file:line: message`) for what the proxy cannot serve.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..config import Config, ConfigError, VServer
from ..config.build import check_supported
from ..net.upstream import Backend

SERVED_TYPES = ("HTTP",)
TLS_TYPES = ("SSL",)  # served when a certificate is bound (`bind ssl vserver VS -certkeyName NAME`)


@dataclass(frozen=True)
class Probe:
    """One service's health probe, as HealthMonitor runs it."""

    kind: str = "tcp"              # "tcp" (connect) or "http" (a request, a status among codes)
    path: str = "/"
    method: str = "GET"
    codes: Tuple[Tuple[int, int], ...] = ((200, 399),)
    interval: float = 5.0
    timeout: float = 2.0
    fall: int = 3
    rise: int = 1


DEFAULT_PROBE = Probe()  # the vendor's default monitor of a service without one: TCP


@dataclass
class VServerPlan:
    """One vserver as the proxy serves it."""

    name: str
    listen: Tuple[str, int]
    method: str
    settings: Dict[str, Any]                       # the engine's: slow start, hash options
    backends: List[Backend] = field(default_factory=list)
    disabled: List[str] = field(default_factory=list)  # services bound OUT_OF_SERVICE
    probes: Dict[str, Probe] = field(default_factory=dict)
    # the Proxy keywords of its edge: tls_cert and tls_key (its bound certificates, in order) and
    # accept_proxy, those the vserver sets (the [proxy] table's and the flags' otherwise)
    edge: Dict[str, Any] = field(default_factory=dict)
    line: int = 0


def plan(config: Config, listen: Optional[Tuple[str, int]] = None) -> Tuple[List[VServerPlan], List[str]]:
    """The vservers the proxy serves from `config`, and warnings for what it leaves out.
    `listen`: the --listen override, allowed when exactly one vserver is served."""
    warnings: List[str] = list(config.warnings)
    plans: List[VServerPlan] = []
    for vs in config.vservers:
        where = f"{config.source}:{vs.line}"
        if vs.service_type in TLS_TYPES and not vs.cert_keys:
            warnings.append(f"{where}: lb vserver {vs.name} is {vs.service_type} without a certificate "
                            f"(bind ssl vserver {vs.name} -certkeyName NAME): not served")
            continue
        if vs.service_type not in SERVED_TYPES + TLS_TYPES:
            warnings.append(f"{where}: lb vserver {vs.name} is {vs.service_type}: the proxy serves HTTP vservers "
                            "(and SSL ones with a certificate bound) only")
            continue
        if vs.address is None or vs.port is None:
            if listen is None:
                warnings.append(f"{where}: lb vserver {vs.name} has no IP and port: not served")
                continue
        check_supported(config, vs)
        plans.append(_plan_vserver(config, vs, warnings))
    if not plans:
        raise ConfigError(config.source, None, "no HTTP lb vserver with an IP and port to serve")
    if listen is not None:
        if len(plans) > 1:
            raise ConfigError(config.source, None, f"--listen names one address, but the config has {len(plans)} "
                                                   "vservers to serve (each has its own IP and port)")
        plans[0].listen = listen
    seen: Dict[Tuple[str, int], str] = {}
    for p in plans:
        if p.listen in seen and p.listen[1] != 0:
            raise ConfigError(config.source, p.line, f"lb vserver {p.name} listens on {p.listen[0]}:{p.listen[1]}, "
                                                     f"as lb vserver {seen[p.listen]} does")
        seen[p.listen] = p.name
    return plans, warnings


def _plan_vserver(config: Config, vs: VServer, warnings: List[str]) -> VServerPlan:
    settings: Dict[str, Any] = {}
    if vs.new_service_request:
        settings.update(new_service_request=vs.new_service_request,
                        new_service_request_unit=vs.new_service_request_unit,
                        new_service_request_increment_interval=vs.new_service_request_increment_interval)
    if vs.hash_length is not None:
        settings["hashlength"] = vs.hash_length
    if vs.netmask is not None:
        settings["netmask"] = vs.netmask
    p = VServerPlan(vs.name, (vs.address or "127.0.0.1", vs.port or 0), vs.lb_method, settings, line=vs.line)
    if vs.cert_keys:
        p.edge.update(tls_cert=tuple(c.cert for c in vs.cert_keys), tls_key=tuple(c.key for c in vs.cert_keys))
    if vs.accept_proxy:
        p.edge["accept_proxy"] = True
    for binding in vs.bindings:
        service = config.service(binding.service)
        if service is None:  # the parser requires services to exist: a backstop
            raise ConfigError(config.source, binding.line, f"bind lb vserver {vs.name}: no service {binding.service}")
        if service.service_type not in SERVED_TYPES:
            warnings.append(f"{config.source}:{binding.line}: service {service.name} is {service.service_type}: "
                            f"lb vserver {vs.name} forwards HTTP to it")
        host = service.host
        server = config.server(host)
        if server is not None:
            host = server.address
        p.backends.append(Backend(service.name, host, service.port, config.weight_of(vs, binding)))
        if service.state != "ENABLED":
            p.disabled.append(service.name)
        p.probes[service.name] = _probe_of(config, service.name, service.monitors, warnings)
    return p


def _probe_of(config: Config, service: str, monitors: List[str], warnings: List[str]) -> Probe:
    if not monitors:
        return DEFAULT_PROBE
    if len(monitors) > 1:
        warnings.append(f"{config.source}: service {service} has monitors {', '.join(monitors)}: "
                        f"the proxy probes with the first, {monitors[0]}")
    m = config.monitor(monitors[0])
    assert m is not None  # the parser checks that a bound monitor exists
    interval, timeout = float(m.interval), float(m.resptimeout)
    if m.monitor_type == "TCP":
        return Probe("tcp", interval=interval, timeout=timeout, fall=m.retries, rise=m.success_retries)
    method, path = m.http_request
    return Probe("http", path=path, method=method, codes=tuple(m.resp_codes), interval=interval, timeout=timeout,
                 fall=m.retries, rise=m.success_retries)
