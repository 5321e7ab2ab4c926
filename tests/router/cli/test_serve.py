"""``switchboard serve --demo`` as a user runs it: a real process, real demo agents."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import sys
from asyncio.subprocess import Process
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from router.cli import build_parser, main
from router.cli import serve as serve_mod
from router.cli.errors import CliError
from tests.support.helpers import make_settings
from tests.support.procout import ProcessOutput

ROOT = Path(__file__).resolve().parents[3]


async def _wait_for_line(stream: asyncio.StreamReader, needle: str, seen: list[str]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            raise AssertionError("server exited before serving:\n" + "".join(seen))
        seen.append(line.decode(errors="replace"))
        if needle in seen[-1]:
            return


async def _spawn(
    *argv: str,
    cwd: Path,
    stdout: int = asyncio.subprocess.DEVNULL,
    env: dict[str, str] | None = None,
) -> Process:
    """Start ``switchboard serve ARGV`` as a real process, without inherited settings (but
    ``env``'s); words match messages (no test here routes by meaning: no model to load)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    inherited |= {"PYTHONPATH": str(ROOT), "SWITCHBOARD_MATCHER": "lexical"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "serve",
        *argv,
        env={**inherited, **(env or {})},
        cwd=cwd,
        stdout=stdout,
        stderr=asyncio.subprocess.PIPE,
    )


def _free_ports(count: int) -> list[int]:
    """``count`` ports free right now on 127.0.0.1."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


_AGENT_LINE = re.compile(r"demo agent (\w+) at (http://127\.0\.0\.1:\d+)\n")


async def _run_demo(tmp_path: Path, port: int, *argv: str) -> dict[str, str]:
    """Run ``serve --demo ARGV`` on ``port`` with the database in ``tmp_path``, check what it
    serves, stop it; return the demo agents' URLs it printed."""
    database = f"sqlite:///{tmp_path / 'demo.db'}"
    proc = await _spawn(
        *("--demo", "--port", str(port), "--database-url", database, *argv),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    drain = asyncio.ensure_future(proc.stderr.read())
    printed: list[str] = []
    try:
        await asyncio.wait_for(_wait_for_line(proc.stdout, "demo agent caption", printed), 60)
        base = f"http://127.0.0.1:{port}"
        assert printed[:3] == [
            f"Switchboard (A2A router) at {base}/\n",
            f"admin API at {base}/api/v1 (OpenAPI: {base}/api/v1/openapi.json)\n",
            f"web console at {base}/ui/\n",
        ]
        matches = [_AGENT_LINE.fullmatch(line) for line in printed[3:]]
        urls = {m.group(1): m.group(2) for m in matches if m is not None}
        assert len(urls) == 3, printed
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/readyz") as resp:
                assert resp.status == 200
                assert (await resp.json())["agents"] == 3
            async with http.get(f"{base}/api/v1/agents") as resp:
                agents = (await resp.json())["agents"]
            assert {a["id"]: a["card_format"] for a in agents} == {
                "caption": "1.0",
                "currency": "1.0",
                "translate": "0.3",
            }
            # their cards signed by keys made at start, trusted at their real URLs
            assert {a["id"]: a["verification"]["key_source"] for a in agents} == {
                name: f"jwks:{url}/.well-known/jwks.json" for name, url in urls.items()
            }
            assert {a["verification"]["status"] for a in agents} == {"verified"}
            # registered where they really listen
            assert {a["id"]: a["interfaces"][0]["url"] for a in agents} == {
                name: f"{url}/" for name, url in urls.items()
            }
            async with http.get(f"{base}/api/v1/skills?input_mode=image/png") as resp:
                skills = (await resp.json())["skills"]
            assert [(s["agent"]["id"], s["id"]) for s in skills] == [("caption", "caption-image")]
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited on its own
            proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), timeout=30)
        err = (await drain).decode(errors="replace")
    assert code == 0, err
    assert "Traceback" not in err
    return urls


async def test_serve_demo_on_free_ports_then_chosen_ones(tmp_path: Path) -> None:
    """``serve --demo`` binds free ports and prints where everything is; ``--demo-ports``
    fixes them, and a restart on the same database registers the agents where they are now."""
    port, *chosen = _free_ports(4)
    first = await _run_demo(tmp_path, port)
    assert sorted(first) == ["caption", "currency", "translate"]
    second = await _run_demo(tmp_path, port, "--demo-ports", ",".join(map(str, chosen)))
    assert second == {
        name: f"http://127.0.0.1:{p}"
        for name, p in zip(("currency", "translate", "caption"), chosen, strict=True)
    }


