"""Choosing the agent for an A2A call, in order: a pinned agent, a routing hint, skill matching.

- **Pinned** (``/agents/{id}``, or the owner of a known task): that agent, no matching. It must
  still be routable (signed-card policy) and have a JSON-RPC interface of A2A 0.3 or 1.0.
- **Hint**: ``metadata["urn:a2a-switchboard:routing:v1"] = {"skill": id}`` and/or ``{"agent": id}``
  on the message (or, second, on the request params). An unknown, unroutable or incompatible
  skill or agent is ``-32051``, never a fallback to matching.
- **Matching**: every skill of every agent is a candidate. It is dropped when its agent is not
  routable, has no JSON-RPC interface of A2A 0.3 or 1.0, or cannot stream when the call
  streams; or when the skill's input modes do not accept a part's media type (text parts are
  also fine next to other parts: they are the instruction for them), or its output modes miss
  every ``acceptedOutputModes`` entry (none given: any). The interface used is the agent's one
  of the client's version, else the other version's (the router translates, see
  :mod:`router.translate`); ``Choice.target.version`` is the agent's version.
  The rest are ranked by a BM25 score of the message text against the skill's name (x3), id,
  tags (x2), description, examples and its agent's name and description (x0.5); an agent's
  score is its best skill's. Ties go to an agent already serving the conversation, then by id.

Score threshold (``SWITCHBOARD_MATCH_THRESHOLD``, default 0.5): the best skill must score at
least this much, or the call fails with ``-32050`` whose data lists the closest skills. Word
rarity is judged as if the catalog held at least :data:`MIN_CORPUS` skills, so one word in
common with a skill scores 2 or more (about 5 for a word of its name, about 20 for "convert 100
USD to EUR" against the demo currency skill), while a word found in more than about two
thirds of a large catalog's skills scores under 0.5: 0.5 means "shares at least one word that
tells skills apart". Stop words and lone letters or digits (the ``s`` of ``what's``) never
count. A message without any such words (an image alone) goes to the one agent accepting its
media types, or the one of them already serving the conversation; more than one is ``-32050``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from registry import mediatypes
from registry.cards import Interface, Skill
from registry.records import AgentRecord
from registry.service import Registry
from registry.textsearch import Field, TextIndex, terms, tokenize
from router import wire
from router.jsonrpc import (
    AGENT_UNAVAILABLE,
    BAD_ROUTING_HINT,
    NO_MATCHING_AGENT,
    VERSION_NOT_SUPPORTED,
    VERSIONS,
    Op,
    RpcError,
    Version,
    version_of,
)
from router.upstream import Target

ROUTING_EXTENSION = "urn:a2a-switchboard:routing:v1"
"""The routing extension's URI: the metadata key of a routing hint (declared in the router card)."""

STREAMING_OPS = frozenset({Op.STREAM, Op.SUBSCRIBE})
CLOSEST = 5
_CHUNK = 64  # scored skills looked at per step when only the choice is needed
"""How many of the closest skills a ``-32050`` error lists."""
MIN_CORPUS = 50
"""Word rarity (BM25's idf) is judged as if the catalog held at least this many skills (the
missing ones of average length, sharing no word): in a small catalog, a word every skill has
(two agents both translating) still counts as relevant."""
MAX_QUERY_CHARS = 4096
"""Only the start of a long message text is matched (the request is usually stated first)."""

Via = Literal["hint", "task", "match", "pinned"]

_SINGLE = re.compile(r"(?<![^\W_])[^\W_](?![^\W_])")  # a lone letter or digit: "what's" -> "s"
_TEXT = "text/plain"
_PAD = "\x00"  # the only term of the padding documents; no query yields it


@dataclass(frozen=True)
class Candidate:
    """One skill (``skill_id`` None: an agent as a whole) considered for a call."""

    agent_id: str
    skill_id: str | None
    score: float
    kept: bool
    reason: str
    url: str | None = None
    version: Version | None = None

    def to_json(self) -> dict[str, Any]:
        """The explain view of this candidate."""
        return {
            "agent_id": self.agent_id,
            "skill_id": self.skill_id,
            "score": self.score,
            "kept": self.kept,
            "reason": self.reason,
            "url": self.url,
            "version": self.version,
        }


