"""`python -m leastload COMMAND [ARGS]` (also the `leastload` script).

Each command is a module with a `main(argv)`, imported only when its command
runs, so a command whose optional dependencies are missing cannot break the
others.
"""
import argparse
import importlib
import signal
import sys

COMMANDS = {
    "backends": ("leastload.backends", "toy HTTP backends to try the proxy on (delay, body size)"),
    "bench": ("leastload.bench", "measure the C engine beside the reference, check the performance targets"),
    "demo": ("leastload.demo", "a short walk through the engine"),
    "proxy": ("leastload.proxy", "an asyncio HTTP/1.1 reverse proxy balancing with the engine"),
    "simulate": ("leastload.sim.simulate", "traffic on a virtual clock: requests per service per second"),
}


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m leastload",
        description="leastload: NetScaler-style load-balancing selection.",
        epilog="commands:\n" + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items())
        + "\n\n'python -m leastload COMMAND --help' shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=COMMANDS, metavar="COMMAND", help="one of: " + ", ".join(COMMANDS))
    return p


def main(argv=None):
    if argv is None and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends quietly
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv[:1])  # prints usage or help and exits
    module_name = COMMANDS[argv[0]][0]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if getattr(exc, "name", None) == module_name:
            parser.exit(2, f"python -m leastload {argv[0]}: {module_name} is not part of this installation\n")
        # an optional dependency of the command is missing: say which, without a traceback
        parser.exit(2, f"python -m leastload {argv[0]}: {exc}\n")
    command = getattr(module, "main", None)
    if command is None:
        parser.exit(2, f"python -m leastload {argv[0]}: {module_name} has no command line (no main(argv))\n")
    return command(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
