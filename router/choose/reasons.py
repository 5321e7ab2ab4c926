"""Why matching refused a message: the ``-32050`` that names the decisive reason.

When every candidate whose score reaches the threshold was dropped by the same hard filter,
the message names that filter ("the agents whose skills fit do not accept video/mp4"); when
several filters share the work, it names each; when no skill the caller may use reaches the
threshold but one it may not use does, it says so ("no agent you may use offers this
skill", without naming that agent); otherwise the best score was below the threshold.

``data`` holds the facts: ``reason`` (``no match``, ``filtered``, ``not allowed``), ``tier``
(``refused``), ``threshold`` and, with the semantic tier, ``score`` (the best fitting
skill's, if any), ``filter`` (what dropped them: ``input``, ``output``, ``policy``,
``health``, ``interface``, ``streaming``, or ``several``) and ``closest``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from registry import mediatypes
from router.choose.choice import Candidate, Filter, closest
from router.choose.skillindex import SkillIndex
from router.protocol.errors import NO_MATCHING_AGENT, RpcError

FIT = "the agents whose skills fit"
NOT_ALLOWED = "no agent you may use offers this skill"


def _filtered(kind: Filter, media: list[str], accepted: list[str]) -> str:
    """What one filter did to every fitting candidate, as the end of a sentence."""
    if kind == "input":
        others = [m for m in media if not mediatypes.matches(m, "text/plain")]
        types = ", ".join(dict.fromkeys(others or media))  # text next to parts: their instruction
        return f"do not accept {types}"
    if kind == "output":
        return f"do not output any of {', '.join(accepted)}"
    if kind == "policy":
        return "are not routable: their cards are not verified (SWITCHBOARD_REQUIRE_SIGNED_CARDS)"
    if kind == "health":
        return "are unreachable"
    if kind == "interface":
        return "have no interface the router can call"
    if kind == "streaming":
        return "do not stream"
    return "cannot take it"


def refusal(
    registry: Any,
    index: SkillIndex,
    candidates: list[Candidate],
    *,
    threshold: float,
    media: list[str],
    accepted: list[str],
    hidden: bool = False,
    score: float | None = None,
    semantic: bool = False,
) -> RpcError:
    """The ``-32050`` of a message no candidate can take (see the module docs).
    ``candidates``: every candidate looked at, with its score (before the hard filters) and
    what dropped it; ``hidden``: a skill the caller may not use reaches ``threshold``;
    ``score``: the best fitting skill's score (semantic tier)."""
    reached = [c for c in candidates if c.filter not in (None, "score") and c.score >= threshold]
    reached = [c for c in reached if c.skill_id is not None]
    data: dict[str, Any] = {"reason": "no match", "tier": "refused", "threshold": threshold}
    if semantic:
        data["score"] = score
    kinds = Counter(c.filter for c in reached if c.filter is not None)
    if len(kinds) == 1:
        ((kind, _),) = kinds.items()
        data.update(reason="filtered", filter=kind)
        why = f"{FIT} {_filtered(kind, media, accepted)}"
    elif kinds:
        data.update(reason="filtered", filter="several")
        found = [_filtered(kind, media, accepted) for kind in sorted(kinds)]
        why = f"{FIT} cannot take it: some {found[0]}, " + ", ".join(
            f"others {what}" for what in found[1:]
        )
    elif hidden:
        data["reason"] = "not allowed"
        why = NOT_ALLOWED
    elif score is not None:
        why = (
            f"no agent has a skill that matches it well enough: the best scores {score:g}, "
            f"below the threshold {threshold:g}"
        )
    elif semantic:
        why = "no skill both matches it and can take the call"
    else:
        why = f"no skill matches its words well enough (a score of {threshold:g} or more)"
    data["closest"] = closest(candidates, registry, index)
    return RpcError(NO_MATCHING_AGENT, f"no agent can take this message: {why}", data)
