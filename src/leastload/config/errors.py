"""The one error type of config input: where it happened and what is wrong."""
from __future__ import annotations


class ConfigError(ValueError):
    """A bad config: prints as `file:line: message` (just `file: message` without a line)."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.message}"
