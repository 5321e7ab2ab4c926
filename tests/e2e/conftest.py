"""Fixtures of the end-to-end tests: the whole Switchboard app on a real port (see
tests/README.md). The demo agents (``demo``), the httpx client (``http``) and the a2a-sdk 0.3
venv (``sdk03_python``) come from tests/conftest.py.

With ``SWITCHBOARD_TEST_WORKERS=2`` the ``router`` fixture is ``switchboard serve --workers 2``
in a subprocess instead (:mod:`tests.support.served`), and only the tests that use it run:
the others build their own app in this process, which the ordinary run already covers. Every
test on ``router`` passes both ways: none is kept to one process (what a test does through
``router.app[...]`` goes through a sidecar replica on the same database).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.served import serve_router, test_workers


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With several test workers, deselect the tests that do not use the ``router`` fixture."""
    if test_workers() <= 1:
        return
    here = Path(__file__).parent

    def dropped(item: pytest.Item) -> bool:
        return here in item.path.parents and "router" not in getattr(item, "fixturenames", ())

    config.hook.pytest_deselected(items=[item for item in items if dropped(item)])
    items[:] = [item for item in items if not dropped(item)]


@pytest.fixture
async def router(aiohttp_server: Any, sqlite_url: str) -> AsyncIterator[Any]:
    """The Switchboard app (registry and router) on a real port, with no agent registered;
    ``router.app[KEY]`` reaches its registry and router (with workers: the sidecar's)."""
    async with serve_router(aiohttp_server, sqlite_url) as server:
        yield server