async def _serve(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``switchboard serve`` with ``argv`` until it exits; return (status, stderr)."""
    proc = await _spawn(*argv, cwd=cwd, env=env)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode(errors="replace")


def _one_line_error(err: str) -> str:
    """The single ``switchboard: ...`` line of ``err``, after asserting there is no traceback."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("switchboard: ")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    return errors[0]


def _went_on(*_args: object) -> None:
    raise AssertionError("serve went past its checks")


async def _in_process(
    capsys: pytest.CaptureFixture[str], *argv: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """``main(["serve", *argv])`` in this process, with only ``env``'s ``SWITCHBOARD_*``
    variables, its logging left alone, stopped before the schema step (several workers) or
    its app (one): (status, stderr). Another process than a serve holding ports, without an
    interpreter's start."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("SWITCHBOARD_")]:
            patch.delenv(name)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        patch.setattr(serve_mod, "configure_logging", lambda *_args: None)
        patch.setattr(serve_mod, "prepare_schema", _went_on)
        patch.setattr(serve_mod, "_serve", _went_on)
        status = await asyncio.to_thread(main, ["serve", *argv])
    return status, capsys.readouterr().err


_MISTAKES = {  # argv, what the line says
    "missing seed file": (["--seeds", "{tmp}/nonexistent.toml"], "cannot read seed file"),
    "unsupported database": (
        ["--database-url", "mysql://user:secret@db.example/switchboard"],
        "unsupported database 'mysql'",
    ),
    "log level": (["--log-level", "bogus"], "invalid --log-level 'bogus'"),
    "demo ports": (["--demo", "--demo-ports", "9101,9102"], "invalid --demo-ports '9101,9102'"),
    "demo ports without demo": (["--demo-ports", "9101"], "--demo-ports needs --demo"),
}
_THROUGH_THE_ENTRY_POINT = ("unsupported database", "demo ports")  # the others: main(argv)


async def test_serve_bad_configuration_is_one_line_and_status_2(
    tmp_path: Path,
    unused_tcp_port: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_switchboard_environment: None,
) -> None:
    """Mistakes seen before starting stop ``serve`` with one line and status 2: each through
    ``main(argv)`` (stopped before it would configure logging), two of them also through the
    real entry point (tests/router/cli/test_cli.py has more cases in-process)."""
    db = f"sqlite:///{tmp_path / 'ok.db'}"

    def argv(name: str) -> list[str]:
        extra = [arg.format(tmp=tmp_path) for arg in _MISTAKES[name][0]]
        return ["--port", str(unused_tcp_port), "--database-url", db, *extra]

    processes = asyncio.gather(*(_serve(*argv(n), cwd=tmp_path) for n in _THROUGH_THE_ENTRY_POINT))

    monkeypatch.setattr(serve_mod, "configure_logging", _went_on)
    results = {}
    for name in _MISTAKES:
        status = await asyncio.to_thread(main, ["serve", *argv(name)])
        results[name] = status, capsys.readouterr().err
    for name, result in zip(_THROUGH_THE_ENTRY_POINT, await processes, strict=True):
        results[f"{name} (entry point)"] = result
    for name, (status, err) in results.items():
        expected = _MISTAKES[name.removesuffix(" (entry point)")][1]
        assert status == 2, f"{name}: {err}"
        assert err.count("\n") == 1, f"{name}: more than one line: {err}"
        line = _one_line_error(err)
        assert expected in line and "secret" not in line, f"{name}: {line}"
    assert not (tmp_path / "ok.db").exists()  # nothing was started


async def test_serve_startup_failures_are_one_line_and_status_1(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    """Failures that only show when starting: the port is taken, the database is unreachable."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        nobody = f"postgresql://user:secret@127.0.0.1:{unused_tcp_port}/switchboard"
        (status_port, err_port), (status_db, err_db) = await asyncio.gather(
            _serve("--port", str(port), "--database-url", "sqlite:///./ok.db", cwd=tmp_path),
            _serve("--port", str(port), "--database-url", nobody, cwd=tmp_path),
        )
    assert status_port == 1, err_port
    line = _one_line_error(err_port)
    assert line.startswith("switchboard: cannot start:") and "address already in use" in line
    assert status_db == 1, err_db
    line = _one_line_error(err_db)
    assert line.startswith("switchboard: cannot start: database postgresql://user:***@")
    assert "Connection refused" in line and "secret" not in line


def _free_run(count: int) -> int:
    """A port P such that P to P + ``count`` - 1 are free right now on 127.0.0.1."""
    for _ in range(50):
        with contextlib.ExitStack() as stack:
            first = stack.enter_context(socket.socket())
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                for offset in range(1, count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port + offset))
            except OSError:
                continue
            return port
    raise AssertionError(f"no {count} free ports in a row")


def _in_use(port: int, host: str = "127.0.0.1") -> str:
    return f"switchboard: cannot start: {host}:{port}: address already in use"


def _listeners(port: int) -> int:
    """How many sockets listen on ``port``, any address (Linux: ``/proc/net/tcp*``)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as rows:
            entries = [row.split() for row in rows.readlines()[1:]]
        count += sum(e[1].endswith(f":{port:04X}") and e[3] == "0A" for e in entries)
    return count


async def test_a_port_that_a_serve_holds_is_refused_and_that_serve_keeps_its_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second ``serve`` on the port, the gRPC port or a metrics port of a running ``serve
    --workers 2``, with two workers or one, exits 1 with one line and binds nothing; the
    first keeps its sockets and answers every new connection (router/cli/ports.py). Each
    second one runs in this process; the two on the port also as real processes."""
    port, grpc = _free_ports(2)
    metrics = _free_run(2)
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    database = f"sqlite:///{tmp_path / 'serve.db'}"  # the second's too: the same command twice
    first = await _spawn(
        *("--workers", "2", "--port", str(port), "--database-url", database),
        cwd=tmp_path,
        env={**env, "SWITCHBOARD_GRPC_PORT": str(grpc), "SWITCHBOARD_METRICS_PORT": str(metrics)},
    )
    assert first.stderr is not None
    log = ProcessOutput(first.stderr)
    try:
        workers = {
            int((await log.wait_for(rf"worker {index} \(pid (\d+)\): Running on", 60))[1])
            for index in (0, 1)
        }
        grpc_at, metrics_at = {"SWITCHBOARD_GRPC_PORT": str(grpc)}, "SWITCHBOARD_METRICS_PORT"
        cases: dict[str, tuple[list[str], dict[str, str], int]] = {  # argv, variables, refused
            "the port": (["--workers", "2", "--port", str(port)], {}, port),
            "the port, one worker": (["--workers", "1", "--port", str(port)], {}, port),
            "the gRPC port": (["--workers", "2", "--port", "0"], grpc_at, grpc),
            "worker 1's metrics port": (
                ["--workers", "2", "--port", "0"], {metrics_at: str(metrics + 1)}, metrics + 1
            ),
            "a metrics port, one worker": (
                ["--workers", "1", "--port", "0"], {metrics_at: str(metrics)}, metrics
            ),
        }  # fmt: skip
        processes = asyncio.gather(  # the first two through the real entry point too
            *(
                _serve(*argv, "--database-url", database, cwd=tmp_path, env={**env, **variables})
                for argv, variables, _ in list(cases.values())[:2]
            )
        )
        results = {}
        for name, (argv, variables, _) in cases.items():
            results[name] = await _in_process(
                capsys, *argv, "--database-url", database, env={**env, **variables}
            )
        for name, result in zip(list(cases)[:2], await processes, strict=True):
            results[f"{name} (entry point)"] = result
        for name, (status, err) in results.items():
            refused = cases[name.removesuffix(" (entry point)")][2]
            assert status == 1, f"{name}: {err}"
            assert _one_line_error(err) == _in_use(refused), f"{name}: {err}"
            assert "Running on" not in err and "workers ready" not in err, f"{name}: {err}"
        if sys.platform.startswith("linux"):
            assert _listeners(port) == 2  # the first's, one per worker
        connector = aiohttp.TCPConnector(force_close=True)  # a new connection per request
        async with aiohttp.ClientSession(connector=connector) as http:
            for _ in range(20):
                async with http.get(f"http://127.0.0.1:{port}/api/v1/status") as resp:
                    replica = (await resp.json())["replica"]["name"]
                assert int(replica.split(":")[-2]) in workers, replica
            for scraped in (metrics, metrics + 1):
                async with http.get(f"http://127.0.0.1:{scraped}/metrics") as resp:
                    assert resp.status == 200
    finally:
        with contextlib.suppress(ProcessLookupError):
            first.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(first.wait(), timeout=30)
        await log.task
    assert code == 0, log.text
    assert "cannot start" not in log.text and "Traceback" not in log.text, log.text


@contextlib.contextmanager
def _stranger(*, reuse_address: bool = False, listen: bool = False) -> Iterator[int]:
    """Another program's ``SO_REUSEPORT`` socket on a free port of 127.0.0.1; the port."""
    with socket.socket() as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", 0))
        if listen:
            sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="no SO_REUSEPORT")
