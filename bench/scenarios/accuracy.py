"""Scenario 6, routing accuracy: the evaluation set of ``bench/routing_eval`` through the
router's real choosing code, fitted on the ``dev`` half and reported on the ``test`` half.

Rows: lexical (BM25 and its threshold, the router before meaning), semantic (embeddings
alone, weights and thresholds fitted with no lexical part), hybrid (embeddings fused with
BM25: what the router ships) at each operating point of ``SWITCHBOARD_REFUSE`` (calibrated,
the default; strict; never), and hybrid + learned examples (20% of the hybrid's mistakes on
the dev half fed back as an operator would, then the test half scored). Then the trade-off
curve of the hybrid's threshold on the test half (top-1 and false refusals against refusals
of messages no agent serves), and the same hybrid with each other model option found, for
the choice of model. Decision times include the message's embedding (never cached here) and
run in process on this machine.
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.options import Options
from bench.report import Check, Section, Table
from bench.routing_eval.dataset import Message, messages
from bench.routing_eval.fit import curve, fit
from bench.routing_eval.harness import Scores, catalog, evaluate, features, learn
from registry.embedding.fetch import fetch_model
from router.choose.models import data_dir, local_embedder
from router.choose.semantic import Calibration

FEEDBACK_SHARE = 0.2
CURVE_STEPS = (-0.04, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08)
"""The thresholds of the curve: the calibrated one plus these."""


def _row(name: str, s: Scores) -> list[Any]:
    return [
        name,
        s.top1,
        s.media,
        s.false_refusals,
        s.refusal_precision,
        s.refusal_recall,
        s.latency_ms(50),
        s.latency_ms(99),
    ]


def _hash(m: Message) -> str:
    return hashlib.sha256(m.id.encode()).hexdigest()


async def _rows(
    embedder: Any, dev: Sequence[Message], test: Sequence[Message], *, full: bool
) -> tuple[list[list[Any]], dict[str, Any]]:
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    async with catalog(embedder) as env:
        assert env.semantic is not None
        feats = await features(env, dev)
        calibrations = {"hybrid": fit(feats, lexical=True)}
        if full:
            calibrations = {"semantic": fit(feats, lexical=False), **calibrations}
        for name, cal in calibrations.items():
            env.semantic.calibration = cal
            scores = await evaluate(env, test)
            rows.append(_row(name, scores))
            data[name] = {"calibration": cal.to_json(), "test": rows[-1][1:]}
        env.semantic.calibration = calibrations["hybrid"]
        if full:
            for point in ("strict", "never"):
                env.matcher.refuse = point
                rows.append(_row(f"hybrid, SWITCHBOARD_REFUSE={point}", await evaluate(env, test)))
                data[f"hybrid {point}"] = {"test": rows[-1][1:]}
            env.matcher.refuse = "calibrated"
            cal = calibrations["hybrid"]
            thresholds = [round(cal.floor + step, 4) for step in CURVE_STEPS]
            points = curve(await features(env, test), cal, thresholds)
            data["curve"] = [[t, *p] for t, p in zip(thresholds, points, strict=True)]
            dev_scores = await evaluate(env, dev)
            mistakes = [o for o in dev_scores.outcomes if o.message.in_domain and not o.correct]
            chosen = sorted(mistakes, key=lambda o: _hash(o.message))
            chosen = chosen[: math.ceil(FEEDBACK_SHARE * len(mistakes))]
            await learn(env, chosen)
            scores = await evaluate(env, test)
            rows.append(_row(f"hybrid + {len(chosen)} learned examples", scores))
            data["learned"] = {"fed_back": len(chosen), "dev_mistakes": len(mistakes)}
        data["index_s"] = env.index_seconds
    return rows, data


async def run(opts: Options) -> Section:
    """Fit on dev, report on test (see the module docs)."""
    section = Section("6. routing accuracy (bench/routing_eval, in process)")
    everything = messages()
    if opts.quick:
        everything = everything[::8]
    dev = [m for m in everything if m.half == "dev"]
    test = [m for m in everything if m.half == "test"]
    inside = sum(m.in_domain for m in test)
    section.notes.append(
        f"{len(everything)} messages: fitted on {len(dev)} (dev), reported on {len(test)} "
        f"(test: {inside} in domain, {len(test) - inside} that no agent serves, "
        f"{sum(m.media_decided for m in test)} decided by media type or output mode)"
    )
    directory = fetch_model(data_dir(), log=lambda line: section.notes.append(line))
    columns = [
        "matcher", "top-1", "media top-1", "false refusals", "refusal P", "refusal R",
        "p50 ms", "p99 ms",
    ]  # fmt: skip
    table = Table(f"test half ({len(test)} messages)", columns)
    async with catalog(None) as env:
        table.rows.append(_row("lexical (BM25, threshold 0.5)", await evaluate(env, test)))
    before = _rss_mib()
    start = time.perf_counter()
    embedder = local_embedder(directory)
    cold = time.perf_counter() - start
    grown = _rss_mib() - before
    rows, data = await _rows(embedder, dev, test, full=True)
    table.rows += rows
    section.tables.append(table)
    hybrid = next(r for r in rows if r[0] == "hybrid")
    never = next(r for r in rows if r[0].endswith("=never"))
    strict = next(r for r in rows if r[0].endswith("=strict"))
    trade = Table(
        "the hybrid's threshold on the test half, the calibrated margin (the calibrated "
        f"threshold is {data['hybrid']['calibration']['floor']:g}, the strict one "
        f"{data['hybrid']['calibration']['strict_floor']:g})",
        ["threshold", "top-1", "false refusals", "out-of-domain refused", "refusal P"],
    )
    trade.rows += data["curve"]
    section.tables.append(trade)
    models = Table(
        "model options, hybrid (fitted on dev for each), test half; load: time and resident memory "
        "added by loading the model (the static row finds its table next to the loaded MiniLM; "
        "it is distilled on first use, in about a minute)",
        ["model", *columns[1:], "load s", "load MiB"],
    )
    models.rows.append([f"{embedder.name} (128 tokens)", *hybrid[1:], cold, grown])
    for label, make in _options(directory):
        before = _rss_mib()
        start = time.perf_counter()
        other = make()
        load = time.perf_counter() - start
        grown = _rss_mib() - before
        other_rows, _ = await _rows(other, dev, test, full=False)
        models.rows.append([label, *other_rows[0][1:], load, grown])
    section.tables.append(models)
    section.data = {"model_dir": str(directory), **data}
    shipped = Calibration.load()
    if replace(shipped, fitted_on="") != replace(
        Calibration(**data["hybrid"]["calibration"]), fitted_on=""
    ):
        section.notes.append(
            "router/choose/calibration.json differs from this fit (refit with "
            "`python -m bench.routing_eval.fit --write` after changing the set or the model)"
        )
    section.checks += [
        Check("hybrid top-1 accuracy (test half)", hybrid[1], 0.90, "", higher_is_better=True),
        Check("top-1 lost against never refusing (test half)", never[1] - hybrid[1], 0.02, ""),
        Check("refusal precision (test half)", hybrid[4], 0.95, "", higher_is_better=True),
        Check("refusal recall (test half)", hybrid[5], 0.6, "", higher_is_better=True),
        Check("decision p99, 42 agents (embedding included)", hybrid[7], 10.0, "ms"),
    ]
    section.notes.append(
        f"SWITCHBOARD_REFUSE=strict: top-1 {strict[1]:.3f} against {never[1]:.3f} never refusing "
        f"(calibrated {hybrid[1]:.3f}), out-of-domain refused {strict[5]:.2f} (calibrated "
        f"{hybrid[5]:.2f})"
    )
    section.notes.append(
        f"BLAS threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}"
    )
    return section


def _rss_mib() -> float:
    """This process's resident memory now (Linux), in MiB."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * resource.getpagesize() / 2**20


def _options(directory: Path) -> list[tuple[str, Any]]:
    """Other local model options to compare (each a label and a loader)."""
    from registry.embedding.static import StaticEmbedder, static_model

    return [
        ("all-MiniLM-L6-v2 (48 tokens)", lambda: local_embedder(directory, max_tokens=48)),
        (
            "static 256-d, distilled from all-MiniLM-L6-v2",
            lambda: StaticEmbedder(static_model(local_embedder(directory))),
        ),
    ]
