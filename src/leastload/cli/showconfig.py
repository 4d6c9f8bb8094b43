"""`leastload show CONFIG`: a config file printed back as NetScaler CLI lines.

`leastload show --shared NAME` prints a live shared vserver instead (as
show() does): the one nginx's workers share, or a `leastload proxy`'s.

The file is NetScaler lines, or the TOML form when its name ends in .toml.
What is printed parses back to the same model (a round trip); `--json` prints
the model as JSON, `--toml` in the TOML form. Warnings about lines leastload
does not model go to stderr; `--strict` makes them errors.
"""
from __future__ import annotations

import sys
from typing import Optional, Sequence

from ..cmdline import OneLineParser
from ..config import load, to_json, to_netscaler, to_toml


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = OneLineParser(prog="leastload show", description=(__doc__ or "").splitlines()[0])
    p.add_argument("config", metavar="CONFIG", nargs="?",
                   help="NetScaler CLI lines, or TOML when the name ends in .toml")
    p.add_argument("--shared", metavar="NAME",
                   help="print the live shared vserver NAME instead (e.g. nginx.UPSTREAM); read only")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the model as JSON")
    out.add_argument("--toml", action="store_true", help="print the model in the TOML form")
    p.add_argument("--strict", action="store_true", help="commands or options leastload does not model are errors")
    args = p.parse_args(argv)
    if args.shared is not None:
        if args.config is not None or args.json or args.toml or args.strict:
            p.error("--shared NAME takes no CONFIG, --json, --toml or --strict")
        from .showshared import show_shared

        sys.stdout.write(show_shared(args.shared) + "\n")
        return 0
    if args.config is None:
        p.error("a CONFIG, or --shared NAME, is needed")
    config = load(args.config, strict=args.strict)
    for warning in config.warnings:
        print(warning, file=sys.stderr)
    text = to_json(config) if args.json else to_toml(config) if args.toml else to_netscaler(config)
    sys.stdout.write(text)
    return 0
