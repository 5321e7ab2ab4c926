"""Fit the semantic tier's fusion weights and refusal thresholds on the development half.

``python -m bench.routing_eval.fit [--model DIR] [--write]`` embeds the ``dev`` half of the
evaluation set with the router's model, then

1. picks the fusion weights (:class:`router.choose.semantic.Calibration`: skill, agent, example,
   lexical, lexical_k) that route the most in-domain dev messages to the right agent, on a
   grid (the skill document's weight is fixed at 1);
2. with those weights, picks each operating point of ``SWITCHBOARD_REFUSE``
   (:data:`BUDGETS`): the threshold and the margin that refuse the most dev messages no
   agent serves while losing at most the point's budget of top-1 (in-domain messages routed
   to their agent) against never refusing (ties: more top-1, then the lower threshold).
   ``calibrated`` may lose 0.02, ``strict`` 0.06; ``never`` refuses nothing below the
   threshold, which stays the calibrated one.

Nothing of the ``test`` half is looked at. ``--write`` stores the result in
``router/choose/calibration.json`` (what the router ships); the accuracy benchmark fits
again on the same half and reports on the other (:func:`curve` gives the trade-off there).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.routing_eval.dataset import messages
from bench.routing_eval.harness import Features, catalog, features
from router.choose.semantic import CALIBRATION_FILE, REFUSE_POINTS, Calibration, fuse

AGENT = (0.0, 0.1, 0.2, 0.35, 0.5)
EXAMPLE = (0.0, 0.25, 0.5, 1.0)
LEXICAL = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)
LEXICAL_K = (1.0, 3.0, 10.0)
MARGINS = (0.0, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02)
BUDGETS = {"calibrated": 0.02, "strict": 0.06}
"""Per operating point, the top-1 it may lose against never refusing (on the dev half)."""


def decide(f: Features, cal: Calibration) -> tuple[str | None, float, float | None]:
    """The best fitting agent, its score and its margin over the next agent (no refusal)."""
    fused = fuse(cal, f.skill, f.agent, f.example, f.lexical)
    fused = np.where(f.fits, fused, -np.inf)
    best = int(np.argmax(fused))
    if not np.isfinite(fused[best]):
        return None, float("-inf"), None
    agent = f.agents[best]
    others = [fused[n] for n in range(len(fused)) if f.agents[n] != agent and f.fits[n]]
    margin = float(fused[best] - max(others)) if others else None
    return agent, float(fused[best]), margin


def fit_weights(feats: Sequence[Features], *, lexical: bool = True) -> Calibration:
    """The weights routing the most in-domain messages right (ties: the first on the grid)."""
    inside = [f for f in feats if f.message.in_domain]
    best: tuple[int, Calibration] | None = None
    for a, e, lx, k in itertools.product(AGENT, EXAMPLE, LEXICAL if lexical else (0.0,), LEXICAL_K):
        if not lexical and k != LEXICAL_K[0]:
            continue
        cal = Calibration(skill=1.0, agent=a, example=e, lexical=lx, lexical_k=k)
        right = sum(decide(f, cal)[0] == f.message.agent for f in inside)
        if best is None or right > best[0]:
            best = (right, cal)
    assert best is not None
    return best[1]


Decided = tuple[Features, str | None, float, float | None]


def rates(
    decided: Sequence[Decided], floor: float, margin: float
) -> tuple[float, float, float, float]:
    """In-domain accuracy (top-1), refusal precision, refusal recall (of the messages no
    agent serves, those refused) and the share of in-domain messages refused (false
    refusals) at a threshold and margin."""
    right = refused_out = refused_in = outside = inside = 0
    for f, agent, score, lead in decided:
        refused = agent is None or score < floor or (lead is not None and lead < margin)
        if f.message.in_domain:
            inside += 1
            right += not refused and agent == f.message.agent
            refused_in += refused
        else:
            outside += 1
            refused_out += refused
    refused = refused_in + refused_out
    precision = refused_out / refused if refused else 1.0
    return (
        right / max(inside, 1), precision, refused_out / max(outside, 1),
        refused_in / max(inside, 1),
    )  # fmt: skip


def fit_point(decided: Sequence[Decided], budget: float) -> tuple[float, float]:
    """The threshold and margin refusing the most messages no agent serves while losing at
    most ``budget`` of top-1 against never refusing (ties: more top-1, the lower threshold,
    the smaller margin)."""
    never = rates(decided, -np.inf, 0.0)[0]
    scores = sorted(s for _, a, s, _ in decided if a is not None and np.isfinite(s))
    # rounded down: the lowest threshold refuses no message by its score
    floors = sorted(set(np.floor(np.quantile(scores, np.linspace(0, 0.8, 161)) * 1e4) / 1e4))
    best: tuple[tuple[float, float, float, float], float, float] | None = None
    for floor, margin in itertools.product(floors, MARGINS):
        top1, _, recall, _ = rates(decided, floor, margin)
        if top1 < never - budget - 1e-9:
            continue
        key = (recall, top1, -floor, -margin)
        if best is None or key > best[0]:
            best = (key, float(floor), margin)
    assert best is not None  # the lowest threshold and no margin refuse nothing
    return best[1], best[2]


def fit_thresholds(feats: Sequence[Features], cal: Calibration) -> Calibration:
    """Each operating point's threshold and margin (see the module docs) for the weights."""
    decided = [(f, *decide(f, cal)) for f in feats]
    floor, margin = fit_point(decided, BUDGETS["calibrated"])
    strict_floor, strict_margin = fit_point(decided, BUDGETS["strict"])
    return replace(
        cal, floor=floor, margin=margin, strict_floor=strict_floor, strict_margin=strict_margin
    )


