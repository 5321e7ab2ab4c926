"""A child process's output read line by line as it comes, so its pipe never fills up, and
waited on by pattern (the serve, shutdown and workers tests)."""

from __future__ import annotations

import asyncio
import re

__all__ = ["ProcessOutput"]


class ProcessOutput:
    """A process's output, read as it comes (the pipe never fills up)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self.task = asyncio.ensure_future(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace"))
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("")  # the end
            self._changed.notify_all()

    async def wait_for(self, pattern: str, seconds: float = 120) -> re.Match[str]:
        """The first line matching ``pattern``; AssertionError if the output ends first."""

        def found() -> re.Match[str] | None:
            for line in self.lines:
                if match := re.search(pattern, line):
                    return match
            if self.lines and self.lines[-1] == "":
                raise AssertionError(f"no {pattern!r} in:\n{self.text}")
            return None

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(found), seconds)
        match = found()
        assert match is not None
        return match

    @property
    def text(self) -> str:
        """Everything read so far."""
        return "".join(self.lines)
