"""`Gateway`: the vservers of a config file served by one process, and live reloads of the file.

    gateway = Gateway("lb.conf", settings={"retries": 2})   # the file's vservers, one Proxy each
    await gateway.start()
    changes = gateway.reload()      # SIGHUP, or POST /leastload/reload on the admin port
    await gateway.close()

A reload reads the file again and applies the difference in place, without
dropping a request: services newly bound are added (under slow start when
the vserver has it: the new-service ramp), services no longer bound are
drained (requests in flight finish, then the engine unbinds them, their
probes stop and their idle connections close), and changed weights,
states (enable/disable service), monitors, methods and slow-start or hash
settings are applied. A file with any error, or a change the proxy cannot
make in place (a vserver added, removed or moved to another address, a
service moved to another address, a service bound again while it still
drains), is refused whole: the error is raised (and logged by the caller)
and the running configuration stays as it was. Changes to the proxy's own
settings (the TOML form's [proxy] table) apply at the next start; a reload
says so.
"""

import logging
from typing import Any, Dict, List, Optional, Tuple

from ..config import ConfigError, load
from ..engine import settings as engine_settings
from ..net.upstream import Backend
from ._config import Probe, VServerPlan, plan
from ._proxy import Proxy

log = logging.getLogger("leastload.proxy")

# the engine's settings a vserver falls back to when the file stops setting them
SETTING_DEFAULTS: Dict[str, Any] = {"new_service_request": 0, "hashlength": 80, "netmask": "255.255.255.255"}


def probe_args(probe: Probe) -> Tuple[Any, ...]:
    """A Probe as HealthMonitor's arguments after (loop, vserver, backend)."""
    return (probe.kind, probe.path, probe.interval, probe.timeout, probe.fall, probe.rise, probe.method, probe.codes)