def fit(feats: Sequence[Features], *, lexical: bool = True, note: str = "") -> Calibration:
    """Weights, then thresholds, on ``feats`` (the dev half)."""
    cal = fit_thresholds(feats, fit_weights(feats, lexical=lexical))
    inside = sum(f.message.in_domain for f in feats)
    fitted = f"{len(feats)} dev messages ({inside} in domain){note}"
    return replace(cal, fitted_on=fitted)


def curve(
    feats: Sequence[Features], cal: Calibration, thresholds: Sequence[float]
) -> list[tuple[float, float, float, float]]:
    """Per threshold (with the calibrated margin): top-1, false refusals (in-domain messages
    refused), refusals of messages no agent serves (out-of-domain recall), and refusal
    precision."""
    decided = [(f, *decide(f, cal)) for f in feats]
    out = []
    for threshold in thresholds:
        top1, precision, recall, false = rates(decided, threshold, cal.margin)
        out.append((top1, false, recall, precision))
    return out


async def _main(model: Path | None, write: bool) -> None:
    from router.choose.models import local_embedder

    embedder = await asyncio.to_thread(local_embedder, model)
    dev = [m for m in messages() if m.half == "dev"]
    async with catalog(embedder) as env:
        feats = await features(env, dev)
    for lexical in (False, True):
        cal = fit(feats, lexical=lexical, note=f", model {embedder.model_id}")
        decided = [(f, *decide(f, cal)) for f in feats]
        name = "hybrid" if lexical else "semantic"
        print(f"{name}: {json.dumps(cal.to_json())}")
        for point in REFUSE_POINTS:
            cut = cal.cutoff(point)
            if point == "never":  # below the threshold and by the margin: routed anyway
                top1, precision, recall, false = rates(decided, -np.inf, 0.0)
            else:
                top1, precision, recall, false = rates(decided, cut.threshold, cut.margin)
            print(
                f"  dev, {point}: top-1 {top1:.3f}, false refusals {false:.3f}, refusal "
                f"precision {precision:.3f}, recall {recall:.3f}"
            )
    if write:
        CALIBRATION_FILE.write_text(json.dumps(cal.to_json(), indent=2) + "\n")
        print(f"written to {CALIBRATION_FILE}")


def main() -> None:
    """The command line (see the module docs)."""
    parser = argparse.ArgumentParser(prog="python -m bench.routing_eval.fit", description=__doc__)
    parser.add_argument(
        "--model", type=Path, help="a local model directory (default: the router's)"
    )
    parser.add_argument("--write", action="store_true", help="write router/choose/calibration.json")
    args = parser.parse_args()
    asyncio.run(_main(args.model, args.write))


if __name__ == "__main__":
    main()
