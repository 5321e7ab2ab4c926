"""TextIndex against a brute-force BM25 scorer: same scores to the bit, same order, same ties."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest

from registry.textsearch import TextIndex, descending, tokenize

WORDS = ["rain", "sun", "map", "tide", "wind", "storm", "city", "report", "data", "image"]


def _documents(seed: int, count: int) -> list[Counter[str]]:
    """Documents over a small vocabulary with field-like weights: many shared words and
    ties; "common" is in nearly every document (the array-by-position path), "rare" in few."""
    rnd = random.Random(seed)
    docs = []
    for n in range(count):
        tf: Counter[str] = Counter()
        for word in rnd.choices(WORDS, k=rnd.randint(0, 6)):
            tf[word] += rnd.choice((0.5, 1.0, 2.0, 3.0))
        if rnd.random() < 0.9:
            tf["common"] += 1.0
        if n % 97 == 0:
            tf["rare"] += 2.0
        docs.append(tf)
    return docs


def _brute_force(documents: list[Counter[str]], query: str) -> dict[int, float]:
    """BM25 as specified: per-document sums, in query word order, of each word's weight."""
    n = len(documents)
    lengths = [sum(tf.values()) for tf in documents]
    average = sum(lengths) / n if n else 0.0
    words = [t for t in dict.fromkeys(tokenize(query)) if any(t in tf for tf in documents)]
    out: dict[int, float] = {}
    for doc, tf in enumerate(documents):
        if not any(w in tf for w in words):
            continue
        norm = 1.2 * (1 - 0.75 + 0.75 * (lengths[doc] / average if average else 1.0))
        total = 0.0
        for word in words:
            if word in tf:
                df = sum(1 for other in documents if word in other)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * tf[word] * (1.2 + 1) / (tf[word] + norm)
        out[doc] = total
    return out


QUERIES = [
    "rain",
    "storm city",
    "the maps of rain and wind",
    "common",
    "common rare",
    "rare data image report",
    "nothing here",
    "",
    "sun sun tides",
]


@pytest.mark.parametrize("seed", range(6))
def test_ranked_scores_and_lookups_equal_the_brute_force_scorer(seed: int) -> None:
    documents = _documents(seed, 400)
    index = TextIndex(documents)
    for query in QUERIES:
        expected = _brute_force(documents, query)
        ranked = sorted(expected.items(), key=lambda item: (-item[1], item[0]))
        assert list(index.ranked(query)) == ranked  # exact floats, ties by position
        assert list(itertools.islice(index.ranked(query), 5)) == ranked[:5]
        for limit in (0, 1, 5, 64, 1000):
            assert index.best(query, limit) == ranked[:limit]
        assert sorted(index.scores(query).items()) == sorted(expected.items())
        dense = index.dense(query)
        assert dense.tolist() == [expected.get(doc, 0.0) for doc in range(len(documents))]
        for doc in range(0, len(documents), 7):
            assert index.score_of(query, doc) == expected.get(doc, 0.0)


def test_the_best_rows_of_a_large_index_are_the_first_ranked() -> None:
    """Past 8,192 matching rows the first batch is cut at a sampled quantile."""
    index = TextIndex(_documents(7, 12_000))
    for query in ("common", "rain storm", "common rare"):
        for limit in (1, 64, 300):
            assert index.best(query, limit) == list(itertools.islice(index.ranked(query), limit))


def test_scores_keep_the_order_of_the_word_that_first_matched() -> None:
    documents = [Counter({"sun": 1.0}), Counter({"map": 1.0}), Counter({"sun": 1.0, "map": 1.0})]
    index = TextIndex(documents)
    assert list(index.scores("sun map")) == [0, 2, 1]
    assert list(index.scores("map sun")) == [1, 2, 0]


def test_an_empty_index_and_unknown_words_match_nothing() -> None:
    empty = TextIndex([])
    assert list(empty.ranked("rain")) == []
    assert empty.scores("rain") == {}
    index = TextIndex(_documents(1, 20))
    assert list(index.ranked("zebra")) == []
    assert index.scores("zebra") == {}
    assert index.score_of("zebra", 3) == 0.0


@pytest.mark.parametrize("size", [10, 300, 20_000])
def test_descending_sorts_lazily_in_batches_with_ties_in_position_order(size: int) -> None:
    """Large inputs take the sampled cut; heavy ties straddle every batch boundary."""
    rnd = np.random.default_rng(size)
    scores = rnd.integers(0, 40, size).astype(np.float64) / 8
    rows = np.flatnonzero(scores > 0)
    expected = sorted(((int(r), float(scores[r])) for r in rows), key=lambda t: (-t[1], t[0]))
    assert list(descending(scores, rows, first=16)) == expected
    assert list(itertools.islice(descending(scores, rows), 3)) == expected[:3]