async def test_a_strangers_socket_on_the_port_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain socket with ``SO_REUSEPORT`` (which ``serve --workers 2``'s sockets could
    join), listening or merely bound, on the port or the gRPC port: refused, one line (each
    in this process, the listening one also by a real process)."""
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    database = f"sqlite:///{tmp_path / 'x.db'}"
    argv = ("--workers", "2", "--database-url", database)
    with (
        _stranger(listen=True) as listening,
        _stranger() as bound,
        _stranger(reuse_address=True) as reserved,  # as a serve holds its gRPC port
    ):
        cases = {  # the port refused: its variables
            listening: {"SWITCHBOARD_PORT": str(listening)},
            bound: {"SWITCHBOARD_PORT": str(bound)},
            reserved: {"SWITCHBOARD_PORT": "0", "SWITCHBOARD_GRPC_PORT": str(reserved)},
        }
        process = asyncio.ensure_future(_serve(*argv, cwd=tmp_path, env=env | cases[listening]))
        results = [(r, await _in_process(capsys, *argv, env=env | v)) for r, v in cases.items()]
        results.append((listening, await process))
    for refused, (status, err) in results:
        assert status == 1, err
        assert _one_line_error(err) == _in_use(refused)


async def test_two_serves_started_together_one_runs(tmp_path: Path) -> None:
    """Two ``serve --workers 2`` started at the same moment on one port, and two on one port
    of overlapping hosts (``0.0.0.0`` and ``127.0.0.1``, which share no port lock): in each
    pair one runs, the other exits 1 with one line."""
    same, overlapping = _free_ports(2)
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    pairs = [(("127.0.0.1", same), ("127.0.0.1", same))]
    pairs.append((("0.0.0.0", overlapping), ("127.0.0.1", overlapping)))
    started: list[tuple[Process, ProcessOutput, str, int]] = []
    try:
        for index, (host, port) in enumerate(where for pair in pairs for where in pair):
            proc = await _spawn(
                *("--workers", "2", "--host", host, "--port", str(port)),
                *("--database-url", f"sqlite:///{tmp_path / f'{index}.db'}"),
                cwd=tmp_path,
                env=env,
            )
            assert proc.stderr is not None
            started.append((proc, ProcessOutput(proc.stderr), host, port))
        await asyncio.gather(_one_runs(started[:2]), _one_runs(started[2:]))
    finally:
        for proc, *_ in started:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _one_runs(pair: list[tuple[Process, ProcessOutput, str, int]]) -> None:
    """One of ``pair`` exits 1 with one line, the other runs (then stops on SIGTERM)."""
    exits = {asyncio.ensure_future(proc.wait()): index for index, (proc, *_) in enumerate(pair)}
    done, pending = await asyncio.wait(exits, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert done, "both serves run: " + "".join(log.text for _, log, _, _ in pair)
    loser = exits[done.pop()]
    (proc, log, host, port), (winner, winner_log, _, _) = pair[loser], pair[1 - loser]
    await log.task
    assert proc.returncode == 1, log.text
    assert _one_line_error(log.text) == _in_use(port, host)
    await winner_log.wait_for("all 2 workers ready", 60)
    assert winner.returncode is None
    winner.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(winner.wait(), 30) == 0, winner_log.text
    for waiting in pending:
        await waiting


async def test_serve_logs_a_bad_http_request_as_one_info_line(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    """An HTTP/2 client (prior knowledge) on the port: one INFO line naming the sender, no
    traceback (router/cli/logs.py)."""
    database = f"sqlite:///{tmp_path / 'bad.db'}"
    proc = await _spawn(
        *("--workers", "2", "--port", str(unused_tcp_port), "--database-url", database),
        cwd=tmp_path,
    )  # two workers (not one per CPU), as in most of the tests here
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        await asyncio.wait_for(_wait_for_line(proc.stderr, "Running on", seen), timeout=60)
        reader, writer = await asyncio.open_connection("127.0.0.1", unused_tcp_port)
        writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), timeout=10)
        writer.close()
        assert b" 400 " in answer.split(b"\r\n")[0]
        await asyncio.wait_for(_wait_for_line(proc.stderr, "bad HTTP request", seen), timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        drain = asyncio.ensure_future(proc.stderr.read())
        code = await asyncio.wait_for(proc.wait(), timeout=30)
        seen.append((await drain).decode(errors="replace"))
    log = "".join(seen)
    assert code == 0, log
    [line] = [line for line in log.splitlines() if "aiohttp.server" in line]
    assert " INFO aiohttp.server: bad HTTP request from 127.0.0.1: " in line, log
    assert "HTTP/2" in line, log
    assert "Traceback" not in log and " ERROR " not in log, log


@pytest.mark.parametrize(
    ("demo", "workers", "expected"),
    [(True, None, 1), (True, 1, 1), (False, None, 8), (False, 3, 3)],
)
def test_the_workers_default_to_the_cpus_and_to_one_for_the_demo(
    monkeypatch: pytest.MonkeyPatch, demo: bool, workers: int | None, expected: int
) -> None:
    """On a machine with 8 CPUs: ``serve`` runs 8 workers unless told, ``--demo`` runs one."""
    monkeypatch.setattr(serve_mod, "available_cpus", lambda: 8)
    settings = make_settings("sqlite://", workers=workers)
    assert serve_mod._worker_count(argparse.Namespace(demo=demo), settings) == expected


def test_the_demo_refuses_several_workers() -> None:
    settings = make_settings("sqlite://", workers=2)
    with pytest.raises(CliError, match="--demo runs one worker") as caught:
        serve_mod._worker_count(argparse.Namespace(demo=True), settings)
    assert caught.value.status == 2


@pytest.mark.parametrize(
    ("variable", "flag", "expected"),
    [(None, None, "INFO"), ("warning", None, "WARNING"), ("WARNING", "debug", "DEBUG")],
)
def test_the_log_level_comes_from_the_flag_over_the_variable(
    monkeypatch: pytest.MonkeyPatch,
    no_switchboard_environment: None,
    tmp_path: Path,
    variable: str | None,
    flag: str | None,
    expected: str,
) -> None:
    if variable is not None:
        monkeypatch.setenv("SWITCHBOARD_LOG_LEVEL", variable)
    argv = ["serve", "--database-url", f"sqlite:///{tmp_path / 'x.db'}"]
    args = build_parser().parse_args([*argv, *(["--log-level", flag] if flag else [])])
    assert serve_mod._checked_settings(args).log_level == expected


def test_a_bad_log_level_variable_is_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch, no_switchboard_environment: None, tmp_path: Path
) -> None:
    monkeypatch.setenv("SWITCHBOARD_LOG_LEVEL", "loud")
    args = build_parser().parse_args(["serve", "--database-url", f"sqlite:///{tmp_path / 'x.db'}"])
    with pytest.raises(CliError, match="log_level") as caught:
        serve_mod._checked_settings(args)
    assert caught.value.status == 2 and "\n" not in str(caught.value)


def test_the_metrics_ports_are_one_per_worker_and_stay_below_65536() -> None:
    """Each worker's port is claimed; past 65535 ``getaddrinfo`` would wrap to port 0."""
    settings = make_settings("sqlite://", metrics_port=65534)
    assert serve_mod._metrics_ports(settings, 2) == [65534, 65535]
    assert serve_mod._metrics_ports(settings.model_copy(update={"metrics_port": 0}), 2) == []
    with pytest.raises(CliError, match="beyond 65535") as caught:
        serve_mod._metrics_ports(settings, 3)
    assert caught.value.status == 2
