"""Vservers of the engine built from the config model."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

from .. import _implementation
from ..engine.errors import METHODS
from .errors import ConfigError
from .model import Config, VServer

# The engine's state for a service the config disables: out of service (an
# administrative stop; coming back from it does not start slow start).
ENGINE_STATE = {"ENABLED": "UP", "DISABLED": "OUT_OF_SERVICE"}


def check_supported(config: Config, vs: VServer) -> None:
    """A ConfigError naming the line of -lbMethod when the engine lacks that method."""
    if vs.lb_method not in METHODS:
        line = vs.option_lines.get("lb_method", vs.line)
        raise ConfigError(config.source, line, f"lbMethod {vs.lb_method} is not supported by this engine yet "
                                               f"(it has {', '.join(METHODS)})")


def build_vserver(config: Config, vs: VServer, clock: Any, impl: Optional[ModuleType] = None) -> Any:
    """One engine VirtualServer for `vs`, its services bound in order, on `clock`.

    `impl` is the engine module (leastload.engine.native or leastload.reference);
    None: the package's choice (the one `import leastload` made)."""
    if impl is None:
        impl = _implementation
    check_supported(config, vs)
    engine_class: Any = impl.VirtualServer
    settings = dict(new_service_request=vs.new_service_request,
                    new_service_request_unit=vs.new_service_request_unit,
                    new_service_request_increment_interval=vs.new_service_request_increment_interval)
    try:
        # Bindings are made in order, with slow start on for the services bound
        # while it was on (they start in slow start) and off for the others.
        on = not vs.bindings or vs.bindings[0].slow_start
        engine = engine_class(vs.lb_method, clock=clock, name=vs.name,
                              **{**settings, "new_service_request": vs.new_service_request if on else 0})
        for b in vs.bindings:
            if b.slow_start != on:
                on = b.slow_start
                engine.set(**{**settings, "new_service_request": vs.new_service_request if on else 0})
            engine.bind(b.service, weight=config.weight_of(vs, b))
            service = config.service(b.service)
            if service is not None and service.state != "ENABLED":
                engine.set_state(b.service, ENGINE_STATE[service.state])
        if not on:
            engine.set(**settings)
    except (ValueError, TypeError) as exc:  # the parsers check ranges first: this is a backstop
        raise ConfigError(config.source, vs.line, f"lb vserver {vs.name!r}: {exc}") from None
    return engine


def build(config: Config, clock: Any, impl: Optional[ModuleType] = None) -> dict[str, Any]:
    """Every vserver of the config, by name, in config order, sharing `clock`.
    Checks every vserver before building any."""
    for vs in config.vservers:
        check_supported(config, vs)
    return {vs.name: build_vserver(config, vs, clock, impl) for vs in config.vservers}
