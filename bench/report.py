"""Results: tables of medians and ratios, targets with PASS/MISS, and the JSON file."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def median(rounds: list[dict[str, Any]], key: str) -> float:
    """Median of ``key`` across rounds (NaN when no round has it)."""
    values = [r[key] for r in rounds if key in r and not math.isnan(r[key])]
    return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is zero or NaN."""
    return a / b if b and not math.isnan(b) else float("nan")


@dataclass
class Table:
    """An aligned table: a title, column headers, rows of cells."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)

    def render(self) -> str:
        """The table as text, numbers right-aligned."""
        cells = [self.columns, *[[_cell(v) for v in row] for row in self.rows]]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [self.title]
        for n, row in enumerate(cells):
            first = row[0].ljust(widths[0])
            rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            lines.append("  " + "  ".join([first, *rest]))
            if n == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        return "\n".join(lines)


@dataclass
class Check:
    """One target: the measured value, the bound, PASS/MISS (None: not measured)."""

    name: str
    value: float | None
    bound: float
    unit: str
    higher_is_better: bool = False

    @property
    def passed(self) -> bool | None:
        """True/False against the bound; None when there is no value."""
        if self.value is None or math.isnan(self.value):
            return None
        return self.value >= self.bound if self.higher_is_better else self.value <= self.bound

    def render(self) -> str:
        """One line: name, measured, target, verdict."""
        op = ">=" if self.higher_is_better else "<="
        verdict = {True: "PASS", False: "MISS", None: "n/a"}[self.passed]
        value = "-" if self.value is None else _cell(self.value)
        return f"  {verdict:<5} {self.name}: {value} {self.unit} (target {op} {self.bound:g})"


@dataclass
class Section:
    """What one scenario reports."""

    name: str
    tables: list[Table] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        """Tables, then targets, then notes."""
        parts = [f"== {self.name} =="]
        parts += [t.render() for t in self.tables]
        if self.checks:
            parts.append("targets\n" + "\n".join(c.render() for c in self.checks))
        parts += [f"note: {n}" for n in self.notes]
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, with each check's verdict."""
        out = asdict(self)
        for check, raw in zip(self.checks, out["checks"], strict=True):
            raw["passed"] = check.passed
        return out


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def write(sections: list[Section], meta: dict[str, Any]) -> Path:
    """Write the run to ``bench/results/<UTC timestamp>.json``; its path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / (datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + ".json")
    body = {"meta": meta, "sections": [s.to_json() for s in sections]}
    path.write_text(json.dumps(body, indent=2, default=str, allow_nan=True) + "\n")
    return path
