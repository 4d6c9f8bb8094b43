"""`leastload top URL`: a live view of a running proxy, from its admin port.

    leastload top http://127.0.0.1:9100            # refreshed every second; q or Ctrl-C quits
    leastload top http://127.0.0.1:9100 --once     # one table (two readings apart) on stdout

URL is the proxy's admin port (`leastload proxy --admin HOST:PORT`; with `--workers N` the
supervisor's, which merges its workers). Each second `GET URL/metrics` is read and shown per
vserver and service: the state (and ejected, draining), the weight, requests in flight, requests
a second since the last reading, the method's N, the engine's TTFB average, slow start's phase
and cap, and the passive ejections since start (top_model.py computes them). A URL that does
not answer at start is one line and exit 2; one that stops answering later is said on the
screen, and the view goes on trying. Needs rich: `pip install 'leastload[top]'`.
"""

import argparse
import contextlib
import os
import select
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Iterator, List, Optional, Sequence

from ..cmdline import MissingExtra, UserError, flag_error, parse_number
from .top_model import ExpositionError, Snapshot, VserverView, per_second, views, workers_line

try:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text
except ImportError:  # the message names the extra; `leastload` prints it as one line
    raise MissingExtra("the live view", "rich", "top") from None

COLUMNS = ("service", "state", "weight", "active", "req/s", "N", "TTFB", "slow start", "ejections")
STATE_STYLES = {"UP": "green", "DOWN": "red", "OUT_OF_SERVICE": "yellow"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="leastload top", description="A live view of a leastload proxy's admin port.")
    p.add_argument("url", metavar="URL", help="the admin port, http://HOST:PORT")
    p.add_argument("--interval", default="1", metavar="SECONDS", help="between readings (default 1)")
    p.add_argument("--timeout", default="5", metavar="SECONDS",
                   help="a reading answers within this (default 5)")
    p.add_argument("--vserver", metavar="NAME", help="show this vserver only")
    p.add_argument("--once", action="store_true", help="print one table (two readings apart) and exit")
    return p


def fetch(base: str, timeout: float) -> Snapshot:
    """One reading of BASE/metrics; UserError when there is no answer or not leastload's."""
    url = base + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            text = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise UserError(f"{url} answered {exc.code}: not a leastload admin port?") from None
    except (urllib.error.URLError, OSError) as exc:
        raise UserError(f"no answer from {base}: {getattr(exc, 'reason', exc)}") from None
    try:
        return Snapshot(text, time.monotonic())
    except ExpositionError as exc:
        raise UserError(f"{url}: {exc}") from None


def table(view: VserverView) -> Table:
    title = (f"lb vserver [bold]{view.name}[/]  {view.method}  "
             f"{per_second(view.requests_per_second)} req/s  {view.clients} clients")
    if view.edge:
        title += "\n" + view.edge
    t = Table(title=title, title_justify="left", expand=False)
    for column in COLUMNS:
        t.add_column(column, justify="left" if column in ("service", "state", "slow start") else "right",
                     no_wrap=True)
    for row in view.rows:
        style = STATE_STYLES.get(row.state.split(",")[0], "")
        t.add_row(row.name, Text(row.state, style=style), row.weight, row.active,
                  per_second(row.requests_per_second), row.load, row.ttfb, row.slow_start, row.ejections)
    return t


def screen(shown: List[VserverView], status: str) -> Group:
    parts: List[Any] = [table(view) for view in shown] or [Text("no vserver in the answer")]
    parts.append(Text(status, style="dim"))
    return Group(*parts)


def status_line(base: str, now: Optional[Snapshot], trouble: Optional[str], interval: float) -> str:
    words = [f"{base}", time.strftime("%H:%M:%S")]
    if now is not None:
        workers = workers_line(now)
        if workers:
            words.append(workers)
    words.append(f"every {interval:g} s")
    if trouble:
        words.append(trouble)
    words.append("q quits")
    return "  ".join(words)


@contextlib.contextmanager
def keys() -> Iterator[Optional[int]]:
    """The terminal's keys one at a time, unechoed (cbreak mode, restored at the end); yields
    stdin's descriptor, or None when stdin is not a terminal or there is no termios (no key
    then quits; Ctrl-C does)."""
    fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    try:
        import termios
        import tty
    except ImportError:  # Windows: Ctrl-C quits
        fd = None
    if fd is None:
        yield None
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def wait_for_key(fd: Optional[int], seconds: float) -> bool:
    """Waits `seconds`; True when q (or Q) was pressed meanwhile."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if fd is None:
            time.sleep(left)
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if ready and os.read(fd, 1).lower() == b"q":
            return True


def run(base: str, first: Snapshot, interval: float, timeout: float, vserver: Optional[str]) -> int:
    before = now = first
    console = Console()
    trouble: Optional[str] = None
    try:
        with keys() as fd, Live(console=console, auto_refresh=False, screen=console.is_terminal) as live:
            while True:
                shown = views(before, now, vserver)
                live.update(screen(shown, status_line(base, now, trouble, interval)), refresh=True)
                if wait_for_key(fd, interval):
                    return 0
                try:
                    latest = fetch(base, timeout)
                except UserError as exc:
                    trouble = f"{exc} (since {time.strftime('%H:%M:%S')})" if trouble is None else trouble
                    continue
                trouble = None
                before, now = now, latest
    except KeyboardInterrupt:  # Ctrl-C: the terminal is restored above, a quiet exit
        return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    interval = parse_number("--interval", args.interval, integer=False, low=0.05, low_inclusive=True, high=3600)
    timeout = parse_number("--timeout", args.timeout, integer=False, low=0)
    if not args.url.startswith(("http://", "https://")):
        raise flag_error("URL", "http://HOST:PORT", repr(args.url))
    base = args.url.rstrip("/")
    first = fetch(base, timeout)  # no answer: one line, exit 2
    if args.vserver is not None and args.vserver not in first.vservers():
        raise UserError(f"--vserver: no lb vserver {args.vserver!r} at {base} (it has: "
                        f"{', '.join(first.vservers()) or 'none'})")
    if args.once:
        time.sleep(interval)
        now = fetch(base, timeout)
        shown = views(first, now, args.vserver)
        Console().print(screen(shown, status_line(base, now, None, interval).replace("  q quits", "")))
        return 0
    return run(base, first, interval, timeout, args.vserver)


if __name__ == "__main__":
    sys.exit(main())
