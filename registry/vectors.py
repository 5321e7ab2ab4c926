"""Embeddings of the catalog's text, computed when a card is indexed and kept in the database.

Vectors are content-addressed: one row per (model id, SHA-256 of the embedded text) in
``skill_vectors``. A restart, another replica or a second agent with the same skill text
reads the row instead of running the model again; a new model (another ``model_id``) finds
no rows and recomputes everything. What is embedded for each skill and agent is
:func:`skill_document` and :func:`agent_document`; learned examples
(:mod:`registry.examples`) go through the same store.

The registry calls :meth:`SkillVectors.index` after catalog changes (its ``on_index`` hook),
in the background (:mod:`registry.indexing`: a registration does not wait); a model that
fails there (an endpoint down) leaves those texts without a vector, and the next change or
:meth:`SkillVectors.index` call tries again. Routing treats a text without a vector as
semantically unknown (lexical score only).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from registry.cards import Skill
from registry.records import AgentRecord, utcnow
from registry.store import Store
from registry.tables import SkillVectorRow

log = logging.getLogger(__name__)

BATCH = 256
"""Texts embedded (and rows written) per step at index time."""


def text_key(text: str) -> str:
    """The content address of a text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def skill_document(skill: Skill) -> str:
    """What is embedded for a skill: name, description, tags and examples as one text."""
    parts = [skill.name.strip(), skill.description.strip()]
    if skill.tags:
        parts.append("Tags: " + ", ".join(skill.tags))
    if skill.examples:
        parts.append("Examples: " + " | ".join(e.strip() for e in skill.examples))
    return "\n".join(p for p in parts if p)


def agent_document(agent: AgentRecord) -> str:
    """What is embedded for an agent as a whole: its name and description."""
    card = agent.card
    return "\n".join(p for p in (card.name.strip(), card.description.strip()) if p)


def documents(agent: AgentRecord) -> list[str]:
    """Every text of an agent that routing embeds: the agent, each skill, each example."""
    out = [agent_document(agent)]
    for skill in agent.card.skills:
        out.append(skill_document(skill))
        out.extend(e.strip() for e in skill.examples if e.strip())
    return out


