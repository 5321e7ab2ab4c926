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
from pathlib import Path

import aiohttp
import pytest

from router.cli import build_parser
from router.cli import serve as serve_mod
from router.cli.errors import CliError
from tests.support.helpers import make_settings

ROOT = Path(__file__).resolve().parents[3]


async def _wait_for_line(stream: asyncio.StreamReader, needle: str, seen: list[str]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            raise AssertionError("server exited before serving:\n" + "".join(seen))
        seen.append(line.decode(errors="replace"))
        if needle in seen[-1]:
            return


async def _spawn(*argv: str, cwd: Path, stdout: int = asyncio.subprocess.DEVNULL) -> Process:
    """Start ``switchboard serve ARGV`` as a real process, without inherited settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "serve",
        *argv,
        env={**env, "PYTHONPATH": str(ROOT)},
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


async def _serve(*argv: str, cwd: Path) -> tuple[int, str]:
    """Run ``switchboard serve`` with ``argv`` until it exits; return (status, stderr)."""
    proc = await _spawn(*argv, cwd=cwd)
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


async def test_serve_bad_configuration_is_one_line_and_status_2(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    """Mistakes seen before starting stop ``serve`` with one line and status 2 (every case is
    covered in-process by tests/router/cli/test_cli.py; these run the real entry point)."""
    db = f"sqlite:///{tmp_path / 'ok.db'}"
    cases = {
        "missing seed file": (
            ["--seeds", str(tmp_path / "nonexistent.toml")],
            "cannot read seed file",
        ),
        "unsupported database": (
            ["--database-url", "mysql://user:secret@db.example/switchboard"],
            "unsupported database 'mysql'",
        ),
        "log level": (["--log-level", "bogus"], "invalid --log-level 'bogus'"),
        "demo ports": (["--demo", "--demo-ports", "9101,9102"], "invalid --demo-ports '9101,9102'"),
        "demo ports without demo": (["--demo-ports", "9101"], "--demo-ports needs --demo"),
    }
    results = await asyncio.gather(
        *(
            _serve("--port", str(unused_tcp_port), "--database-url", db, *argv, cwd=tmp_path)
            for argv, _ in cases.values()
        )
    )
    for (name, (_, expected)), (status, err) in zip(cases.items(), results, strict=True):
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


async def test_serve_logs_a_bad_http_request_as_one_info_line(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    """An HTTP/2 client (prior knowledge) on the port: one INFO line naming the sender, no
    traceback (router/cli/logs.py)."""
    database = f"sqlite:///{tmp_path / 'bad.db'}"
    proc = await _spawn("--port", str(unused_tcp_port), "--database-url", database, cwd=tmp_path)
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
