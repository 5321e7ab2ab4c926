"""Shared fixtures: databases (SQLite, and PostgreSQL when configured), settings, the app,
and a programmable card server.

Set ``SWITCHBOARD_TEST_DATABASE_URL`` (e.g. ``postgresql://postgres@127.0.0.1:5432/test``) to
run the storage tests on PostgreSQL too: the run creates its own database with a random
name, gives each test its own schema, and drops the database at the end.
"""

from __future__ import annotations

import compileall
import gc
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import hypothesis  # noqa: F401  (imported now, not by its plugin's summary as each process ends)
import psycopg
import pytest
from _pytest.nodeid import coerce_node_id
from aiohttp import web
from aiohttp.test_utils import TestClient
from sqlalchemy.engine import make_url

from router.app import create_app
from router.observe.turn import run_held
from seeds.demo_agents import DEMO_PORTS, DemoAgents, start_demo_agents
from tests.peers03 import sdk03_python  # noqa: F401  (the a2a-sdk 0.3 venv fixture)
from tests.support import compat
from tests.support.embedding_fixtures import (  # noqa: F401  (the model, once per machine)
    bert,
    model_dir,
    model_wheel,
    static_model_dir,
)
from tests.support.helpers import AUTH, CardServer, card_v03, card_v1, make_settings
from tests.support.thorough import THOROUGH

ROOT = Path(__file__).resolve().parent.parent

# --- the compatibility table (tests/support/compat.py) ---------------------------------------

_COMPAT = compat.Recorder() if os.environ.get(compat.ENV) else None


