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
  with words (:mod:`router.choose.meaning`), or by a BM25 score of the message text against
  the skill's name (x3), id, tags (x2), description, examples and its agent's name and
  description (x0.5): ``SWITCHBOARD_MATCHER=lexical``, or tier ``lexical-fallback`` while the
  model or the vectors are missing. Ties go to an agent already serving the conversation.

Lexical threshold (``SWITCHBOARD_MATCH_THRESHOLD``, default 0.5): the best skill must score at
least this much, or the call fails with ``-32050`` whose data lists the closest skills. Word
rarity is judged as if the catalog held at least ``MIN_CORPUS`` skills, so one word in common
with a skill scores 2 or more, while a word found in more than about two thirds of a large
catalog's skills scores under 0.5: 0.5 means "shares at least one word that tells skills
apart". Stop words and lone letters or digits (the ``s`` of ``what's``) never count. A message
without any such words (an image alone) goes to the one agent accepting its media types, or
the one of them already serving the conversation; more than one is ``-32050``.

:meth:`Matcher.decide` returns a :class:`router.choose.choice.Decision` that an adjudicator
may still settle (:mod:`router.choose.chooser`); :meth:`Matcher.choose` settles it at once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
from cachetools import LRUCache

from registry import mediatypes
from registry.cards import Interface
from registry.records import AgentRecord
from registry.service import Registry
from registry.textsearch import tokenize
from router.choose.choice import (
    CLOSEST,
    ROUTING_EXTENSION,
    Candidate,
    Choice,
    Decision,
    Target,
    Tier,
    Via,
    closest,
    error_view,
    rank_key,
    ranked,
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
from router.choose.meaning import by_meaning, fell_back, pending_vectors, until_embedded
from router.choose.refusals import closest_rows, content_type_refusal
from router.choose.semantic import Semantic
from router.choose.skillindex import MAX_QUERY_CHARS, SkillIndex, query_text
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


_CHUNK = 64  # scored skills looked at per step when only the choice is needed
_VIEWS = 256  # callers' views of the skill index kept


class Matcher:
    """Chooses the agent for each call from the registry's current catalog snapshot."""

    def __init__(
        self,
        registry: Registry,
        *,
        threshold: float,
        semantic: Semantic | None = None,
        status: str = "lexical (SWITCHBOARD_MATCHER=lexical)",
        by_meaning: bool = False,
    ) -> None:
        self.registry = registry
        self.by_meaning = by_meaning  # SWITCHBOARD_MATCHER=semantic: words are a fallback
        self.threshold = threshold
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

    # --- public ------------------------------------------------------------------------------

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

    def settle(self, decision: Decision, pick: Candidate | None = None) -> Choice:
        """The final choice: ``pick`` (an adjudicator's pick among ``decision.options``),
        else the decision's own; RpcError when it is a refusal."""
        if pick is not None:
            index = self._current()
            rows = [
                n
                for n in index.by_agent.get(pick.agent_id, ())
                if (skill := index.rows[n].skill) is not None and skill.id == pick.skill_id
            ]
            if rows:
                why = "picked by the LLM adjudicator"
                if decision.uncertain:
                    why += f" ({decision.uncertain})"
                margin = decision.choice.margin if decision.choice else None
                version = decision.context["version"]
                done = self.finish(
                    index, rows[0], pick, decision.candidates, "match", why, version,
                    tier="llm", margin=margin,
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

    def explain(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        context_agents: Iterable[str] = frozenset(),
        limit: int = 100,
        grant: Grant = EVERYTHING,
    ) -> dict[str, Any]:
        """Why a call would go where it goes: the ranked candidates (at most ``limit``) with
        their score and why each was kept or dropped, the choice and the error, if any."""
        decision = self.decide(
            version, op, params, context_agents=context_agents, complete=True, grant=grant
        )
        return self.explain_decision(decision, limit=limit)

    def explain_decision(
        self, decision: Decision, *, limit: int = 100, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The explain view of a decision (``extra``: what the adjudicator did)."""
        error = decision.error
        pending = pending_vectors(self.semantic, self._current()) if self.by_meaning else 0
        return {
            "catalog_version": self._current().snapshot.version,
            "threshold": self.threshold,
            "matcher": self.status,
            **({"vectors": "pending", "vectors_pending": pending} if pending else {}),
            **decision.context,
            "uncertain": decision.uncertain,
            **(extra or {}),
            "candidates": [c.to_json() for c in decision.candidates[:limit]],
            "total_candidates": len(decision.candidates),
            "choice": decision.choice.to_json() if decision.choice else None,
            "error": None if error is None else error_view(error),
        }

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
        reason = "the owner of this task" if via == "task" else "pinned by the endpoint"
        reason += via_note(version, agent_version, binding)
        candidate = Candidate(
            agent.id, None, 0.0, True, reason, interface.url, agent_version, binding=binding
        )
        tier: Tier = "task" if via == "task" else "pinned"
        return Choice(agent, target, None, via, [candidate], None, reason, tier)

    def _policy_reason(self, agent: AgentRecord) -> str:
        return self.registry.unroutable_reason(agent)

    def _agent_problem(
        self, agent: AgentRecord, version: Version, op: Op
    ) -> tuple[tuple[Interface, Version] | None, str | None]:
        if not self.registry.routable(agent):
            return None, f"agent not routable: {self._policy_reason(agent)}"
        found = route_interface(agent, version)
        if found is None:
            return None, f"{NOT_REACHABLE} (it offers {offers(agent)})"
        return found, None  # a streaming call reaches an agent that does not stream too

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
        """A candidate per row. ``threshold`` None: the score does not decide; ``skill_less``:
        an agent without skills may be taken (its default modes must fit)."""
        agents: dict[str, tuple[tuple[Interface, Version] | None, str | None]] = {}
        out = []
        for n in rows:
            if not index.allowed(n):
                continue  # not the caller's: not a candidate, not even a dropped one
            row = index.rows[n]
            agent = row.agent
            if agent.id not in agents:
                agents[agent.id] = self._agent_problem(agent, version, op)
            interface, problem = agents[agent.id]
            score = round(scores.get(n, 0.0), 6)
            skill_id = row.skill.id if row.skill else None
            if problem is None:
                if row.skill is not None:
                    problem = mode_problem(
                        row.skill.input_modes, row.skill.output_modes, media, accepted
                    )
                    problem = f"skill {problem}" if problem else None
                elif not skill_less:
                    problem = "agent declares no skills to match against"
                else:
                    card = agent.card
                    problem = mode_problem(
                        card.default_input_modes, card.default_output_modes, media, accepted
                    )
                    problem = f"agent {problem}" if problem else None
            if problem is None and threshold is not None and score < threshold:
                problem = (
                    f"score {score:g} is below the threshold {threshold:g}"
                    if score > 0
                    else f"no word of the message matches this skill (threshold {threshold:g})"
                )
            url, via = (interface[0].url, interface[1]) if interface else (None, None)
            binding = interface[0].binding if interface else "JSONRPC"
            found = Candidate(
                agent.id, skill_id, score, problem is None, problem or "", url, via, binding=binding
            )
            out.append((n, found))
        return out

    def _best_scored(
        self,
        index: SkillIndex,
        version: Version,
        op: Op,
        media: list[str],
        accepted: list[str],
        query: str,
    ) -> list[tuple[int, Candidate]]:
        """Candidates in descending score (at or above the threshold), evaluated until the
        first one that can take the call, every other with its score and at least
        :data:`CLOSEST` in all; none kept if none can take it."""
        out: list[tuple[int, Candidate]] = []
        best: float | None = None
        for n, score in index.text.ranked(query):
            score = round(score, 6)
            if score < self.threshold:
                break
            if best is not None and score < best and len(out) >= CLOSEST:
                break  # the choice and a few runners-up, for the record
            found = self.evaluate(
                index, [n], version, op, media, accepted, {n: score}, self.threshold,
                skill_less=False,
            )  # fmt: skip
            out += found
            if best is None and found and found[0][1].kept:
                best = found[0][1].score
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
        words = tokenize(query)
        context = {
            "version": version,
            "media_types": media,
            "accepted_output_modes": accepted,
            "words": words,
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
                words = self._by_match(
                    index, query, True, version, op, media, accepted, context_agents, complete
                )
                decision = until_embedded(self.semantic, index, decision, words)
                if decision is words:
                    fell_back(decision)
        else:
            decision = self._by_match(
                index, query, bool(words), version, op, media, accepted, context_agents, complete
            )
            if self.by_meaning and words:  # no model (yet), or the message's vector failed
                fell_back(decision)
        error = decision.error
        if decision.choice is None and error is not None and error.code == NO_MATCHING_AGENT:
            refused = content_type_refusal(self, index, version, op, media, accepted, error)
            decision.error = refused or error
        decision.context = {**context, **decision.context}
        return decision

    def _by_match(
        self,
        index: SkillIndex,
        query: str,
        has_words: bool,
        version: Version,
        op: Op,
        media: list[str],
        accepted: list[str],
        context_agents: frozenset[str],
        complete: bool = True,
    ) -> Decision:
        threshold = self.threshold if has_words else None
        if has_words and self.threshold > 0 and not complete:
            # only the best-scoring skills that can take the call, and those tied with the
            # best of them, need a look: a choice costs no more than a few candidates
            evaluated = self._best_scored(index, version, op, media, accepted, query)
        else:
            scores = index.text.scores(query) if has_words else {}
            rows = range(len(index.rows))
            evaluated = self.evaluate(
                index, rows, version, op, media, accepted, scores, threshold, skill_less=False
            )
        kept = [(n, c) for n, c in evaluated if c.kept]
        if not kept and not complete:
            # no match: the error lists the closest skills, scored or not
            found = closest_rows(self, index, version, op, media, accepted, query)
            if found is None:  # a score the shortcut cannot order: every row
                return self._by_match(
                    index, query, has_words, version, op, media, accepted, context_agents, True
                )
            evaluated = found
        candidates = [c for _, c in evaluated]
        if not kept:
            return Decision(None, self.no_match(index, candidates, has_words), ranked(candidates))
        best_n, best = min(kept, key=lambda item: rank_key(item, index, context_agents))
        if has_words:
            rivals = [c for _, c in kept if c.agent_id != best.agent_id and c.score == best.score]
            if not rivals:
                why = "the best score"
            elif best.agent_id in context_agents:
                why = "the best score, tied; the agent already serves this conversation"
            else:
                why = "the best score, tied; first by agent id"
            return self.finish(index, best_n, best, candidates, "match", why, version)
        agents = sorted({c.agent_id for _, c in kept})
        serving = [a for a in agents if a in context_agents]
        if all(mediatypes.matches(m, "text/plain") for m in media):
            # only text, and no word of it to match (e.g. "what is it?"): never a guess
            error = RpcError(
                NO_MATCHING_AGENT,
                "the message has no words to match a skill with; say what you need, or name "
                "a skill or agent with the routing extension",
                {"reason": "no words", "extension": ROUTING_EXTENSION, "agents": agents},
            )
            return Decision(None, error, ranked(candidates))
        if len(agents) == 1:
            why = "the only agent accepting these media types (the message has no words to match)"
        elif len(serving) == 1:
            best_n, best = min(
                ((n, c) for n, c in kept if c.agent_id == serving[0]),
                key=lambda item: index.rows[item[0]].position,
            )
            why = "already serves this conversation (the message has no words to match)"
        else:
            error = RpcError(
                NO_MATCHING_AGENT,
                f"the message has no words to match and {len(agents)} agents accept its media "
                "types; name a skill or agent with the routing extension",
                {
                    "reason": "ambiguous",
                    "extension": ROUTING_EXTENSION,
                    "agents": agents,
                    "closest": closest(candidates, self.registry, index),
                },
            )
            return Decision(None, error, ranked(candidates))
        return self.finish(index, best_n, best, candidates, "match", why, version)

    def no_match(
        self,
        index: SkillIndex,
        candidates: list[Candidate],
        has_words: bool,
        *,
        floor: float | None = None,
        score: float | None = None,
    ) -> RpcError:
        threshold = self.threshold if floor is None else floor
        if has_words:
            message = (
                f"no agent can take this message: none has a skill that matches it well enough "
                f"(score {threshold:g} or more) and fits its media types, output modes, "
                "protocol version and the routing policy; data.closest says why for each"
            )
        else:
            message = "no agent accepts the media types of this message"
        data: dict[str, Any] = {"reason": "no match", "tier": "refused", "threshold": threshold}
        if floor is not None:
            data["score"] = score
        data["closest"] = closest(candidates, self.registry, index)
        return RpcError(NO_MATCHING_AGENT, message, data)

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
        agent = index.rows[row].agent
        assert best.url is not None and best.version is not None
        marked = []
        why += via_note(version, best.version, best.binding)
        chosen = (best.agent_id, best.skill_id)
        for c in candidates:
            if c is best or (c.kept and (c.agent_id, c.skill_id) == chosen):
                c = c.but(reason=f"chosen: {why}")
            elif c.kept:
                lower = "not the agent's best skill" if c.agent_id == agent.id else "ranked lower"
                c = c.but(reason=f"kept, {lower}")
            marked.append(c)
        target = Target(agent.id, best.url, best.version, binding=best.binding)
        order = ranked(marked)
        tier = tier or ("hint" if via == "hint" else "lexical")
        choice = Choice(agent, target, best.skill_id, via, order, best.score, why, tier, margin)
        return Decision(choice, None, order)
