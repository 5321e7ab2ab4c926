"""Processes the scenarios start: the echo agent, Switchboard, nginx; ports, readiness, RSS."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp

TOKEN = "bench-admin-token"
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child_setup() -> None:
    """In a child before exec: raise its open-file limit; on Linux, end it with its parent."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, hard), hard))
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (``VmRSS`` in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def wait_http(
    url: str, limit: float = 30.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll ``url`` until it answers 200 (e.g. ``/readyz``); fail if ``proc`` exits first."""
    deadline = time.monotonic() + limit
    async with aiohttp.ClientSession() as http:
        while True:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before ready")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(url) as resp:
                    if resp.status == 200:
                        return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} not ready after {limit} s")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def process(
    args: Sequence[str],
    ready_url: str,
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Run ``args`` (output to ``log``, in directory ``cwd``) until the block ends; ready when
    ``ready_url`` is 200."""
    proc = _spawn(args, log, env, cwd)
    try:
        await wait_http(ready_url, proc=proc)
        yield proc
    finally:
        stop(proc)


def _spawn(
    args: Sequence[str], log: Path, env: dict[str, str] | None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            list(args),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            preexec_fn=_child_setup,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop one process we started: SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def echo_agent(
    tmp: Path, answer: str = "message"
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run the echo agent (``answer``: ``message`` or ``task``, what ``SendMessage``
    answers); yields its base URL and process."""
    async with echo_agents(tmp, 1, answer) as (bases, proc):
        yield bases[0], proc


@contextlib.asynccontextmanager
async def echo_agents(
    tmp: Path, count: int, answer: str = "message"
) -> AsyncIterator[tuple[list[str], subprocess.Popen[bytes]]]:
    """Run ``count`` echo agents (one process, one port each); yields base URLs and process."""
    ports = [free_port() for _ in range(count)]
    args = [sys.executable, "-m", "bench.echo_agent", "--answer", answer]
    for port in ports:
        args += ["--port", str(port)]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    async with process(args, f"{bases[-1]}/.well-known/agent-card.json", tmp / "agent.log") as proc:
        yield bases, proc


@contextlib.asynccontextmanager
async def switchboard(
    tmp: Path, database_url: str | None = None, source: Path | None = None, **settings: str
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``switchboard serve`` (a fresh SQLite file unless ``database_url``); yields its base
    URL and process. ``source``: a checkout whose code runs (its directory first on the
    module path) instead of this one's.

    ``settings`` become ``SWITCHBOARD_<NAME>`` variables (after the bench defaults): one
    worker process unless ``workers`` says otherwise.
    """
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="switchboard-", dir=tmp))
    env = {
        "SWITCHBOARD_PORT": str(port),
        "SWITCHBOARD_DATABASE_URL": database_url or f"sqlite:///{home / 'switchboard.db'}",
        "SWITCHBOARD_ADMIN_TOKEN": TOKEN,
        "SWITCHBOARD_ALLOW_NETWORKS": "127.0.0.0/8",
        "SWITCHBOARD_SEEDS": "",
        "SWITCHBOARD_REFRESH": "false",
        "SWITCHBOARD_MAX_STREAMS": "100000",
        "SWITCHBOARD_WORKERS": "1",
        **{f"SWITCHBOARD_{k.upper()}": v for k, v in settings.items()},
    }
    if source is not None:
        env["PYTHONPATH"] = str(source)
    # the log level serve defaults to (INFO): the access log and the per-call line on, as
    # operators run it, written to a file (not a terminal)
    args = [sys.executable, "-m", "router.cli", "serve"]
    base = f"http://127.0.0.1:{port}"
    async with process(args, f"{base}/readyz", home / "switchboard.log", env, source) as proc:
        yield base, proc


async def client_key(base: str, subject: str = "bench") -> str:
    """A new API key for a client (``POST /api/v1/clients`` with the admin token)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.post(f"{base}/api/v1/clients", json={"subject": subject}) as resp,
    ):
        if resp.status != 201:
            raise RuntimeError(f"making an API key failed: {resp.status} {await resp.text()}")
        made: dict[str, str] = await resp.json()
        return made["key"]


async def register(base: str, body: dict[str, object]) -> dict[str, object]:
    """``POST /api/v1/agents`` with the admin token; the created agent."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.post(f"{base}/api/v1/agents", json=body) as resp,
    ):
        if resp.status != 201:
            raise RuntimeError(f"registering {body} failed: {resp.status} {await resp.text()}")
        agent: dict[str, object] = await resp.json()
        return agent
