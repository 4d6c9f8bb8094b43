"""`AccessLog`: one line per request the proxy answered, in the combined format or as JSON.

    log = AccessLog.open("-", "json")        # "-": standard output; else a file, appended to
    proxy = Proxy([...], access_log=log)     # `leastload proxy --access-log FILE --log-format json`

A line is written when the request's answer is decided: the backend's response
ended (or broke off), or the proxy answered itself (400, 408, 413, 431, 502,
503, 504 ...), or the client left first (status 499, as nginx logs it). Its
fields:

- time: when the request was complete, wall clock, ISO 8601 with the UTC
  offset (in the combined format: `[02/Dec/2026:01:40:00 +0000]`);
- client: the client's address; method, target and version as the request
  line had them ("-" for a request refused before its head was read);
- status; bytes: the response as the backend sent it (the proxy's own
  answer's bytes when it answered itself; "-" / 0 when nothing was sent);
- backend: the service that answered (the last one tried; "-" / null when
  none did); retries: the other backends tried first;
- ttfb: seconds from the request sent to the backend's first response byte
  (null / "-" without one); total: seconds from the request complete to the
  answer decided; vserver: the proxy's name.

The combined format is Apache's (`%h %l %u %t "%r" %>s %b "%{Referer}i"
"%{User-Agent}i"`) with backend, ttfb, total and retries appended, so tools
that read the combined format read the first nine fields as usual. JSON: one
object per line with the keys above. Each line is one write() on a file
opened for appending, so several worker processes can share one file.
"""

import datetime
import json
import sys
from typing import IO, Optional

from ..config.proxy_settings import LOG_FORMATS as FORMATS


class AccessLog:
    def __init__(self, stream: IO[str], fmt: str = "combined", owned: bool = False) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.stream = stream
        self.json = fmt == "json"
        self.owned = owned  # close the stream with the log
        self.lines = 0

    @classmethod
    def open(cls, target: str, fmt: str = "combined") -> "AccessLog":
        """`target`: a file name (appended to, created if missing) or "-" for standard output."""
        if target == "-":
            return cls(sys.stdout, fmt)
        return cls(open(target, "a", buffering=1, encoding="utf-8"), fmt, owned=True)

    def write(self, *, wall: float, client: str, method: str, target: str, version: str, status: int,
              size: int, backend: Optional[str], ttfb: Optional[float], total: float, retries: int,
              vserver: str, referer: str = "", user_agent: str = "") -> None:
        when = datetime.datetime.fromtimestamp(wall, datetime.timezone.utc).astimezone()
        if self.json:
            line = json.dumps({
                "time": when.isoformat(timespec="milliseconds"), "client": client, "method": method,
                "target": target, "version": version, "status": status, "bytes": size, "backend": backend,
                "ttfb": None if ttfb is None else round(ttfb, 6), "total": round(total, 6),
                "retries": retries, "vserver": vserver}, separators=(",", ":"))
        else:
            request = f"{method} {target} {version}" if method != "-" else "-"
            line = (f'{client} - - [{when.strftime("%d/%b/%Y:%H:%M:%S %z")}] "{_quote(request)}" {status} '
                    f'{size if size else "-"} "{_quote(referer) or "-"}" "{_quote(user_agent) or "-"}" '
                    f'{backend or "-"} {"-" if ttfb is None else f"{ttfb:.6f}"} {total:.6f} {retries}')
        try:
            self.stream.write(line + "\n")
        except (OSError, ValueError):  # a full disk or a closed stdout must not stop the proxy
            return
        self.lines += 1

    def close(self) -> None:
        if self.owned:
            self.stream.close()
        else:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                pass


def _quote(text: str) -> str:
    """As Apache escapes a logged string: quotes and backslashes escaped, control bytes as \\xHH."""
    out = []
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)
