"""The matcher's view of one catalog snapshot: a row per skill of an agent, with a BM25 index
over the skills' text (:mod:`registry.textsearch`)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from registry.cards import Skill
from registry.records import AgentRecord
from registry.textsearch import Field, TextIndex, terms

MIN_CORPUS = 50
"""Word rarity (BM25's idf) is judged as if the catalog held at least this many skills (the
missing ones of average length, sharing no word): in a small catalog, a word every skill has
(two agents both translating) still counts as relevant."""
MAX_QUERY_CHARS = 4096
"""Only the start of a long message text is matched (the request is usually stated first)."""

_SINGLE = re.compile(r"(?<![^\W_])[^\W_](?![^\W_])")  # a lone letter or digit: "what's" -> "s"
_PAD = "\x00"  # the only term of the padding documents; no query yields it


@dataclass(frozen=True)
class Row:
    """A skill of an agent (``skill`` None: an agent that declares no skills)."""

    agent: AgentRecord
    position: int
    skill: Skill | None


class SkillIndex:
    """Every skill of one catalog snapshot with a BM25 index over their text.

    Term counts of records unchanged since the previous index are reused.
    """

    def __init__(self, snapshot: Any, previous: SkillIndex | None = None) -> None:
        self.snapshot = snapshot
        self.rows: list[Row] = []
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
                self.rows.append(Row(agent, -1, None))
                documents.append(Counter())
            for position, skill in enumerate(agent.card.skills):
                rows.append(len(self.rows))
                self.by_skill.setdefault(skill.id, []).append(len(self.rows))
                self.rows.append(Row(agent, position, skill))
                documents.append(known[1][position])
        if 0 < len(documents) < MIN_CORPUS:  # see MIN_CORPUS
            average = sum(sum(tf.values()) for tf in documents) / len(documents)
            documents += [Counter({_PAD: average})] * (MIN_CORPUS - len(documents))
        self.text = TextIndex(documents)
        self.pairs = [(row.agent, row.skill) for row in self.rows]

    @property
    def base(self) -> SkillIndex:
        """The whole index (a caller's view, :class:`router.choose.grants.GrantedIndex`,
        answers the index it views)."""
        return self

    def allowed(self, n: int) -> bool:
        """Whether row ``n`` may be used (every row of the whole index may)."""
        return True


def query_text(text: str) -> str:
    """The part of a message text that is matched: its start, without lone letters/digits."""
    return _SINGLE.sub(" ", text[:MAX_QUERY_CHARS])
