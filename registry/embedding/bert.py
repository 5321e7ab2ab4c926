"""A BERT sentence encoder (such as all-MiniLM-L6-v2) run with numpy: no PyTorch.

The weights come from ``model.safetensors`` (with or without a ``bert.`` prefix), the shape
from ``config.json``, the tokenizer from ``tokenizer.json`` (the ``tokenizers`` library) and
the pooling from ``1_Pooling/config.json`` (mean over the tokens, the ``[CLS]`` token, or the
maximum), as sentence-transformers does; the vectors are L2-normalized. Texts are cut at
``max_tokens`` tokens, special tokens included. Many texts are sorted by length and embedded
in batches of similar length: a pass pads each row to the pass's longest, so a text longer
than the pass's shortest by more than ``PAD`` tokens starts the next pass (a padded token
costs as much as a real one; one more pass costs about two). One text is a batch of one.

Everything is float32; Q, K and V are one matrix product per layer; the attention scale is
folded into the query weights; GELU is the one the config names (``gelu``: the exact erf
form, through a rational erf approximation with an absolute error below 1e-6; ``gelu_new``:
the tanh form).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from registry.embedding.errors import EmbeddingUnavailable

BATCH = 32
"""Texts per forward pass, at most."""
PAD = 8
"""Padding tokens a text may get in a pass (measured on the routing evaluation's messages:
a pass padded to the longest of 32 cost 1.6 times the passes of one text each; 2 to 8
tokens, 0.67 to 0.69 times)."""

_F = np.float32
# erf(x) = x * P(x^2) / Q(x^2) on [-4, 4] (Eigen's and XLA's float32 fit), rewritten for
# Phi(x) = 0.5 + 0.5 * erf(x / sqrt 2): the 1/sqrt 2 and the 0.5 are folded into P and Q.
_ERF_P = (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02,
)  # fmt: skip
_ERF_Q = (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
    -7.37332916720468e-03, -1.42647390514189e-02,
)  # fmt: skip
_PHI_P = tuple(_F(0.5 * c / math.sqrt(2) ** (2 * (6 - i) + 1)) for i, c in enumerate(_ERF_P))
_PHI_Q = tuple(_F(c / 2 ** (4 - i)) for i, c in enumerate(_ERF_Q))
_PHI_CLIP = _F(4 * math.sqrt(2))
_BLOCK = 1 << 16  # elements per GELU step: a few arrays of this size stay in the L2 cache
_TANH_C = _F(math.sqrt(2 / math.pi))
_MASKED = _F(-1e30)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, vectorized (absolute error below 1e-6 in float32, 2e-7 in
    float64): ``2 * Phi(x * sqrt 2) - 1``."""
    return 2 * _phi(np.asarray(x) * math.sqrt(2)) - 1