@pytest.fixture(autouse=True)
def _compat_record(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``SWITCHBOARD_COMPAT_RECORD`` set, record what each test drives through routers."""
    if _COMPAT is not None:
        _COMPAT.test = request.node.nodeid
        _COMPAT.install(monkeypatch)


@pytest.fixture(autouse=True)
def _put_off_lines_stay_in_their_test() -> Iterator[None]:
    """The log lines a test's last requests put off to the end of a loop turn its loop did
    not reach (:mod:`router.observe.turn`) are made as the test ends, not in the next one."""
    yield
    run_held()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep a test's recorded calls once its call phase passed (drop them otherwise)."""
    if _COMPAT is not None and (report.when == "call" or report.outcome != "passed"):
        _COMPAT.finish(report.nodeid, report.passed and report.when == "call")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the recorded calls for ``python -m tests.support.compat``."""
    if _COMPAT is not None:
        Path(os.environ[compat.ENV]).write_text(json.dumps(_COMPAT.kept))


def pytest_configure(config: pytest.Config) -> None:
    """Cache the bytecode of the checkout's modules, whatever ``PYTHONDONTWRITEBYTECODE`` says:
    every test process and every ``switchboard serve`` a test starts imports several hundred
    of them, and without a ``__pycache__`` each compiles them all again (a fifth of the
    suite's CPU where the variable is set). The first process compiles them once, before the
    test processes start; they and their subprocesses then read them (and pytest keeps the
    test modules' rewritten bytecode)."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the processes started from here
    if not hasattr(config, "workerinput"):  # the first process (not an xdist worker)
        for package in ("registry", "router", "seeds", "bench"):
            compileall.compile_dir(ROOT / package, quiet=2, workers=1)


GC_YOUNG = 20_000
"""Net container allocations between two young collections in a test process."""

# --- parallel runs (pytest-xdist) ------------------------------------------------------------


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one process more than the CPUs this process may use (many tests wait on a
    subprocess, a socket or the database), at least two."""
    return max(2, len(os.sched_getaffinity(0)) + 1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection made (every module imported, the model, the SDKs) out of the
    collector's reach (``gc.freeze``): each full collection, and the last ones as a process
    ends, then walk only what the tests made. And collect the youngest generation every
    ``GC_YOUNG`` net allocations instead of 700: a test's apps, sessions and servers are
    short-lived garbage that reference counting frees, so frequent young collections only
    walk it (10% of the time of tests/registry/test_api.py)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


@pytest.hookimpl(trylast=True)  # after xdist's own: it names the items of a group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``bench`` deselected unless asked for (``-m`` naming ``bench``, or a
    thorough run: :mod:`tests.support.thorough`); tests marked ``slow`` first (in their
    order), so that none starts last and keeps one process busy while the others have
    finished; ``xdist_group`` made to work again (:func:`_grouped`)."""
    _grouped(items)
    if not THOROUGH and "bench" not in (config.option.markexpr or ""):
        benches = [item for item in items if item.get_closest_marker("bench") is not None]
        if benches:
            config.hook.pytest_deselected(items=benches)
            items[:] = [item for item in items if item.get_closest_marker("bench") is None]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _grouped(items: list[pytest.Item]) -> None:
    """Give each item of an ``xdist_group`` the node id xdist means it to have
    (``<id>@<group>``), so that ``--dist loadgroup`` runs a group in one process. xdist 3.8
    sets it as ``item._nodeid``, which pytest 9.2 no longer reads (its ``nodeid`` comes from
    ``item._id``); without this, every group is spread over the processes (a browser and a
    ``serve --demo`` started in each)."""
    for item in items:
        meant = getattr(item, "_nodeid", None)
        if isinstance(meant, str) and meant != item.nodeid and hasattr(item, "_id"):
            item._id = coerce_node_id(meant)


# --- databases -------------------------------------------------------------------------------


def _pg_admin_url() -> str | None:
    return os.environ.get("SWITCHBOARD_TEST_DATABASE_URL") or None


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str | None]:
    """A PostgreSQL database of this run's own (random name), dropped at the end."""
    url = _pg_admin_url()
    if not url:
        yield None
        return
    admin = make_url(url).set(drivername="postgresql")
    name = f"switchboard_test_{secrets.token_hex(6)}"
    conninfo = admin.render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, pg_database: str | None) -> str:
    """A fresh, empty database URL per test: SQLite, and PostgreSQL when configured."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'switchboard.db'}"
    if pg_database is None:
        pytest.skip("SWITCHBOARD_TEST_DATABASE_URL is not set")
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{pg_database}?options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite database for tests that are not about storage."""
    return f"sqlite:///{tmp_path / 'switchboard.db'}"


# --- the application -------------------------------------------------------------------------


@pytest.fixture
async def switchboard(aiohttp_client: Any, db_url: str) -> TestClient:
    """A running Switchboard (on each test database) and a client for it."""
    return await aiohttp_client(create_app(make_settings(db_url)))


# --- the demo agents, and an HTTP client for the a2a-sdk client -------------------------------


@pytest.fixture
async def demo() -> AsyncIterator[DemoAgents]:
    """The three demo agents (seeds/demo_agents.py), each on a free port of 127.0.0.1."""
    agents = await start_demo_agents(ports=dict.fromkeys(DEMO_PORTS, 0))
    try:
        yield agents
    finally:
        await agents.close()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client, e.g. for the a2a-sdk 1.x client (which adds ``A2A-Version: 1.0`` to its
    default headers). Tests that speak raw HTTP with aiohttp define their own ``http``."""
    async with httpx.AsyncClient(timeout=30.0) as client:
        yield client


# --- a programmable card server ----------------------------------------------------------------


@pytest.fixture
async def card_server(aiohttp_server: Any) -> CardServer:
    """A card server with nothing configured (every path answers 404)."""
    holder: dict[str, CardServer] = {}

    async def handler(request: web.Request) -> web.StreamResponse:
        server = holder["server"]
        server.requests.append(request)
        if request.path not in server.routes:
            return web.json_response({"error": "not found"}, status=404)
        status, body, headers = server.routes[request.path]
        headers = dict(headers)
        if isinstance(body, bytes | str):
            headers.setdefault("Content-Type", "application/json")
            return web.Response(status=status, body=body, headers=headers)
        etag = headers.get("ETag")
        if etag and request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return web.json_response(body, status=status, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    server = await aiohttp_server(app)
    holder["server"] = CardServer(server)
    return holder["server"]


@pytest.fixture
async def registered(switchboard: TestClient, card_server: CardServer) -> dict[str, str]:
    """Two agents (a 1.0 and a 0.3 card) registered through the API; their ids."""
    card_server.set("/weather/.well-known/agent-card.json", card_v1(card_server.url("/weather")))
    card_server.set("/invoices/.well-known/agent.json", card_v03(card_server.url("/invoices")))
    ids = {}
    for key, path in (("weather", "/weather"), ("invoices", "/invoices")):
        resp = await switchboard.post(
            "/api/v1/agents", json={"url": card_server.url(path)}, headers=AUTH
        )
        assert resp.status == 201, await resp.text()
        ids[key] = (await resp.json())["id"]
    return ids
