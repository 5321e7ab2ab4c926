"""The whole choice of an agent for one message, with the tiers that wait on I/O: one function,
:meth:`Chooser.route`, for the send and for explain.

In order: a message continuing a task goes to the task's owner (looked up in the caller's
ID space, :class:`Scope`); a pinned endpoint's agent; otherwise
:class:`router.choose.matcher.Matcher` decides synchronously on the catalog snapshot, with the
agents already serving the message's conversation as the tie-break. Around it,
:class:`Chooser` embeds the message first (the semantic tier, :mod:`router.choose.semantic`)
and, when the decision is uncertain (a small margin between the two best agents, or a score
near the threshold) and an LLM adjudicator is configured (:mod:`router.choose.adjudicator`),
asks it to pick one of the best candidates or none; a timeout, an error or an answer that is
not one of the candidates falls back to the embedding decision (or its refusal). A refusal
goes to the default route, if one is set, and with ``SWITCHBOARD_REFUSE=never`` a refusal
below the threshold (or by the margin) goes to the best candidate, as tier ``guess``.

:meth:`Chooser.choose` is what the send runs; :meth:`Chooser.explain` runs the same
:meth:`Chooser.route`, then lists every candidate for the record
(:mod:`router.choose.explaining`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from router.choose.adjudicator import Adjudicator, Option, Verdict
from router.choose.choice import ROUTING_EXTENSION, Choice, Decision
from router.choose.explaining import explain_view
from router.choose.grants import EVERYTHING, Grant
from router.choose.matcher import MAX_QUERY_CHARS, Matcher
from router.choose.refusals import default_route
from router.choose.semantic import Semantic
from router.choose.skillindex import query_text
from router.choose.words import content_words
from router.protocol import payloads as wire
from router.protocol.errors import BAD_ROUTING_HINT, NO_MATCHING_AGENT, TASK_NOT_FOUND, RpcError
from router.protocol.versions import Op, Version


@dataclass(frozen=True)
class Scope:
    """The caller as routing sees it: what it may use (``grant``) and its ID space: the
    agent owning one of its tasks (``owner``: RpcError ``-32001`` or ``-32052`` as the send
    answers them) and the agents serving one of its conversations (``serving``)."""

    grant: Grant = EVERYTHING
    owner: Callable[[str], Awaitable[str]] | None = None
    serving: Callable[[str], Awaitable[Iterable[str]]] | None = None


@dataclass
class Routed:
    """Where a message goes (``choice``) or the error it gets, and how that was found: the
    matcher's ``decision`` (None when the task's owner or a pinned endpoint decided), the
    adjudicator's ``verdict``, the ``task`` it continues, the ``serving`` agents."""

    choice: Choice | None = None
    error: RpcError | None = None
    decision: Decision | None = None
    verdict: Verdict | None = None
    task: dict[str, str] | None = None
    serving: frozenset[str] = field(default_factory=frozenset)

    def result(self) -> Choice:
        """The choice; RpcError when the message is refused."""
        if self.error is not None:
            raise self.error
        assert self.choice is not None
        return self.choice


