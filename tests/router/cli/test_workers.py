"""``switchboard serve --workers 2`` as operators run it: a real supervisor and its workers, a
real a2a-sdk agent and client; a worker killed, restarted, the lease moved; SIGTERM stops all.
The supervisor's parts that need no process (CPU quota, sockets) are tested directly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from a2a.types import GetTaskRequest

from router.cli import main
from router.cli.workers import listen_sockets
from tests.support.procout import ProcessOutput
from tests.support.sdk_clients import answer, ask, connect, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

ROOT = Path(__file__).resolve().parents[3]
T = TypeVar("T")


async def _until(check: Callable[[], Awaitable[T | None]], seconds: float = 60) -> T:
    """Poll ``check`` until it gives a value (not None), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"no result from {check.__name__} within {seconds} s")
        await asyncio.sleep(0.05)  # a polling interval, not a wait for an event


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _pid(replica: str) -> int:
    """The pid in a replica name (``host:pid:suffix``)."""
    return int(replica.split(":")[-2])


@contextlib.asynccontextmanager
async def _switchboard(tmp_path: Path, db_url: str, agent_url: str) -> AsyncIterator[Any]:
    """``serve --workers 2 --port 0`` with the agent as seed ``echo``; yields (process, log,
    base URL) once both workers accept requests."""
    seeds = tmp_path / "seeds.toml"
    seeds.write_text(f'[[agents]]\nid = "echo"\nurl = "{agent_url}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "SWITCHBOARD_DATABASE_URL": db_url,
        "SWITCHBOARD_ALLOW_NETWORKS": "127.0.0.1/32",
        "SWITCHBOARD_MATCHER": "lexical",
        "SWITCHBOARD_REFRESH_LEASE_TTL": "1.5",  # the lease moves within 1.5 s of a death
        "SWITCHBOARD_GRPC_PORT": "0",  # one free port, shared by the workers
    }
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "router.cli", "serve", "--workers", "2", "--port", "0"),
        *("--seeds", str(seeds)),
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    log = ProcessOutput(proc.stderr)
    try:
        printed = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        match = re.fullmatch(r"Switchboard \(A2A router\) at (http://127\.0\.0\.1:\d+)/\n", printed)
        assert match, printed + log.text
        await log.wait_for(r"worker 0 \(pid \d+\): Running on")
        await log.wait_for(r"worker 1 \(pid \d+\): Running on")
        grpc = re.findall(r"serving the A2A gRPC binding on 127\.0\.0\.1:(\d+)", log.text)
        assert len(grpc) == 2 and grpc[0] == grpc[1], log.text  # both on one port
        yield proc, log, match.group(1)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.slow
async def test_two_workers_share_the_port_survive_a_kill_and_stop_on_sigterm(
    tmp_path: Path, db_url: str
) -> None:
    async with (
        serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url,
        _switchboard(tmp_path, db_url, agent_url) as (proc, log, base),
    ):
        # a fresh connection per request: the kernel spreads them over the workers
        fresh = httpx.Limits(max_keepalive_connections=0)
        async with (
            httpx.AsyncClient(limits=fresh, timeout=30) as http,
            httpx.AsyncClient(timeout=30) as pooled,  # keep-alive connections
        ):

            async def status() -> dict[str, Any]:
                resp = await http.get(f"{base}/api/v1/status")
                assert resp.status_code == 200, resp.text
                return resp.json()["replica"]

            client = await connect(http, f"{base}/agents/echo")  # pinned: no matching
            served: set[int] = set()
            tasks = []

            async def both_served() -> set[int] | None:
                task = await send(client, ask(f"call {len(tasks)}"))
                assert answer(task) == f"echo: call {len(tasks)}"
                tasks.append(task)
                served.add(_pid((await status())["name"]))
                return served if len(served) == 2 else None

            workers = set(await _until(both_served))
            # any worker answers for a task another made: the ID key is shared
            for task in tasks[-6:]:
                got = await client.get_task(GetTaskRequest(id=task.id))
                assert got.id == task.id and answer(got) == answer(task)

            async def lease_holder() -> int | None:
                holder = (await status())["lease_holder"]
                return _pid(holder) if holder else None

            holder = await _until(lease_holder)
            assert holder in workers
            os.kill(holder, signal.SIGKILL)

            async def replaced() -> int | None:
                task = await send(client, ask("still there?"))  # the other keeps serving
                assert answer(task) == "echo: still there?"
                now = await lease_holder()
                return now if now is not None and now != holder and _alive(now) else None

            new_holder = await _until(replaced)
            assert new_holder != holder
            await log.wait_for(rf"worker \d \(pid {holder}\) was killed by signal 9: restarting")
            served.clear()
            await _until(both_served)
            assert holder not in served

            # SIGHUP: each worker replaced once its replacement is ready; no call fails, not
            # one on a connection an old worker accepted just before it stopped listening, nor
            # one on a keep-alive connection to it
            old = set(served)
            done = asyncio.Event()
            load = [
                asyncio.create_task(_calls_until(done, caller, base))
                for caller in [http, pooled] * 6
            ]
            proc.send_signal(signal.SIGHUP)

            async def old_gone() -> bool | None:
                task = await send(client, ask("during reload"))
                assert answer(task) == "echo: during reload"
                return True if not any(_alive(pid) for pid in old) else None

            await _until(old_gone)
            done.set()
            assert all(await asyncio.gather(*load))  # each made calls, all answered
            served.clear()
            await _until(both_served)
            assert not served & old
            workers |= old

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0, log.text
    assert "Traceback" not in log.text, log.text
    assert "reloading: replacing 2 workers" in log.text and "stopping 2 workers" in log.text
    assert not any(_alive(pid) for pid in served | workers)