@dataclass(frozen=True)
class Choice:
    """The agent a call goes to, the interface to use, and how it was chosen."""

    agent: AgentRecord
    target: Target
    skill_id: str | None
    via: Via
    candidates: list[Candidate] = field(default_factory=list)
    score: float | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The explain view of this choice."""
        return {
            "agent_id": self.agent.id,
            "skill_id": self.skill_id,
            "via": self.via,
            "score": self.score,
            "reason": self.reason,
            "url": self.target.url,
            "version": self.target.version,
        }


@dataclass(frozen=True)
class _Row:
    """A skill of an agent (``skill`` None: an agent that declares no skills)."""

    agent: AgentRecord
    position: int
    skill: Skill | None


class _SkillIndex:
    """Every skill of one catalog snapshot with a BM25 index over their text.

    Term counts of records unchanged since the previous index are reused.
    """

    def __init__(self, snapshot: Any, previous: _SkillIndex | None = None) -> None:
        self.snapshot = snapshot
        self.rows: list[_Row] = []
        self.by_skill: dict[str, list[int]] = {}
        self.by_agent: dict[str, list[int]] = {}
        self._terms: dict[str, tuple[AgentRecord, list[Counter[str]]]] = {}
        documents: list[Counter[str]] = []
        for agent in snapshot.agents.values():
            known = previous._terms.get(agent.id) if previous else None
            if known is None or known[0] is not agent:
                # the catalog's skill terms, plus the agent's description (counted once)
                extra = terms([Field(agent.card.description, 0.5)])
                known = (agent, [tf + extra for tf in snapshot.skill_terms(agent.id)])
            self._terms[agent.id] = known
            rows = self.by_agent.setdefault(agent.id, [])
            if not agent.card.skills:
                rows.append(len(self.rows))
                self.rows.append(_Row(agent, -1, None))
                documents.append(Counter())
            for position, skill in enumerate(agent.card.skills):
                rows.append(len(self.rows))
                self.by_skill.setdefault(skill.id, []).append(len(self.rows))
                self.rows.append(_Row(agent, position, skill))
                documents.append(known[1][position])
        if 0 < len(documents) < MIN_CORPUS:  # see MIN_CORPUS
            average = sum(sum(tf.values()) for tf in documents) / len(documents)
            documents += [Counter({_PAD: average})] * (MIN_CORPUS - len(documents))
        self.text = TextIndex(documents)


def query_text(text: str) -> str:
    """The part of a message text that is matched: its start, without lone letters/digits."""
    return _SINGLE.sub(" ", text[:MAX_QUERY_CHARS])


def jsonrpc_interface(agent: AgentRecord, version: Version) -> Interface | None:
    """The agent's first JSON-RPC interface of A2A ``version`` (0.x counts as 0.3), if any."""
    for interface in agent.card.interfaces:
        if interface.binding == "JSONRPC" and version_of(interface.protocol_version) == version:
            return interface
    return None


def route_interface(agent: AgentRecord, version: Version) -> tuple[Interface, Version] | None:
    """The interface a call of A2A ``version`` goes to, and the agent's version there: one of
    the client's version when the agent has one (pass-through), else one of the other version
    (the router translates); None if the agent has no JSON-RPC interface of either."""
    for wanted in (version, *(v for v in VERSIONS if v != version)):
        interface = jsonrpc_interface(agent, wanted)
        if interface is not None:
            return interface, wanted
    return None


def _via(client: Version, agent: Version) -> str:
    """How a call reaches an agent interface: as it is, or translated."""
    if client == agent:
        return ""
    return f" (translated: the client speaks A2A {client}, the agent A2A {agent})"


def _offers(agent: AgentRecord) -> str:
    found = [f"{i.binding} {i.protocol_version}" for i in agent.card.interfaces]
    return ", ".join(dict.fromkeys(found)) or "nothing"


@lru_cache(maxsize=4096)
def _accepts(media_type: str, modes: tuple[str, ...]) -> bool:
    return not modes or mediatypes.any_match(media_type, modes)


