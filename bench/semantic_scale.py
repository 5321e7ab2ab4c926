"""Routing by meaning at scale: the decision (the message's embedding included) over a large
synthetic catalog, for scenario 3.

The catalog's vectors are random unit vectors given to the vector store directly: embedding
hundreds of thousands of synthetic texts would take the model many minutes, and the cost of
a decision does not depend on the vectors' values (a matrix-vector product per kind of
text, then the few best candidates checked). The messages are real: the evaluation set's
texts (``bench/routing_eval``), embedded by the real model on each call (never cached).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np

from bench.load import percentile
from bench.routing_eval.dataset import messages
from registry.examples import LearnedExamples
from registry.records import AgentRecord
from registry.service import Registry
from registry.vectors import SkillVectors, documents
from router.app import freeze_long_lived
from router.choose.chooser import Chooser
from router.choose.matcher import Matcher
from router.choose.semantic import Calibration, Semantic
from router.protocol.errors import RpcError
from router.protocol.versions import Op


async def measure_semantic(
    registry: Registry, agents: list[AgentRecord], embedder: Any, calls: int
) -> dict[str, Any]:
    """p50/p99 of the chooser's decision with the semantic tier on, over ``agents``."""
    vectors = SkillVectors(registry.store, embedder)
    rng = np.random.default_rng(11)
    texts = sorted({t for agent in agents for t in documents(agent)})
    synthetic = rng.standard_normal((len(texts), embedder.dim)).astype(np.float32)
    synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
    vectors.remember(texts, synthetic)
    examples = LearnedExamples(registry.store)
    semantic = Semantic(embedder, vectors, examples, Calibration.load())
    matcher = Matcher(registry, threshold=0.5, semantic=semantic, status="semantic")
    chooser = Chooser(matcher, semantic)
    start = time.perf_counter()
    matcher.skill_index()
    semantic.index_for(matcher.skill_index(), matcher.skill_index().pairs)
    built = time.perf_counter() - start
    await freeze_long_lived()  # as switchboard serve does once started
    queries = [m.text for m in messages()]
    samples: list[float] = []
    deadline = time.perf_counter() + 20
    for i in range(calls):
        if len(samples) >= 50 and time.perf_counter() > deadline:
            break
        params = {
            "message": {
                "role": "ROLE_USER",
                "messageId": "m",
                "parts": [{"text": queries[i % len(queries)]}],
            }
        }
        semantic.clear_cache()
        start = time.perf_counter()
        with contextlib.suppress(RpcError):  # a refusal is a decision too
            await chooser.choose("1.0", Op.SEND, params)
        samples.append((time.perf_counter() - start) * 1000)
    semantic.close()
    return {
        "agents": len(agents),
        "skills": sum(len(a.card.skills) for a in agents),
        "vectors": len(texts),
        "index_s": built,
        "p50_ms": percentile(samples, 0.5),
        "p99_ms": percentile(samples, 0.99),
        "calls": len(samples),
    }