def _phi(x: np.ndarray, *, times_x: bool = False) -> np.ndarray:
    """The standard normal CDF, elementwise, in blocks that stay in the cache; with
    ``times_x``, ``x * Phi(x)`` written over ``x``."""
    out = x if times_x else np.empty_like(x)
    flat, into = x.reshape(-1), out.reshape(-1)
    size = min(_BLOCK, flat.size)
    clipped, x2, q, p = (np.empty(size, dtype=x.dtype) for _ in range(4))
    for start in range(0, flat.size, _BLOCK):
        stop = min(flat.size, start + _BLOCK)
        n = stop - start
        c, s, d, r = clipped[:n], x2[:n], q[:n], p[:n]
        np.clip(flat[start:stop], -_PHI_CLIP, _PHI_CLIP, out=c)
        np.multiply(c, c, out=s)
        np.multiply(s, _PHI_Q[0], out=d)
        d += _PHI_Q[1]
        for coef in _PHI_Q[2:]:
            d *= s
            d += coef
        np.multiply(s, _PHI_P[0], out=r)
        r += _PHI_P[1]
        for coef in _PHI_P[2:]:
            r *= s
            r += coef
        r *= c
        r /= d
        r += _F(0.5)
        if times_x:
            into[start:stop] *= r
        else:
            into[start:stop] = r
    return out


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's GELU, ``x * Phi(x)``, in place."""
    return _phi(x, times_x=True)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU's tanh form (``gelu_new`` in a config), in place."""
    inner = x * x
    inner *= _F(0.044715)
    inner += 1
    inner *= x
    inner *= _TANH_C
    np.tanh(inner, out=inner)
    inner += 1
    inner *= _F(0.5)
    x *= inner
    return x


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu_fast": gelu_tanh,
    "relu": lambda x: np.maximum(x, 0, out=x),
}


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Layer norm over the last axis of a 2-D array, in place."""
    x -= x.mean(axis=1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / _F(x.shape[1])
    x *= (1 / np.sqrt(var + _F(eps)))[:, None]
    x *= weight
    x += bias
    return x


class _Layer:
    """One encoder layer's weights, transposed for ``x @ w``, Q, K, V fused, Q pre-scaled."""

    def __init__(self, tensor: Callable[[str], np.ndarray], prefix: str, heads: int) -> None:
        def get(name: str) -> np.ndarray:
            return tensor(prefix + name)

        att = "attention.self."
        scale = _F(1 / math.sqrt(get(f"{att}query.weight").shape[0] // heads))
        weights = [get(f"{att}{n}.weight") for n in ("query", "key", "value")]
        biases = [get(f"{att}{n}.bias") for n in ("query", "key", "value")]
        weights[0], biases[0] = weights[0] * scale, biases[0] * scale
        self.qkv = np.ascontiguousarray(np.concatenate(weights).T)
        self.qkv_bias = np.concatenate(biases)
        self.out = np.ascontiguousarray(get("attention.output.dense.weight").T)
        self.out_bias = get("attention.output.dense.bias")
        self.ln1 = (
            get("attention.output.LayerNorm.weight"),
            get("attention.output.LayerNorm.bias"),
        )
        self.up = np.ascontiguousarray(get("intermediate.dense.weight").T)
        self.up_bias = get("intermediate.dense.bias")
        self.down = np.ascontiguousarray(get("output.dense.weight").T)
        self.down_bias = get("output.dense.bias")
        self.ln2 = (get("output.LayerNorm.weight"), get("output.LayerNorm.bias"))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingUnavailable(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise EmbeddingUnavailable(f"{path} is not a JSON object")
    return data


def _pooling(model_dir: Path) -> str:
    """The pooling mode of a sentence-transformers directory (``mean`` without a config)."""
    path = model_dir / "1_Pooling" / "config.json"
    if not path.is_file():
        return "mean"
    config = _read_json(path)
    modes = [
        mode
        for mode in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")
        if config.get(f"pooling_mode_{mode}")
    ]
    if len(modes) != 1 or modes[0] == "mean_sqrt_len_tokens":
        raise EmbeddingUnavailable(f"{path}: unsupported pooling {modes or 'none'}")
    return modes[0].split("_")[0]


class BertEmbedder:
    """Sentence vectors from a BERT model directory (see the module docs).

    An empty text is embedded as sentence-transformers does, from ``[CLS] [SEP]`` alone: a
    unit vector like any other, not zero.
    """

    def __init__(self, model_dir: Path, *, max_tokens: int = 128) -> None:
        model_dir = Path(model_dir)
        weights_file = model_dir / "model.safetensors"
        needed = (model_dir / "config.json", model_dir / "tokenizer.json", weights_file)
        missing = [p.name for p in needed if not p.is_file()]
        if missing:
            raise EmbeddingUnavailable(
                f"{model_dir} is not a model directory (missing {', '.join(missing)}); "
                "run `switchboard models fetch` or point to a sentence-transformers BERT model"
            )
        from safetensors import safe_open
        from tokenizers import Tokenizer

        config = _read_json(model_dir / "config.json")
        try:
            self.heads = int(config["num_attention_heads"])
            layers = int(config["num_hidden_layers"])
            act = str(config.get("hidden_act", "gelu"))
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingUnavailable(f"{model_dir / 'config.json'}: bad BERT config") from exc
        if act not in _ACTIVATIONS:
            raise EmbeddingUnavailable(f"{model_dir / 'config.json'}: unsupported {act!r}")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise EmbeddingUnavailable(f"{model_dir}: only absolute position embeddings")
        self._activation = _ACTIVATIONS[act]
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_tokens = max(2, min(max_tokens, int(config.get("max_position_embeddings", 512))))
        self.pooling = _pooling(model_dir)
        try:
            with safe_open(str(weights_file), framework="np") as f:
                keys = set(f.keys())
                prefix = "bert." if "bert.embeddings.word_embeddings.weight" in keys else ""

                def get(name: str) -> np.ndarray:
                    return f.get_tensor(prefix + name).astype(np.float32, copy=False)

                emb = "embeddings."
                self.words = get(f"{emb}word_embeddings.weight")
                self.positions = get(f"{emb}position_embeddings.weight")[: self.max_tokens].copy()
                # token type 0 is constant: added to the positions once
                self.positions += get(f"{emb}token_type_embeddings.weight")[0]
                self.ln = (get(f"{emb}LayerNorm.weight"), get(f"{emb}LayerNorm.bias"))
                self.layers = [
                    _Layer(get, f"encoder.layer.{i}.", self.heads) for i in range(layers)
                ]
        except Exception as exc:  # a truncated or foreign file, a missing tensor
            raise EmbeddingUnavailable(
                f"cannot read the BERT weights in {weights_file}: {exc}; fetch the model again"
            ) from exc
        self.dim = int(self.words.shape[1])
        self.vocab_size = int(self.words.shape[0])
        try:
            self.tokenizer: Any = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:  # not a tokenizers file
            raise EmbeddingUnavailable(
                f"cannot read {model_dir / 'tokenizer.json'}: {exc}"
            ) from exc
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()
        self.source = model_dir
        self.name = model_dir.name
        self.weights_sha256 = file_sha256(weights_file)
        self.model_id = f"{self.name}@{self.weights_sha256[:12]}:numpy-bert:{self.max_tokens}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalized float32 row per text, shape ``(len(texts), dim)``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if len(texts) == 0:
            return out
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        for chunk in passes([len(row) for row in ids]):
            out[chunk] = self.embed_ids([ids[i] for i in chunk])
        return out

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """The normalized vectors of token ID sequences (special tokens included, at most
        ``max_tokens`` each), in one forward pass padded to the longest."""
        if len(ids) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch, length = len(ids), max(len(row) for row in ids)
        if length > self.max_tokens:
            raise ValueError(f"a sequence of {length} tokens exceeds {self.max_tokens}")
        tokens = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = 1
        padded = not mask.all()
        x = self._encode(tokens, mask if padded else None)
        if self.pooling == "cls":
            pooled = x[:, 0]
        elif self.pooling == "max":
            if padded:
                x[mask == 0] = _MASKED
            pooled = x.max(axis=1)
        elif padded:
            pooled = np.einsum("bt,btd->bd", mask, x) / mask.sum(axis=1, keepdims=True)
        else:
            pooled = x.mean(axis=1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)

    def _encode(self, tokens: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """The last hidden states, shape ``(batch, length, dim)``."""
        batch, length = tokens.shape
        heads, size, dim = self.heads, self.dim // self.heads, self.dim
        x = (self.words[tokens] + self.positions[:length]).reshape(batch * length, dim)
        _layer_norm(x, *self.ln, self.eps)
        blocked = None if mask is None else ((1 - mask) * _MASKED)[:, None, None, :]
        for layer in self.layers:
            qkv = x @ layer.qkv
            qkv += layer.qkv_bias
            qkv = qkv.reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)  # (batch, heads, length, length)
            if blocked is not None:
                scores += blocked
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * length, dim)
            attended = context @ layer.out
            attended += layer.out_bias
            attended += x
            x = _layer_norm(attended, *layer.ln1, self.eps)
            hidden = x @ layer.up
            hidden += layer.up_bias
            hidden = self._activation(hidden)
            out = hidden @ layer.down
            out += layer.down_bias
            out += x
            x = _layer_norm(out, *layer.ln2, self.eps)
        return x.reshape(batch, length, dim)


def passes(lengths: Sequence[int], size: int = BATCH, pad: int = PAD) -> list[list[int]]:
    """The indices of ``lengths`` in forward passes: by length, at most ``size`` a pass, none
    longer than its pass's shortest by more than ``pad``."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    out: list[list[int]] = []
    for i in order:
        if not out or len(out[-1]) >= size or lengths[i] - lengths[out[-1][0]] > pad:
            out.append([])
        out[-1].append(i)
    return out


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