class Gateway:
    def __init__(self, path: str, *, listen: Optional[Tuple[str, int]] = None,
                 settings: Optional[Dict[str, Any]] = None) -> None:
        """`settings`: keyword arguments of every Proxy (its own settings: timeouts, limits,
        health_check, outlier_*, engine, ...), not the vserver's (method, slow start, hash options
        come from the file)."""
        self.path, self.listen = path, listen
        self.settings = dict(settings or {})
        config = load(path)
        plans, self.warnings = plan(config, listen)
        self.proxy_table: Dict[str, object] = dict(config.proxy)
        self.plans: Dict[str, VServerPlan] = {p.name: p for p in plans}
        self.proxies: Dict[str, Proxy] = {p.name: self._make(p) for p in plans}
        self.reloads = 0

    def _make(self, p: VServerPlan) -> Proxy:
        proxy = Proxy(p.backends, p.method, listen=p.listen, name=p.name, **{**self.settings, **p.edge}, **p.settings)
        for name in p.disabled:
            proxy.vserver.set_state(name, "OUT_OF_SERVICE")
        for name, probe in p.probes.items():
            proxy.set_probe(name, probe_args(probe))
        return proxy

    async def start(self) -> "Gateway":
        started: List[Proxy] = []
        try:
            for proxy in self.proxies.values():
                await proxy.start()
                started.append(proxy)
        except BaseException:
            for proxy in started:
                await proxy.close(grace=0)
            raise
        return self

    async def close(self, grace: float = 5.0) -> None:
        for proxy in self.proxies.values():
            if proxy.listener is not None:
                await proxy.close(grace)

    # ---- reload -------------------------------------------------------------------

    def reload(self) -> List[str]:
        """Rereads the file and applies the difference; returns what changed, one line each.
        ConfigError or ValueError: nothing was applied."""
        config = load(self.path)
        plans, warnings = plan(config, self.listen)
        new = {p.name: p for p in plans}
        self._check(new)
        changes: List[str] = []
        for name, p in new.items():
            changes += self._apply(self.proxies[name], self.plans[name], p)
        for name, proxy in self.proxies.items():  # TLS: the certificate files read again
            if proxy.reload_certificates():
                changes.append(f"vserver {name}: certificates reloaded")
        if dict(config.proxy) != self.proxy_table:
            changes.append("the [proxy] settings changed: they apply at the next start")
        self.plans, self.warnings = new, warnings
        self.reloads += 1
        return changes

    def _check(self, new: Dict[str, VServerPlan]) -> None:
        """Everything the new plans ask for can be done in place: else ValueError, nothing done."""
        if list(new) != list(self.plans):
            raise ValueError(f"the vservers changed ({', '.join(self.plans)} -> {', '.join(new)}): "
                             "adding or removing a vserver needs a restart")
        for name, p in new.items():
            old, proxy = self.plans[name], self.proxies[name]
            if p.listen != old.listen:
                raise ValueError(f"lb vserver {name} moved from {old.listen[0]}:{old.listen[1]} to "
                                 f"{p.listen[0]}:{p.listen[1]}: a new address needs a restart")
            before = {b.name: b for b in old.backends}
            for b in p.backends:
                was = before.get(b.name)
                if was is not None and (was.host, was.port) != (b.host, b.port):
                    raise ValueError(f"service {b.name} of lb vserver {name} moved to {b.host}:{b.port}: "
                                     "bind a service of another name instead")
                if was is None and b.name in proxy.vserver:
                    raise ValueError(f"service {b.name} is still draining from lb vserver {name}: "
                                     "bind it again once it is unbound")
            # the engine accepts the new method and settings: its settings table's checks say so
            # (the file's unknown words were refused by the parser, the weights too)
            settings = {k: v for k, v in self.settings.items() if k.startswith("outlier_")}
            settings.update(p.settings, method=p.method)
            checked = engine_settings.check_settings(settings)
            engine_settings.check_rate(checked.get("new_service_request", 0),
                                       checked.get("new_service_request_unit", "PER_SECOND"))

    def _apply(self, proxy: Proxy, old: VServerPlan, new: VServerPlan) -> List[str]:
        vs, changes = proxy.vserver, []
        if new.edge != old.edge:
            changes += proxy.set_edge(new.edge)
        if new.method != old.method:
            vs.set_method(new.method)
            changes.append(f"{new.name}: method {old.method} -> {new.method}")
        if new.settings != old.settings:
            settings = {k: SETTING_DEFAULTS[k] for k in old.settings if k not in new.settings and k in SETTING_DEFAULTS}
            settings.update(new.settings)
            vs.set(**settings)
            changes.append(f"{new.name}: settings {old.settings} -> {new.settings}")
        before = {b.name: b for b in old.backends}
        after = {b.name: b for b in new.backends}
        for name in before:
            if name not in after:
                proxy.remove_backend(name)
                changes.append(f"{new.name}: {name} draining (no longer bound)")
        for name, b in after.items():
            was = before.get(name)
            if was is None:
                proxy.set_probe(name, probe_args(new.probes[name]))
                proxy.add_backend(b)
                ramp = " (slow start)" if vs.slow_start(name) is not None else ""
                changes.append(f"{new.name}: {name} bound at {b.host}:{b.port}, weight {b.weight}{ramp}")
            elif was.weight != b.weight:
                vs.set_weight(name, b.weight)
                proxy.backends[name] = Backend(name, b.host, b.port, b.weight)
                changes.append(f"{new.name}: {name} weight {was.weight} -> {b.weight}")
            if was is not None and old.probes.get(name) != new.probes[name]:
                proxy.set_probe(name, probe_args(new.probes[name]))
                changes.append(f"{new.name}: {name} monitor changed")
            disabled, was_disabled = name in new.disabled, name in old.disabled
            if disabled and not was_disabled:
                vs.set_state(name, "OUT_OF_SERVICE")
                changes.append(f"{new.name}: {name} disabled (OUT_OF_SERVICE)")
            elif was_disabled and not disabled and was is not None:
                vs.set_state(name, "UP")
                changes.append(f"{new.name}: {name} enabled")
            elif disabled and was is None:
                vs.set_state(name, "OUT_OF_SERVICE")
        return changes

    def reload_and_log(self) -> List[str]:
        """reload(), its outcome logged either way (POST /leastload/reload): raises as reload() does."""
        try:
            changes = self.reload()
        except (ConfigError, ValueError, TypeError, OSError) as exc:
            log.error("reload of %s refused, the running configuration stays: %s", self.path, exc)
            raise
        for warning in self.warnings:
            log.warning("%s", warning)
        log.warning("reloaded %s: %s", self.path, "; ".join(changes) if changes else "no change")
        return changes

    def reload_logged(self) -> Optional[List[str]]:
        """reload_and_log() for SIGHUP's handler: None when refused."""
        try:
            return self.reload_and_log()
        except (ConfigError, ValueError, TypeError, OSError):
            return None