async def embed_texts(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """Run ``embedder.embed`` (a coroutine for remote models, CPU work in a thread for local
    ones) and return float32 rows."""
    if inspect.iscoroutinefunction(embedder.embed):
        vectors = await embedder.embed(list(texts))
    else:
        vectors = await asyncio.to_thread(embedder.embed, list(texts))
    return np.asarray(vectors, dtype=np.float32)


class SkillVectors:
    """The vectors of one model: in memory (by text key) over the ``skill_vectors`` table."""

    def __init__(self, store: Store, embedder: Any) -> None:
        self.store = store
        self.embedder = embedder
        self.model_id: str = embedder.model_id
        self.computed = 0
        """Texts this process embedded at index time (not read from the database)."""
        self.generation = 0
        """Grows whenever vectors are added: routing rebuilds its matrix when it changes."""
        self.failure: str | None = None
        """Why the last computation failed, if it did (shown by explain and /readyz)."""
        self._vectors: dict[str, np.ndarray] = {}
        self._docs: dict[str, tuple[AgentRecord, dict[str, str]]] = {}  # texts by key
        self._lock = asyncio.Lock()

    def get(self, text: str) -> np.ndarray | None:
        """The vector of ``text``, if known."""
        return self._vectors.get(text_key(text))

    def __len__(self) -> int:
        return len(self._vectors)

    def has_all(self, agent: AgentRecord) -> bool:
        """Whether every text of ``agent`` has its vector here."""
        known = self._docs.get(agent.id)
        keys = known[1] if known is not None and known[0] is agent else None
        if keys is None:
            keys = {text_key(t): t for t in documents(agent) if t}
        return all(key in self._vectors for key in keys)

    def remember(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep vectors computed elsewhere, in memory only (benchmarks, imports)."""
        for text, vector in zip(texts, vectors, strict=True):
            self._vectors[text_key(text)] = np.ascontiguousarray(vector, dtype=np.float32)
        self.generation += 1

    async def load(self) -> int:
        """Read every stored vector of this model; the number read."""
        async with self.store.session() as session:
            rows = (
                await session.exec(
                    select(SkillVectorRow.text_sha256, SkillVectorRow.vector).where(
                        SkillVectorRow.model_id == self.model_id
                    )
                )
            ).all()
        for key, blob in rows:
            self._vectors[key] = np.frombuffer(blob, dtype=np.float32)
        if rows:
            self.generation += 1
        return len(rows)

    async def index(self, agents: Iterable[AgentRecord]) -> int:
        """Make sure every text of these agents has a vector: read missing ones from the
        database, embed the rest; the number embedded. Never raises for a model failure
        (logged, kept in :attr:`failure`, retried by the next call)."""
        missing: dict[str, str] = {}
        vectors = self._vectors
        for agent in agents:  # each agent's texts hashed once, not at every call
            known = self._docs.get(agent.id)
            if known is None or known[0] is not agent:
                known = (agent, {text_key(t): t for t in documents(agent) if t})
                self._docs[agent.id] = known
            for key, text in known[1].items():
                if key not in vectors:
                    missing[key] = text
        return await self._ensure(missing)

    async def ensure(self, texts: Iterable[str]) -> int:
        """Vectors for ``texts`` (see :meth:`index`); the number embedded."""
        wanted = {text_key(t): t for t in texts if t}
        return await self._ensure({k: t for k, t in wanted.items() if k not in self._vectors})

    async def _ensure(self, missing: dict[str, str]) -> int:
        """Vectors for ``missing`` (texts by key, none known yet here)."""
        if not missing:
            return 0
        async with self._lock:
            missing = {k: t for k, t in missing.items() if k not in self._vectors}
            if not missing:
                return 0
            await self._read(list(missing))
            todo = [(k, t) for k, t in missing.items() if k not in self._vectors]
            done = 0
            try:
                for start in range(0, len(todo), BATCH):
                    chunk = todo[start : start + BATCH]
                    vectors = await embed_texts(self.embedder, [t for _, t in chunk])
                    await self._write([k for k, _ in chunk], vectors)
                    done += len(chunk)
                self.failure = None
            except Exception as exc:  # a model or endpoint failure must not fail a write
                self.failure = f"{type(exc).__name__}: {exc}"
                log.warning("embedding %d text(s) failed: %s", len(todo) - done, self.failure)
            self.computed += done
            return done

    async def _read(self, keys: list[str]) -> None:
        found = False
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            async with self.store.session() as session:
                rows = (
                    await session.exec(
                        select(SkillVectorRow.text_sha256, SkillVectorRow.vector).where(
                            SkillVectorRow.model_id == self.model_id,
                            SkillVectorRow.text_sha256.in_(chunk),  # type: ignore[attr-defined]
                        )
                    )
                ).all()
            for key, blob in rows:
                self._vectors[key] = np.frombuffer(blob, dtype=np.float32)
                found = True
        if found:
            self.generation += 1

    async def _write(self, keys: list[str], vectors: np.ndarray) -> None:
        now = utcnow()
        rows = [
            SkillVectorRow(
                model_id=self.model_id,
                text_sha256=key,
                dim=int(vector.shape[0]),
                vector=np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
                created_at=now,
            )
            for key, vector in zip(keys, vectors, strict=True)
        ]
        try:
            async with self.store.session() as session, session.begin():
                session.add_all(rows)
        except IntegrityError:  # another replica wrote some of them meanwhile: one by one
            for row in rows:
                try:
                    async with self.store.session() as session, session.begin():
                        session.add(row)
                except IntegrityError:
                    pass
        for key, vector in zip(keys, vectors, strict=True):
            self._vectors[key] = np.ascontiguousarray(vector, dtype=np.float32)
        self.generation += 1
