"""The in-memory catalog: an immutable snapshot of every agent, with search and pagination.

Routing and catalog reads never touch the database: they read the current
:class:`Snapshot`, which :class:`Catalog` swaps atomically whenever the index changes.
Search results are cached per snapshot version (cachetools), so repeated queries are free
and a new snapshot invalidates them all at once. Pages of results carry the cursors of
:mod:`registry.paging`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from cachetools import LRUCache

from registry import mediatypes
from registry.cards import Skill
from registry.paging import Ordering, Page, decode_cursor, encode_cursor
from registry.records import AgentRecord
from registry.textsearch import Field, TextIndex, descending, terms


@dataclass(frozen=True)
class Query:
    """Catalog filters; every given filter must hold.

    Skill-level filters (``skill``, ``tags``, ``input_mode``, ``output_mode``) must all hold
    for one and the same skill; agent-level ones (``streaming``, ``push``,
    ``protocol_version``, ``verified``, ``verification``) for the agent. ``q`` is ranked
    text: a skill matches on its own text (and its agent's name); an agent matches on its
    name and description or on one of the skills that pass the skill-level filters.
    """

    q: str | None = None
    skill: str | None = None
    tags: tuple[str, ...] = ()
    input_mode: str | None = None
    output_mode: str | None = None
    streaming: bool | None = None
    push: bool | None = None
    protocol_version: str | None = None
    verified: bool | None = None
    verification: str | None = None

    def skill_filters(self) -> bool:
        """True if any skill-level filter is set."""
        return bool(self.skill or self.tags or self.input_mode or self.output_mode)

    def agent_filters(self) -> bool:
        """True if any agent-level filter is set."""
        flags = (self.streaming, self.push, self.verified, self.verification)
        return any(v is not None for v in flags) or bool(self.protocol_version)


@dataclass(frozen=True)
class AgentHit:
    """An agent found by a query, with its text score (0 without ``q``)."""

    agent: AgentRecord
    score: float = 0.0
    skills: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillHit:
    """A skill found by a query, with its agent and text score."""

    agent: AgentRecord
    skill: Skill
    position: int
    score: float = 0.0


def version_matches(wanted: str, offered: str) -> bool:
    """``0.3`` matches ``0.3.0``; ``1`` matches ``1.0``: compare the parts ``wanted`` gives."""
    want = [p for p in wanted.strip().split(".") if p]
    have = offered.strip().split(".")
    have += ["0"] * max(0, len(want) - len(have))
    return bool(want) and have[: len(want)] == want


class Snapshot:
    """Every agent at one catalog version, with text indexes built once.

    Given the ``previous`` snapshot, the terms of every record it already held (the same
    object) are reused, so replacing one agent among thousands does not re-tokenize the rest.
    """

    def __init__(
        self,
        records: Sequence[AgentRecord] | dict[str, AgentRecord],
        version: int,
        previous: Snapshot | None = None,
        changed: frozenset[str] | None = None,
    ) -> None:
        """``records`` as a dict are already by id in id order; ``changed``: the ids whose
        records differ from ``previous`` (None: compare them all)."""
        self.version = version
        self.agents: dict[str, AgentRecord] = (
            records if isinstance(records, dict) else {r.id: r for r in sorted(records, key=_id)}
        )
        # the term counts computed so far, for reuse when this snapshot's indexes are built
        self._inherited: dict[str, _AgentTerms] = previous._known_terms() if previous else {}
        # and the interface owners, updated for the agents that changed
        built = previous.__dict__.get("_owners") if previous else None
        self._base_owners: tuple[dict[str, AgentRecord], _Owners, Any] | None = (
            None if previous is None or built is None else (previous.agents, built, changed)
        )

    def _known_terms(self) -> dict[str, _AgentTerms]:
        built = self.__dict__.get("_terms")
        return built if built is not None else self._inherited

    # The indexes are built on the first query, not on every write: a burst of writes (a
    # crawl, seeds, a reload) then costs one build instead of one per write.

    @cached_property
    def _terms(self) -> dict[str, _AgentTerms]:
        terms = {
            agent.id: _reuse_or_compute(agent, self._inherited) for agent in self.agents.values()
        }
        self._inherited = {}
        return terms

    def interface_owners(self, url: str, tenant: str | None) -> tuple[str, ...]:
        """The ids of the agents with an interface at ``url`` for ``tenant``."""
        return self._owners.get((url, tenant), ())

    @cached_property
    def _owners(self) -> _Owners:
        """Agent ids by interface (URL, tenant): the previous snapshot's, with only the
        agents that are not the same objects there rewritten."""
        base, self._base_owners = self._base_owners, None
        if base is None:
            owners: _Owners = {}
            added: Iterable[AgentRecord] = self.agents.values()
        else:
            before, owners, changed = base[0], dict(base[1]), base[2]
            if changed is None:
                changed = before.keys() | self.agents.keys()
            changed = sorted(i for i in changed if before.get(i) is not self.agents.get(i))
            for agent_id in changed:
                for key in _interface_keys(before[agent_id]) if agent_id in before else ():
                    owners[key] = tuple(a for a in owners.get(key, ()) if a != agent_id)
            added = [self.agents[i] for i in changed if i in self.agents]
        for record in added:
            for key in _interface_keys(record):
                owners[key] = (*owners.get(key, ()), record.id)
        return owners

    @cached_property
    def _skills(self) -> list[tuple[AgentRecord, int, Skill]]:
        return [
            (agent, n, skill)
            for agent in self.agents.values()
            for n, skill in enumerate(agent.card.skills)
        ]

    @cached_property
    def _skill_rows(self) -> dict[tuple[str, str], int]:
        return {(a.id, s.id): i for i, (a, _, s) in enumerate(self._skills)}

    @cached_property
    def _skill_index(self) -> TextIndex:
        return TextIndex([tf for agent in self.agents for tf in self._terms[agent].skills])

    @cached_property
    def _agent_ids(self) -> list[str]:
        return list(self.agents)

    @cached_property
    def _agent_rows(self) -> dict[str, int]:
        return {agent_id: n for n, agent_id in enumerate(self._agent_ids)}

    @cached_property
    def _rows_by(self) -> dict[str, dict[str, list[int]]]:
        """Skill rows by skill id, by tag (case-folded) and by input and output mode (as
        written): the filters look there instead of at every skill."""
        by: dict[str, dict[str, list[int]]] = {"skill": {}, "tag": {}, "input": {}, "output": {}}
        for row, (_, _, skill) in enumerate(self._skills):
            by["skill"].setdefault(skill.id, []).append(row)
            for tag in {t.casefold() for t in skill.tags}:
                by["tag"].setdefault(tag, []).append(row)
            for mode in set(skill.input_modes):
                by["input"].setdefault(mode, []).append(row)
            for mode in set(skill.output_modes):
                by["output"].setdefault(mode, []).append(row)
        return by

    def _candidate_rows(self, query: Query, scores: dict[int, float] | None) -> list[int] | None:
        """The skill rows that match ``query``'s skill-level filters (exactly: each filter
        has an index), narrowed to those ``scores`` holds, in row order; or None when no
        filter narrows them down."""
        found: set[int] | None = None

        def narrow(rows: Iterable[int]) -> None:
            nonlocal found
            found = set(rows) if found is None else found.intersection(rows)

        by = self._rows_by
        if query.skill is not None:
            narrow(by["skill"].get(query.skill, ()))
        for tag in query.tags:
            narrow(by["tag"].get(tag.casefold(), ()))
        for wanted, kind in ((query.input_mode, "input"), (query.output_mode, "output")):
            if wanted:  # (intersections and unions of sets and lists run in C)
                lists = [
                    rows for mode, rows in by[kind].items() if mediatypes.matches(wanted, mode)
                ]
                base = found
                found = set().union(*(lists if base is None else map(base.intersection, lists)))
        if scores is not None:
            narrow(scores)
        return None if found is None else sorted(found)

    @cached_property
    def _agent_index(self) -> TextIndex:
        return TextIndex([self._terms[a].agent for a in self._agent_ids])

    def __len__(self) -> int:
        return len(self.agents)

    def skill_terms(self, agent_id: str) -> list[Counter[str]]:
        """The weighted terms of each of the agent's skills (:func:`skill_fields`), computed
        once per record and shared with the router's matcher."""
        return self._terms[agent_id].skills

    def skills(self, query: Query) -> list[SkillHit]:
        """Skills matching ``query``: by score (with ``q``), then agent id and card order."""
        scores = self._skill_index.scores(query.q) if query.q else None
        rows = self._candidate_rows(query, scores)  # the skill-level filters hold for these
        agent_level = query.agent_filters()
        hits = []
        for row in range(len(self._skills)) if rows is None else rows:
            agent, position, skill = self._skills[row]
            if agent_level and not agent_ok(agent, query):
                continue
            score = 0.0
            if scores is not None:
                score = round(scores.get(row, 0.0), 6)
                if score <= 0:
                    continue
            hits.append(SkillHit(agent, skill, position, score))
        if scores is not None:  # (rows are in agent id and card order already)
            hits.sort(key=lambda h: (-h.score, h.agent.id, h.position))
        return hits

    def ranked_skills(
        self,
        query: Query,
        limit: int,
        after: list[Any] | None = None,
        keep: Callable[[SkillHit], bool] | None = None,
    ) -> tuple[list[SkillHit], bool]:
        """The first ``limit`` skills after sort key ``after`` of a ranked text query (``q``),
        and whether more follow: the same page as :meth:`skills` gives, found by walking the
        index best first (:meth:`TextIndex.ranked`) instead of scoring and sorting every skill
        that shares a word with ``q``. ``keep`` is a further filter (e.g. health)."""
        assert query.q
        collected: list[SkillHit] = []
        for row, raw_score in self._skill_index.ranked(query.q):
            score = round(raw_score, 6)
            if score <= 0:
                break
            if len(collected) > limit and score < collected[limit].score:
                break  # nothing left can enter the page (ties with its last place included)
            agent, position, skill = self._skills[row]
            if not agent_ok(agent, query) or not skill_ok(skill, query):
                continue
            hit = SkillHit(agent, skill, position, score)
            if (keep is not None and not keep(hit)) or (
                after is not None and _skill_key(hit) <= after
            ):
                continue
            collected.append(hit)
        collected.sort(key=_skill_key)
        return collected[:limit], len(collected) > limit

    def ranked_agents(
        self,
        query: Query,
        limit: int,
        after: list[Any] | None = None,
        keep: Callable[[AgentHit], bool] | None = None,
    ) -> tuple[list[AgentHit], bool]:
        """The first ``limit`` agents after sort key ``after`` of a ranked text query without
        skill filters, and whether more follow: the same page as :meth:`agents_for` gives.

        An agent's score is its best skill's text score plus half its own: both computed for
        every agent at once (arrays), then agents are taken best first until the page (ties
        included) is decided."""
        assert query.q and not query.skill_filters()
        skill_scores = self._skill_index.dense(query.q)
        best = np.zeros(len(self._agent_ids), dtype=np.float64)
        starts, owners = self._skill_starts
        if len(starts):
            best[owners] = np.maximum.reduceat(skill_scores, starts)
        totals = best + 0.5 * self._agent_index.dense(query.q)
        collected: list[tuple[float, str]] = []  # (score, agent id) of agents that pass
        for row, raw in descending(totals, np.flatnonzero(totals > 0)):
            score = round(raw, 6)
            if score <= 0 or (len(collected) > limit and score < collected[limit][0]):
                break  # nothing left can enter the page (ties with its last place included)
            agent_id = self._agent_ids[row]
            agent = self.agents[agent_id]
            if not agent_ok(agent, query) or (after is not None and [-score, agent_id] <= after):
                continue
            if keep is None or keep(AgentHit(agent, score)):
                collected.append((score, agent_id))
        collected.sort(key=lambda t: (-t[0], t[1]))
        hits = []
        for score, agent_id in collected[: limit + 1]:
            agent = self.agents[agent_id]
            rows = self._skill_rows
            matched = tuple(
                s.id for s in agent.card.skills if skill_scores[rows[(agent_id, s.id)]] > 0
            )
            hits.append(AgentHit(agent, score, matched))
        return hits[:limit], len(hits) > limit

    @cached_property
    def _skill_starts(self) -> tuple[np.ndarray, np.ndarray]:
        """The first skill row of each agent with skills, and that agent's row."""
        starts: list[int] = []
        owners: list[int] = []
        row = 0
        for n, agent in enumerate(self.agents.values()):
            if agent.card.skills:
                starts.append(row)
                owners.append(n)
                row += len(agent.card.skills)
        return np.array(starts, dtype=np.intp), np.array(owners, dtype=np.intp)

    def _candidate_agents(
        self,
        query: Query,
        scores: dict[int, float] | None,
        skill_scores: dict[int, float],
    ) -> Iterable[str]:
        """The only agents that can match ``query``, in id order (all without a narrowing
        filter): those with a candidate skill, or (ranked text) whose own text matches."""
        if not query.skill_filters() and scores is None:
            return self._agent_ids
        if query.skill_filters():
            # (not narrowed by text: an agent's own text may match where its skills' does not)
            rows = self._candidate_rows(query, None) or []
            ids = {self._skills[row][0].id for row in rows}
        else:
            ids = {self._skills[row][0].id for row in skill_scores}
            ids.update(self._agent_ids[row] for row in scores or ())
        return sorted(ids)

    def agents_for(self, query: Query) -> list[AgentHit]:
        """Agents matching ``query``: by score (with ``q``), then id."""
        scores = self._agent_index.scores(query.q) if query.q else None
        skill_scores = self._skill_index.scores(query.q) if query.q else {}
        candidates = self._candidate_agents(query, scores, skill_scores)
        hits = []
        for agent_id in candidates:
            row = self._agent_rows[agent_id]
            agent = self.agents[agent_id]
            if not agent_ok(agent, query):
                continue
            matched = tuple(s.id for s in agent.card.skills if skill_ok(s, query))
            if query.skill_filters() and not matched:
                continue
            score = 0.0
            if scores is not None:
                texts = {s: skill_scores.get(self._skill_rows[(agent_id, s)], 0.0) for s in matched}
                matched = tuple(s for s in matched if texts[s] > 0)
                score = max(texts.values(), default=0.0) + 0.5 * scores.get(row, 0.0)
                if score <= 0:
                    continue
            hits.append(AgentHit(agent, round(score, 6), matched))
        hits.sort(key=lambda h: (-h.score, h.agent.id))
        return hits


