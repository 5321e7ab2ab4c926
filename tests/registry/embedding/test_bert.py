"""registry.embedding.bert: the numpy BERT encoder gives the reference implementation's vectors
(sentence-transformers on PyTorch, recorded in tests/fixtures/minilm_reference.json), batched
or one by one, cut at max_tokens; its erf and GELU are accurate; a directory that holds no
model is refused with what is missing."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from registry.embedding import EmbeddingUnavailable
from registry.embedding.bert import BATCH, PAD, BertEmbedder, erf, gelu, gelu_tanh, passes

# the session fixtures this module uses

REFERENCE = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "minilm_reference.json").read_text(encoding="utf-8")
)


def _cosines(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)


def test_vectors_match_the_reference_implementation(bert: BertEmbedder) -> None:
    assert bert.max_tokens == REFERENCE["max_tokens"]
    texts = [item["text"] for item in REFERENCE["items"]]
    expected = np.array([item["vector"] for item in REFERENCE["items"]], dtype=np.float32)
    assert [len(bert.tokenizer.encode(t).ids) for t in texts] == [
        item["tokens"] for item in REFERENCE["items"]
    ]
    got = bert.embed(texts)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    assert _cosines(got, expected).min() >= 0.9999
    one_by_one = np.concatenate([bert.embed([t]) for t in texts])
    assert _cosines(one_by_one, expected).min() >= 0.9999
    assert np.abs(_cosines(np.roll(got, 1, axis=0), expected)).max() < 0.9  # tells texts apart


def test_a_batch_gives_each_text_its_own_vector(bert: BertEmbedder) -> None:
    """Texts of many lengths, more than one batch, in an order unlike the sorted one:
    padding leaks into no vector and each row stays with its text."""
    words = "please route this message to the agent that can book a flight".split()
    texts = [" ".join(words[: (i * 7) % len(words) + 1]) * (1 + i % 3) for i in range(BATCH + 9)]
    texts[5] = ""
    batch = bert.embed(texts)
    singles = np.concatenate([bert.embed([t]) for t in texts])
    np.testing.assert_allclose(batch, singles, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert bert.embed([]).shape == (0, bert.dim)


def test_passes_group_texts_of_similar_length() -> None:
    lengths = [30, 9, 12, 10, 90, 11, 29, 31, 10]
    assert passes(lengths, size=3, pad=4) == [[1, 3, 8], [5, 2], [6, 0, 7], [4]]
    assert passes(lengths, size=32, pad=1000) == [sorted(range(9), key=lengths.__getitem__)]
    grouped = passes([n % 97 for n in range(500)])
    assert sorted(i for group in grouped for i in group) == list(range(500))
    assert max(len(group) for group in grouped) <= BATCH
    assert all((g[-1] % 97) - (g[0] % 97) <= PAD for g in grouped)
    assert passes([]) == []


def test_long_texts_are_cut_at_max_tokens(model_dir: Path, bert: BertEmbedder) -> None:
    short = BertEmbedder(model_dir, max_tokens=16)
    head = "please book me a flight to madrid for next week and then tell me"  # 14 tokens
    texts = [head + " the price", head + " a long story" * 300]
    assert len(bert.tokenizer.encode(texts[1]).ids) == 128
    a, b = short.embed(texts)
    np.testing.assert_allclose(a, b, atol=1e-6)  # only the first 16 tokens count
    full = bert.embed(texts)
    assert float(full[0] @ full[1]) < 0.95
    assert short.model_id != bert.model_id


def test_the_model_id_names_model_weights_runtime_and_length(
    model_dir: Path, bert: BertEmbedder
) -> None:
    digest = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
    assert bert.model_id == f"{model_dir.name}@{digest[:12]}:numpy-bert:128"
    assert bert.dim == 384 and bert.name == model_dir.name and bert.pooling == "mean"


def test_related_texts_are_closer_than_unrelated(bert: BertEmbedder) -> None:
    v = bert.embed(
        ["my laptop screen is cracked", "the display of my notebook broke", "pay my invoice"]
    )
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.3


def test_weights_with_a_bert_prefix_give_the_same_vectors(
    model_dir: Path, bert: BertEmbedder, tmp_path: Path
) -> None:
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(model_dir / name, tmp_path / name)
    weights = load_file(str(model_dir / "model.safetensors"))
    save_file({f"bert.{k}": v for k, v in weights.items()}, str(tmp_path / "model.safetensors"))
    texts = ["convert 100 USD to EUR", "a cat"]
    np.testing.assert_allclose(BertEmbedder(tmp_path).embed(texts), bert.embed(texts), atol=1e-6)


def test_erf_and_gelu_are_accurate() -> None:
    xs = np.linspace(-10, 10, 200_001)
    exact = np.array([math.erf(x) for x in xs])
    assert np.abs(erf(xs) - exact).max() < 2e-7
    assert np.abs(erf(xs.astype(np.float32)) - exact).max() < 1e-6
    x = np.linspace(-12, 12, 24_001).astype(np.float32)
    exact_gelu = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()])
    got = gelu(x.copy())
    assert got.dtype == np.float32
    assert (np.abs(got - exact_gelu) / np.maximum(1, np.abs(x))).max() < 1e-6
    assert np.abs(gelu_tanh(x.copy()) - exact_gelu).max() < 1e-3  # the other form, not this


def test_a_directory_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match=r"missing config\.json.*models fetch"):
        BertEmbedder(tmp_path)
    (tmp_path / "config.json").write_text('{"num_attention_heads": 12, "num_hidden_layers": 6}')
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"not a model")
    with pytest.raises(EmbeddingUnavailable, match="cannot read the BERT weights"):
        BertEmbedder(tmp_path)
    (tmp_path / "config.json").write_text("[]")
    with pytest.raises(EmbeddingUnavailable, match="not a JSON object"):
        BertEmbedder(tmp_path)
