"""Matching by meaning: a message's skills ranked by the fused score of
:mod:`router.choose.semantic`, the hard filters applied in that order, and the calibrated refusal.

The best skill that can take the call decides, if its score reaches the floor and its agent
leads the next agent that could take the call by the margin; otherwise the answer is
``-32050`` listing the closest skills. A score near the floor, or a small margin, marks the
decision ``uncertain`` for an adjudicator (:mod:`router.choose.chooser`). Only the best rows are
looked at (in descending order, until the choice, its margin and a few runners-up are known),
so a decision costs a matrix-vector product and a handful of candidate checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from router.choose.choice import (
    CLOSEST,
    ROUTING_EXTENSION,
    Candidate,
    Decision,
    Evaluator,
    closest,
    options,
    rank_key,
    ranked,
)
from router.choose.semantic import Cutoff, Semantic, fuse, saturate
from router.choose.skillindex import SkillIndex
from router.protocol.errors import NO_MATCHING_AGENT, RpcError
from router.protocol.versions import Op, Version


def by_meaning(
    matcher: Evaluator,
    semantic: Semantic,
    index: SkillIndex,
    query: str,
    vector: np.ndarray,
    version: Version,
    op: Op,
    media: list[str],
    accepted: list[str],
    context_agents: frozenset[str],
    complete: bool,
) -> Decision:
    """Matching by meaning: skills ranked by the fused score (:mod:`router.choose.semantic`);
    the best agent must reach the threshold in force (:meth:`Evaluator.cutoff`) and lead the
    next by its margin."""
    cal = semantic.calibration
    cut = matcher.cutoff()
    floor, margin_needed = cut.threshold, cut.margin
    sindex = semantic.index_for(index.base, index.base.pairs)  # one per snapshot, not caller
    skill, agent, example, learned = sindex.features(vector)
    ranking = _Ranking(cal, index, query, fuse(cal, skill, agent, example, _zero(skill), learned))
    context: dict[str, Any] = {"model": semantic.model, "cutoff": cut}
    if sindex.missing:
        context["skills_without_vector"] = sindex.missing
    rows: Iterable[tuple[int, float]] = ranking.every() if complete else ranking.descending()
    evaluated: list[tuple[int, Candidate]] = []
    best: tuple[int, Candidate] | None = None
    runner: Candidate | None = None
    for n, exact in rows:
        score = round(exact, 6)
        if not complete and len(evaluated) >= CLOSEST:
            if best is None and score < floor - cal.llm_band:
                break  # nothing left can reach the threshold
            if best is not None and (runner is not None or score < best[1].score - margin_needed):
                break  # the choice, its margin and a few runners-up are known
        if not index.allowed(n):
            continue  # not the caller's to use
        ((_, found),) = matcher.evaluate(
            index, [n], version, op, media, accepted, {n: score}, None, skill_less=False
        )
        if complete:  # explain's listing: what the score is made of
            found = found.but(**_features(cal, sindex, n, skill, agent, example, learned, ranking))
        evaluated.append((n, found))
        if not found.kept:
            continue
        if best is None:
            best = (n, found)
        elif runner is None and found.agent_id != best[1].agent_id:
            runner = found
    fitting = sorted(
        ((n, c) for n, c in evaluated if c.kept),
        key=lambda item: rank_key(item, index, context_agents),
    )
    if fitting:
        best = fitting[0]
        runner = next((c for _, c in fitting if c.agent_id != best[1].agent_id), None)
    below = f"below the threshold {floor:g} ({cut.source})"
    candidates = [
        c.but(kept=False, filter="score", reason=f"It scores {c.score:g}, {below}.")
        if c.kept and c.score < floor
        else c
        for _, c in evaluated
    ]
    opts = options([c for _, c in fitting])
    if best is None:
        hidden = _hidden_reaches(index, ranking, floor)
        error = matcher.no_match(
            index, candidates, True, media=media, accepted=accepted, threshold=floor,
            hidden=hidden, semantic=True,
        )  # fmt: skip
        return Decision(None, error, ranked(candidates), context)
    n, top = best
    margin = round(top.score - runner.score, 6) if runner is not None else None
    context["score"], context["margin"] = top.score, margin
    near = abs(top.score - floor) < cal.llm_band
    if top.score < floor:
        error = matcher.no_match(
            index, candidates, True, media=media, accepted=accepted, threshold=floor,
            score=top.score, hidden=_hidden_reaches(index, ranking, floor), semantic=True,
        )  # fmt: skip
        uncertain = "near the threshold" if near else None
        return Decision(None, error, ranked(candidates), context, uncertain, opts)
    if margin is not None and margin < margin_needed:
        assert runner is not None
        error = RpcError(
            NO_MATCHING_AGENT,
            f"no agent can take this message: agents {top.agent_id!r} and "
            f"{runner.agent_id!r} fit it almost equally ({top.score:g} and {runner.score:g}, "
            f"a margin of {margin:g} where {margin_needed:g} is needed); say more, or name a "
            "skill or agent with the routing extension",
            {
                "reason": "ambiguous",
                "tier": "refused",
                "extension": ROUTING_EXTENSION,
                "threshold": floor,
                "score": top.score,
                "margin": margin,
                "marginNeeded": margin_needed,
                "floor": floor,
                "closest": closest(candidates, matcher.registry, index),
            },
        )
        return Decision(None, error, ranked(candidates), context, "small margin", opts)
    why = f"it has the best score by meaning and words ({top.score:g}; {_threshold(cut)})"
    if margin is not None:
        why += f", {margin:g} ahead of the next agent"
    decision = matcher.finish(
        index, n, top, candidates, "match", why, version, tier="semantic", margin=margin
    )
    decision.context = context
    decision.uncertain = "near the threshold" if near else None
    decision.options = opts
    return decision


def _features(
    cal: Any,
    sindex: Any,
    n: int,
    skill: np.ndarray,
    agent: np.ndarray,
    example: np.ndarray,
    learned: np.ndarray,
    ranking: _Ranking,
) -> dict[str, Any]:
    """Row ``n``'s features for explain: each on [0, 1] (None: absent), and the deprecated
    raw ones (cosines, -1 for none, the BM25 score)."""
    lexical = ranking.lexical(n)
    return {
        "features": {
            "skill": _unit(skill[n], sindex.has_vector[n]),
            "agent": _unit(agent[n]),
            "example": _unit(example[n]),
            "learned": _unit(learned[n]),
            "lexical": round(float(saturate(lexical, cal.lexical_k)), 4),
        },
        "features_raw": {
            "skill": _cosine(skill[n]),
            "agent": _cosine(agent[n]),
            "example": _cosine(example[n]),
            "lexical": round(lexical, 4),
            "learned": _cosine(learned[n]),
        },
    }


def _threshold(cut: Cutoff) -> str:
    return f"threshold {cut.threshold:g}, {cut.source}"


def _unit(value: Any, known: bool = True) -> float | None:
    """A feature for explain: on [0, 1], rounded; None when absent (NaN, or no vector)."""
    value = float(value)
    return None if not known or np.isnan(value) else round(value, 4)


def _cosine(value: Any) -> float:
    """A feature as explain showed it before (deprecated ``features_raw``): the cosine, -1
    for none."""
    value = float(value)
    return -1.0 if np.isnan(value) else round(2 * value - 1, 4)


def _hidden_reaches(index: SkillIndex, ranking: _Ranking, floor: float) -> bool:
    """Whether a skill the caller may not use scores at least ``floor``."""
    if index.base is index:
        return False  # the whole index: nothing hidden
    for n, score in ranking.descending():
        if round(score, 6) < floor:
            return False
        if not index.allowed(n) and index.rows[n].skill is not None:
            return True
    return False


def _zero(like: np.ndarray) -> np.ndarray:
    return np.zeros(len(like), dtype=np.float32)


SMALL = 24
"""Up to this many candidate rows are scored one by one; more, as arrays (numpy's cost per
call is worth it only past a few dozen rows)."""


class _Ranking:
    """Rows by descending fused score, exactly, without scoring every row by words.

    The fused score is the semantic part (every row: matrix products) plus the saturated
    BM25 part. The best ``first`` rows by meaning and the best ``first`` by words (read
    lazily from the inverted index) are scored exactly; no other row can beat ``bound`` (the
    ``first``-th best meaning plus the ``first``-th best words), so they come first, in order,
    down to it. Below the bound every row is scored (rare: the best rows could not take the
    call, e.g. an image none of them accepts).
    """

    def __init__(
        self, cal: Any, index: SkillIndex, query: str, semantic: np.ndarray, first: int = 64
    ) -> None:
        self.cal, self.index, self.query, self.semantic = cal, index, query, semantic
        self.first = first
        self.total = cal.skill + cal.agent + cal.example + cal.lexical or 1.0
        self._lexical: dict[int, float] = {}
        self._dense: np.ndarray | None = None  # every row's BM25 score, once a row needs it
        words = index.text.best(query, first)
        self._lexical.update(words)
        self.words_bound = words[-1][1] if len(words) == first else 0.0
        self._words_complete = len(words) < first  # no other row has a word in common

    def lexical(self, n: int) -> float:
        """The BM25 score of row ``n`` (the rows not among the best by words are scored in
        one pass over the query's postings, the first time one is asked for)."""
        found = self._lexical.get(n)
        if found is None:
            if self._words_complete:
                return 0.0
            if self._dense is None:
                self._dense = self.index.text.dense(self.query)
            found = float(self._dense[n]) if n < len(self._dense) else 0.0
            self._lexical[n] = found
        return found

    def _scored(self, rows: np.ndarray) -> list[tuple[float, int]]:
        """``sorted(((self._fused(n), n) for n in rows), reverse=True)`` as array operations
        (:meth:`_fused`'s, in its order, on float64: the same values)."""
        lex = self._lexical_of(rows)
        fused = (
            self.semantic[rows].astype(np.float64)
            + self.cal.lexical * lex / (lex + self.cal.lexical_k) / self.total
        )
        order = np.lexsort((-rows, -fused))  # descending score, ties by descending row
        return list(zip(fused[order].tolist(), rows[order].tolist(), strict=True))

    def _lexical_of(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`lexical` of each of ``rows``, as a float64 array (without scoring every row
        when the best rows by words are all the rows with a word in common)."""
        if self._words_complete and self._dense is None:
            out = np.zeros(len(rows), dtype=np.float64)
            known = np.array(sorted(self._lexical), dtype=np.intp)
            if len(known):
                at = np.minimum(np.searchsorted(known, rows), len(known) - 1)
                hit = known[at] == rows
                lexical = self._lexical
                out[hit] = [lexical[n] for n in rows[hit].tolist()]
            return out
        if self._dense is None:
            self._dense = self.index.text.dense(self.query)
        dense = self._dense  # the same sums as the best rows' scores
        out = np.zeros(len(rows), dtype=np.float64)
        inside = rows < len(dense)
        out[inside] = dense[rows[inside]]
        return out

    def _fused(self, n: int) -> float:
        lex = self.lexical(n)
        return (
            float(self.semantic[n])
            + self.cal.lexical * lex / (lex + self.cal.lexical_k) / self.total
        )

    def every(self) -> Iterator[tuple[int, float]]:
        """Every row with its score, in row order (explain)."""
        self._lexical.update(self.index.text.scores(self.query))
        for n in range(len(self.semantic)):
            yield n, self._fused(n)

    def descending(self) -> Iterator[tuple[int, float]]:
        """Rows by descending score (see the class docs)."""
        size = len(self.semantic)
        if size <= self.first:
            top = np.arange(size)
        else:
            top = np.argpartition(-self.semantic, self.first)[: self.first]
        candidates = set(top.tolist()) | {n for n in self._lexical if n < size}
        meaning_bound = float(self.semantic[top].min()) if size > self.first else -np.inf
        words = self.words_bound
        bound = meaning_bound + self.cal.lexical * words / (words + self.cal.lexical_k) / self.total
        if len(candidates) <= SMALL:
            scored = sorted(((self._fused(n), n) for n in candidates), reverse=True)
        else:
            scored = self._scored(np.fromiter(candidates, dtype=np.intp, count=len(candidates)))
        done: set[int] = set()
        for score, n in scored:
            if score < bound:
                break
            done.add(n)
            yield n, score
        if size <= self.first:
            yield from ((n, s) for s, n in scored if n not in done)
            return
        lexical = np.zeros(size, dtype=np.float32)
        for n, value in self.index.text.scores(self.query).items():
            if n < size:
                lexical[n] = value
        fused = (
            self.semantic + self.cal.lexical * lexical / (lexical + self.cal.lexical_k) / self.total
        )
        for n in np.argsort(-fused, kind="stable").tolist():
            if n not in done:
                yield n, float(fused[n])


def until_embedded(
    semantic: Semantic, index: SkillIndex, refused: Decision, words: Decision
) -> Decision:
    """A refusal by meaning while some skills have no vector yet (registered moments ago:
    their texts are embedded behind the registration's answer), and the decision by words
    alone: the words' choice stands when it falls on a skill without a vector (agents
    without skills left out: they have nothing to wait for), else the refusal does."""
    choice = words.choice
    if choice is None or choice.skill_id is None:
        return refused
    sindex = semantic.index_for(index.base, index.base.pairs)
    rows = [
        n
        for n, row in enumerate(index.rows)
        if row.agent.id == choice.agent.id
        and row.skill is not None
        and row.skill.id == choice.skill_id
    ]
    if not rows or any(sindex.has_vector[n] for n in rows):
        return refused
    words.context = {
        **refused.context,
        "by_words": "the chosen skill is not embedded yet: scored by its words alone",
    }
    return words


def fell_back(decision: Decision) -> None:
    """A choice made by words in place of meaning (the model or the chosen skill's vectors
    missing): its tier is ``lexical-fallback``."""
    choice = decision.choice
    if choice is not None and choice.tier == "lexical":
        decision.choice = replace(choice, tier="lexical-fallback")


def pending_vectors(semantic: Semantic | None, index: SkillIndex) -> int:
    """How many skills of ``index`` wait for their vectors: every one while the model is not
    loaded (``semantic`` None)."""
    if semantic is None:
        return sum(1 for _, skill in index.pairs if skill is not None)
    return semantic.index_for(index, index.pairs).missing
