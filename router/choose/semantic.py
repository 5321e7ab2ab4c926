"""The semantic tier: how close a message is, in meaning, to each skill of the catalog.

A message is embedded once (:meth:`Semantic.query_vector`, cached by text; messages that
wait together are embedded in one batch, :mod:`router.choose.batching`). Each row of the
matcher's skill index (a skill of an agent) gets four similarities with it, each on [0, 1]
(:func:`similarity`: ``(cos + 1) / 2``) and NaN where there is nothing to compare
(:meth:`SemanticIndex.features`): to the skill's document (name, description, tags,
examples), to its agent's document (name, description), to the best of the skill's card
examples taken one by one, and to the best of its learned examples (:mod:`registry.examples`).
The router's score of a row fuses them with the lexical (BM25) score saturated into [0, 1)
(:func:`saturate`: ``bm25 / (bm25 + k)``): :func:`fuse`, a weighted mean, so every score is
on [0, 1]. :meth:`Semantic.scores` is that score for every row of a skill index. The weights,
the refusal thresholds of each operating point (``SWITCHBOARD_REFUSE``) and the margin are a
:class:`Calibration` fitted on a development set by ``bench/routing_eval/fit.py`` and shipped
as ``router/choose/calibration.json``; :meth:`Calibration.cutoff` is the threshold in force.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np
from cachetools import LRUCache

from registry.cards import Skill
from registry.examples import Example, LearnedExamples
from registry.records import AgentRecord
from registry.vectors import SkillVectors, agent_document, embed_texts, skill_document
from router.choose.batching import Batches
from router.choose.skillindex import SkillIndex, query_text

log = logging.getLogger(__name__)

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")


Refuse = Literal["calibrated", "strict", "never"]
"""``SWITCHBOARD_REFUSE``: the operating point. ``calibrated`` refuses below the calibrated
threshold (at most 0.02 of top-1 lost against ``never`` on the evaluation set), ``strict``
below a higher one (more refusals of messages no agent serves, more of top-1 lost), ``never``
routes below the calibrated threshold too: to the default route if one is set, else to the
best candidate, as tier ``guess``."""
REFUSE_POINTS: tuple[Refuse, ...] = ("calibrated", "strict", "never")
Source = Literal["calibrated", "operator", "default"]
"""Where the threshold in force comes from: the shipped calibration, the operator
(``SWITCHBOARD_MATCH_THRESHOLD``), or the lexical matcher's default (0.5)."""


@dataclass(frozen=True)
class Cutoff:
    """The threshold that decides a refusal, the margin the best agent must lead by, where
    the threshold comes from and the operating point (see :data:`Refuse`)."""

    threshold: float
    margin: float
    source: Source
    refuse: Refuse

    def to_json(self) -> dict[str, Any]:
        """The explain view: ``threshold``, ``threshold_source``, ``margin_needed``,
        ``refuse``."""
        return {
            "threshold": self.threshold,
            "threshold_source": self.source,
            "margin_needed": self.margin,
            "refuse": self.refuse,
        }


@dataclass(frozen=True)
class Calibration:
    """Fusion weights and refusal thresholds (see :func:`fuse`); scores are on [0, 1]."""

    skill: float = 1.0
    agent: float = 0.2
    example: float = 0.5
    lexical: float = 0.3
    lexical_k: float = 5.0
    floor: float = 0.6
    """The ``calibrated`` operating point: a best fused score below this is refused."""
    margin: float = 0.0
    """The best agent must lead the next agent by at least this much, else refused (or,
    with an adjudicator, asked)."""
    strict_floor: float | None = None
    """The ``strict`` operating point's threshold (None: the calibrated one)."""
    strict_margin: float | None = None
    """The ``strict`` operating point's margin (None: the calibrated one)."""
    llm_band: float = 0.05
    """With an adjudicator, decisions within this much of the threshold are asked too."""
    fitted_on: str = "defaults"

    @classmethod
    def load(cls, path: Path | None = None) -> Calibration:
        """The calibration in ``path`` (default: the one shipped beside this module)."""
        path = path or CALIBRATION_FILE
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> dict[str, Any]:
        """The values, as written to ``calibration.json`` and shown by explain."""
        return asdict(self)

    def cutoff(self, refuse: Refuse = "calibrated", operator: float | None = None) -> Cutoff:
        """The threshold and margin in force at operating point ``refuse``; ``operator``
        (``SWITCHBOARD_MATCH_THRESHOLD``), when set, is the threshold instead."""
        floor, margin = self.floor, self.margin
        if refuse == "strict":
            floor = self.floor if self.strict_floor is None else self.strict_floor
            margin = self.margin if self.strict_margin is None else self.strict_margin
        if operator is not None:
            return Cutoff(operator, margin, "operator", refuse)
        return Cutoff(floor, margin, "calibrated", refuse)


def similarity(cos: np.ndarray) -> np.ndarray:
    """Cosine similarities on [0, 1]: ``(cos + 1) / 2`` (orthogonal texts: 0.5)."""
    return np.clip((cos + 1.0) / 2.0, 0.0, 1.0).astype(np.float32)


