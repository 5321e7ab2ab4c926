"""Real a2a-sdk 0.3.26 peers for tests: the official 0.3 client and a 0.3 server agent.

The 0.3 SDK cannot share a virtual environment with the 1.x SDK, so both run as scripts
(``tests/peers03/client03.py`` and ``agent03.py``) under the python of their own venv. The
``sdk03_python`` session fixture builds that venv once, in
``${SWITCHBOARD_TEST_CACHE:-~/.cache/switchboard-tests}/a2a-sdk-0.3.26-py<major><minor>``,
and later runs reuse it (a marker file written last says it is complete; an ``fcntl`` lock
keeps parallel test processes from building it at the same time).

- ``run_client03(python, base_url, op, **options)`` yields each JSON line the client prints,
  as it arrives (options map to ``--kebab-case`` flags; see ``client03.py``). The clients of
  a test process all run in one long-lived ``client03.py --serve`` (the SDK imported once,
  not once per call: :class:`Client03Process`).
- ``agent03(python, gated=False)`` runs the echo agent; the yielded :class:`Agent03` has
  ``base_url``, ``release()`` (opens the gate for one waiting task), the agent's log lines
  (``requests``, ``executions``, ``cancels``, ``taps``; ``await wait_for(kind, count)``) and
  ``kill()``. Leave a ``run_client03`` loop early inside ``contextlib.aclosing(...)`` so the
  client is cancelled at once, its connection closed (that is how a test drops one).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import fcntl
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import venv
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SDK03_VERSION = "0.3.26"
SDK03_REQUIREMENTS = (f"a2a-sdk[http-server]=={SDK03_VERSION}", "httpx==0.28.1", "uvicorn==0.54.0")
PEERS_DIR = Path(__file__).resolve().parent
CLIENT03 = PEERS_DIR / "client03.py"
AGENT03 = PEERS_DIR / "agent03.py"
LINE_TIMEOUT = 30.0
_MARKER = ".switchboard-complete"
_CHECK = (
    "import importlib.metadata as m, a2a.client, a2a.server.apps, uvicorn;"
    f"assert m.version('a2a-sdk') == {SDK03_VERSION!r}, m.version('a2a-sdk')"
)


# --- the venv --------------------------------------------------------------------------------


def sdk03_venv_dir() -> Path:
    """Where the 0.3 venv lives (``SWITCHBOARD_TEST_CACHE`` or ``~/.cache/switchboard-tests``)."""
    root = os.environ.get("SWITCHBOARD_TEST_CACHE") or "~/.cache/switchboard-tests"
    major, minor = sys.version_info[:2]
    return Path(root).expanduser() / f"a2a-sdk-{SDK03_VERSION}-py{major}{minor}"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _build(target: Path, python: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    venv.EnvBuilder(with_pip=True, clear=True).create(target)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    steps = ([*pip, "--no-input", *SDK03_REQUIREMENTS], [str(python), "-I", "-c", _CHECK])
    for command in steps:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(
                f"building the a2a-sdk {SDK03_VERSION} test venv at {target} failed:\n"
                f"$ {' '.join(command)}\n{_tail(result.stdout + result.stderr)}"
            )


def ensure_sdk03_python() -> Path:
    """The python of the cached 0.3 venv, built first if it is missing or incomplete."""
    target = sdk03_venv_dir()
    python = target / "bin" / "python"
    marker = target / _MARKER
    wanted = "\n".join(SDK03_REQUIREMENTS) + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text() == wanted and python.exists():
            return python
        _build(target, python)
        marker.write_text(wanted)  # last: its presence means "complete"
    return python


@pytest.fixture(scope="session")
def sdk03_python() -> Path:
    """Path of a python with ``a2a-sdk[http-server]==0.3.26``, httpx and uvicorn (cached venv)."""
    try:
        return ensure_sdk03_python()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.fail(str(exc), pytrace=False)


# --- running the scripts ----------------------------------------------------------------------


def _env() -> dict[str, str]:
    """The environment for the 0.3 scripts: no proxies, nothing pointing at this venv."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in drop and "proxy" not in k.lower()}


def client03_args(options: dict[str, Any]) -> list[str]:
    """Command-line flags for ``client03.py`` from keyword options.

    ``True`` is a bare flag, lists are comma-joined, dicts are JSON (``headers`` becomes one
    ``--header 'Name: value'`` per entry), ``None``/``False`` are left out.
    """
    args: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        if key == "headers":
            for name, header in value.items():
                args += ["--header", f"{name}: {header}"]
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, list | tuple):
            args += [flag, ",".join(value)]
        elif isinstance(value, dict):
            args += [flag, json.dumps(value)]
        else:
            args += [flag, str(value)]
    return args


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await process.wait()


