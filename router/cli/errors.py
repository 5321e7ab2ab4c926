"""The command line's one error type: a failure reported in one line, with an exit status."""

from __future__ import annotations


class CliError(Exception):
    """A failure to report in one line, with the exit status to use."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status