def saturate(bm25: np.ndarray | float, k: float) -> Any:
    """A BM25 score on [0, 1): ``bm25 / (bm25 + k)`` (0 for no word in common, 0.5 at
    ``k``)."""
    return bm25 / (bm25 + k)


def fuse(
    cal: Calibration,
    skill: np.ndarray,
    agent: np.ndarray,
    example: np.ndarray,
    lexical: np.ndarray,
    learned: np.ndarray | None = None,
) -> np.ndarray:
    """The fused score of every row, on [0, 1]: the weighted mean of the similarities (on
    [0, 1], :func:`similarity`) and the saturated BM25 score (``lexical`` is the raw BM25
    score, :func:`saturate` with ``cal.lexical_k``). A skill without examples (``example``
    NaN) counts its document for them. A learned example (an operator's feedback; NaN: none)
    stands for the skill's document and examples when the message is closer to it, whatever
    the weights."""
    if learned is not None:
        skill = np.fmax(skill, learned)
        example = np.fmax(example, learned)
    best_example = np.fmax(example, skill)
    total = cal.skill + cal.agent + cal.example + cal.lexical
    fused = (
        cal.skill * skill
        + cal.agent * agent
        + cal.example * best_example
        + cal.lexical * saturate(lexical, cal.lexical_k)
    )
    return fused / total if total > 0 else fused


