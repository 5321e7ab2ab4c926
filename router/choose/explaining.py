"""The explain view of a routing decision (``POST /api/v1/route/explain``).

:func:`explain_view` shows what :meth:`router.choose.chooser.Chooser.route` decided (the
choice or the error the send gets) and why: one threshold, the one that decided
(``threshold``, its ``threshold_source``: ``calibrated``, ``operator`` or, by words,
``default``; the ``margin_needed``, the operating point ``refuse`` and the ``scale`` scores
are on), every candidate with its score, whether it was kept, a sentence saying why, and for
matching by meaning its ``features``, each on [0, 1] or null when absent.

Deprecated, kept for one version: ``floor`` (the threshold of matching by meaning, now
``threshold``) and each candidate's ``features_raw`` (cosines, -1 for none, the raw BM25
score).
"""

from __future__ import annotations

from typing import Any

from router.choose.choice import Candidate, Choice, Decision, error_view, phrase, sentence
from router.choose.meaning import pending_vectors
from router.choose.semantic import Cutoff

MEANING_SCALE = "fused score, 0 to 1"
WORDS_SCALE = "BM25 score"


def explain_view(
    matcher: Any,
    routed: Any,
    listing: Decision | None,
    *,
    limit: int = 100,
    failure: str | None = None,
) -> dict[str, Any]:
    """The view of ``routed`` (a :class:`router.choose.chooser.Routed`) with ``listing`` (the
    same decision with every candidate evaluated; None when matching did not run) and the
    semantic tier's last embedding ``failure``."""
    decision = listing or routed.decision
    context = dict(decision.context) if decision is not None else {}
    cut, scale = _cutoff(matcher, routed, context)
    index = matcher.skill_index()
    pending = pending_vectors(matcher.semantic, index) if matcher.by_meaning else 0
    out: dict[str, Any] = {
        "catalog_version": index.snapshot.version,
        **cut.to_json(),
        "scale": scale,
        "matcher": matcher.status,
    }
    if pending:
        out.update(vectors="pending", vectors_pending=pending)
    context.pop("cutoff", None)
    context.pop("scored", None)
    if scale == MEANING_SCALE:
        out["floor"] = cut.threshold  # deprecated: the threshold
    out.update(context)
    if routed.task is not None:
        out["task"] = routed.task
    out["context_agents"] = sorted(routed.serving)
    out["uncertain"] = routed.decision.uncertain if routed.decision is not None else None
    verdict = routed.verdict
    if verdict is not None:
        out["adjudicator"] = {
            "outcome": verdict.outcome,
            "detail": verdict.detail,
            "elapsed_ms": round(verdict.elapsed_ms, 1),
            "pick": (
                {"agent": verdict.option.agent_id, "skill": verdict.option.skill_id}
                if verdict.option
                else None
            ),
        }
    if listing is not None:
        candidates = _agreeing(listing.candidates, routed.choice, routed.error)
    elif routed.choice is not None:
        candidates = routed.choice.candidates
    else:
        candidates = decision.candidates if decision is not None else []
    out["candidates"] = [c.to_json() for c in candidates[:limit]]
    out["total_candidates"] = len(candidates)
    out["choice"] = routed.choice.to_json() if routed.choice is not None else None
    out["error"] = error_view(routed.error) if routed.error is not None else None
    if failure:
        out["semantic_failure"] = failure
    return out


def _cutoff(matcher: Any, routed: Any, context: dict[str, Any]) -> tuple[Cutoff, str]:
    """The threshold that decided: the one the decision was held to (matching by meaning's,
    or by words' for the lexical matcher and tier ``lexical-fallback``); when no score was (a
    task's owner, a pinned agent, a hint, a message without content), the one that would
    have been."""
    tier = routed.choice.tier if routed.choice is not None else None
    held = context.get("cutoff")
    if tier == "lexical-fallback" or context.get("scored") == "words":
        return matcher.words_cutoff(), WORDS_SCALE
    if isinstance(held, Cutoff):
        return held, MEANING_SCALE
    if matcher.semantic is not None:
        return matcher.cutoff(), MEANING_SCALE
    return matcher.words_cutoff(), WORDS_SCALE


def _agreeing(
    candidates: list[Candidate], choice: Choice | None, error: Any | None
) -> list[Candidate]:
    """The listed candidates, saying what the send does where the adjudicator, the default
    route or a guess settled otherwise than the best score."""
    key = (choice.agent.id, choice.skill_id) if choice is not None else None
    out = []
    for c in candidates:
        chosen = c.reason.startswith("Chosen:")
        if key is not None and (c.agent_id, c.skill_id) == key:
            if not chosen or choice.tier in ("llm", "guess", "default"):  # type: ignore[union-attr]
                reason = sentence(f"chosen: {phrase(choice.reason)}")  # type: ignore[union-attr]
                c = c.but(kept=True, filter=None, reason=reason)
        elif chosen and choice is not None:
            c = c.but(reason=f"It scores best, but the {choice.tier} tier chose another skill.")
        elif chosen and error is not None:
            c = c.but(kept=False, reason=sentence(f"it scores best, but {phrase(error.message)}"))
        out.append(c)
    return out
