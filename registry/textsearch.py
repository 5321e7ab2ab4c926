"""Ranked free-text search over skills: BM25 over weighted fields.

Each skill is one document made of its name, description, tags and examples (plus the
agent's name and description, weighted low). Scores from several skills of one agent are
aggregated by the caller (the best skill wins). Pure Python, built once per catalog snapshot.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
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


class TextIndex:
    """A BM25 index over documents made of weighted fields; documents are addressed by position."""

    def __init__(self, documents: Sequence[Iterable[Field]]) -> None:
        self._tf: list[Counter[str]] = []
        self._lengths: list[float] = []
        df: Counter[str] = Counter()
        for fields in documents:
            tf: Counter[str] = Counter()
            for field in fields:
                for token in tokenize(field.text):
                    tf[token] += field.weight
            self._tf.append(tf)
            self._lengths.append(sum(tf.values()))
            df.update(tf.keys())
        n = len(self._tf)
        self._avg = (sum(self._lengths) / n) if n else 0.0
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def __len__(self) -> int:
        return len(self._tf)

    def score(self, doc: int, query_tokens: Sequence[str]) -> float:
        """BM25 score of document ``doc`` for the query tokens (0.0 when nothing matches)."""
        tf = self._tf[doc]
        norm = _K1 * (1 - _B + _B * (self._lengths[doc] / self._avg if self._avg else 1.0))
        total = 0.0
        for token in query_tokens:
            freq = tf.get(token)
            if freq:
                total += self._idf[token] * freq * (_K1 + 1) / (freq + norm)
        return total

    def scores(self, query: str) -> dict[int, float]:
        """Non-zero scores of every document for ``query``."""
        tokens = list(dict.fromkeys(tokenize(query)))
        if not tokens:
            return {}
        out = {}
        for doc in range(len(self._tf)):
            value = self.score(doc, tokens)
            if value > 0:
                out[doc] = value
        return out
