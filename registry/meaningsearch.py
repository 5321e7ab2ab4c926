"""Catalog search by meaning: ``match=semantic`` on ``GET /api/v1/agents`` and ``/skills``.

The registry embeds nothing itself: the app that runs the router sets the hook
:data:`registry.appkeys.SEARCH_BY_MEANING` to a :data:`ScoreByMeaning` (the router's
``router/choose/search.py``), which scores every skill of the current catalog snapshot for a
text with the score routing ranks by, and keeps the skills at or above the floor routing
refuses under. Here those scores become agent and skill hits, with the same filters as the
search by words (:mod:`registry.catalog`), best first, paged with cursors of their own: a
cursor of one mode is refused in the other (:mod:`registry.paging`).

Which mode a search uses (:func:`search_mode`): ``match`` when given, else the router's
matcher (``SWITCHBOARD_MATCHER``). Semantic without a model (loading, missing, or the text
could not be embedded) is lexical, and the answer says why (``match_fallback``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from registry.catalog import AGENTS, SKILLS, AgentHit, Query, SkillHit, Snapshot, agent_ok, skill_ok
from registry.paging import Ordering

__all__ = [
    "AGENTS_BY_MEANING",
    "NO_ROUTER",
    "SKILLS_BY_MEANING",
    "Match",
    "Mode",
    "ScoreByMeaning",
    "Scored",
    "Unavailable",
    "agent_hits",
    "search_mode",
    "skill_hits",
]

Match = Literal["semantic", "lexical"]
"""The two ways a search ranks ``q``: the names ``SWITCHBOARD_MATCHER`` uses."""

NO_ROUTER = "this server has no router to search by meaning"


@dataclass(frozen=True)
class Scored:
    """The skills of ``snapshot`` whose score for one text reaches ``floor``: (agent id,
    position of the skill in the card) -> score (0 to 1, rounded to 6 places)."""

    snapshot: Snapshot
    scores: Mapping[tuple[str, int], float]
    floor: float


@dataclass(frozen=True)
class Unavailable:
    """Why a text cannot be scored by meaning now (no model, or its embedding failed)."""

    reason: str


ScoreByMeaning = Callable[[str], Awaitable[Scored | Unavailable]]
"""The hook: a search text -> the skills it finds by meaning, or why it cannot."""


@dataclass(frozen=True)
class Mode:
    """How one search ranks ``q``: ``used`` (what the answer's ``match`` says), the scores of
    a semantic search, and why a search asked to go by meaning goes by words."""

    used: Match
    scored: Scored | None = None
    fallback: str | None = None


async def search_mode(
    q: str | None, asked: Match | None, default: Match, score: ScoreByMeaning | None
) -> Mode | None:
    """The mode of a search of ``q`` (None without ``q``: nothing is ranked): ``asked``, else
    ``default``; semantic needs ``score`` (the hook) and a text it can score."""
    if not q:
        return None
    if (asked or default) == "lexical":
        return Mode("lexical")
    if score is None:
        return Mode("lexical", fallback=NO_ROUTER)
    found = await score(q)
    if isinstance(found, Unavailable):
        return Mode("lexical", fallback=found.reason)
    return Mode("semantic", found)


AGENTS_BY_MEANING: Ordering[AgentHit] = Ordering("agents-by-meaning", AGENTS.key, AGENTS.shape)
SKILLS_BY_MEANING: Ordering[SkillHit] = Ordering("skills-by-meaning", SKILLS.key, SKILLS.shape)

Usable = Callable[[str, str | None], bool]


def skill_hits(scored: Scored, query: Query) -> list[SkillHit]:
    """The scored skills that pass ``query``'s filters, best first (then agent id and card
    order)."""
    agents, skill_level, agent_level = (
        scored.snapshot.agents,
        query.skill_filters(),
        query.agent_filters(),
    )
    hits = []
    for (agent_id, position), score in scored.scores.items():
        agent = agents[agent_id]
        skill = agent.card.skills[position]
        if (skill_level and not skill_ok(skill, query)) or (
            agent_level and not agent_ok(agent, query)
        ):
            continue
        hits.append(SkillHit(agent, skill, position, score))
    hits.sort(key=SKILLS.key)
    return hits


def agent_hits(scored: Scored, query: Query, usable: Usable | None = None) -> list[AgentHit]:
    """The agents with a scored skill that passes ``query``'s skill filters (and that the
    caller may use: ``usable``), best first (then id): an agent's score is its best such
    skill's, its ``skills`` all of them in card order."""
    agents, skill_level = scored.snapshot.agents, query.skill_filters()
    found: dict[str, list[tuple[int, float]]] = {}
    for (agent_id, position), score in scored.scores.items():
        if skill_level or usable is not None:
            skill = agents[agent_id].card.skills[position]
            if (skill_level and not skill_ok(skill, query)) or (
                usable is not None and not usable(agent_id, skill.id)
            ):
                continue
        found.setdefault(agent_id, []).append((position, score))
    agent_level = query.agent_filters()
    hits = []
    for agent_id, skills in found.items():
        agent = agents[agent_id]
        if agent_level and not agent_ok(agent, query):
            continue
        skills.sort()
        matched = tuple(agent.card.skills[n].id for n, _ in skills)
        hits.append(AgentHit(agent, max(score for _, score in skills), matched))
    hits.sort(key=AGENTS.key)
    return hits
