"""Fixtures of the end-to-end tests: the whole Switchboard app on a real port (see
tests/README.md). The demo agents (``demo``), the httpx client (``http``) and the a2a-sdk 0.3
venv (``sdk03_python``) come from tests/conftest.py.

With ``SWITCHBOARD_TEST_WORKERS=2`` the ``router`` fixture, and each app started with
``start_router`` (one's own database and settings), is ``switchboard serve --workers 2`` in a
subprocess instead (:mod:`tests.support.served`), and only the tests that use one of them run:
the others build their own app in this process (they read or set its internal objects), which
the ordinary run already covers. Every test on ``router`` or ``start_router`` passes both
ways (what a test does through ``router.app[...]`` goes through a sidecar replica on the same
database).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.served import serve_router, test_workers


def pytest_configure(config: pytest.Config) -> None:
    """The ``in_process`` marker: deselected with several test workers."""
    config.addinivalue_line(
        "markers",
        "in_process: the test counts what one process does (with SWITCHBOARD_TEST_WORKERS > 1 "
        "it is deselected, though it uses start_router)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With several test workers, deselect the tests that use neither ``router`` nor
    ``start_router``, and those marked ``in_process``."""
    if test_workers() <= 1:
        return
    here = Path(__file__).parent

    def dropped(item: pytest.Item) -> bool:
        used = set(getattr(item, "fixturenames", ()))
        served = {"router", "start_router"} & used and not item.get_closest_marker("in_process")
        return here in item.path.parents and not served

    config.hook.pytest_deselected(items=[item for item in items if dropped(item)])
    items[:] = [item for item in items if not dropped(item)]


@pytest.fixture
async def router(aiohttp_server: Any, sqlite_url: str) -> AsyncIterator[Any]:
    """The Switchboard app (registry and router) on a real port, with no agent registered;
    ``router.app[KEY]`` reaches its registry and router (with workers: the sidecar's)."""
    async with serve_router(aiohttp_server, sqlite_url) as server:
        yield server


@pytest.fixture
async def start_router(aiohttp_server: Any) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """``await start_router(database_url, **settings)``: the Switchboard app on a real port with
    :func:`~tests.support.helpers.make_settings` ``(database_url, **settings)``, as the
    ``router`` fixture is (with workers: served, ``app[KEY]`` the sidecar's); each one stopped
    at the test's end (or by its ``close()``)."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(database_url: str, **settings: Any) -> Any:
            started = serve_router(aiohttp_server, database_url, **settings)
            return await stack.enter_async_context(started)

        yield start
