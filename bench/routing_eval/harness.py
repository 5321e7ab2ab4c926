"""Running the evaluation set through the real router code: a catalog in a scratch SQLite
database, the registry, stored vectors, the matcher and the chooser, as ``switchboard
serve`` wires them (no HTTP: the decision is what is measured).

:func:`features` gives, per message, what the fit needs (every row's cosine similarities,
BM25 score, and whether it passes the hard filters); :func:`evaluate` asks the real
:class:`router.choose.chooser.Chooser` and times each decision.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.routing_eval.dataset import Message, cards
from registry.crawler import Crawler
from registry.examples import LearnedExamples
from registry.service import Registry
from registry.settings import Settings
from registry.store import Store
from registry.vectors import SkillVectors
from router.choose.chooser import Chooser
from router.choose.matcher import Matcher, query_text
from router.choose.semantic import Calibration, Semantic
from router.protocol.errors import RpcError
from router.protocol.versions import Op
from router.tables import SCHEMA


@dataclass
class Env:
    """One catalog with the router's choosing parts."""

    registry: Registry
    matcher: Matcher
    chooser: Chooser
    semantic: Semantic | None
    examples: LearnedExamples
    index_seconds: float = 0.0


@contextlib.asynccontextmanager
async def catalog(
    embedder: Any | None,
    calibration: Calibration | None = None,
    *,
    card_set: dict[str, dict[str, Any]] | None = None,
    threshold: float = 0.5,
) -> AsyncIterator[Env]:
    """The evaluation catalog registered in a scratch database; ``embedder`` None: lexical."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'eval.db'}"
        store = Store(url, SCHEMA)
        settings = Settings(database_url=url, refresh=False)
        registry = Registry(store, Crawler(settings))
        await registry.load()
        examples = LearnedExamples(store)
        await examples.load()
        matcher = Matcher(registry, threshold=threshold, status="lexical")
        semantic = None
        start = time.perf_counter()
        if embedder is not None:
            vectors = SkillVectors(store, embedder)
            await vectors.load()
            semantic = Semantic(embedder, vectors, examples, calibration or Calibration())
            registry.on_index = lambda snapshot: vectors.index(snapshot.agents.values())
            matcher.semantic, matcher.status = semantic, "semantic"
        for agent_id, card in (card_set or cards()).items():
            await registry.register_card(card, agent_id)
        await registry.indexed()  # the skill texts are embedded behind the registrations
        elapsed = time.perf_counter() - start
        try:
            yield Env(registry, matcher, Chooser(matcher, semantic), semantic, examples, elapsed)
        finally:
            await registry.indexing.close(1.0)
            if semantic is not None:
                semantic.close()
            await store.close()


@dataclass
class Features:
    """What the fit needs of one message: per row of the skill index."""

    message: Message
    agents: list[str]
    skills: list[str | None]
    fits: np.ndarray
    skill: np.ndarray
    agent: np.ndarray
    example: np.ndarray
    lexical: np.ndarray
    has_words: bool = True


async def features(env: Env, messages: Sequence[Message]) -> list[Features]:
    """The fit's view of each message (see :class:`Features`)."""
    assert env.semantic is not None
    index = env.matcher.skill_index()
    sindex = env.semantic.index_for(index, index.pairs)
    agents = [agent.id for agent, _ in index.pairs]
    skills = [skill.id if skill else None for _, skill in index.pairs]
    out = []
    for m in messages:
        params = m.params()
        fits = np.array(env.matcher.fitting_rows("1.0", Op.SEND, params), dtype=bool)
        vector = await env.semantic.query_vector(m.text)
        assert vector is not None
        skill, agent, example, _learned = sindex.features(vector)
        lexical = np.zeros(len(agents), dtype=np.float32)
        for n, value in index.text.scores(query_text(m.text)).items():
            if n < len(lexical):
                lexical[n] = value
        out.append(Features(m, agents, skills, fits, skill, agent, example, lexical))
    return out


@dataclass
class Outcome:
    """What the router did with one message."""

    message: Message
    agent: str | None
    skill: str | None
    tier: str | None
    seconds: float

    @property
    def correct(self) -> bool:
        """Routed to the right agent, or refused when no agent serves it."""
        return self.agent == self.message.agent


@dataclass
class Scores:
    """The figures of one run over a set of messages."""

    outcomes: list[Outcome] = field(default_factory=list)

    def _share(self, hits: int, total: int) -> float | None:
        return hits / total if total else None

    @property
    def top1(self) -> float | None:
        """In-domain messages routed to the right agent (a refusal counts as wrong)."""
        inside = [o for o in self.outcomes if o.message.in_domain]
        return self._share(sum(o.correct for o in inside), len(inside))

    @property
    def media(self) -> float | None:
        """Top-1 on the messages an attachment or the accepted output modes decide."""
        media = [o for o in self.outcomes if o.message.media_decided]
        return self._share(sum(o.correct for o in media), len(media))

    @property
    def false_refusals(self) -> float | None:
        """In-domain messages refused."""
        inside = [o for o in self.outcomes if o.message.in_domain]
        return self._share(sum(o.agent is None for o in inside), len(inside))

    @property
    def refusal_precision(self) -> float | None:
        """Of the refused messages, those no agent serves."""
        refused = [o for o in self.outcomes if o.agent is None]
        return self._share(sum(not o.message.in_domain for o in refused), len(refused))

    @property
    def refusal_recall(self) -> float | None:
        """Of the messages no agent serves, those refused."""
        outside = [o for o in self.outcomes if not o.message.in_domain]
        return self._share(sum(o.agent is None for o in outside), len(outside))

    def latency_ms(self, q: float) -> float:
        """A percentile of the decision time, in milliseconds."""
        values = sorted(o.seconds for o in self.outcomes)
        if not values:
            return 0.0
        rank = min(len(values) - 1, max(0, int(np.ceil(q / 100 * len(values))) - 1))
        return values[rank] * 1000


async def evaluate(env: Env, messages: Sequence[Message]) -> Scores:
    """Each message through the real chooser (the message's embedding included, uncached)."""
    if env.semantic is not None:
        await env.semantic.query_vector("a first message starts the embedding thread")
        env.semantic.clear_cache()
    scores = Scores()
    for m in messages:
        start = time.perf_counter()
        try:
            choice = await env.chooser.choose("1.0", Op.SEND, m.params())
            agent, skill, tier = choice.agent.id, choice.skill_id, choice.tier
        except RpcError:
            agent = skill = tier = None
        scores.outcomes.append(Outcome(m, agent, skill, tier, time.perf_counter() - start))
    return scores


async def learn(env: Env, mistakes: Sequence[Outcome]) -> int:
    """Feed mistakes back as learned examples (what an operator's feedback does)."""
    assert env.semantic is not None
    index = env.matcher.skill_index()
    for o in mistakes:
        m = o.message
        assert m.agent is not None
        skill = m.skill or next(s.id for a, s in index.pairs if a.id == m.agent and s)
        example = await env.examples.add(m.agent, skill, m.text)
        await env.semantic.vectors.ensure([example.text])
    return len(mistakes)
