"""README.md and docs/quickstart.md show what really happens: their commands run against a real
``switchboard serve --demo`` and print what the pages show (tests/support/doc_examples.py says
how a page is read)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_examples import Runner, examples

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "docs" / "quickstart.md"]
TOKEN = "s3cret"  # the admin token the quickstart uses

pytestmark = [
    pytest.mark.skipif(
        shutil.which("curl") is None, reason="the pages' examples use curl, which is not installed"
    ),
    # all started first and together: the module's ``serve --demo`` (with the model) started
    # once per test process, not again for the tests ``slow`` used to leave behind; and on one
    # test process once ``--dist loadgroup`` groups again (xdist 3.8 cannot rename a pytest
    # 9.2 item to its group: xdist_group has no effect yet)
    pytest.mark.slow,
    pytest.mark.xdist_group("doc_examples"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """``switchboard serve --demo`` (this checkout) on free ports with its own database:
    its URL and the environment for the pages' commands."""
    home = tmp_path_factory.mktemp("serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env["PYTHONPATH"] = str(ROOT)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "router.cli", "serve", "--demo", "--port", str(port)],
        cwd=home,
        env={
            **env,
            "SWITCHBOARD_DATABASE_URL": f"sqlite:///{home / 'switchboard.db'}",
            "SWITCHBOARD_ADMIN_TOKEN": TOKEN,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    watchdog = threading.Timer(120, proc.kill)  # a server that never gets ready
    watchdog.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("demo agent caption at "):
                break
        else:
            pytest.fail(f"switchboard serve --demo exited ({proc.wait()}) before it was ready")
        watchdog.cancel()
        base = f"http://127.0.0.1:{port}"
        yield base, {**env, "SWITCHBOARD_URL": base, "SWITCHBOARD_ADMIN_TOKEN": TOKEN}
    finally:
        watchdog.cancel()
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_examples_print_what_the_page_shows(
    page: Path, server: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    base, env = server
    assert examples(page), f"{page.name} has no examples to run"
    failures = Runner(base, tmp_path, env).run_page(page)
    assert not failures, "\n\n".join(failures)


# the errors these pages had: each must be caught
OLD_MISTAKES = {
    "the 0.3 currency request refused with -32050": (
        '"kind": "task", "status": {"state": "completed"',
        '"error": {"code": -32050',
    ),
    "the answer in one piece": (
        '{"kind": "text", "text": "bonjour "}, {"kind": "text", "text": "monde"}',
        '{"kind": "text", "text": "bonjour monde"}',
    ),
    "the old -32050 message": (
        "no agent can take this message: no agent has a skill that matches it well enough",
        "no agent can take this message: none has a skill that matches it well enough",
    ),
}


@pytest.mark.parametrize("mistake", OLD_MISTAKES)
def test_the_check_catches_the_old_mistakes(
    mistake: str, server: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    right, wrong = OLD_MISTAKES[mistake]
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert right in quickstart
    page = tmp_path / "quickstart.md"
    page.write_text(quickstart.replace(right, wrong, 1), encoding="utf-8")
    changed = [e for e in examples(page) if e not in examples(ROOT / "docs" / "quickstart.md")]
    assert len(changed) == 1
    base, env = server
    assert Runner(base, tmp_path, env).run(changed[0]) is not None
