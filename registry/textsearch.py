"""Ranked free-text search over skills: BM25 over weighted fields.

Each skill is one document made of its name, description, tags and examples (plus the
agent's name and description, weighted low). Scores from several skills of one agent are
aggregated by the caller (the best skill wins). Built once per catalog snapshot; queries
add numpy arrays.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "for", "from",
        "how", "i", "in", "is", "it", "me", "my", "of", "on", "or", "please", "the",
        "this", "to", "what", "with", "would", "you", "your",
    }
)  # fmt: skip
_K1 = 1.2
_B = 0.75


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without accents and stop words; light plural stemming."""
    if text.isascii():  # nothing to fold: the common case, much faster
        folded = text.lower()
    else:
        folded = unicodedata.normalize("NFKD", text.casefold())
        folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return [_stem(t) for t in _TOKEN.findall(folded) if t not in _STOP]


def _stem(token: str) -> str:
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


@dataclass(frozen=True)
class Field:
    """A piece of a document's text and its weight."""

    text: str
    weight: float


def terms(fields: Iterable[Field]) -> Counter[str]:
    """Weighted term frequencies of a document (computed once per document and reused)."""
    tf: Counter[str] = Counter()
    for field in fields:
        for token in tokenize(field.text):
            tf[token] += field.weight
    return tf