@dataclass(frozen=True)
class _AgentTerms:
    record: AgentRecord
    agent: Counter[str]
    skills: list[Counter[str]]


def _reuse_or_compute(agent: AgentRecord, known_terms: dict[str, _AgentTerms]) -> _AgentTerms:
    known = known_terms.get(agent.id)
    if known is not None and known.record is agent:
        return known
    return _AgentTerms(
        agent,
        terms(_agent_fields(agent)),
        [terms(skill_fields(agent, skill)) for skill in agent.card.skills],
    )


def _id(record: AgentRecord) -> str:
    return record.id


def skill_fields(agent: AgentRecord, skill: Skill) -> list[Field]:
    """The weighted text of a skill for ranking (its agent's name counts a little)."""
    return [
        Field(skill.name, 3.0),
        Field(skill.id.replace("-", " ").replace("_", " "), 2.0),
        Field(" ".join(skill.tags), 2.0),
        Field(skill.description, 1.0),
        Field(" ".join(skill.examples), 1.0),
        Field(agent.card.name, 0.5),
    ]


def _agent_fields(agent: AgentRecord) -> list[Field]:
    return [Field(agent.card.name, 3.0), Field(agent.card.description, 1.0)]


def agent_ok(agent: AgentRecord, query: Query) -> bool:
    """Whether ``agent`` passes ``query``'s agent-level filters."""
    caps = agent.card.capabilities
    if query.streaming is not None and caps.streaming != query.streaming:
        return False
    if query.push is not None and caps.push_notifications != query.push:
        return False
    status = agent.verification.status
    if query.verified is not None and (status == "verified") != query.verified:
        return False
    if query.verification is not None and status != query.verification:
        return False
    wanted = query.protocol_version
    return not wanted or any(version_matches(wanted, v) for v in agent.card.protocol_versions)


