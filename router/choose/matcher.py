"""Choosing the agent for an A2A call, in order: a pinned agent, a routing hint, skill matching.

- **Pinned** (``/agents/{id}``, or the owner of a known task): that agent, no matching. It must
  still be routable (signed-card policy) and have a JSON-RPC or HTTP+JSON interface of A2A 0.3
  or 1.0.
- **Hint**: ``metadata["urn:a2a-switchboard:routing:v1"] = {"skill": id}`` and/or ``{"agent": id}``
  on the message (or, second, on the request params). An unknown, unroutable or incompatible
  skill or agent is ``-32051``, never a fallback to matching.
- **Matching**: every skill of every agent is a candidate, dropped by the hard filters of
  :mod:`router.choose.fits` (routable, an interface of the client's version or the other one,
  input media types, ``acceptedOutputModes``), the rest ranked by meaning fused
  with words (:mod:`router.choose.meaning`), or by words alone (:mod:`router.choose.words`:
  ``SWITCHBOARD_MATCHER=lexical``, or tier ``lexical-fallback`` while the model or the vectors
  are missing). Ties go to an agent already serving the conversation.

Thresholds: by meaning, the operating point of ``SWITCHBOARD_REFUSE`` in the calibration
(:meth:`router.choose.semantic.Calibration.cutoff`), or ``SWITCHBOARD_MATCH_THRESHOLD`` when
set; by words, the lexical threshold (``SWITCHBOARD_MATCH_THRESHOLD`` with the lexical
matcher, default 0.5): word rarity is judged as if the catalog held at least ``MIN_CORPUS``
skills, so one word in common with a skill scores 2 or more, while a word found in more than
about two thirds of a large catalog's skills scores under 0.5: 0.5 means "shares at least one
word that tells skills apart". Refusals name their decisive reason (:mod:`router.choose.reasons`).

:meth:`Matcher.decide` returns a :class:`router.choose.choice.Decision` that an adjudicator
may still settle (:mod:`router.choose.chooser`); :meth:`Matcher.choose` settles it at once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
from cachetools import LRUCache

from registry.cards import Interface
from registry.records import AgentRecord
from registry.service import Registry
from registry.settings import Settings
from router.choose.choice import (
    ROUTING_EXTENSION,
    Candidate,
    Choice,
    Decision,
    Filter,
    Target,
    Tier,
    Via,
    phrase,
    ranked,
    sentence,
)
from router.choose.fits import (
    NOT_REACHABLE,
    jsonrpc_interface,
    mode_problem,
    offers,
    route_interface,
    via_note,
)
from router.choose.grants import EVERYTHING, Grant, GrantedIndex
from router.choose.hints import by_hint, parse_hint
from router.choose.meaning import by_meaning, fell_back, until_embedded
from router.choose.reasons import refusal
from router.choose.refusals import content_type_refusal
from router.choose.semantic import Calibration, Cutoff, Refuse, Semantic
from router.choose.skillindex import MAX_QUERY_CHARS, SkillIndex, query_text
from router.choose.words import by_words, content_words, search_words
from router.protocol import payloads as wire
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    NO_MATCHING_AGENT,
    VERSION_NOT_SUPPORTED,
    RpcError,
)
from router.protocol.versions import Op, Version

__all__ = [
    "MAX_QUERY_CHARS",
    "ROUTING_EXTENSION",
    "Candidate",
    "Choice",
    "Decision",
    "Matcher",
    "jsonrpc_interface",
    "query_text",
    "route_interface",
]


LEXICAL_THRESHOLD = 0.5
"""The lexical threshold when ``SWITCHBOARD_MATCH_THRESHOLD`` does not set it."""
_VIEWS = 256  # callers' views of the skill index kept


class Matcher:
    """Chooses the agent for each call from the registry's current catalog snapshot."""

    def __init__(
        self,
        registry: Registry,
        *,
        threshold: float = LEXICAL_THRESHOLD,
        semantic: Semantic | None = None,
        status: str = "lexical (SWITCHBOARD_MATCHER=lexical)",
        by_meaning: bool = False,
        refuse: Refuse = "calibrated",
        operator: float | None = None,
        threshold_source: str = "default",
    ) -> None:
        self.registry = registry
        self.by_meaning = by_meaning  # SWITCHBOARD_MATCHER=semantic: words are a fallback
        self.threshold = threshold
        """The lexical threshold: the lowest score by words a skill is chosen with."""
        self.threshold_source = threshold_source
        """``operator`` when ``SWITCHBOARD_MATCH_THRESHOLD`` set :attr:`threshold`."""
        self.refuse: Refuse = refuse
        """``SWITCHBOARD_REFUSE``: the operating point of matching by meaning."""
        self.operator = operator
        """``SWITCHBOARD_MATCH_THRESHOLD`` with the semantic matcher: the threshold of matching
        by meaning instead of the calibrated one."""
        self.default_agent: str | None = None
        """SWITCHBOARD_DEFAULT_AGENT: where a message no tier was confident about goes
        (:func:`router.choose.refusals.default_route`)."""
        self.default_skill: str | None = None
        """SWITCHBOARD_DEFAULT_SKILL: the default agent's skill to use (None: its first fitting)."""
        self.semantic = semantic
        self.status = status
        """How matching works here, for explain and /readyz: ``semantic ...``, or ``lexical
        ...`` and why (configured, the model loading, or it could not be loaded)."""
        self._index: SkillIndex | None = None
        self._views: LRUCache[Hashable, SkillIndex] = LRUCache(_VIEWS)

    @classmethod
    def configured(cls, registry: Registry, settings: Settings) -> Matcher:
        """The matcher ``settings`` ask for: the matcher kind, ``SWITCHBOARD_REFUSE``,
        ``SWITCHBOARD_MATCH_THRESHOLD`` (the lexical threshold with the lexical matcher, the
        threshold of matching by meaning with the semantic one) and the default route."""
        lexical = settings.matcher == "lexical"
        given = settings.match_threshold
        matcher = cls(
            registry,
            threshold=given if lexical and given is not None else LEXICAL_THRESHOLD,
            threshold_source="operator" if lexical and given is not None else "default",
            by_meaning=not lexical,
            refuse=settings.refuse,
            operator=None if lexical else given,
        )
        matcher.default_agent = settings.default_agent
        matcher.default_skill = settings.default_skill
        return matcher

    # --- public ------------------------------------------------------------------------------

    def cutoff(self) -> Cutoff:
        """The threshold in force for matching by meaning, its source, the margin and the
        operating point (the calibration's defaults before the model is loaded)."""
        cal = self.semantic.calibration if self.semantic is not None else Calibration()
        return cal.cutoff(self.refuse, self.operator)

    def words_cutoff(self) -> Cutoff:
        """The lexical threshold as a :class:`Cutoff` (no margin)."""
        source = "operator" if self.threshold_source == "operator" else "default"
        return Cutoff(self.threshold, 0.0, source, self.refuse)

    def hint(self, version: Version, params: Mapping[str, Any]) -> dict[str, str] | None:
        """The routing hint of a call (see :func:`router.choose.hints.parse_hint`)."""
        return parse_hint(version, params)

    def choose(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        context_agents: Iterable[str] = frozenset(),
        pinned_agent: str | None = None,
        grant: Grant = EVERYTHING,
    ) -> Choice:
        """The agent for this call (see the module docs) among those ``grant`` allows;
        RpcError when there is none."""
        if pinned_agent is not None:
            return self._pinned(version, pinned_agent, grant=grant)
        decision = self.decide(version, op, params, context_agents=context_agents, grant=grant)
        return self.settle(decision)

    def decide(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        context_agents: Iterable[str] = frozenset(),
        vector: np.ndarray | None = None,
        complete: bool = False,
        grant: Grant = EVERYTHING,
    ) -> Decision:
        """The decision for a call that is not pinned; ``vector``: the message's embedding
        (None: by words alone); ``complete``: every skill is a candidate in the answer;
        ``grant``: what the caller may use (nothing else is considered, or shown)."""
        return self._decide(
            version, op, params, frozenset(context_agents), complete=complete, vector=vector,
            grant=grant,
        )  # fmt: skip

    def settle(
        self,
        decision: Decision,
        pick: Candidate | None = None,
        *,
        tier: Tier = "llm",
        why: str | None = None,
    ) -> Choice:
        """The final choice: ``pick`` (one of ``decision.options``: an adjudicator's pick,
        tier ``llm``, or a ``guess``, saying ``why``), else the decision's own; RpcError when
        it is a refusal."""
        if pick is not None:
            index = self._current()
            rows = [
                n
                for n in index.by_agent.get(pick.agent_id, ())
                if (skill := index.rows[n].skill) is not None and skill.id == pick.skill_id
            ]
            if rows:
                if why is None:
                    why = "the LLM adjudicator picked it"
                    if decision.uncertain:
                        why += f" ({decision.uncertain})"
                margin = decision.context.get("margin")
                version = decision.context["version"]
                done = self.finish(
                    index, rows[0], pick, decision.candidates, "match", why, version,
                    tier=tier, margin=margin,
                )  # fmt: skip
                assert done.choice is not None
                return done.choice
        if decision.error is not None:
            raise decision.error
        assert decision.choice is not None
        return decision.choice

    def target_for(
        self, version: Version, agent_id: str, via: Via = "task", grant: Grant = EVERYTHING
    ) -> Choice:
        """A :class:`Choice` of one known agent (e.g. a task's owner): like a pinned agent."""
        return self._pinned(version, agent_id, via, grant)

    def skill_index(self, grant: Grant = EVERYTHING) -> SkillIndex:
        """The index of the current catalog snapshot (one row per skill of an agent), as
        ``grant`` sees it."""
        return self._view(grant)

    def fitting_rows(self, version: Version, op: Op, params: Mapping[str, Any]) -> list[bool]:
        """Per row of :meth:`skill_index`: whether the skill passes the hard filters for this
        call (routable, an interface, media types, output modes)."""
        index = self._current()
        message = wire.message_of(version, params)
        media = wire.part_media_types(version, message)
        accepted = list(wire.accepted_output_modes(version, params))
        evaluated = self.evaluate(
            index, range(len(index.rows)), version, op, media, accepted, {}, None, skill_less=False
        )
        return [c.kept for _, c in evaluated]

    # --- steps -------------------------------------------------------------------------------

    def _current(self) -> SkillIndex:
        snapshot = self.registry.catalog.snapshot
        if self._index is None or self._index.snapshot is not snapshot:
            self._index = SkillIndex(snapshot, self._index)
            self._views.clear()
        return self._index

    def _view(self, grant: Grant) -> SkillIndex:
        """The current index as ``grant`` sees it (views cached per grant key)."""
        index = self._current()
        if grant.unlimited:
            return index
        view = self._views.get(grant.key)
        if view is None:
            view = self._views[grant.key] = GrantedIndex(index, grant)
        return view

    def _pinned(
        self, version: Version, agent_id: str, via: Via = "pinned", grant: Grant = EVERYTHING
    ) -> Choice:
        agent = self._current().snapshot.agents.get(agent_id)
        if agent is None or not grant.allows(agent_id, None):  # a hidden agent: not there
            raise RpcError(AGENT_UNAVAILABLE, f"no agent with id {agent_id!r}", {"agent": agent_id})
        # a task's owner is the only agent that can answer for it, and a pinned endpoint names
        # its agent: both are tried whatever its health (a success makes it healthy again)
        if not self.registry.routable(agent, health=False):
            reason = self._policy_reason(agent)
            raise RpcError(
                NO_MATCHING_AGENT,
                f"agent {agent_id!r} is not routable: {reason}",
                {"agent": agent_id, "reason": reason},
            )
        found = route_interface(agent, version)
        if found is None:
            raise RpcError(
                VERSION_NOT_SUPPORTED,
                f"agent {agent_id!r} {NOT_REACHABLE.removeprefix('agent ')} (it offers"
                f" {offers(agent)})",
                {"agent": agent_id, "requested": version, "supportedVersions": []},
            )
        interface, agent_version = found
        binding = interface.binding
        target = Target(agent.id, interface.url, agent_version, binding=binding)
        reason = "it owns this task" if via == "task" else "the endpoint names it"
        reason = sentence(reason + via_note(version, agent_version, binding))
        candidate = Candidate(
            agent.id, None, 0.0, True, reason, interface.url, agent_version, binding=binding
        )
        tier: Tier = "task" if via == "task" else "pinned"
        return Choice(agent, target, None, via, [candidate], None, reason, tier)

    def _policy_reason(self, agent: AgentRecord) -> str:
        return self.registry.unroutable_reason(agent)

    def _agent_problem(
        self, agent: AgentRecord, version: Version, op: Op
    ) -> tuple[tuple[Interface, Version] | None, str | None, Filter | None]:
        """The agent's interface for the call, or why it cannot take any (a sentence) and
        which filter that is."""
        if not self.registry.routable(agent):
            kind: Filter = "policy" if not self.registry.routable(agent, health=False) else "health"
            return None, f"The agent is not routable: {self._policy_reason(agent)}.", kind
        found = route_interface(agent, version)
        if found is None:
            return None, sentence(f"{NOT_REACHABLE} (it offers {offers(agent)})"), "interface"
        return found, None, None  # a streaming call reaches an agent that does not stream too

    def evaluate(
        self,
        index: SkillIndex,
        rows: Iterable[int],
        version: Version,
        op: Op,
        media: list[str],
        accepted: list[str],
        scores: dict[int, float],
        threshold: float | None,
        *,
        skill_less: bool,
    ) -> list[tuple[int, Candidate]]:
        """A candidate per row, with why it was dropped (a sentence) and by which filter.
        ``threshold`` None: the score does not decide; ``skill_less``: an agent without
        skills may be taken (its default modes must fit)."""
        agents: dict[str, tuple[tuple[Interface, Version] | None, str | None, Filter | None]]
        agents = {}
        out = []
        for n in rows:
            if not index.allowed(n):
                continue  # not the caller's: not a candidate, not even a dropped one
            row = index.rows[n]
            agent = row.agent
            if agent.id not in agents:
                agents[agent.id] = self._agent_problem(agent, version, op)
            interface, problem, kind = agents[agent.id]
            score = round(scores.get(n, 0.0), 6)
            skill_id = row.skill.id if row.skill else None
            if problem is None:
                if row.skill is not None:
                    found_problem = mode_problem(
                        row.skill.input_modes, row.skill.output_modes, media, accepted
                    )
                    who = "The skill"
                elif not skill_less:
                    found_problem = ("skills", "declares no skills to match against")
                    who = "The agent"
                else:
                    card = agent.card
                    found_problem = mode_problem(
                        card.default_input_modes, card.default_output_modes, media, accepted
                    )
                    who = "The agent"
                if found_problem is not None:
                    kind, problem = found_problem[0], sentence(f"{who} {found_problem[1]}")
            if problem is None and threshold is not None and score < threshold:
                kind = "score"
                problem = (
                    f"It scores {score:g} by words, below the threshold {threshold:g}."
                    if score > 0
                    else f"No word of the message matches this skill (threshold {threshold:g})."
                )
            url, via = (interface[0].url, interface[1]) if interface else (None, None)
            binding = interface[0].binding if interface else "JSONRPC"
            found = Candidate(
                agent.id, skill_id, score, problem is None, problem or "", url, via,
                binding=binding, filter=kind if problem is not None else None,
            )  # fmt: skip
            out.append((n, found))
        return out

    def _decide(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        context_agents: frozenset[str],
        *,
        complete: bool,
        vector: np.ndarray | None = None,
        grant: Grant = EVERYTHING,
    ) -> Decision:
        """The decision; ``complete``: every skill is a candidate in the answer (explain),
        else only those the choice can fall on."""
        try:
            index = self._view(grant)
            message = wire.message_of(version, params)
            media = wire.part_media_types(version, message)
            accepted = list(wire.accepted_output_modes(version, params))
            query = query_text(wire.message_text(version, message))
            hint = self.hint(version, params)
        except RpcError as error:
            return Decision(None, error, [])
        words = content_words(query)
        context = {
            "version": version,
            "media_types": media,
            "accepted_output_modes": accepted,
            "words": list(search_words(query)),  # what it is matched by (fillers too)
            "hint": hint,
        }
        if hint is not None:
            scores = index.text.scores(query) if words else {}
            decision = by_hint(
                self, index, hint, version, op, media, accepted, scores, context_agents
            )
        elif vector is not None and self.semantic is not None and words:
            decision = by_meaning(
                self, self.semantic, index, query, vector, version, op, media, accepted,
                context_agents, complete,
            )  # fmt: skip
            if decision.choice is None and decision.context.get("skills_without_vector"):
                lexical = by_words(
                    self, index, query, True, version, op, media, accepted, context_agents,
                    complete,
                )  # fmt: skip
                decision = until_embedded(self.semantic, index, decision, lexical)
                if decision is lexical:
                    fell_back(decision)
        else:
            decision = by_words(
                self, index, query, bool(words), version, op, media, accepted, context_agents,
                complete,
            )  # fmt: skip
            if self.by_meaning and words:  # no model (yet), or the message's vector failed
                fell_back(decision)
        error = decision.error
        if decision.choice is None and error is not None and error.code == NO_MATCHING_AGENT:
            refused = content_type_refusal(self, index, version, op, media, accepted, error)
            decision.error = refused or error
        decision.context = {**context, **decision.context}
        return decision

    def no_match(
        self,
        index: SkillIndex,
        candidates: list[Candidate],
        has_words: bool,
        *,
        media: list[str],
        accepted: list[str],
        threshold: float | None = None,
        score: float | None = None,
        hidden: bool = False,
        semantic: bool = False,
    ) -> RpcError:
        """The ``-32050`` of a message no candidate can take, naming the decisive reason
        (:func:`router.choose.reasons.refusal`); ``threshold`` None: the lexical one (0 for
        a message without words)."""
        if threshold is None:
            threshold = self.threshold if has_words else 0.0
        return refusal(
            self.registry, index, candidates, threshold=threshold, media=media,
            accepted=accepted, hidden=hidden, score=score, semantic=semantic,
        )  # fmt: skip

    def finish(
        self,
        index: SkillIndex,
        row: int,
        best: Candidate,
        candidates: list[Candidate],
        via: Via,
        why: str,
        version: Version,
        *,
        tier: Tier | None = None,
        margin: float | None = None,
    ) -> Decision:
        """The decision for ``best`` (row ``row``) among ``candidates``: each kept one says
        why it was not chosen; ``why`` (a phrase) is the choice's reason."""
        agent = index.rows[row].agent
        assert best.url is not None and best.version is not None
        marked = []
        why = phrase(why) + via_note(version, best.version, best.binding)
        chosen = (best.agent_id, best.skill_id)
        for c in candidates:
            if c is best or (c.kept and (c.agent_id, c.skill_id) == chosen):
                c = c.but(reason=sentence(f"chosen: {why}"))
            elif c.kept:
                c = c.but(reason=_OTHER_SKILL if c.agent_id == agent.id else _RANKS_LOWER)
            marked.append(c)
        target = Target(agent.id, best.url, best.version, binding=best.binding)
        order = ranked(marked)
        tier = tier or ("hint" if via == "hint" else "lexical")
        reason = sentence(why)
        choice = Choice(agent, target, best.skill_id, via, order, best.score, reason, tier, margin)
        return Decision(choice, None, order)


_OTHER_SKILL = "It could take the call too, but another skill of its agent fits better."
_RANKS_LOWER = "It could take the call too, but the chosen skill ranks higher."
