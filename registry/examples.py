"""Learned examples: messages an operator said should have gone to a given skill.

``POST /api/v1/route/feedback`` stores the message text as an example of the right skill;
routing embeds it (:mod:`registry.vectors`) and a new message close to it scores that skill
as high as the example is close. Examples are listed and deleted per skill
(``/api/v1/skills/{agent_id}/{skill_id}/examples``). They live in ``skill_examples``; the
counter ``examples_version`` in ``catalog_state`` tells other replicas to reload them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete
from sqlmodel import col, select

from registry.records import utcnow
from registry.store import Store, bump
from registry.synced import Synced
from registry.tables import CatalogStateRow, SkillExampleRow

VERSION_KEY = "examples_version"
MAX_TEXT = 4096
"""Characters of a message kept as an example (routing reads no more of a message)."""


@dataclass(frozen=True)
class Example:
    """A learned example as routing and the API see it."""

    id: str
    agent_id: str
    skill_id: str
    text: str
    source: str
    task_id: str | None
    created_at: datetime

    def to_api(self) -> dict[str, Any]:
        """The admin API view."""
        return {
            "id": self.id,
            "agent_id": self.agent_id,
            "skill_id": self.skill_id,
            "text": self.text,
            "source": self.source,
            "task_id": self.task_id,
            "created_at": self.created_at.isoformat(),
        }


def _example(row: SkillExampleRow) -> Example:
    return Example(
        row.id, row.agent_id, row.skill_id, row.text, row.source, row.task_id, row.created_at
    )


class LearnedExamples(Synced):
    """Every learned example in memory, over the ``skill_examples`` table."""

    VERSION_KEY = VERSION_KEY

    def __init__(self, store: Store) -> None:
        self.store = store
        self.version = -1
        self._all: dict[str, Example] = {}

    @property
    def all(self) -> list[Example]:
        """Every example, oldest first."""
        return sorted(self._all.values(), key=lambda e: (e.created_at, e.id))

    def of_skill(self, agent_id: str, skill_id: str) -> list[Example]:
        """The examples of one skill, oldest first."""
        return [e for e in self.all if e.agent_id == agent_id and e.skill_id == skill_id]

    async def load(self) -> None:
        """Create the counter if missing and read every example."""
        await self.create_counter()
        await self._reload()

    async def _reload(self) -> None:
        async with self.store.session() as session:
            state = await session.get(CatalogStateRow, VERSION_KEY)
            rows = (await session.exec(select(SkillExampleRow))).all()
        self._all = {row.id: _example(row) for row in rows}
        self.version = state.value if state else 0

    async def add(
        self, agent_id: str, skill_id: str, text: str, *, task_id: str | None = None
    ) -> Example:
        """Store ``text`` (its first :data:`MAX_TEXT` characters) as an example of a skill."""
        row = SkillExampleRow(
            id=uuid.uuid4().hex,
            agent_id=agent_id,
            skill_id=skill_id,
            text=text[:MAX_TEXT],
            task_id=task_id,
            created_at=utcnow(),
        )
        async with self.store.session() as session, session.begin():
            session.add(row)
            self.advanced(await bump(session, VERSION_KEY))
        example = _example(row)
        self._all[example.id] = example
        return example

    async def remove(self, agent_id: str, skill_id: str, example_id: str) -> bool:
        """Delete one example of a skill; False if there is none with that id."""
        async with self.store.session() as session, session.begin():
            result = await session.exec(
                delete(SkillExampleRow).where(
                    col(SkillExampleRow.id) == example_id,
                    col(SkillExampleRow.agent_id) == agent_id,
                    col(SkillExampleRow.skill_id) == skill_id,
                )
            )
            if not result.rowcount:  # type: ignore[attr-defined]
                return False
            self.advanced(await bump(session, VERSION_KEY))
        self._all.pop(example_id, None)
        return True
