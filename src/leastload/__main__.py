"""`leastload COMMAND [ARGS]` (also `python -m leastload`).

Each command is a module with a `main(argv)`, imported only when its command
runs, so a command whose optional dependencies are missing cannot break the
others. User errors of every command are one line on stderr and exit 2:
`leastload COMMAND: message`, or `file:line: message` for a config.
"""
from __future__ import annotations

import importlib
import signal
import sys
from typing import Optional, Sequence

from .cmdline import EXIT_USAGE, FileError, MissingExtra, OneLineParser, UserError, die, one_line_errors
from ._version import __version__

COMMANDS = {
    "backends": ("leastload.cli.backends", "toy HTTP backends to try the proxy on (delay, body size)"),
    "bench": ("leastload.bench", "measure the C engine beside the reference, check the performance targets"),
    "ctl": ("leastload.cli.ctl", "the proxy's runtime API: disable, enable, drain, weights, bind, show, reload"),
    "demo": ("leastload.cli.demo", "the vendor's worked tables and slow start, replayed by the engine"),
    "nginx-conf": ("leastload.cli.nginxconf", "nginx upstream blocks (the leastload module's) for a config's vservers"),
    "proxy": ("leastload.proxy", "an asyncio HTTP/1.1 reverse proxy balancing with the engine"),
    "show": ("leastload.cli.showconfig", "a config (NetScaler lines or TOML) printed back as NetScaler lines or JSON"),
    "simulate": ("leastload.sim.simulate", "a config's vservers under a workload on a virtual clock"),
    "top": ("leastload.cli.top", "a live view of a running proxy's admin port (needs the top extra: rich)"),
}

def _parser() -> OneLineParser:
    import argparse

    p = OneLineParser(
        prog="leastload",
        description="leastload: NetScaler-style load-balancing selection.",
        epilog="commands:\n" + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items())
        + "\n\n'leastload COMMAND --help' shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"leastload {__version__}")
    p.add_argument("command", choices=COMMANDS, metavar="COMMAND", help="one of: " + ", ".join(COMMANDS))
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends quietly
    args = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not args or args[0] not in COMMANDS:
        parser.parse_args(args[:1])  # prints help, the version or a one-line error, and exits
    name = args[0]
    prog = f"leastload {name}"
    module_name = COMMANDS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if getattr(exc, "name", None) == module_name:
            die(prog, f"{module_name} is not part of this installation")
        die(prog, str(exc))  # an optional dependency is missing: the message says which extra
    command = getattr(module, "main", None)
    if command is None:
        die(prog, f"{module_name} has no command line (no main(argv))")
    from .config.errors import ConfigError

    with one_line_errors(prog):
        try:
            return int(command(args[1:]) or 0)
        except (ConfigError, FileError) as exc:
            die(None, str(exc))
        except (UserError, MissingExtra) as exc:
            die(prog, str(exc))
        except KeyboardInterrupt:
            sys.stderr.write(f"{prog}: interrupted\n")
            return 130
    return EXIT_USAGE  # not reached


if __name__ == "__main__":
    sys.exit(main())
