"""`leastload ctl URL [--token-file FILE] COMMAND...`: the proxy's runtime API from a shell.

    leastload ctl http://127.0.0.1:9100 --token-file /etc/leastload/token disable service s1
    leastload ctl http://127.0.0.1:9100 enable service s1        # token from LEASTLOAD_ADMIN_TOKEN
    leastload ctl http://127.0.0.1:9100 bind lb vserver web s6 -weight 2
    leastload ctl http://127.0.0.1:9100 show lb vserver web
    leastload ctl http://127.0.0.1:9100 reload                   # reread --config's file

URL is the proxy's admin port (`leastload proxy --admin HOST:PORT`). The
command's words go to `POST /leastload/command` as JSON (`reload` to
`POST /leastload/reload`), with the token as `Authorization: Bearer TOKEN`;
the answer's JSON is printed. Exit code: 0 when the proxy did it, 1 when it
refused (the answer says why: 401 without the right token, 400 for a wrong
command, 404 for an unknown name), 2 for a usage error or no answer.
docs/proxy.md (Operations) lists the commands.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import List, Optional, Sequence

from ..cmdline import read_token

TOKEN_ENV = "LEASTLOAD_ADMIN_TOKEN"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="leastload ctl", description="The leastload proxy's runtime API.",
                                epilog="commands: disable|enable|drain service NAME, set service NAME -weight W, "
                                       "add service NAME IP HTTP PORT, bind|unbind lb vserver VS NAME [-weight W], "
                                       "show|stat lb vserver [VS], reload")
    p.add_argument("url", metavar="URL", help="the admin port, http://HOST:PORT")
    p.add_argument("--token-file", metavar="FILE", help=f"the admin token (default: ${TOKEN_ENV})")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="default 10")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND...")
    return p


def _options_first(argv: Sequence[str]) -> List[str]:
    """argv with ctl's own --options moved before the URL: they may come anywhere, and the
    command's words (which may start with one dash, as -weight does) never start with two."""
    own, rest = [], []
    it = iter(argv)
    for word in it:
        if word.split("=", 1)[0] in ("--token-file", "--timeout"):
            own.append(word)
            if "=" not in word:
                own.append(next(it, ""))
        elif word in ("-h", "--help"):
            own.append(word)
        else:
            rest.append(word)
    return own + rest


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(_options_first(list(sys.argv[1:] if argv is None else argv)))
    words: List[str] = list(args.command)
    if not words:
        parser.error("a command is needed (e.g. disable service NAME)")
    if not args.url.startswith(("http://", "https://")):
        parser.error(f"URL must be http://HOST:PORT, got {args.url!r}")
    token = os.environ.get(TOKEN_ENV)
    if args.token_file is not None:
        try:
            token = read_token(args.token_file)
        except OSError as exc:
            parser.error(f"--token-file: cannot read {args.token_file!r}: {exc.strerror}")
    base = args.url.rstrip("/")
    if words == ["reload"]:
        url, body = base + "/leastload/reload", b"{}"
    else:
        url, body = base + "/leastload/command", json.dumps({"command": words}).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as r:
            print(r.read().decode("utf-8", "replace").rstrip())
            return 0
    except urllib.error.HTTPError as exc:
        print(exc.read().decode("utf-8", "replace").rstrip())
        print(f"leastload ctl: the proxy answered {exc.code}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"leastload ctl: no answer from {base}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
