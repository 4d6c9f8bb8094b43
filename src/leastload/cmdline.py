"""What every command shares: user errors as one line, flags' numbers, files written whole.

At the bottom of the package's layers (it imports nothing of leastload), so the
commands' parts in any layer (sim's `simulate`, the proxy's, cli's) can use it.

A user error (a bad flag value, a bad config line, a missing file) prints
exactly one line on stderr, `leastload COMMAND: message` or
`file:line: message`, and exits with status 2; no traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any, BinaryIO, Callable, Coroutine, NoReturn, Optional, Sequence

EXIT_USAGE = 2


class UserError(Exception):
    """Bad input from the user; its text is the whole message (printed after the command's name)."""


class FileError(UserError):
    """Bad content of an input file; its text starts with `file:line:` and is printed alone."""


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, what: str, package: str, extra: str) -> None:
        super().__init__(f"{what} needs {package}: pip install 'leastload[{extra}]'")
        self.extra = extra


def flag_error(flag: str, expected: str, value: object) -> UserError:
    """`--rate: must be > 0, got -5`."""
    return UserError(f"{flag}: must be {expected}, got {value}")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (`PROG: message`) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


def one_line_errors(prog: str) -> "_PatchedErrors":
    """While active, every argparse parser reports errors as one line prefixed by `prog`
    (for the commands whose parsers are not OneLineParser)."""
    return _PatchedErrors(prog)


class _PatchedErrors:
    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.saved = argparse.ArgumentParser.error

    def __enter__(self) -> None:
        prog = self.prog

        def error(self: argparse.ArgumentParser, message: str) -> NoReturn:
            self.exit(EXIT_USAGE, f"{prog}: {message}\n")

        argparse.ArgumentParser.error = error  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        argparse.ArgumentParser.error = self.saved  # type: ignore[method-assign]


def die(prog: Optional[str], message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Prints `prog: message` (the message alone when prog is None: a `file:line:` one) and exits."""
    sys.stderr.write((message if prog is None else f"{prog}: {message}") + "\n")
    raise SystemExit(code)


def parse_number(flag: str, text: str, *, integer: bool, low: Optional[float] = None,
                 high: Optional[float] = None, low_inclusive: bool = False) -> float:
    """A flag's number, with the range check's message in the house style."""
    import math

    kind = "an integer" if integer else "a number"
    try:
        value: float = int(text) if integer else float(text)
    except ValueError:
        raise flag_error(flag, kind, repr(text)) from None
    if not math.isfinite(value):
        raise flag_error(flag, "a finite number", text)
    if low is not None and (value < low if low_inclusive else value <= low):
        raise flag_error(flag, f"{'>=' if low_inclusive else '>'} {low:g}", text)
    if high is not None and value > high:
        raise flag_error(flag, f"<= {high:g}", text)
    return value


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def write_file(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Writes `path` whole or not at all: `write` fills a temporary file in the same
    directory, which then replaces `path`; permissions as for a new file (umask)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".leastload-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_token(path: str) -> str:
    """A token file's first line, stripped (so a trailing newline is not part of it): the admin
    token of `leastload proxy --admin-token-file` and `leastload ctl --token-file`."""
    with open(path, encoding="utf-8") as f:
        return f.readline().strip()


def ignore_sigpipe() -> None:
    """A write to a connection the peer has reset fails with EPIPE (a connection error)
    instead of killing the process. `leastload`'s entry point sets SIGPIPE to SIG_DFL (for
    `leastload ... | head`). Under uvloop, a reset that arrives while a write is queued is
    read first, then libuv flushes the queue with write(2) to the dead socket: SIGPIPE. So
    each long-running command (a server) ignores it again once its arguments are parsed
    (--help still ends quietly in a pipe)."""
    import signal
    import threading

    if hasattr(signal, "SIGPIPE") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def serve_until_stopped(prog: str, coro: "Coroutine[Any, Any, None]", loop: str = "auto") -> int:
    """Runs a server command's coroutine to its end on uvloop (`loop` "auto": when installed;
    "uvloop": required; "asyncio": never). A listening address that cannot be had (a port in
    use, an address not on this machine) is the operator's to fix: one line, exit 2. Ctrl-C
    ends it quietly with 0."""
    import asyncio

    try:
        if loop != "asyncio":
            try:
                import uvloop
            except ImportError:
                if loop == "uvloop":
                    coro.close()
                    die(prog, "--loop uvloop, but uvloop is not installed (pip install leastload[proxy])")
            else:
                uvloop.run(coro)
                return 0
        asyncio.run(coro)
    except OSError as exc:
        print(f"{prog}: cannot listen: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return 0
