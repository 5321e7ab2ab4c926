"""What every scenario is given: sizes, timing and where things are."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Options:
    """Run-wide settings; ``quick`` shrinks every size for a smoke test."""

    tmp: Path
    quick: bool = False
    rounds: int = 3
    round_seconds: float = 1.5
    warmup_seconds: float = 0.5
    nginx: str | None = None
    postgres: str | None = None

    def timing(self) -> dict[str, Any]:
        """The timing keys of a load spec."""
        return {"rounds": self.rounds, "round": self.round_seconds, "warmup": self.warmup_seconds}