def _mode_problem(
    modes_in: Iterable[str], modes_out: Iterable[str], media: list[str], accepted: list[str]
) -> str | None:
    """Why a skill (or agent) with these modes cannot take the message, or None."""
    inputs, outputs = tuple(modes_in), tuple(modes_out)
    others = [m for m in media if mediatypes.normalize(m) != _TEXT]
    for media_type in dict.fromkeys(media):
        if media_type not in others and others:
            continue  # text next to other parts: the instruction for them
        if not _accepts(media_type, inputs):
            return f"does not accept {media_type} (input modes: {', '.join(inputs)})"
    if accepted and outputs and not any(_accepts(a, outputs) for a in accepted):
        return (
            f"outputs {', '.join(outputs)}, none of the acceptedOutputModes ({', '.join(accepted)})"
        )
    return None


@dataclass
class _Decision:
    choice: Choice | None
    error: RpcError | None
    candidates: list[Candidate]
    context: dict[str, Any] = field(default_factory=dict)


class Matcher:
    """Chooses the agent for each call from the registry's current catalog snapshot."""

    def __init__(self, registry: Registry, *, threshold: float) -> None:
        self.registry = registry
        self.threshold = threshold
        self._index: _SkillIndex | None = None

    # --- public ------------------------------------------------------------------------------

    def hint(self, version: Version, params: Mapping[str, Any]) -> dict[str, str] | None:
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

    def choose(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        context_agents: Iterable[str] = frozenset(),
        pinned_agent: str | None = None,
    ) -> Choice:
        """The agent for this call (see the module docs); RpcError when there is none."""
        if pinned_agent is not None:
            return self._pinned(version, pinned_agent)
        decision = self._decide(version, op, params, frozenset(context_agents), complete=False)
        if decision.error is not None:
            raise decision.error
        assert decision.choice is not None
        return decision.choice

    def target_for(self, version: Version, agent_id: str, via: Via = "task") -> Choice:
        """A :class:`Choice` of one known agent (e.g. a task's owner): like a pinned agent."""
        return self._pinned(version, agent_id, via)

    def explain(
        self,
        version: Version,
        op: Op,
        params: Mapping[str, Any],
        *,
        context_agents: Iterable[str] = frozenset(),
        limit: int = 100,
    ) -> dict[str, Any]:
        """Why a call would go where it goes: the ranked candidates (at most ``limit``) with
        their score and why each was kept or dropped, the choice and the error, if any."""
        decision = self._decide(version, op, params, frozenset(context_agents), complete=True)
        error = decision.error
        return {
            "version": version,
            "catalog_version": self._current().snapshot.version,
            "threshold": self.threshold,
            **decision.context,
            "candidates": [c.to_json() for c in decision.candidates[:limit]],
            "total_candidates": len(decision.candidates),
            "choice": decision.choice.to_json() if decision.choice else None,
            "error": (
                {"code": error.code, "message": error.message, "data": error.data}
                if error is not None
                else None
            ),
        }

    # --- steps -------------------------------------------------------------------------------

    def _current(self) -> _SkillIndex:
        snapshot = self.registry.catalog.snapshot
        if self._index is None or self._index.snapshot is not snapshot:
            self._index = _SkillIndex(snapshot, self._index)
        return self._index

    def _pinned(self, version: Version, agent_id: str, via: Via = "pinned") -> Choice:
        agent = self._current().snapshot.agents.get(agent_id)
        if agent is None:
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
                f"agent {agent_id!r} has no JSON-RPC interface for A2A 0.3 or 1.0 "
                f"(it offers {_offers(agent)})",
                {"agent": agent_id, "requested": version, "supportedVersions": []},
            )
        interface, agent_version = found
        target = Target(agent.id, interface.url, agent_version)
        reason = "the owner of this task" if via == "task" else "pinned by the endpoint"
        reason += _via(version, agent_version)
        candidate = Candidate(agent.id, None, 0.0, True, reason, interface.url, agent_version)
        return Choice(agent, target, None, via, [candidate], None, reason)

    def _policy_reason(self, agent: AgentRecord) -> str:
        return self.registry.unroutable_reason(agent)

    def _agent_problem(
        self, agent: AgentRecord, version: Version, op: Op
    ) -> tuple[tuple[Interface, Version] | None, str | None]:
        if not self.registry.routable(agent):
            return None, f"agent not routable: {self._policy_reason(agent)}"
        found = route_interface(agent, version)
        if found is None:
            return None, (
                f"agent has no JSON-RPC interface for A2A 0.3 or 1.0 (it offers {_offers(agent)})"
            )
        if op in STREAMING_OPS and not agent.card.capabilities.streaming:
            return found, "agent does not support streaming (capabilities.streaming)"
        return found, None

    def _evaluate(
        self,
        index: _SkillIndex,
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
            row = index.rows[n]
            agent = row.agent
            if agent.id not in agents:
                agents[agent.id] = self._agent_problem(agent, version, op)
            interface, problem = agents[agent.id]
            score = round(scores.get(n, 0.0), 6)
            skill_id = row.skill.id if row.skill else None
            if problem is None:
                if row.skill is not None:
                    problem = _mode_problem(
                        row.skill.input_modes, row.skill.output_modes, media, accepted
                    )
                    problem = f"skill {problem}" if problem else None
                elif not skill_less:
                    problem = "agent declares no skills to match against"
                else:
                    card = agent.card
                    problem = _mode_problem(
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
            found = Candidate(agent.id, skill_id, score, problem is None, problem or "", url, via)
            out.append((n, found))
        return out

    def _best_scored(
        self,
        index: _SkillIndex,
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
            found = self._evaluate(
                index,
                [n],
                version,
                op,
                media,
                accepted,
                {n: score},
                self.threshold,
                skill_less=False,
            )
            out += found
            if best is None and found[0][1].kept:
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
    ) -> _Decision:
        """The decision; ``complete``: every skill is a candidate in the answer (explain),
        else only those the choice can fall on."""
        try:
            index = self._current()
            message = wire.message_of(version, params)
            media = wire.part_media_types(version, message)
            accepted = list(wire.accepted_output_modes(version, params))
            query = query_text(wire.message_text(version, message))
            hint = self.hint(version, params)
        except RpcError as error:
            return _Decision(None, error, [])
        words = tokenize(query)
        context = {
            "media_types": media,
            "accepted_output_modes": accepted,
            "words": words,
            "hint": hint,
        }
        if hint is not None:
            scores = index.text.scores(query) if words else {}
            decision = self._by_hint(
                index, hint, version, op, media, accepted, scores, context_agents
            )
        else:
            decision = self._by_match(
                index, query, bool(words), version, op, media, accepted, context_agents, complete
            )
        decision.context = context
        return decision

    def _by_hint(
        self,
        index: _SkillIndex,
        hint: dict[str, str],
        version: Version,
        op: Op,
        media: list[str],
        accepted: list[str],
        scores: dict[int, float],
        context_agents: frozenset[str],
    ) -> _Decision:
        agent_id, skill_id = hint.get("agent"), hint.get("skill")
        named = " and ".join(
            f"{kind} {value!r}"
            for kind, value in (("agent", agent_id), ("skill", skill_id))
            if value
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
                    skills = [s.id for s in index.snapshot.agents[agent_id].card.skills]
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
        evaluated = self._evaluate(
            index, rows, version, op, media, accepted, scores, None, skill_less=True
        )
        candidates = [c for _, c in evaluated]
        kept = [(n, c) for n, c in evaluated if c.kept]
        if not kept:
            reasons = "; ".join(dict.fromkeys(f"{_label(c)}: {c.reason}" for c in candidates))
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
            return _Decision(None, error, _ranked(candidates))
        n, best = min(kept, key=lambda item: _rank_key(item, index, context_agents))
        return self._finish(
            index, n, best, candidates, "hint", f"named by the routing hint ({named})", version
        )

    def _by_match(
        self,
        index: _SkillIndex,
        query: str,
        has_words: bool,
        version: Version,
        op: Op,
        media: list[str],
        accepted: list[str],
        context_agents: frozenset[str],
        complete: bool = True,
    ) -> _Decision:
        threshold = self.threshold if has_words else None
        if has_words and self.threshold > 0 and not complete:
            # only the best-scoring skills that can take the call, and those tied with the
            # best of them, need a look: a choice costs no more than a few candidates
            evaluated = self._best_scored(index, version, op, media, accepted, query)
        else:
            scores = index.text.scores(query) if has_words else {}
            rows = range(len(index.rows))
            evaluated = self._evaluate(
                index, rows, version, op, media, accepted, scores, threshold, skill_less=False
            )
        candidates = [c for _, c in evaluated]
        kept = [(n, c) for n, c in evaluated if c.kept]
        if not kept and not complete:
            # no match: the error lists the closest skills, scored or not (a rare path)
            return self._by_match(
                index, query, has_words, version, op, media, accepted, context_agents, True
            )
        if not kept:
            return _Decision(
                None, self._no_match(index, candidates, has_words), _ranked(candidates)
            )
        best_n, best = min(kept, key=lambda item: _rank_key(item, index, context_agents))
        if has_words:
            rivals = [c for _, c in kept if c.agent_id != best.agent_id and c.score == best.score]
            if not rivals:
                why = "the best score"
            elif best.agent_id in context_agents:
                why = "the best score, tied; the agent already serves this conversation"
            else:
                why = "the best score, tied; first by agent id"
            return self._finish(index, best_n, best, candidates, "match", why, version)
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
            return _Decision(None, error, _ranked(candidates))
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
                    "closest": _closest(candidates, self.registry, index),
                },
            )
            return _Decision(None, error, _ranked(candidates))
        return self._finish(index, best_n, best, candidates, "match", why, version)

    def _no_match(
        self, index: _SkillIndex, candidates: list[Candidate], has_words: bool
    ) -> RpcError:
        if has_words:
            message = (
                f"no agent can take this message: none has a skill that matches it well enough "
                f"(score {self.threshold:g} or more) and fits its media types, output modes, "
                "protocol version and the routing policy; data.closest says why for each"
            )
        else:
            message = "no agent accepts the media types of this message"
        return RpcError(
            NO_MATCHING_AGENT,
            message,
            {
                "reason": "no match",
                "threshold": self.threshold,
                "closest": _closest(candidates, self.registry, index),
            },
        )

    def _finish(
        self,
        index: _SkillIndex,
        row: int,
        best: Candidate,
        candidates: list[Candidate],
        via: Via,
        why: str,
        version: Version,
    ) -> _Decision:
        agent = index.rows[row].agent
        assert best.url is not None and best.version is not None
        marked = []
        why += _via(version, best.version)
        for c in candidates:
            if c is best:
                c = replace(c, reason=f"chosen: {why}")
            elif c.kept:
                lower = "not the agent's best skill" if c.agent_id == agent.id else "ranked lower"
                c = replace(c, reason=f"kept, {lower}")
            marked.append(c)
        target = Target(agent.id, best.url, best.version)
        ranked = _ranked(marked)
        choice = Choice(agent, target, best.skill_id, via, ranked, best.score, why)
        return _Decision(choice, None, ranked)


# --- helpers ---------------------------------------------------------------------------------


def _rank_key(
    item: tuple[int, Candidate], index: _SkillIndex, context_agents: frozenset[str]
) -> tuple[float, bool, str, int]:
    n, c = item
    return (-c.score, c.agent_id not in context_agents, c.agent_id, index.rows[n].position)


def _ranked(candidates: list[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (-c.score, not c.kept, c.agent_id, c.skill_id or ""))


def _label(c: Candidate) -> str:
    """Who a reason is about: the agent alone for agent-wide reasons."""
    if c.skill_id is None or c.reason.startswith("agent "):
        return f"agent {c.agent_id!r}"
    return f"agent {c.agent_id!r} skill {c.skill_id!r}"


def _closest(
    candidates: list[Candidate], registry: Registry, index: _SkillIndex
) -> list[dict[str, Any]]:
    """The best-scoring skills of routable agents, with why each was not taken."""
    routable = [
        c
        for c in candidates
        if c.skill_id is not None and registry.routable(index.snapshot.agents[c.agent_id])
    ]
    return [
        {"agent": c.agent_id, "skill": c.skill_id, "score": c.score, "reason": c.reason}
        for c in _ranked(routable)[:CLOSEST]
    ]


def _hint_error(message: str, hint: dict[str, str], reason: str) -> _Decision:
    error = RpcError(
        BAD_ROUTING_HINT, message, {"extension": ROUTING_EXTENSION, "hint": hint, "reason": reason}
    )
    return _Decision(None, error, [])