def skill_ok(skill: Skill, query: Query) -> bool:
    """Whether ``skill`` passes ``query``'s skill-level filters."""
    if query.skill is not None and skill.id != query.skill:
        return False
    if query.tags:
        have = {t.casefold() for t in skill.tags}
        if not all(t.casefold() in have for t in query.tags):
            return False
    if query.input_mode and not mediatypes.any_match(query.input_mode, skill.input_modes):
        return False
    return not (
        query.output_mode and not mediatypes.any_match(query.output_mode, skill.output_modes)
    )


_Owners = dict[tuple[str, str | None], tuple[str, ...]]


def _interface_keys(record: AgentRecord) -> set[tuple[str, str | None]]:
    return {(i.url, i.tenant) for i in record.card.interfaces}


def _agent_key(hit: AgentHit) -> list[Any]:
    return [-hit.score, hit.agent.id]


def _skill_key(hit: SkillHit) -> list[Any]:
    return [-hit.score, hit.agent.id, hit.position]


AGENTS: Ordering[AgentHit] = Ordering("agents", _agent_key, (float, str))
SKILLS: Ordering[SkillHit] = Ordering("skills", _skill_key, (float, str, int))


@dataclass
class Catalog:
    """The current snapshot, swapped whole on every change, and a per-version result cache."""

    snapshot: Snapshot = field(default_factory=lambda: Snapshot([], 0))
    loaded: bool = False
    _cache: LRUCache[tuple[Any, ...], Any] = field(default_factory=lambda: LRUCache(maxsize=512))

    def replace(self, records: Sequence[AgentRecord], version: int) -> None:
        """Install a snapshot of ``records`` at ``version``, unless a newer one is installed."""
        if self.loaded and version < self.snapshot.version:
            return  # a slower reload finished after a newer write was installed
        self._install(Snapshot(records, version, self.snapshot))

    def upsert(self, record: AgentRecord, version: int) -> bool:
        """Apply a write of ``record`` that produced catalog ``version``.

        False when the snapshot missed another write in between: the caller must reload.
        """
        current = self.snapshot.version
        if version <= current:
            return True  # a reload already read the database after this write
        if version > current + 1:
            return False
        self._install(self._after({record.id: record}, version))
        return True

    def apply(self, changes: dict[str, AgentRecord | None], version: int) -> None:
        """Install the snapshot at ``version`` that another process's writes made: these
        agents replaced (None: removed), the others kept, unless a newer one is installed."""
        if version <= self.snapshot.version:
            return
        self._install(self._after(changes, version))

    def patch(self, record: AgentRecord) -> None:
        """Swap in a record whose indexed content is unchanged (new card bytes that mean the
        same), keeping the catalog version: no other process needs to reload for it."""
        if record.id not in self.snapshot.agents:
            return
        self._install(self._after({record.id: record}, self.snapshot.version))

    def remove(self, agent_id: str, version: int) -> bool:
        """Apply the removal of ``agent_id`` that produced ``version`` (see :meth:`upsert`)."""
        current = self.snapshot.version
        if version <= current:
            return True
        if version > current + 1:
            return False
        self._install(self._after({agent_id: None}, version))
        return True

    def _after(self, changes: dict[str, AgentRecord | None], version: int) -> Snapshot:
        """The snapshot at ``version`` with ``changes`` made (None: removed): the agents are
        copied in id order without sorting them again, unless one is new."""
        agents, new = dict(self.snapshot.agents), False
        for agent_id, record in changes.items():
            if record is None:
                agents.pop(agent_id, None)
            else:
                new = new or agent_id not in agents
                agents[agent_id] = record
        if new:
            ids = sorted(agents)
            agents = dict(zip(ids, map(agents.__getitem__, ids), strict=True))
        return Snapshot(agents, version, self.snapshot, frozenset(changes))

    def _install(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.loaded = True
        self._cache.clear()

    def agents(self, query: Query) -> list[AgentHit]:
        """Cached :meth:`Snapshot.agents_for` on the current snapshot."""
        snapshot = self.snapshot
        key = ("agents", snapshot.version, query)
        if key not in self._cache:
            self._cache[key] = snapshot.agents_for(query)
        return self._cache[key]

    def agents_page(
        self,
        query: Query,
        limit: int,
        cursor: str | None,
        keep: Callable[[AgentHit], bool] | None = None,
    ) -> Page[AgentHit]:
        """A page of a ranked text search of agents (see :meth:`Snapshot.ranked_agents`),
        with the same cursors as :func:`paginate` over :meth:`agents`."""
        scope = AGENTS.scope(query)
        after = decode_cursor(cursor, scope, AGENTS.shape) if cursor else None
        hits, more = self.snapshot.ranked_agents(query, limit, after, keep)
        next_cursor = encode_cursor(scope, _agent_key(hits[-1])) if more and hits else None
        return Page(hits, next_cursor)

    def skills_page(
        self,
        query: Query,
        limit: int,
        cursor: str | None,
        keep: Callable[[SkillHit], bool] | None = None,
    ) -> Page[SkillHit]:
        """A page of a ranked text search of skills (see :meth:`Snapshot.ranked_skills`),
        with the same cursors as :func:`paginate` over :meth:`skills`."""
        scope = SKILLS.scope(query)
        after = decode_cursor(cursor, scope, SKILLS.shape) if cursor else None
        hits, more = self.snapshot.ranked_skills(query, limit, after, keep)
        next_cursor = encode_cursor(scope, _skill_key(hits[-1])) if more and hits else None
        return Page(hits, next_cursor)

    def skills(self, query: Query) -> list[SkillHit]:
        """Cached :meth:`Snapshot.skills` on the current snapshot."""
        snapshot = self.snapshot
        key = ("skills", snapshot.version, query)
        if key not in self._cache:
            self._cache[key] = snapshot.skills(query)
        return self._cache[key]
