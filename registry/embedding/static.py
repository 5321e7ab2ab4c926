"""Static token embeddings distilled from a BERT sentence encoder, as model2vec does: a much
faster, somewhat weaker model option.

:func:`distill` passes every vocabulary token through the encoder alone (``[CLS] token
[SEP]``, mean-pooled), reduces the vectors to ``dims`` with PCA, and weighs each token by how
rare it is: SIF weighting, ``a / (a + p)``, with ``p`` a Zipf estimate of the token's
frequency from its rank in the vocabulary (BERT's vocabulary is roughly ordered by
frequency). :class:`StaticEmbedder` embeds a text as the mean of its tokens' vectors (no
special tokens), L2-normalized: a table lookup instead of a transformer, microseconds instead
of milliseconds per text.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from registry.embedding.bert import BertEmbedder
from registry.embedding.errors import EmbeddingUnavailable

VECTORS = "static.safetensors"
META = "static.json"
SIF = 1e-4
"""The SIF coefficient ``a`` (model2vec's default)."""
MAX_TOKENS = 512
"""Tokens of a text that count (a bound on the work per text)."""
_BATCH = 1024  # vocabulary tokens per forward pass when distilling


def distill(bert: BertEmbedder, out_dir: Path, dims: int = 256, *, replace: bool = True) -> Path:
    """Write a static model distilled from ``bert`` into ``out_dir`` through a temporary
    directory renamed into place; ``out_dir``. An existing model there is replaced, or with
    ``replace=False`` kept (then the new one is dropped)."""
    from safetensors.numpy import save_file

    out_dir = Path(out_dir)
    size = bert.vocab_size
    cls_id, sep_id = bert.tokenizer.token_to_id("[CLS]"), bert.tokenizer.token_to_id("[SEP]")
    if cls_id is None or sep_id is None:
        raise EmbeddingUnavailable(f"{bert.source}: the tokenizer has no [CLS] or [SEP] token")
    if not 0 < dims <= bert.dim:
        raise ValueError(f"dims must be in 1..{bert.dim}, not {dims}")
    ids = np.arange(size)
    vectors = np.empty((size, bert.dim), dtype=np.float32)
    for start in range(0, size, _BATCH):
        chunk = ids[start : start + _BATCH]
        rows = np.stack([np.full_like(chunk, cls_id), chunk, np.full_like(chunk, sep_id)], 1)
        vectors[start : start + len(chunk)] = bert.embed_ids(rows.tolist())
    mean = vectors.mean(axis=0)
    centered = vectors - mean
    # PCA: the top eigenvectors of the covariance (dim x dim), cheaper than an SVD of all rows
    eigenvalues, eigenvectors = np.linalg.eigh(centered.T @ centered)
    top = np.argsort(eigenvalues)[::-1][:dims]
    reduced = centered @ eigenvectors[:, top]
    explained = float(eigenvalues[top].sum() / eigenvalues.sum())
    inverse_rank = 1 / np.arange(2, size + 2, dtype=np.float64)
    probability = inverse_rank / inverse_rank.sum()  # Zipf's law
    reduced *= (SIF / (SIF + probability)).astype(np.float32)[:, None]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}-") as tmp:
        work = Path(tmp) / "model"
        work.mkdir()
        save_file(
            {"embeddings": np.ascontiguousarray(reduced, dtype=np.float32)}, str(work / VECTORS)
        )
        shutil.copyfile(bert.source / "tokenizer.json", work / "tokenizer.json")
        meta = {
            "distilled_from": bert.model_id,
            "dims": dims,
            "vocab_size": size,
            "pooling": "mean of [CLS] token [SEP]",
            "pca_explained_variance": round(explained, 4),
            "sif_coefficient": SIF,
            "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        (work / META).write_text(json.dumps(meta, indent=2) + "\n")
        if replace and out_dir.exists():  # the old one goes with the temporary directory
            os.rename(out_dir, Path(tmp) / "old")
        try:
            os.rename(work, out_dir)
        except OSError:
            if replace or not is_static_model(out_dir):
                raise
    return out_dir


def ensure_distilled(bert: BertEmbedder, out_dir: Path, dims: int = 256) -> Path:
    """``out_dir`` holding a static model distilled from ``bert``: distilled first if it is
    missing (about a minute on two cores); safe when several processes race to do it."""
    out_dir = Path(out_dir)
    if is_static_model(out_dir):
        return out_dir
    return distill(bert, out_dir, dims, replace=False)


def is_static_model(directory: Path) -> bool:
    """Whether ``directory`` holds a complete static model."""
    return all((directory / name).is_file() for name in (VECTORS, META, "tokenizer.json"))


class StaticEmbedder:
    """Sentence vectors as the mean of static token vectors (see the module docs); a text
    without tokens (empty, blank) gives a zero vector."""

    def __init__(self, model_dir: Path) -> None:
        model_dir = Path(model_dir)
        if not is_static_model(model_dir):
            raise EmbeddingUnavailable(
                f"{model_dir} holds no static model ({VECTORS}, {META}, tokenizer.json); "
                "distill one from the BERT model (registry.embedding.fetch.ensure_static)"
            )
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        try:
            self.vectors = load_file(str(model_dir / VECTORS))["embeddings"]
            meta = json.loads((model_dir / META).read_text())
            self.tokenizer: Any = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:  # a truncated or foreign file
            raise EmbeddingUnavailable(
                f"cannot read the static model in {model_dir}: {exc}"
            ) from exc
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()
        self.dim = int(self.vectors.shape[1])
        source = str(meta.get("distilled_from", model_dir.name)).split("@")[0]
        digest = hashlib.sha256(self.vectors.tobytes()).hexdigest()[:12]
        self.name = f"{source}-static-{self.dim}"
        self.model_id = f"{self.name}@{digest}:numpy-static:{MAX_TOKENS}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalized float32 row per text, shape ``(len(texts), dim)``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if len(texts) == 0:
            return out
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        token_ids = [np.asarray(e.ids, dtype=np.intp) for e in encodings]
        lengths = np.array([len(t) for t in token_ids])
        rows = np.flatnonzero(lengths)
        if rows.size:
            starts = np.concatenate(([0], np.cumsum(lengths[rows])[:-1]))
            table = self.vectors.take(np.concatenate(token_ids), axis=0)
            sums = np.add.reduceat(table, starts, axis=0)  # the mean, up to the norm
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            out[rows] = sums / np.maximum(norms, 1e-12)
        return out


def static_model(bert: BertEmbedder) -> Path:
    """The static model distilled from ``bert``, in the directory next to its own
    (``<model dir>-static``), distilled first if missing."""
    return ensure_distilled(bert, bert.source.with_name(bert.source.name + "-static"))
