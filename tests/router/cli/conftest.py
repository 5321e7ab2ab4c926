"""Fixtures of the command line's tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def no_switchboard_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No SWITCHBOARD_* variable of the environment running the tests is seen."""
    for name in [n for n in os.environ if n.startswith("SWITCHBOARD_")]:
        monkeypatch.delenv(name)
