"""The app of the end-to-end tests, in this process or as ``switchboard serve --workers N``.

With ``SWITCHBOARD_TEST_WORKERS=N`` (N > 1) :func:`serve_router` starts a real supervisor and
N workers in a subprocess (a free port, the test's database, the settings of
:func:`tests.support.helpers.make_settings` as ``SWITCHBOARD_*`` variables) and gives back a
:class:`ServedRouter`, shaped like aiohttp's ``TestServer`` as the tests use it: ``make_url``,
``host``, ``port`` and ``app[KEY]``.

``app[KEY]`` is a *sidecar*: the same app created in this process on the same database,
started but never called over HTTP, a replica as any worker is. What the tests do through it
(register an agent, decode a task ID, read the task list) reaches the workers through the
database; after a change to the catalog the sidecar waits until every worker has caught up
(its catalog version, polled every ``SWITCHBOARD_CATALOG_SYNC_INTERVAL``: 0.1 s here), as
it waits for readiness on the supervisor's ``all N workers ready`` line, never a sleep.
:func:`everywhere` waits likewise after a change made over HTTP that workers take up on their
next sync (access policies, outbound credentials); ``close()`` stops the supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from yarl import URL

from registry.api import REGISTRY
from router.app import create_app
from tests.support.helpers import make_settings, settings_values
from tests.support.procout import ProcessOutput

__all__ = [
    "WORKERS_ENV",
    "ServedRouter",
    "everywhere",
    "pinned_clients",
    "serve_router",
    "serve_workers",
    "test_workers",
]

WORKERS_ENV = "SWITCHBOARD_TEST_WORKERS"
ROOT = Path(__file__).resolve().parents[2]
_SYNC = 0.1  # seconds between the catalog polls of the workers and the sidecar: short waits


def test_workers() -> int:
    """The worker count ``SWITCHBOARD_TEST_WORKERS`` asks for (1: the app in this process)."""
    return int(os.environ.get(WORKERS_ENV) or "1")


test_workers.__test__ = False  # type: ignore[attr-defined]  # not a test: pytest, skip it


class _SyncedRegistry:
    """The sidecar's registry: each awaited method, once done, waits for the workers to have
    the catalog version it left."""

    def __init__(self, registry: Any, served: ServedRouter) -> None:
        self._registry, self._served = registry, served

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._registry, name)
        if not asyncio.iscoroutinefunction(value):
            return value

        async def synced(*args: Any, **kwargs: Any) -> Any:
            result = await value(*args, **kwargs)
            await self._served.caught_up(self._registry.catalog.snapshot.version)
            return result

        return synced


class _SidecarApp:
    """``app[KEY]`` of a served router: the sidecar's, the registry synced."""

    def __init__(self, app: web.Application, served: ServedRouter) -> None:
        self._app, self._served = app, served

    def __getitem__(self, key: Any) -> Any:
        if key is REGISTRY:
            return _SyncedRegistry(self._app[REGISTRY], self._served)
        return self._app[key]

    def get(self, key: Any, default: Any = None) -> Any:
        """``app.get(key)``, as above."""
        return self[key] if key in self._app else default


class ServedRouter:
    """``switchboard serve --workers N`` on ``host:port`` and its sidecar (module docstring)."""

    scheme = "http"

    def __init__(
        self,
        host: str,
        port: int,
        pids: set[int],
        sidecar: web.Application,
        admin: dict[str, str],
        stop: Callable[[], Awaitable[None]],
    ) -> None:
        self.host, self.port, self.pids = host, port, pids
        self.app = _SidecarApp(sidecar, self)
        self._admin, self._stop = admin, stop

    async def close(self) -> None:
        """Stop the supervisor and its workers (SIGTERM), as ``TestServer.close`` stops its
        server; the sidecar stays up until the test's end."""
        await self._stop()

    def make_url(self, path: str = "") -> URL:
        """The absolute URL of ``path``."""
        return URL(f"{self.scheme}://{self.host}:{self.port}").join(URL(path))

    async def caught_up(self, version: int, seconds: float = 60) -> None:
        """Wait until every worker's catalog is at ``version`` or later."""

        def current(stats: httpx.Response) -> bool:
            return int(stats.raise_for_status().json()["catalog_version"]) >= version

        await self.until_every_worker("/api/v1/stats", current, seconds)

    async def until_every_worker(
        self, path: str, ready: Callable[[httpx.Response], bool], seconds: float = 60
    ) -> None:
        """Wait until every worker answers ``GET path`` (as the admin) with a response
        ``ready`` accepts: ask on new connections (the kernel spreads them over the workers)
        until each has said so."""
        behind, deadline = set(self.pids), time.monotonic() + seconds
        while behind:
            pid, answer = await self._probe(path)
            if ready(answer):
                behind.discard(pid)
            if time.monotonic() > deadline:
                raise AssertionError(f"workers {behind} not ready on {path}: {answer.text}")
            if pid in behind:
                await asyncio.sleep(0.02)  # its next catalog poll: a polling interval

    async def _probe(self, path: str) -> tuple[int, httpx.Response]:
        """One worker's pid and its answer to ``GET path``, both from one connection."""
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        status_url, url = str(self.make_url("/api/v1/status")), str(self.make_url(path))
        async with httpx.AsyncClient(limits=limits, headers=self._admin, timeout=30) as http:
            status = (await http.get(status_url)).raise_for_status().json()
            answer = await http.get(url)
        return int(status["replica"]["name"].split(":")[-2]), answer


