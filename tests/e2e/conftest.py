"""Fixtures of the end-to-end tests: the whole Switchboard app on a real port (see
tests/README.md). The demo agents (``demo``), the httpx client (``http``) and the a2a-sdk 0.3
venv (``sdk03_python``) come from tests/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from router.app import create_app
from tests.support.helpers import make_settings


@pytest.fixture
async def router(aiohttp_server: Any, sqlite_url: str) -> TestServer:
    """The Switchboard app (registry and router) on a real port, with no agent registered."""
    return await aiohttp_server(create_app(make_settings(sqlite_url)))