class Client03Process:
    """One long-lived ``client03.py --serve`` process (per test process and python), which
    runs every client a test asks for, many at once. Each test has its own event loop, so the
    process is not an asyncio subprocess: threads read its output and hand each line to the
    loop of the run it belongs to."""

    def __init__(self, python: Path | str) -> None:
        self.process = subprocess.Popen(
            [str(python), "-I", str(CLIENT03), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        self._runs: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]] = {}
        self._lock = threading.Lock()  # the runs
        self._writing = threading.Lock()  # stdin (apart: the reader never waits on a writer)
        self._ids = itertools.count(1)
        self._stderr: collections.deque[str] = collections.deque(maxlen=60)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def start(self, argv: list[str]) -> tuple[int, asyncio.Queue[dict[str, Any]]]:
        """Start a client of ``argv``; its messages arrive on the queue, in this loop."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        with self._lock:
            run_id = next(self._ids)
            self._runs[run_id] = (asyncio.get_running_loop(), queue)
        self._send({"id": run_id, "argv": argv})
        return run_id, queue

    def cancel(self, run_id: int) -> None:
        """Cancel a run (its ``end`` still arrives, once its connections are closed)."""
        self._send({"id": run_id, "cancel": True})

    def forget(self, run_id: int) -> None:
        """Drop a run's queue."""
        with self._lock:
            self._runs.pop(run_id, None)

    def stderr_tail(self) -> str:
        """The process's last lines on stderr."""
        return "\n".join(self._stderr)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        with self._writing:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()

    def _deliver(self, run_id: int, message: dict[str, Any]) -> None:
        with self._lock:
            target = self._runs.get(run_id)
        if target is not None:
            loop, queue = target
            with contextlib.suppress(RuntimeError):  # that test's loop is closed
                loop.call_soon_threadsafe(queue.put_nowait, message)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            message = json.loads(raw)
            self._deliver(message["id"], message)
        with self._lock:
            run_ids = list(self._runs)
        for run_id in run_ids:  # the process ended: every run still going ends with it
            self._deliver(run_id, {"id": run_id, "end": "died"})

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self._stderr.append(raw.decode(errors="replace").rstrip("\n"))

    def stop(self) -> None:
        """End the process (end of input), killed if it does not end at once."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_CLIENTS: dict[str, Client03Process] = {}


def client03_process(python: Path | str) -> Client03Process:
    """This test process's ``client03.py --serve`` for ``python`` (started, or restarted after
    it died, on first use; ended when the test process exits)."""
    client = _CLIENTS.get(str(python))
    if client is None or not client.alive():
        client = _CLIENTS[str(python)] = Client03Process(python)
    return client


@atexit.register
def _stop_clients() -> None:
    for client in _CLIENTS.values():
        client.stop()


async def run_client03(
    python: Path | str,
    base_url: str,
    op: str,
    *,
    line_timeout: float = LINE_TIMEOUT,
    **options: Any,
) -> AsyncIterator[dict[str, Any]]:
    """Run the 0.3 client; yield each printed JSON line (event, result or ``{"error"}``) live.

    The client runs in this test process's long-lived ``client03.py --serve``
    (:func:`client03_process`), as one command line would. It starts at the first ``anext``
    (a generator is lazy: to act while it waits for its first line, run
    ``asyncio.ensure_future(anext(gen))``). Closing the generator early
    (``contextlib.aclosing``) cancels the client and returns once its connections are
    closed. A client that ends non-zero without a JSON error line raises.
    """
    client = client03_process(python)
    run_id, queue = client.start([base_url, op, *client03_args(options)])
    ended = False
    saw_error = False
    try:
        while True:
            try:
                message = await asyncio.wait_for(queue.get(), line_timeout)
            except TimeoutError:
                raise TimeoutError(f"client03 {op}: no line within {line_timeout}s") from None
            if "end" in message:
                ended = True
                code = message["end"]
                if code == "died" or (code != 0 and not saw_error):
                    raise RuntimeError(
                        f"client03 {op} ended with {code}:\n{_tail(client.stderr_tail())}"
                    )
                return
            item = message["line"]
            saw_error = saw_error or "error" in item
            yield item
    finally:
        if not ended and client.alive():
            client.cancel(run_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LINE_TIMEOUT):
                    while "end" not in await queue.get():
                        pass  # its connections are closed once it says it ended
        client.forget(run_id)


async def client03_lines(
    python: Path | str, base_url: str, op: str, **options: Any
) -> list[dict[str, Any]]:
    """All the lines of one client run."""
    return [item async for item in run_client03(python, base_url, op, **options)]


async def cancel_and_resubscribe03(
    python: Path | str,
    base_url: str,
    *,
    transport: str = "HTTP+JSON",
    subscribed: Callable[[], Awaitable[Any]] | None = None,
) -> list[dict[str, Any]]:
    """The 0.3 client's cancel and resubscribe on a task left working (a gated agent): a
    stream is started and dropped after its task, the client resubscribes (``subscribed``
    waits until the agent sees it; without it, the resubscription's first event, the task,
    says so), cancels the task (asserted canceled) and reads the resubscription to its end;
    returns what the resubscription yielded (its last event is the canceled status)."""
    options = {"transport": transport}
    stream = run_client03(python, base_url, "stream", text="echo left working", **options)
    async with contextlib.aclosing(stream):
        first = await anext(stream)
    assert first.get("kind") == "task", first
    task_id = first["id"]
    resubscribed = run_client03(python, base_url, "resubscribe", task_id=task_id, **options)
    async with contextlib.aclosing(resubscribed):
        pending = asyncio.ensure_future(anext(resubscribed))
        lines: list[dict[str, Any]] = []
        if subscribed is None:
            lines.append(await pending)
            assert lines[0].get("id") == task_id, lines
        else:
            await subscribed()
        canceled = await client03_lines(python, base_url, "cancel", task_id=task_id, **options)
        assert canceled[-1].get("status", {}).get("state") == "canceled", canceled
        if subscribed is not None:
            lines.append(await pending)
        lines += [line async for line in resubscribed]
    assert lines[-1].get("status", {}).get("state") == "canceled", lines
    return lines


@dataclass
class Agent03:
    """A running 0.3 echo agent process."""

    process: asyncio.subprocess.Process
    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[dict[str, Any]] = field(default_factory=list)
    taps: list[dict[str, Any]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self, count: int = 1) -> None:
        """Open the gate for ``count`` waiting tasks (one stdin line each)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n" * count)

    def kill(self) -> None:
        """Kill the agent at once (e.g. mid-stream)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def wait_for(self, kind: str, count: int = 1) -> list[dict[str, Any]]:
        """Wait until ``count`` log lines of ``kind`` (requests/executions/cancels/taps)."""
        entries: list[dict[str, Any]] = getattr(self, kind)
        async with asyncio.timeout(LINE_TIMEOUT):
            while True:
                self._changed.clear()
                if len(entries) >= count:
                    break
                await self._changed.wait()
        return entries

    async def _read_log(self) -> None:
        assert self.process.stdout is not None
        kinds = {
            "REQUEST": self.requests,
            "EXECUTE": self.executions,
            "CANCEL": self.cancels,
            "TAP": self.taps,
        }
        async for raw in self.process.stdout:
            kind, _, payload = raw.decode().rstrip("\n").partition(" ")
            if kind in kinds:
                kinds[kind].append(json.loads(payload))
                self._changed.set()


@contextlib.asynccontextmanager
async def agent03(
    python: Path | str,
    gated: bool = False,
    *,
    port: int = 0,
    name: str | None = None,
    echo_parts: bool = False,
    sdk_final: bool = False,
    rest: bool = False,
    streaming: bool = True,
) -> AsyncIterator[Agent03]:
    """Run the 0.3 echo agent on 127.0.0.1; stop it at exit (``echo_parts``: file and data
    parts come back in an artifact ``parts``; ``sdk_final``: input-required is sent with the
    SDK's default ``final: false``; ``rest``: it serves HTTP+JSON only; ``streaming=False``:
    its card says it does not stream, and it refuses streaming methods)."""
    args = ["--port", str(port)] + (["--gated"] if gated else [])
    args += ["--name", name] if name else []
    args += ["--echo-parts"] if echo_parts else []
    args += ["--sdk-final"] if sdk_final else []
    args += ["--rest"] if rest else []
    args += [] if streaming else ["--no-streaming"]
    process = await asyncio.create_subprocess_exec(
        str(python),
        "-I",
        str(AGENT03),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    assert process.stdout is not None and process.stderr is not None
    stderr = asyncio.ensure_future(process.stderr.read())
    agent = Agent03(process)
    reader: asyncio.Task[None] | None = None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), LINE_TIMEOUT)
        if not line.startswith(b"LISTENING "):
            await _stop(process)
            raise RuntimeError(f"agent03 did not start:\n{_tail((await stderr).decode())}")
        agent.base_url = line.decode().split()[1]
        reader = asyncio.create_task(agent._read_log())
        yield agent
    finally:
        if process.stdin is not None and process.returncode is None:
            with contextlib.suppress(ConnectionError):
                process.stdin.close()  # end of input stops the server
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            await _stop(process)
        if reader is not None:
            await reader
        stderr.cancel()