class SemanticIndex:
    """The vectors of one catalog snapshot's skills (one row per matcher row), their agents,
    and their examples, as matrices."""

    def __init__(
        self,
        rows: Sequence[tuple[AgentRecord, Skill | None]],
        vectors: SkillVectors,
        learned: Sequence[Example],
    ) -> None:
        self.generation = vectors.generation
        dim = next((len(v) for v in map(vectors.get, _probe(rows, learned)) if v is not None), 0)
        self.dim = dim
        n = len(rows)
        self.skills = np.zeros((n, dim), dtype=np.float32)
        self.has_vector = np.zeros(n, dtype=bool)
        agent_rows: dict[str, int] = {}
        agent_vectors: list[np.ndarray] = []
        agent_known: list[bool] = []
        self.agent_of = np.zeros(n, dtype=np.int32)
        example_vectors: list[np.ndarray] = []
        owners: list[int] = []
        by_skill: dict[tuple[str, str], list[int]] = {}
        zero = np.zeros(dim, dtype=np.float32)
        for i, (agent, skill) in enumerate(rows):
            if agent.id not in agent_rows:
                agent_rows[agent.id] = len(agent_vectors)
                found = vectors.get(agent_document(agent))
                agent_vectors.append(found if found is not None else zero)
                agent_known.append(found is not None)
            self.agent_of[i] = agent_rows[agent.id]
            if skill is None:
                continue
            by_skill.setdefault((agent.id, skill.id), []).append(i)
            found = vectors.get(skill_document(skill))
            if found is not None:
                self.skills[i] = found
                self.has_vector[i] = True
            for text in skill.examples:
                found = vectors.get(text.strip())
                if found is not None:
                    example_vectors.append(found)
                    owners.append(i)
        learned_vectors: list[np.ndarray] = []
        learned_owners: list[int] = []
        for example in learned:
            found = vectors.get(example.text)
            for i in by_skill.get((example.agent_id, example.skill_id), ()):
                if found is not None:
                    learned_vectors.append(found)
                    learned_owners.append(i)
        # len(...), not -1: no vector known yet (dim 0) is a valid, empty shape
        self.agents = np.array(agent_vectors, dtype=np.float32).reshape(len(agent_vectors), dim)
        self.agent_known = np.array(agent_known, dtype=bool)
        self.examples = _Owned(example_vectors, owners, dim)
        self.learned = _Owned(learned_vectors, learned_owners, dim)
        self.missing = int(n - self.has_vector.sum()) - sum(1 for _, s in rows if s is None)

    def features(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The similarities (on [0, 1], :func:`similarity`) of the (normalized) query vector
        with every row's skill document, its agent's document, the best of its card's
        examples and the best of its learned examples (NaN: none). A row whose document has
        no vector yet scores 0 for it. An index built before any of its texts had a vector
        (another process added the agents, this one is still reading or embedding their
        vectors) matches nothing: 0, and NaN for the examples."""
        rows = len(self.skills)
        if self.dim != len(query):
            zero, none = np.zeros(rows, np.float32), np.full(rows, np.nan, np.float32)
            return zero, zero, none, none.copy()
        skill = np.where(self.has_vector, similarity(self.skills @ query), 0.0).astype(np.float32)
        if len(self.agents):
            agent = np.where(self.agent_known, similarity(self.agents @ query), 0.0)
            agent = agent.astype(np.float32)[self.agent_of]
        else:
            agent = np.zeros(rows, np.float32)
        return skill, agent, self.examples.best(query, rows), self.learned.best(query, rows)

    def scores(self, cal: Calibration, query: np.ndarray, lexical: np.ndarray) -> np.ndarray:
        """The fused score (:func:`fuse`, on [0, 1]) of every row for a query vector and
        the rows' raw BM25 scores."""
        skill, agent, example, learned = self.features(query)
        return fuse(cal, skill, agent, example, lexical, learned)


class _Owned:
    """Vectors each owned by a row (a skill's examples), grouped by row for a fast maximum."""

    def __init__(self, vectors: list[np.ndarray], owners: list[int], dim: int) -> None:
        order = np.argsort(np.array(owners, dtype=np.int64), kind="stable")
        self.vectors = np.array(vectors, dtype=np.float32).reshape(len(vectors), dim)[order]
        self.rows, self.starts = np.unique(
            np.array(owners, dtype=np.int64)[order], return_index=True
        )

    def __len__(self) -> int:
        return len(self.vectors)

    def best(self, query: np.ndarray, rows: int) -> np.ndarray:
        """Per row, the best similarity (on [0, 1]) of the query with its vectors (NaN:
        none)."""
        best = np.full(rows, np.nan, dtype=np.float32)
        if len(self.vectors):
            best[self.rows] = similarity(np.maximum.reduceat(self.vectors @ query, self.starts))
        return best


def _probe(
    rows: Sequence[tuple[AgentRecord, Skill | None]], learned: Sequence[Example]
) -> Iterator[str]:
    """The index's texts, the likeliest to have a vector first: the first that has one tells
    the dimension (while the catalog's texts are being embedded, only some have)."""
    for agent, skill in rows:
        yield agent_document(agent)
        if skill is not None:
            yield skill_document(skill)
            yield from (text.strip() for text in skill.examples)
    yield from (example.text for example in learned)


class Semantic:
    """The semantic tier of one process: the model, the stored vectors, learned examples,
    the calibration, a cache of message vectors and the index per snapshot. Messages are
    embedded in batches of up to ``batch_size``, ``threads`` batches at once (a local model
    runs each in a thread of its own)."""

    def __init__(
        self,
        embedder: Any,
        vectors: SkillVectors,
        examples: LearnedExamples,
        calibration: Calibration,
        *,
        cache_size: int = 4096,
        batch_size: int = 32,
        threads: int = 1,
    ) -> None:
        self.embedder = embedder
        self.vectors = vectors
        self.examples = examples
        self.calibration = calibration
        self.failure: str | None = None
        """Why the last message could not be embedded, if it could not."""
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=cache_size)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="embed")
        self.batches = Batches(self._embed, batch_size, threads)
        """The messages embedded together (:mod:`router.choose.batching`)."""
        self._index: tuple[Any, int, int, SemanticIndex] | None = None

    @property
    def model(self) -> str:
        """The model's id (what the stored vectors are keyed by)."""
        return self.vectors.model_id

    async def query_vector(self, text: str) -> np.ndarray | None:
        """The vector of a message text; None if the model failed (routing then goes by
        words alone, and explain says why)."""
        found = self._cache.get(text)
        if found is not None:
            return found
        try:
            vector = await self.batches.vector(text)
        except Exception as exc:  # the router keeps routing by words
            self.failure = f"{type(exc).__name__}: {exc}"
            log.warning("embedding a message failed: %s", self.failure)
            return None
        self.failure = None
        self._cache[text] = vector
        return vector

    async def _embed(self, texts: list[str]) -> np.ndarray:
        """One batch of message texts through the model (a local one in its thread)."""
        if asyncio.iscoroutinefunction(self.embedder.embed):
            return await embed_texts(self.embedder, texts)
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._executor, self.embedder.embed, texts)
        return np.asarray(vectors, dtype=np.float32)

    def index_for(
        self, key: Any, rows: Sequence[tuple[AgentRecord, Skill | None]]
    ) -> SemanticIndex:
        """The matrices of one skill index (``key`` identifies it), rebuilt when vectors or
        learned examples changed."""
        current = self._index
        generation, version = self.vectors.generation, self.examples.version
        if current is not None and current[:3] == (key, generation, version):
            return current[3]
        index = SemanticIndex(rows, self.vectors, self.examples.all)
        self._index = (key, generation, version, index)
        return index

    def scores(self, index: SkillIndex, vector: np.ndarray, text: str) -> np.ndarray:
        """The fused score (on [0, 1], :func:`fuse` with this calibration) of every row of
        ``index`` (a skill of an agent) for a message whose text is ``text`` and whose
        vector is ``vector`` (:meth:`query_vector`): what routing ranks by, before the hard
        filters and the threshold (:meth:`Calibration.cutoff`)."""
        base = index.base
        lexical = np.zeros(len(base.rows), dtype=np.float64)
        dense = base.text.dense(query_text(text))
        size = min(len(lexical), len(dense))
        lexical[:size] = dense[:size]
        return self.index_for(base, base.pairs).scores(self.calibration, vector, lexical)

    def clear_cache(self) -> None:
        """Forget the cached message vectors."""
        self._cache.clear()

    def close(self) -> None:
        """Stop embedding messages and the embedding thread."""
        self.batches.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
