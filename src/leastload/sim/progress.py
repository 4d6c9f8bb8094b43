"""A progress bar for long simulations: only on a terminal, only after a second.

tqdm draws it when installed, else rich when installed, else a plain one-line bar. Nothing is
written when stderr is not a terminal (a pipe, a file, a test).
"""
from __future__ import annotations

import importlib
import sys
import time
from typing import Any, Optional, TextIO

SHOW_AFTER = 1.0  # seconds of wall time before a bar appears: short runs stay quiet


class _RichBar:
    """rich's progress bar behind tqdm's update(n) and close()."""

    def __init__(self, total: int, label: str, stream: TextIO) -> None:
        progress = importlib.import_module("rich.progress")
        console = importlib.import_module("rich.console").Console(file=stream)
        self.bar = progress.Progress(console=console, transient=True)
        self.task = self.bar.add_task(label, total=total)
        self.bar.start()

    def update(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def close(self) -> None:
        self.bar.stop()


class Progress:
    def __init__(self, total: int, label: str, stream: Optional[TextIO] = None) -> None:
        self.total, self.label = max(1, total), label
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.bar: Any = None
        self.shown = 0
        self.plain = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is None and not self.plain:
            if time.monotonic() - self.started < SHOW_AFTER:
                return
            self._open(done)
        if self.bar is not None:
            self.bar.update(done - self.shown)
        else:
            width = 30
            filled = width * done // self.total
            self.stream.write(f"\r{self.label} [{'#' * filled}{' ' * (width - filled)}] {done}/{self.total}")
            self.stream.flush()
        self.shown = done

    def _open(self, done: int) -> None:
        try:
            tqdm = importlib.import_module("tqdm").tqdm
        except ImportError:
            try:
                self.bar = _RichBar(self.total, self.label, self.stream)
            except ImportError:
                self.plain = True
            return
        self.bar = tqdm(total=self.total, desc=self.label, file=self.stream, leave=False)
        self.shown = 0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.plain:
            self.stream.write("\r" + " " * (len(self.label) + 40 + 2 * len(str(self.total))) + "\r")
            self.stream.flush()