async def everywhere(server: Any, path: str, ready: Callable[[httpx.Response], bool]) -> None:
    """After a change made through the admin API that replicas take up on their next sync
    (access policies, outbound credentials): with a served router, wait until every worker
    answers ``GET path`` as ``ready`` accepts; in this process there is nothing to wait for."""
    if isinstance(server, ServedRouter):
        await server.until_every_worker(path, ready)


def _environment(database_url: str, overrides: dict[str, Any], workers: int) -> dict[str, str]:
    """The ``SWITCHBOARD_*`` variables of ``make_settings(database_url, **overrides)``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    for key, value in settings_values(database_url, **overrides).items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | tuple):
            text = ",".join(str(item) for item in value)
        else:
            text = str(value)
        env[f"SWITCHBOARD_{key.upper()}"] = text
    env |= {"SWITCHBOARD_WORKERS": str(workers), "SWITCHBOARD_HOST": "127.0.0.1"}
    env["SWITCHBOARD_PORT"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


async def _served(
    start: Callable[[web.Application], Any], database_url: str, workers: int, **overrides: Any
) -> AsyncIterator[ServedRouter]:
    """Start the sidecar (it creates the tables and keys), then the supervisor; stop both."""
    overrides.setdefault("catalog_sync_interval", _SYNC)  # the sidecar polls as often
    sidecar = (await start(create_app(make_settings(database_url, **overrides)))).app
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "router.cli", "serve"),
        env=_environment(database_url, overrides, workers),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    output = ProcessOutput(proc.stderr)

    async def stop() -> None:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    try:
        port = await output.wait_for(r"\d+ workers on 127\.0\.0\.1, port (\d+)")
        await output.wait_for(rf"all {workers} workers ready")
        pids = {int(p) for p in re.findall(r"worker \d+ started \(pid (\d+)\)", output.text)}
        assert len(pids) == workers, output.text
        admin = {
            "Authorization": f"Bearer {settings_values(database_url, **overrides)['admin_token']}"
        }
        yield ServedRouter("127.0.0.1", int(port.group(1)), pids, sidecar, admin, stop)
    finally:
        await stop()
        await output.task
    assert proc.returncode == 0, output.text  # SIGTERM: every worker stopped cleanly
    assert "Traceback" not in output.text, output.text


def serve_workers(
    aiohttp_server: Callable[..., Any], database_url: str, workers: int = 2, **overrides: Any
) -> Any:
    """An async context manager giving ``switchboard serve --workers N`` on the test's
    database, whatever ``SWITCHBOARD_TEST_WORKERS`` says (:class:`ServedRouter`)."""
    return contextlib.asynccontextmanager(_served)(
        aiohttp_server, database_url, workers, **overrides
    )


async def pinned_clients(
    server: ServedRouter, headers: dict[str, str], tries: int = 40
) -> dict[int, httpx.AsyncClient]:
    """One httpx client per worker of ``server`` (by pid), each holding one keep-alive
    connection that the kernel gave to that worker; the caller closes them."""
    clients: dict[int, httpx.AsyncClient] = {}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    for _ in range(tries):
        client = httpx.AsyncClient(
            base_url=str(server.make_url("/")), limits=limits, headers=headers, timeout=30
        )
        status = (await client.get("/api/v1/status", headers=server._admin)).json()
        pid = int(status["replica"]["name"].split(":")[-2])
        if pid in clients:
            await client.aclose()
        else:
            clients[pid] = client
        if len(clients) == len(server.pids):
            return clients
    for client in clients.values():
        await client.aclose()
    raise AssertionError(f"no connection to every worker of {server.pids} in {tries} tries")


def serve_router(aiohttp_server: Callable[..., Any], database_url: str, **overrides: Any) -> Any:
    """An async context manager giving the router of the end-to-end tests: in this process
    (aiohttp's ``TestServer``) or, with ``SWITCHBOARD_TEST_WORKERS`` > 1, served by that many
    workers (:class:`ServedRouter`)."""
    workers = test_workers()

    @contextlib.asynccontextmanager
    async def in_process() -> AsyncIterator[Any]:
        yield await aiohttp_server(create_app(make_settings(database_url, **overrides)))

    if workers <= 1:
        return in_process()
    return contextlib.asynccontextmanager(_served)(
        aiohttp_server, database_url, workers, **overrides
    )
