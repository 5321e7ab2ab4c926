"""registry.embedding.static: static token vectors distilled from the BERT model route messages
to the right skill almost as well (a real retrieval check, not a smoke test), rows are unit
vectors (zero for a text without tokens), and the distilled files say where they came from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from registry.embedding import EmbeddingUnavailable
from registry.embedding.bert import BertEmbedder
from registry.embedding.static import (
    META,
    VECTORS,
    StaticEmbedder,
    distill,
    ensure_distilled,
)

# the session fixtures this module uses

SKILLS = [
    "Convert amounts between currencies at today's exchange rates",
    "Book flights and airline tickets",
    "Translate text between languages",
    "Report the weather forecast for a city",
    "Reset passwords and unlock user accounts",
    "Pay supplier invoices and track payments",
]
QUERIES = [
    ("how many euros is 100 dollars", 0),
    ("change yen into pounds", 0),
    ("I need a plane ticket to Lisbon on Friday", 1),
    ("reserve a seat on the next flight to Rome", 1),
    ("how do you say good morning in Spanish", 2),
    ("put this paragraph into German", 2),
    ("will it rain in Oslo tomorrow", 3),
    ("what's the temperature in Cairo this weekend", 3),
    ("I forgot my password and I'm locked out", 4),
    ("my account is blocked, please unlock it", 4),
    ("has the supplier invoice 4411 been paid", 5),
    ("settle the outstanding vendor bill", 5),
]


@pytest.fixture(scope="module")
def static(static_model_dir: Path) -> StaticEmbedder:
    return StaticEmbedder(static_model_dir)


def test_messages_find_their_skill(static: StaticEmbedder) -> None:
    """Top-1 over six skills (chance: 2 of 12); the numpy BERT model gets 12, this one 11."""
    sims = static.embed([q for q, _ in QUERIES]) @ static.embed(SKILLS).T
    gold = np.array([g for _, g in QUERIES])
    assert int((sims.argmax(axis=1) == gold).sum()) >= 10
    own = sims[np.arange(len(QUERIES)), gold]
    others = (sims.sum(axis=1) - own) / (len(SKILLS) - 1)
    assert float((own - others).mean()) > 0.2


def test_related_texts_are_closer_than_unrelated(static: StaticEmbedder) -> None:
    triplets = [
        ("my laptop screen is cracked", "the display of my notebook broke", "pay my invoice"),
        ("convert 100 USD to EUR", "exchange dollars into euros", "the weather in Paris"),
        (
            "book a hotel room in Berlin",
            "reserve accommodation for two nights",
            "reset my password",
        ),
    ]
    for anchor, related, unrelated in triplets:
        a, r, u = static.embed([anchor, related, unrelated])
        assert float(a @ r) > float(a @ u) + 0.2, (anchor, float(a @ r), float(a @ u))


def test_rows_are_unit_vectors_or_zero(static: StaticEmbedder) -> None:
    texts = ["", "hello world", "   ", "Café crème 🍕", "a " * 2000]
    rows = static.embed(texts)
    assert rows.dtype == np.float32 and rows.shape == (5, 256)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), [0, 1, 0, 1, 1], atol=1e-6)
    singles = np.concatenate([static.embed([t]) for t in texts])
    np.testing.assert_allclose(rows, singles, atol=1e-7)
    assert static.embed([]).shape == (0, 256)


def test_the_distilled_model_names_its_source(
    static_model_dir: Path, static: StaticEmbedder, bert: BertEmbedder
) -> None:
    meta = json.loads((static_model_dir / META).read_text())
    assert meta["distilled_from"] == bert.model_id and meta["dims"] == 256
    assert 0.5 < meta["pca_explained_variance"] <= 1
    table = load_file(str(static_model_dir / VECTORS))["embeddings"]
    assert table.shape == (bert.vocab_size, 256) and table.dtype == np.float32
    assert static.model_id.startswith(f"{bert.name}-static-256@")
    assert static.model_id != bert.model_id and static.dim == 256


def test_an_existing_model_is_kept_and_bad_input_refused(
    static_model_dir: Path, bert: BertEmbedder, tmp_path: Path
) -> None:
    before = (static_model_dir / VECTORS).stat().st_mtime_ns
    assert ensure_distilled(bert, static_model_dir) == static_model_dir  # at once: no work
    assert (static_model_dir / VECTORS).stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="dims"):
        distill(bert, tmp_path / "s", dims=bert.dim + 1)
    with pytest.raises(EmbeddingUnavailable, match="no static model"):
        StaticEmbedder(tmp_path)
    assert list(tmp_path.iterdir()) == []