async def _calls_until(done: asyncio.Event, http: httpx.AsyncClient, base: str) -> int:
    """Pinned calls one after another until ``done``; how many."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}},
    }
    calls = 0
    while not done.is_set():
        resp = await http.post(f"{base}/agents/echo", json=body, headers={"A2A-Version": "1.0"})
        assert resp.status_code == 200 and "result" in resp.json(), resp.text
        calls += 1
    return calls


def _two_free_ports() -> int:
    """A port P such that P and P + 1 are free right now on 127.0.0.1."""
    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two free ports in a row")


async def test_each_worker_serves_its_metrics_on_the_metrics_port_plus_its_index(
    tmp_path: Path,
) -> None:
    """... and through a reload: the supervisor holds each port (``SO_REUSEPORT``), which
    the new worker joins while the old one still serves it."""
    metrics = _two_free_ports()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "router.cli", "serve", "--workers", "2", "--port", "0"),
        *("--database-url", f"sqlite:///{tmp_path / 'm.db'}"),
        env={
            **env,
            "PYTHONPATH": str(ROOT),
            "SWITCHBOARD_MATCHER": "lexical",  # no model to load: no message is routed
            "SWITCHBOARD_METRICS_PORT": str(metrics),
        },
        cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    log = ProcessOutput(proc.stderr)
    try:
        old = [(await log.wait_for(rf"worker {i} \(pid (\d+)\): Running on"))[1] for i in (0, 1)]
        async with httpx.AsyncClient() as http:
            for port in (metrics, metrics + 1):
                resp = await http.get(f"http://127.0.0.1:{port}/metrics")
                assert resp.status_code == 200 and "switchboard_" in resp.text
            proc.send_signal(signal.SIGHUP)
            for index in (0, 1):
                await log.wait_for(rf"worker {index} \(pid (?!(?:{'|'.join(old)})\))\d+\): Running")
            for port in (metrics, metrics + 1):
                resp = await http.get(f"http://127.0.0.1:{port}/metrics")
                assert resp.status_code == 200 and "switchboard_" in resp.text
        assert "/metrics on the main port" not in log.text  # no warning: every worker scraped
        assert "cannot start" not in log.text, log.text
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0, log.text
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


_REFUSED = {  # no agent is registered: each call is refused, and counted
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}},
}


def _total(exposition: str, name: str) -> float:
    """The sum of every sample of ``name`` in a Prometheus text exposition."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith((f"{name}{{", f"{name} "))
    )


async def test_the_main_ports_metrics_add_up_every_worker(tmp_path: Path) -> None:
    """Without a metrics port, ``/metrics`` on the main port is every worker's (the files of
    prometheus-client's multiprocess mode): whichever worker answers the scrape, and after
    one is killed (its counts stay, its live gauges go)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "router.cli", "serve", "--workers", "2", "--port", "0"),
        *("--database-url", f"sqlite:///{tmp_path / 'm.db'}"),
        env={
            **env,
            "PYTHONPATH": str(ROOT),
            "SWITCHBOARD_MATCHER": "lexical",
            "TMPDIR": str(tmp_path),
        },
        cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    log = ProcessOutput(proc.stderr)
    try:
        port = re.search(
            r"port (\d+)", (await log.wait_for(r"2 workers on 127\.0\.0\.1, port")).string
        )
        assert port is not None
        base = f"http://127.0.0.1:{port.group(1)}"
        await log.wait_for(r"all 2 workers ready")
        [files] = [n for n in os.listdir(tmp_path) if n.startswith("switchboard-metrics-")]
        one = httpx.Limits(max_connections=1)  # one connection: both answers from one worker

        async def on_one_worker(path: str, **post: Any) -> tuple[int, str]:
            async with httpx.AsyncClient(limits=one, timeout=30) as http:
                if post:
                    resp = await http.post(f"{base}{path}", **post)
                else:
                    resp = await http.get(f"{base}{path}")
                status = (await http.get(f"{base}/api/v1/status")).json()
            assert resp.status_code == 200, resp.text
            return _pid(status["replica"]["name"]), resp.text

        calls: dict[int, int] = {}

        async def both_called() -> dict[int, int] | None:
            pid, _ = await on_one_worker("/", json=_REFUSED, headers={"A2A-Version": "1.0"})
            calls[pid] = calls.get(pid, 0) + 1
            return calls if len(calls) == 2 else None

        await _until(both_called)
        sent = sum(calls.values())
        scraped: set[int] = set()

        async def both_scraped() -> set[int] | None:
            pid, text = await on_one_worker("/metrics")
            assert _total(text, "switchboard_a2a_requests_total") == sent, text
            assert _total(text, "switchboard_routing_decisions_total") == sent, text
            assert re.search(r"^switchboard_streams_open 0\.0$", text, re.M), text  # livesum
            scraped.add(pid)
            return scraped if len(scraped) == 2 else None

        await _until(both_scraped)
        killed = max(calls, key=lambda pid: calls[pid])
        os.kill(killed, signal.SIGKILL)
        await log.wait_for(rf"worker \d \(pid {killed}\) was killed by signal 9: restarting")
        await log.wait_for(rf"worker \d \(pid (?!{killed})\d+\): Running on")
        scraped.clear()
        await _until(both_scraped)  # the dead worker's calls still counted
        assert killed not in scraped
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0, log.text
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "Traceback" not in log.text, log.text
    assert files not in os.listdir(tmp_path)  # the supervisor's (in TMPDIR), removed at exit


_SUPERVISE = """
import logging, socket, sys
from router.cli.workers import Supervisor, listen_sockets
logging.basicConfig(level="INFO")
code = int(sys.argv[1])
sockets = listen_sockets("127.0.0.1", 0, 2)
print(Supervisor(2, sockets, lambda: lambda worker: code, backoff=0.01).run())
"""


@pytest.mark.parametrize(
    ("worker_status", "supervisor_status", "starts"), [(1, 1, range(6, 11)), (2, 2, range(2, 3))]
)
def test_workers_that_keep_failing_stop_the_supervisor(
    worker_status: int, supervisor_status: int, starts: range
) -> None:
    """A worker that dies before it is ready is restarted with backoff, 5 times in a row at
    most; a configuration error (status 2) is not retried."""
    done = subprocess.run(
        [sys.executable, "-c", _SUPERVISE, str(worker_status)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == str(supervisor_status), done.stdout + done.stderr
    assert len(re.findall(r"worker \d started", done.stderr)) in starts, done.stderr
    assert "giving up, stopping the others" in done.stderr


def test_one_listening_socket_per_worker_on_one_port() -> None:
    sockets = listen_sockets("127.0.0.1", 0, 3)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(sockets) == (3 if sys.platform.startswith("linux") else 1)
        assert len(ports) == 1
        with socket.create_connection(("127.0.0.1", ports.pop()), timeout=5):
            pass
    finally:
        for sock in sockets:
            sock.close()


def test_a_port_in_use_is_refused() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            listen_sockets("127.0.0.1", taken.getsockname()[1], 2)


def test_an_in_memory_database_is_refused_with_several_workers(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_switchboard_environment: None,
) -> None:
    """Refused before anything binds or forks (``main(argv)``, its logging left alone;
    tests/router/cli/test_serve.py runs such refusals through the real entry point)."""
    monkeypatch.setattr("router.cli.serve.configure_logging", lambda *_args: None)

    def connect(*_args: object) -> None:
        raise AssertionError("serve went on to its database: it would bind and fork next")

    monkeypatch.setattr("router.cli.serve._check_database", connect)
    argv = ["serve", "--workers", "2", "--database-url", "sqlite:///:memory:"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "switchboard: an in-memory SQLite database cannot be shared by several workers: use a "
        "file (sqlite:///./switchboard.db) or --workers 1\n"
    )
