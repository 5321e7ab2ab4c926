"""Fixtures of the forwarding tests: raw HTTP servers for the lean client's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from tests.support.rawhttp import Raw, Script, raw_servers


@pytest.fixture
async def raw() -> AsyncIterator[Callable[[Script], Awaitable[Raw]]]:
    """Start raw servers on 127.0.0.1 (``await raw(script)``); closed after the test."""
    async with raw_servers() as start:
        yield start
