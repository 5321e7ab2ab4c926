"""The whole choice of an agent for one call, with the tiers that wait on I/O.

:class:`router.choose.matcher.Matcher` decides synchronously on the catalog snapshot. Around it,
:class:`Chooser` embeds the message first (the semantic tier, :mod:`router.choose.semantic`) and,
when the decision is uncertain (a small margin between the two best agents, or a score near
the floor) and an LLM adjudicator is configured (:mod:`router.choose.adjudicator`), asks it to pick
one of the best candidates or none; a timeout, an error or an answer that is not one of the
candidates falls back to the embedding decision (or its refusal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from router.choose.adjudicator import Adjudicator, Option, Verdict
from router.choose.grants import EVERYTHING, Grant
from router.choose.matcher import MAX_QUERY_CHARS, ROUTING_EXTENSION, Choice, Decision, Matcher
from router.choose.refusals import default_route
from router.choose.semantic import Semantic
from router.protocol import payloads as wire
from router.protocol.errors import NO_MATCHING_AGENT, RpcError
from router.protocol.versions import Op, Version


class Chooser:
    """Chooses the agent for a call: matching, with the message's vector and an adjudicator."""

    def __init__(
        self,
        matcher: Matcher,
        semantic: Semantic | None = None,
        adjudicator: Adjudicator | None = None,
    ) -> None:
        self.matcher = matcher
        self.semantic = semantic
        self.adjudicator = adjudicator

    async def choose(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        context_agents: Iterable[str] = frozenset(),
        pinned_agent: str | None = None,
        grant: Grant = EVERYTHING,
    ) -> Choice:
        """The agent for this call among those ``grant`` allows; RpcError when there is none
        (see :meth:`Matcher.choose`)."""
        if pinned_agent is not None:
            return self.matcher.choose(version, op, params, pinned_agent=pinned_agent, grant=grant)
        decision, text = await self._decide(
            version, op, params, context_agents, complete=False, grant=grant
        )
        verdict = await self._adjudicate(decision, text)
        return self._final(decision, verdict, version, op, params, grant)

    async def explain(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        limit: int = 100,
        grant: Grant = EVERYTHING,
    ) -> dict[str, Any]:
        """The explain view (see :meth:`Matcher.explain`), with the adjudicator's part and the
        final choice or error, among what ``grant`` allows."""
        decision, text = await self._decide(version, op, params, (), complete=True, grant=grant)
        verdict = await self._adjudicate(decision, text)
        extra: dict[str, Any] = {}
        if verdict is not None:
            extra["adjudicator"] = {
                "outcome": verdict.outcome,
                "detail": verdict.detail,
                "elapsed_ms": round(verdict.elapsed_ms, 1),
                "pick": (
                    {"agent": verdict.option.agent_id, "skill": verdict.option.skill_id}
                    if verdict.option
                    else None
                ),
            }
        out = self.matcher.explain_decision(decision, limit=limit, extra=extra)
        try:
            choice = self._final(decision, verdict, version, op, params, grant)
        except RpcError as error:
            out["choice"] = None
            out["error"] = {"code": error.code, "message": error.message, "data": error.data}
        else:
            out["choice"], out["error"] = choice.to_json(), None
        if self.semantic is not None and self.semantic.failure:
            out["semantic_failure"] = self.semantic.failure
        return out

    async def close(self) -> None:
        """Close the adjudicator's client and the embedding thread."""
        if self.adjudicator is not None:
            await self.adjudicator.close()
        if self.semantic is not None:
            self.semantic.close()

    async def _decide(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        context_agents: Iterable[str],
        *,
        complete: bool,
        grant: Grant = EVERYTHING,
    ) -> tuple[Decision, str]:
        text = _text(version, params)
        vector: np.ndarray | None = None
        if self.semantic is not None and text.strip():
            vector = await self.semantic.query_vector(text)
        decision = self.matcher.decide(
            version, op, params, context_agents=context_agents, vector=vector, complete=complete,
            grant=grant,
        )  # fmt: skip
        return decision, text

    async def _adjudicate(self, decision: Decision, text: str) -> Verdict | None:
        if self.adjudicator is None or not decision.uncertain or not decision.options:
            return None
        snapshot = self.matcher.registry.catalog.snapshot
        options = []
        for c in decision.options:
            agent = snapshot.agents.get(c.agent_id)
            skill = (
                next((s for s in agent.card.skills if s.id == c.skill_id), None) if agent else None
            )
            if agent is not None and skill is not None:
                name = f"{skill.name} ({agent.card.name})"
                options.append(
                    Option(c.agent_id, c.skill_id or "", name, skill.description, c.score)
                )
        if not options:
            return None
        return await self.adjudicator.adjudicate(text, options)

    def _final(
        self,
        decision: Decision,
        verdict: Verdict | None,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        grant: Grant = EVERYTHING,
    ) -> Choice:
        """The settled choice; a refusal goes to the default route, if one is set."""
        try:
            return self._settle(decision, verdict)
        except RpcError as refusal:
            target = (self.matcher.default_agent, self.matcher.default_skill)
            index = self.matcher.skill_index(grant)
            fallback = default_route(self.matcher, index, target, version, op, params, refusal)
            if fallback is None:
                raise
            return fallback

    def _settle(self, decision: Decision, verdict: Verdict | None) -> Choice:
        if verdict is None or verdict.outcome in ("timeout", "error", "invalid"):
            return self.matcher.settle(decision)  # the embedding decision, or its refusal
        if verdict.outcome == "none" or verdict.option is None:
            raise RpcError(
                NO_MATCHING_AGENT,
                "no agent can take this message: the closest skills were judged not to fit it",
                {
                    "reason": "no match",
                    "tier": "llm",
                    "extension": ROUTING_EXTENSION,
                    "detail": verdict.detail,
                    "closest": [
                        {"agent": c.agent_id, "skill": c.skill_id, "score": c.score}
                        for c in decision.options
                    ],
                },
            )
        pick = next(
            c
            for c in decision.options
            if (c.agent_id, c.skill_id) == (verdict.option.agent_id, verdict.option.skill_id)
        )
        return self.matcher.settle(decision, pick)


def _text(version: Version, params: Mapping[str, Any]) -> str:
    """The matched text of a call's message ('' when the params are not a valid message:
    the matcher answers that error)."""
    try:
        return wire.message_text(version, wire.message_of(version, params))[:MAX_QUERY_CHARS]
    except RpcError:
        return ""