class Chooser:
    """Chooses the agent for a message: the task's owner, matching with the message's vector,
    an adjudicator, the default route or a guess."""

    def __init__(
        self,
        matcher: Matcher,
        semantic: Semantic | None = None,
        adjudicator: Adjudicator | None = None,
    ) -> None:
        self.matcher = matcher
        self.semantic = semantic
        self.adjudicator = adjudicator

    async def route(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        scope: Scope = Scope(),
        *,
        pinned: str | None = None,
        context_agents: Iterable[str] = (),
    ) -> Routed:
        """Where the message of a send (``op`` SEND or STREAM, its ``params``) goes for the
        caller of ``scope`` (see the module docs); ``context_agents``: agents serving its
        conversation besides those ``scope`` finds. Never raises RpcError: the error is in
        the answer."""
        try:
            message = wire.message_of(version, params)
        except RpcError as error:
            return Routed(error=error)
        grant = scope.grant
        task_id = message.get("taskId")
        if isinstance(task_id, str) and task_id:
            task = {"taskId": task_id}
            try:
                if scope.owner is None:
                    raise RpcError(TASK_NOT_FOUND, f"no task with id {task_id!r}", task)
                owner = task["agent"] = await scope.owner(task_id)
                self._check_hint_agrees(version, params, owner)
                return Routed(self.matcher.target_for(version, owner, grant=grant), task=task)
            except RpcError as error:
                return Routed(error=error, task=task)
        serving = frozenset(context_agents)
        context_id = message.get("contextId")
        if isinstance(context_id, str) and context_id and scope.serving is not None:
            serving |= frozenset(await scope.serving(context_id))
        if pinned is not None:
            try:
                choice = self.matcher.choose(version, op, params, pinned_agent=pinned, grant=grant)
            except RpcError as error:
                return Routed(error=error, serving=serving)
            return Routed(choice, serving=serving)
        decision, text = await self._decide(version, op, params, serving, False, grant)
        verdict = await self._adjudicate(decision, text)
        try:
            choice = self._final(decision, verdict, version, op, params, grant)
        except RpcError as error:
            return Routed(None, error, decision, verdict, serving=serving)
        return Routed(choice, None, decision, verdict, serving=serving)

    async def choose(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        scope: Scope | None = None,
        *,
        context_agents: Iterable[str] = frozenset(),
        pinned_agent: str | None = None,
        grant: Grant = EVERYTHING,
    ) -> Choice:
        """The agent for this message (:meth:`route`) among those the grant (of ``scope``,
        else ``grant``) allows; RpcError when there is none."""
        scope = scope or Scope(grant)
        routed = await self.route(
            version, op, params, scope, pinned=pinned_agent, context_agents=context_agents
        )
        return routed.result()

    async def explain(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        scope: Scope | None = None,
        *,
        limit: int = 100,
        context_agents: Iterable[str] = (),
        grant: Grant = EVERYTHING,
    ) -> dict[str, Any]:
        """What :meth:`route` decides for this message, as the send would, and why: every
        candidate (at most ``limit`` listed) with its score and why it was kept or dropped,
        the adjudicator's part, the choice or the error."""
        scope = scope or Scope(grant)
        routed = await self.route(version, op, params, scope, context_agents=context_agents)
        listing = None
        if routed.decision is not None:  # matching ran: every candidate, for the record
            listing, _ = await self._decide(version, op, params, routed.serving, True, scope.grant)
        failure = self.semantic.failure if self.semantic is not None else None
        return explain_view(self.matcher, routed, listing, limit=limit, failure=failure)

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
        complete: bool,
        grant: Grant = EVERYTHING,
    ) -> tuple[Decision, str]:
        text = _text(version, params)
        vector: np.ndarray | None = None
        if self.semantic is not None and content_words(query_text(text)):
            vector = await self.semantic.query_vector(text)  # not for "hi": nothing to route
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
        """The settled choice; a refusal goes to the default route, if one is set, else
        (``SWITCHBOARD_REFUSE=never``) a refusal by the threshold or the margin goes to the
        best candidate."""
        try:
            return self._settle(decision, verdict)
        except RpcError as refusal:
            target = (self.matcher.default_agent, self.matcher.default_skill)
            index = self.matcher.skill_index(grant)
            fallback = default_route(self.matcher, index, target, version, op, params, refusal)
            if fallback is not None:
                return fallback
            if self.matcher.refuse == "never" and _by_confidence(refusal) and decision.options:
                return self._guess(decision, refusal)
            raise

    def _guess(self, decision: Decision, refusal: RpcError) -> Choice:
        """The best candidate of a refused decision, as tier ``guess``."""
        best = decision.options[0]
        data = refusal.data if isinstance(refusal.data, dict) else {}
        if data.get("reason") == "ambiguous":
            why = f"a guess: it leads the next agent by only {data.get('margin'):g}"
        else:
            cut = self.matcher.cutoff()
            why = f"a guess: it scores {best.score:g}, below the threshold {cut.threshold:g}"
        why += " (SWITCHBOARD_REFUSE=never)"
        return self.matcher.settle(decision, best, tier="guess", why=why)

    def _settle(self, decision: Decision, verdict: Verdict | None) -> Choice:
        if verdict is None or verdict.outcome in ("timeout", "error", "invalid"):
            return self.matcher.settle(decision)  # the embedding decision, or its refusal
        if verdict.outcome == "none" or verdict.option is None:
            raise RpcError(
                NO_MATCHING_AGENT,
                "no agent can take this message: the LLM adjudicator judged that none of the "
                f"closest skills fits it ({verdict.detail})",
                {
                    "reason": "no match",
                    "tier": "llm",
                    "extension": ROUTING_EXTENSION,
                    "verdict": verdict.detail,
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

    def _check_hint_agrees(self, version: Version, params: Mapping[str, Any], owner: str) -> None:
        """A message continuing a task goes to the task's owner; a routing hint naming
        another agent (or a skill the owner lacks) is an error, not silently ignored."""
        hint = self.matcher.hint(version, params)
        if not hint:
            return
        agent, skill = hint.get("agent"), hint.get("skill")
        record = self.matcher.registry.catalog.snapshot.agents.get(owner)
        owner_skills = {s.id for s in record.card.skills} if record is not None else set()
        if (agent and agent != owner) or (skill and skill not in owner_skills):
            raise RpcError(
                BAD_ROUTING_HINT,
                f"the routing hint does not fit task owner {owner!r}: a message that continues "
                "a task goes to the agent that owns it",
                {"hint": hint, "owner": owner},
            )


def _by_confidence(refusal: RpcError) -> bool:
    """Whether a refusal is the matcher's own (its threshold, its margin, or the filters
    that left only skills below the threshold): what ``SWITCHBOARD_REFUSE=never`` routes
    anyway, to a candidate that can take the call. The adjudicator's "none" stands."""
    data = refusal.data if isinstance(refusal.data, dict) else {}
    return refusal.code == NO_MATCHING_AGENT and data.get("tier") == "refused"


def _text(version: Version, params: Mapping[str, Any]) -> str:
    """The matched text of a call's message ('' when the params are not a valid message:
    the matcher answers that error)."""
    try:
        return wire.message_text(version, wire.message_of(version, params))[:MAX_QUERY_CHARS]
    except RpcError:
        return ""
