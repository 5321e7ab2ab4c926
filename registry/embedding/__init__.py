"""Sentence embeddings for routing by meaning, without PyTorch and without a model hub.

- :mod:`registry.embedding.bert`: all-MiniLM-L6-v2 (any BERT sentence encoder) run with numpy.
- :mod:`registry.embedding.static`: static token vectors distilled from it (model2vec style):
  much faster, somewhat weaker.
- :mod:`registry.embedding.fetch`: the model from a checksummed PyPI wheel, unpacked once.
- :mod:`registry.embedding.remote`: an OpenAI-compatible embeddings endpoint.

Every local embedder satisfies :class:`Embedder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from registry.embedding.errors import EmbeddingUnavailable

__all__ = ["Embedder", "EmbeddingUnavailable"]


class Embedder(Protocol):
    """What routing needs of a model.

    ``model_id`` changes whenever the vectors would (model name, a short hash of the weights,
    runtime kind, max tokens): stored vectors are keyed by it. ``name`` is a human label,
    ``dim`` the vector size.
    """

    model_id: str
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape ``(len(texts), dim)``, float32, each row of unit length. An empty text gives
        what the model makes of it: a unit vector for BERT (from ``[CLS] [SEP]``, as
        sentence-transformers does), a zero row for the static model (no tokens)."""
        ...
