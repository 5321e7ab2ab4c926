"""What the tests of ``deploy/`` share: the image the repository's Dockerfile builds, as the
manifests see it, and ``switchboard`` commands run the way their containers run them, as
processes on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.procout import ProcessOutput

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Image:
    """What the Dockerfile says of its image: the program that starts (``ENTRYPOINT``, else
    the first word of ``CMD``), ``CMD``, the ``ENV`` it sets, its ``USER`` and that user's
    uid."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    user: str
    uid: int


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n\s*", " ", text)
    pairs = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, rest = line.partition(" ")
            pairs.append((name.upper(), rest.strip()))
    return pairs


def _exec_form(argument: str) -> list[str]:
    return json.loads(argument) if argument.startswith("[") else ["/bin/sh", "-c", argument]


@pytest.fixture(scope="session")
def image() -> Image:
    """The repository's Dockerfile, read."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    steps = _instructions(text)
    found = dict(steps)
    cmd = _exec_form(found["CMD"])
    entrypoint = _exec_form(found["ENTRYPOINT"]) if "ENTRYPOINT" in found else cmd[:1]
    env = {
        key: value
        for name, argument in steps
        if name == "ENV"
        for key, value in re.findall(r"(\w+)=(\S+)", argument)
    }
    uid = re.search(r"useradd\b[^&\n]*--uid (\d+)", text)
    assert uid is not None, "the Dockerfile's user has no fixed uid"
    return Image(entrypoint, cmd, env, found["USER"], int(uid.group(1)))


def program(command: Sequence[str]) -> list[str]:
    """``command`` as this checkout runs it: ``switchboard`` is this venv's console script
    (``python -m router.cli`` without one)."""
    if command[0] != "switchboard":
        return list(command)
    script = Path(sys.executable).parent / "switchboard"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "router.cli"]
    return [*head, *command[1:]]


def _environment(env: Mapping[str, str]) -> dict[str, str]:
    """This process's variables less any ``SWITCHBOARD_*`` and ``OTEL_*``, then ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "OTEL_"))}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH")) if p)
    return base | dict(env)


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free on 127.0.0.1 now, below the kernel's
    ephemeral range, so that no process binding port 0 meanwhile is given one of them."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        base = random.randrange(10000, low - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise AssertionError(f"no {count} consecutive free ports")


@dataclass
class Served:
    """A running ``switchboard serve``: its process, its log as it comes and its port."""

    proc: asyncio.subprocess.Process
    output: ProcessOutput
    port: int = 0

    async def stop(self, within: float) -> int:
        """SIGTERM, then its exit status, which must come within ``within`` seconds."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"not stopped within {within} s:\n{self.output.text}") from None
        await self.output.task
        return self.proc.returncode or 0


@pytest.fixture
async def run_command(
    tmp_path: Path,
) -> Callable[[Sequence[str], Mapping[str, str]], Awaitable[str]]:
    """Run a one-shot ``switchboard`` command with these variables; its output, once it
    exited 0."""

    async def run(command: Sequence[str], env: Mapping[str, str]) -> str:
        proc = await asyncio.create_subprocess_exec(
            *program(command), env=_environment(env), cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        text = out.decode(errors="replace")
        assert proc.returncode == 0, text
        return text

    return run


@pytest.fixture
async def serve(
    tmp_path: Path,
) -> AsyncIterator[Callable[[Sequence[str], Mapping[str, str]], Awaitable[Served]]]:
    """Start ``switchboard serve`` with these variables (``SWITCHBOARD_PORT=0``: a free port,
    read from its log) and wait until every worker is ready; whatever still runs at the end
    is killed."""
    started: list[Served] = []

    async def start(command: Sequence[str], env: Mapping[str, str]) -> Served:
        proc = await asyncio.create_subprocess_exec(
            *program(command), env=_environment(env), cwd=tmp_path,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        served = Served(proc, ProcessOutput(proc.stderr))
        started.append(served)
        workers = int(env.get("SWITCHBOARD_WORKERS") or 1)
        if workers > 1:
            port = await served.output.wait_for(r"\d+ workers on 127\.0\.0\.1, port (\d+)")
            await served.output.wait_for(rf"all {workers} workers ready")
        else:
            port = await served.output.wait_for(r"Running on http://127\.0\.0\.1:(\d+)")
        served.port = int(port.group(1))
        return served

    yield start
    for served in started:
        if served.proc.returncode is None:
            served.proc.kill()
            await served.proc.wait()
        await served.output.task
