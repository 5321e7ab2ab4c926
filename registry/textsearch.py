"""Ranked free-text search over skills: BM25 over weighted fields.

Each skill is one document made of its name, description, tags and examples (plus the
agent's name and description, weighted low). Scores from several skills of one agent are
aggregated by the caller (the best skill wins). Pure Python, built once per catalog snapshot.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

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
    contain one of its terms.
    """

    def __init__(self, documents: Sequence[Counter[str]]) -> None:
        lengths = [sum(tf.values()) for tf in documents]
        postings: dict[str, list[tuple[int, float]]] = {}
        for doc, tf in enumerate(documents):
            for token, freq in tf.items():
                postings.setdefault(token, []).append((doc, freq))
        n = len(documents)
        average = (sum(lengths) / n) if n else 0.0
        norms = [_K1 * (1 - _B + _B * (length / average if average else 1.0)) for length in lengths]
        self._size = n
        self._by_impact: dict[str, list[tuple[int, float]]] = {}  # built per term on first use
        self._lookups: dict[str, dict[int, float]] = {}
        # each posting holds its document's whole BM25 contribution for the term, computed once:
        # a query only adds numbers
        self._impacts: dict[str, list[tuple[int, float]]] = {}
        for token, posting in postings.items():
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            self._impacts[token] = [
                (doc, idf * freq * (_K1 + 1) / (freq + norms[doc])) for doc, freq in posting
            ]

    def __len__(self) -> int:
        return self._size

    def ranked(self, query: str) -> Iterator[tuple[int, float]]:
        """The documents matching ``query`` with their BM25 scores, best first, found lazily
        (Fagin's threshold algorithm): postings are read in descending impact, and a document
        is yielded once no unread one can beat it, so asking for the best few of a query whose
        words are in most documents reads a fraction of their postings."""
        tokens = [t for t in dict.fromkeys(tokenize(query)) if t in self._impacts]
        lists = [self._sorted(t) for t in tokens]
        lookups = [self._lookup(t) for t in tokens]
        cursors = [0] * len(lists)
        seen: set[int] = set()
        heap: list[tuple[float, int]] = []
        while True:
            bound = sum(
                lists[i][cursors[i]][1] for i in range(len(lists)) if cursors[i] < len(lists[i])
            )
            while heap and -heap[0][0] >= bound:
                score, doc = heapq.heappop(heap)
                yield doc, -score
            if not any(cursors[i] < len(lists[i]) for i in range(len(lists))):
                return
            for i, posting in enumerate(lists):
                if cursors[i] >= len(posting):
                    continue
                doc = posting[cursors[i]][0]
                cursors[i] += 1
                if doc not in seen:
                    seen.add(doc)
                    score = sum(lookup.get(doc, 0.0) for lookup in lookups)
                    heapq.heappush(heap, (-score, doc))

    def score_of(self, query: str, doc: int) -> float:
        """The BM25 score of one document for ``query`` (0 if no word matches)."""
        tokens = [t for t in dict.fromkeys(tokenize(query)) if t in self._impacts]
        return sum(self._lookup(t).get(doc, 0.0) for t in tokens)

    def _sorted(self, token: str) -> list[tuple[int, float]]:
        found = self._by_impact.get(token)
        if found is None:
            found = sorted(self._impacts[token], key=lambda p: (-p[1], p[0]))
            self._by_impact[token] = found
        return found

    def _lookup(self, token: str) -> dict[int, float]:
        found = self._lookups.get(token)
        if found is None:
            found = self._lookups[token] = dict(self._impacts[token])
        return found

    def scores(self, query: str) -> dict[int, float]:
        """Non-zero BM25 scores of the documents matching ``query``, by position."""
        out: dict[int, float] = {}
        get = out.get
        for token in dict.fromkeys(tokenize(query)):
            for doc, impact in self._impacts.get(token, ()):
                out[doc] = get(doc, 0.0) + impact
        return out
