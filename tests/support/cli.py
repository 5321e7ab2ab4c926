"""Running the ``switchboard`` CLI in a test, against a test server (the CLI is sync: it runs in
a thread)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestServer

from router.cli import main
from tests.support.helpers import ADMIN


async def run(
    capsys: pytest.CaptureFixture[str], server: TestServer, *argv: str
) -> tuple[int, str, str]:
    """Run the CLI with ``--server`` pointing at ``server``; return (status, stdout, stderr)."""
    command, *rest = argv
    args = [command]
    if command in ("agents", "keys", "route", "examples", "policies"):
        args.append(rest.pop(0))
    args += ["--server", str(server.make_url("")), "--token", ADMIN, *rest]
    status = await asyncio.to_thread(main, args)
    out, err = capsys.readouterr()
    return status, out, err
