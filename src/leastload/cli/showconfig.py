"""`leastload show CONFIG`: a config file printed back as NetScaler CLI lines.

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
    p.add_argument("config", metavar="CONFIG", help="NetScaler CLI lines, or TOML when the name ends in .toml")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the model as JSON")
    out.add_argument("--toml", action="store_true", help="print the model in the TOML form")
    p.add_argument("--strict", action="store_true", help="commands or options leastload does not model are errors")
    args = p.parse_args(argv)
    config = load(args.config, strict=args.strict)
    for warning in config.warnings:
        print(warning, file=sys.stderr)
    text = to_json(config) if args.json else to_toml(config) if args.toml else to_netscaler(config)
    sys.stdout.write(text)
    return 0
