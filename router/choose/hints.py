"""The routing hint: a client names the skill or agent it wants.

``metadata["urn:a2a-switchboard:routing:v1"] = {"skill": id}`` and/or ``{"agent": id}`` on the
message (read first) or the request params, declared as an extension in the router's card.
``{"agent"}`` takes that agent's best-scoring fitting skill, ``{"skill"}`` the best agent
having it, both: that skill of that agent. An unknown, unroutable or incompatible skill or
agent is ``-32051``, never a fallback to matching.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.choose.choice import (
    ROUTING_EXTENSION,
    Decision,
    Evaluator,
    label,
    phrase,
    rank_key,
    ranked,
)
from router.choose.skillindex import SkillIndex
from router.protocol.errors import BAD_ROUTING_HINT, RpcError
from router.protocol.versions import Op, Version


def parse_hint(version: Version, params: Mapping[str, Any]) -> dict[str, str] | None:
    """The routing hint of a call (message metadata first, then params metadata), if any.

    Returns ``{"skill": id}`` and/or ``{"agent": id}``; RpcError -32051 when malformed.
    """
    message = params.get("message")
    for where, holder in (("message.metadata", message), ("metadata", params)):
        metadata = holder.get("metadata") if isinstance(holder, Mapping) else None
        if not isinstance(metadata, Mapping) or ROUTING_EXTENSION not in metadata:
            continue
        value = metadata[ROUTING_EXTENSION]
        hint = {k: value.get(k) for k in ("skill", "agent")} if isinstance(value, dict) else {}
        hint = {k: v for k, v in hint.items() if v is not None}
        if not hint or not all(isinstance(v, str) and v for v in hint.values()):
            raise RpcError(
                BAD_ROUTING_HINT,
                f'the routing hint in {where} must be an object naming a "skill" and/or an '
                '"agent" by id (non-empty strings)',
                {"extension": ROUTING_EXTENSION, "field": where, "value": value},
            )
        return hint
    return None


def by_hint(
    matcher: Evaluator,
    index: SkillIndex,
    hint: dict[str, str],
    version: Version,
    op: Op,
    media: list[str],
    accepted: list[str],
    scores: dict[int, float],
    context_agents: frozenset[str],
) -> Decision:
    agent_id, skill_id = hint.get("agent"), hint.get("skill")
    named = " and ".join(
        f"{kind} {value!r}" for kind, value in (("agent", agent_id), ("skill", skill_id)) if value
    )
    if agent_id is not None:
        if agent_id not in index.by_agent:
            return _hint_error(
                f"the routing hint names agent {agent_id!r}, which is not registered",
                hint,
                "unknown agent",
            )
        rows = index.by_agent[agent_id]
        if skill_id is not None:
            rows = [n for n in rows if (s := index.rows[n].skill) and s.id == skill_id]
            if not rows:
                found = (index.rows[n].skill for n in index.by_agent[agent_id])
                skills = [s.id for s in found if s is not None]  # those the caller may use
                return _hint_error(
                    f"agent {agent_id!r} has no skill {skill_id!r}",
                    hint,
                    f"the agent's skills are: {', '.join(skills) or 'none'}",
                )
    else:
        assert skill_id is not None
        rows = index.by_skill.get(skill_id, [])
        if not rows:
            return _hint_error(
                f"the routing hint names skill {skill_id!r}, which no registered agent has",
                hint,
                "unknown skill",
            )
    evaluated = matcher.evaluate(
        index, rows, version, op, media, accepted, scores, None, skill_less=True
    )
    candidates = [c for _, c in evaluated]
    kept = [(n, c) for n, c in evaluated if c.kept]
    if not kept:
        reasons = "; ".join(dict.fromkeys(f"{label(c)}: {phrase(c.reason)}" for c in candidates))
        error = RpcError(
            BAD_ROUTING_HINT,
            f"the routing hint names {named}, which cannot take this call: {reasons}",
            {
                "extension": ROUTING_EXTENSION,
                "hint": hint,
                "reason": reasons,
                "candidates": [
                    {"agent": c.agent_id, "skill": c.skill_id, "reason": c.reason}
                    for c in candidates
                ],
            },
        )
        return Decision(None, error, ranked(candidates))
    n, best = min(kept, key=lambda item: rank_key(item, index, context_agents))
    return matcher.finish(
        index, n, best, candidates, "hint", f"the routing hint names it ({named})", version
    )


def _hint_error(message: str, hint: dict[str, str], reason: str) -> Decision:
    error = RpcError(
        BAD_ROUTING_HINT, message, {"extension": ROUTING_EXTENSION, "hint": hint, "reason": reason}
    )
    return Decision(None, error, [])