class TextIndex:
    """BM25 over documents given as weighted term frequencies, addressed by position.

    An inverted index (term -> postings) means a query only touches the documents that
    contain one of its terms. Each term's postings are two numpy arrays (documents in
    ascending order, and each one's whole BM25 contribution for the term, computed once), so
    a query adds arrays instead of walking postings in Python, and the index is a few
    objects per term rather than one per posting (nothing for the garbage collector to scan).
    """

    def __init__(self, documents: Sequence[Counter[str]]) -> None:
        lengths = [sum(tf.values()) for tf in documents]
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for doc, tf in enumerate(documents):
            for token, freq in tf.items():
                entry = postings.get(token)
                if entry is None:
                    entry = postings[token] = ([], [])
                entry[0].append(doc)
                entry[1].append(freq)
        n = len(documents)
        average = (sum(lengths) / n) if n else 0.0
        norms = np.array(
            [_K1 * (1 - _B + _B * (length / average if average else 1.0)) for length in lengths],
            dtype=np.float64,
        )
        self._size = n
        self._last: tuple[str, list[str]] = ("", [])
        # a word in half the documents or more also gets its impacts as one array by
        # position (0 where absent: adding it changes no other score), added without indexing
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
        self._positive = True  # every impact > 0: the matching documents are the non-zero ones
        for token, (doc_list, freq_list) in postings.items():
            docs = np.array(doc_list, dtype=np.intp)
            freqs = np.array(freq_list, dtype=np.float64)
            idf = math.log(1 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            # the same operations, in the same order, as idf * freq * (k1 + 1) / (freq + norm)
            impacts = idf * freqs * (_K1 + 1) / (freqs + norms[docs])
            full = None
            if 2 * len(docs) >= n:
                full = np.zeros(n, dtype=np.float64)
                full[docs] = impacts
                full.flags.writeable = False
            docs.flags.writeable = impacts.flags.writeable = False
            self._positive = self._positive and bool(impacts.min() > 0)
            self._postings[token] = (docs, impacts, full)

    def __len__(self) -> int:
        return self._size

    def tokens(self, query: str) -> list[str]:
        """The distinct indexed words of ``query``, in query order (the order scores add up;
        the last query's are kept: a routing decision asks two or three times). Not to be
        changed by the caller."""
        last = self._last
        if last[0] == query:
            return last[1]
        found = [t for t in dict.fromkeys(tokenize(query)) if t in self._postings]
        self._last = (query, found)
        return found

    def dense(self, query: str) -> np.ndarray:
        """The BM25 score of every document for ``query`` (0 where no word matches), as an
        array by position: each word's contributions added in query order."""
        return self._add_up(self.tokens(query))

    def _add_up(self, tokens: list[str]) -> np.ndarray:
        scores = np.zeros(self._size, dtype=np.float64)
        for token in tokens:
            docs, impacts, full = self._postings[token]
            if full is not None:
                scores += full
            else:
                scores[docs] += impacts  # a term lists a document once: no repeated index
        return scores

    def ranked(self, query: str) -> Iterator[tuple[int, float]]:
        """The documents matching ``query`` with their BM25 scores, best first (ties in
        position order), found lazily: the scores are added up as arrays, then the best few
        are selected and sorted, then the next ones, so asking for a page sorts a page."""
        found = self._matching(query)
        if found is not None:
            yield from descending(*found)

    def best(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The first ``limit`` of :meth:`ranked`, as a list (no generator step per row)."""
        found = self._matching(query)
        if found is None or limit <= 0:
            return []
        scores, rows = found
        values = scores[rows]
        if len(rows) > limit:
            take = values >= _cut(values, limit)
            rows, values = rows[take], values[take]
        order = np.lexsort((rows, -values))[:limit]
        return list(zip(rows[order].tolist(), values[order].tolist(), strict=True))

    def _matching(self, query: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Every document's score for ``query`` and the documents it matches (None: no
        word of it is indexed)."""
        tokens = self.tokens(query)
        if not tokens:
            return None
        scores = self._add_up(tokens)
        if self._positive:
            return scores, np.flatnonzero(scores > 0)
        matched = np.zeros(self._size, dtype=np.bool_)
        for token in tokens:
            matched[self._postings[token][0]] = True
        return scores, np.flatnonzero(matched)

    def score_of(self, query: str, doc: int) -> float:
        """The BM25 score of one document for ``query`` (0 if no word matches)."""
        total = 0.0
        for token in self.tokens(query):
            docs, impacts, _ = self._postings[token]
            at = int(np.searchsorted(docs, doc))
            if at < len(docs) and docs[at] == doc:
                total += float(impacts[at])
        return total

    def scores(self, query: str) -> dict[int, float]:
        """Non-zero BM25 scores of the documents matching ``query``, by position (in the
        order of the query word that first matched each, then of position)."""
        tokens = self.tokens(query)
        if len(tokens) == 1:
            docs, impacts, _ = self._postings[tokens[0]]
            return dict(zip(docs.tolist(), impacts.tolist(), strict=True))
        scores = self._add_up(tokens)
        first = np.full(self._size, len(tokens), dtype=np.intp)
        for i in range(len(tokens) - 1, -1, -1):
            first[self._postings[tokens[i]][0]] = i
        matched = np.flatnonzero(first < len(tokens))
        matched = matched[np.argsort(first[matched], kind="stable")]
        return dict(zip(matched.tolist(), scores[matched].tolist(), strict=True))


def descending(
    scores: np.ndarray, rows: np.ndarray, first: int = 256
) -> Iterator[tuple[int, float]]:
    """``rows`` (positions in ``scores``) with their scores, best first and ties in position
    order, sorted lazily: the best ``first`` (with every row tied with the last of them),
    then eight times as many of the rest, and so on."""
    values = scores[rows]
    size = first
    while len(rows):
        if len(rows) > size:
            take = values >= _cut(values, size)
        else:
            take = np.ones(len(rows), dtype=np.bool_)
        batch, batch_values = rows[take], values[take]
        order = np.lexsort((batch, -batch_values))
        yield from zip(batch[order].tolist(), batch_values[order].tolist(), strict=True)
        rows, values = rows[~take], values[~take]
        size *= 8


def _cut(values: np.ndarray, size: int) -> float:
    """A value with at least ``size`` of ``values`` at or above it, and not many more: the
    matching quantile of a sample of about 2,048 of them when that proves to be enough (a
    fraction of the cost of a partition of all), else the ``size``-th largest exactly."""
    step = len(values) // 2048
    if step >= 4:
        sample = values[::step]
        rank = 2 * size // step + 2  # expected to leave about twice ``size`` at or above
        if rank < len(sample):
            cut = float(np.partition(sample, len(sample) - rank)[len(sample) - rank])
            if np.count_nonzero(values >= cut) >= size:
                return cut
    return float(np.partition(values, len(values) - size)[len(values) - size])
