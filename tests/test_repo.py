"""Repository contracts: the README quickstart, CI, the Dockerfile, and lint."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\nThen,", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, flags=re.S)


def test_quickstart_has_exactly_two_commands() -> None:
    commands = _quickstart_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands)
    assert "switchboard serve --demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _quickstart_commands()[1] in ci


def test_dockerfile_installs_like_the_readme_and_runs_safely() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim", dockerfile, flags=re.M)
    install = _quickstart_commands()[0].split(" && ")[:2]  # venv + pip install .
    assert "python3 -m venv" in install[0] and install[1].endswith("pip install .")
    assert re.search(r"RUN python3 -m venv (\S+) && \1/bin/pip install \.\n", dockerfile)
    user = re.search(r"^USER (\S+)", dockerfile, flags=re.M)
    assert user and user.group(1) not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*?/healthz", dockerfile, flags=re.M | re.S)
    assert 'CMD ["switchboard", "serve"]' in dockerfile
    assert 'VOLUME ["/data"]' in dockerfile
    assert "SWITCHBOARD_DATABASE_URL=sqlite:////data/" in dockerfile


@pytest.mark.skipif(
    shutil.which("ruff", path=str(Path(sys.executable).parent)) is None,
    reason="ruff is installed with the test extra",
)
@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_clean(args: list[str]) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    result = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
