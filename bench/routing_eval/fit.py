"""Fit the semantic tier's fusion weights and refusal thresholds on the development half.

``python -m bench.routing_eval.fit [--model DIR] [--write]`` embeds the ``dev`` half of the
evaluation set with the router's model, then

1. picks the fusion weights (:class:`router.choose.semantic.Calibration`: skill, agent, example,
   lexical, lexical_k) that route the most in-domain dev messages to the right agent, on a
   grid (the skill document's weight is fixed at 1);
2. with those weights, picks the floor and the margin that route the most in-domain dev
   messages right while refusals stay at least 95% precise (refused messages that no agent
   serves) and at least 60% of those are refused; without such a pair, the pair with the
   most dev messages answered right (an in-domain message routed to its agent, or a message
   no agent serves refused), so refusing costs what it gains.

Nothing of the ``test`` half is looked at. ``--write`` stores the result in
``router/calibration.json`` (what the router ships); the accuracy benchmark fits again on
the same half and reports on the other.
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
from router.choose.semantic import CALIBRATION_FILE, Calibration, fuse

AGENT = (0.0, 0.1, 0.2, 0.35, 0.5)
EXAMPLE = (0.0, 0.25, 0.5, 1.0)
LEXICAL = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75)
LEXICAL_K = (1.0, 3.0, 10.0)
MARGINS = (0.0, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05)
MIN_PRECISION, MIN_RECALL = 0.95, 0.6


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


def rates(
    decided: Sequence[tuple[Features, str | None, float, float | None]], floor: float, margin: float
) -> tuple[float, float, float, float]:
    """In-domain accuracy, refusal precision, refusal recall and overall accuracy (refusing
    a message no agent serves counts as right) at a floor and margin."""
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
    overall = (right + refused_out) / max(inside + outside, 1)
    return right / max(inside, 1), precision, refused_out / max(outside, 1), overall


def fit_thresholds(feats: Sequence[Features], cal: Calibration) -> Calibration:
    """The floor and margin (see the module docs) for the given weights."""
    decided = [(f, *decide(f, cal)) for f in feats]
    scores = sorted(s for _, a, s, _ in decided if a is not None and np.isfinite(s))
    floors = sorted(set(np.round(np.quantile(scores, np.linspace(0, 0.6, 61)), 4)))
    best: tuple[tuple[bool, float], float, float] | None = None
    for floor, margin in itertools.product(floors, MARGINS):
        accuracy, precision, recall, overall = rates(decided, floor, margin)
        feasible = precision >= MIN_PRECISION and recall >= MIN_RECALL
        key = (feasible, accuracy if feasible else overall)
        if best is None or key > best[0]:
            best = (key, float(floor), margin)
    assert best is not None
    return replace(cal, floor=best[1], margin=best[2])


def fit(feats: Sequence[Features], *, lexical: bool = True, note: str = "") -> Calibration:
    """Weights, then thresholds, on ``feats`` (the dev half)."""
    cal = fit_thresholds(feats, fit_weights(feats, lexical=lexical))
    inside = sum(f.message.in_domain for f in feats)
    fitted = f"{len(feats)} dev messages ({inside} in domain){note}"
    return replace(cal, fitted_on=fitted)


async def _main(model: Path | None, write: bool) -> None:
    from router.choose.models import local_embedder

    embedder = await asyncio.to_thread(local_embedder, model)
    dev = [m for m in messages() if m.half == "dev"]
    async with catalog(embedder) as env:
        feats = await features(env, dev)
    for lexical in (False, True):
        cal = fit(feats, lexical=lexical, note=f", model {embedder.model_id}")
        decided = [(f, *decide(f, cal)) for f in feats]
        accuracy, precision, recall, _ = rates(decided, cal.floor, cal.margin)
        name = "hybrid" if lexical else "semantic"
        print(f"{name}: {json.dumps(cal.to_json())}")
        print(f"  dev: top-1 {accuracy:.3f}, refusal precision {precision:.3f} recall {recall:.3f}")
    if write:
        CALIBRATION_FILE.write_text(json.dumps(cal.to_json(), indent=2) + "\n")
        print(f"written to {CALIBRATION_FILE}")


def main() -> None:
    """The command line (see the module docs)."""
    parser = argparse.ArgumentParser(prog="python -m bench.routing_eval.fit", description=__doc__)
    parser.add_argument(
        "--model", type=Path, help="a local model directory (default: the router's)"
    )
    parser.add_argument("--write", action="store_true", help="write router/calibration.json")
    args = parser.parse_args()
    asyncio.run(_main(args.model, args.write))


if __name__ == "__main__":
    main()
