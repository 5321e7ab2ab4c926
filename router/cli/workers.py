"""``switchboard serve --workers N``: a supervisor that pre-binds the port and forks N workers.

Why a pre-binding supervisor rather than each worker binding with ``SO_REUSEPORT`` itself:

- **One bind, one error.** A port in use, a bad host or port ``0`` (any free port) are settled
  once, before any worker starts; every worker then serves the same port. The supervisor
  claims each port first (:mod:`router.cli.ports`): ``SO_REUSEPORT`` would let a second
  ``serve`` join a port this one holds, or this one join another's.
- **Fair accept.** On Linux the supervisor binds one ``SO_REUSEPORT`` socket per worker to
  that port, so the kernel spreads new connections evenly over the workers' own accept queues
  (one socket shared by all workers lets the busiest event loop take most connections). A
  worker that dies leaves its socket open in the supervisor: connections queued there wait
  for its replacement instead of being reset. Elsewhere (macOS, BSD, where ``SO_REUSEPORT``
  does not balance) all workers share one socket.
- **Portability**: POSIX ``fork``; Windows has none and runs one process.

Workers are forked from the supervisor after the configuration is checked and before any event
loop, thread or database connection exists; each runs the ordinary server on its socket
(``router.cli.running.run(sock=...)``). The supervisor forwards ``SIGTERM``/``SIGINT`` (workers
sit in their own process group, so Ctrl-C reaches them once, through it; a second one stops
them at once), waits for them and exits 0; ``SIGHUP`` re-reads the settings and replaces the
workers one by one, each old worker stopping (gracefully) once its replacement is ready. A
worker that dies unexpectedly is restarted after 0.5 s, doubled per consecutive failure up to
30 s; after ``MAX_FAILURES`` consecutive failures (or at once, for a configuration error: exit
status 2) the supervisor stops the others and exits 1. Once every worker has first said it is
ready, the supervisor logs ``all N workers ready`` (once). A worker whose supervisor dies
(``SIGKILL``) sees its pipe close and stops too."""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from router.cli.errors import CliError

__all__ = [
    "MAX_FAILURES",
    "Supervisor",
    "Worker",
    "listen_sockets",
    "reserve_port",
]

log = logging.getLogger("switchboard")

MAX_FAILURES = 5
"""Consecutive failures of one worker (deaths before it was ready) before the supervisor gives
up and exits 1."""
_CONFIG_ERROR = 2  # a worker's exit status for a configuration error: no retry
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
READY = b"r"
"""A worker to its supervisor: it accepts requests."""
CHANGED = b"c"
"""A worker to its supervisor, relayed to every other worker: look at the shared board."""


@dataclass
class Worker:
    """What a worker process is given: its index among ``count``, the listening socket, and
    the pipes to its supervisor (readiness and writes out, the supervisor's life and the other
    workers' writes in)."""

    index: int
    count: int
    sock: socket.socket
    ready_fd: int
    parent_fd: int

    def ready(self) -> None:
        """Tell the supervisor this worker accepts requests."""
        self._send(READY)

    def tell(self) -> None:
        """Tell the other workers (through the supervisor) to look at the shared board:
        a write was counted or applied (:mod:`router.coherence`)."""
        self._send(CHANGED)

    def _send(self, byte: bytes) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone, or the pipe is full
            os.write(self.ready_fd, byte)

    def watch_parent(self, stop: Callable[[], None], told: Callable[[], None]) -> None:
        """In the running event loop: call ``told`` when another worker told (see
        :meth:`tell`), ``stop`` when the supervisor dies."""
        import asyncio

        loop = asyncio.get_running_loop()
        os.set_blocking(self.parent_fd, False)

        def readable() -> None:
            try:
                data = os.read(self.parent_fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                told()
                return
            loop.remove_reader(self.parent_fd)
            log.warning("the supervisor is gone: stopping")
            stop()

        loop.add_reader(self.parent_fd, readable)


def _balanced() -> bool:
    """Whether ``SO_REUSEPORT`` spreads connections over the sockets (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def _address(host: str, port: int) -> tuple[socket.AddressFamily, tuple]:
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return family, address


def _bound(family: socket.AddressFamily, address: tuple, reuse_port: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def listen_sockets(host: str, port: int, count: int, backlog: int = 128) -> list[socket.socket]:
    """Listening sockets on ``host``:``port`` for ``count`` workers: one per worker with
    ``SO_REUSEPORT`` where it balances (Linux), else one shared socket. Port ``0``: the first
    socket picks a free port, the others join it. OSError when it cannot be bound."""
    family, address = _address(host, port)
    balanced = _balanced() and count > 1
    sockets: list[socket.socket] = []
    try:
        for _ in range(count if balanced else 1):
            sock = _bound(family, address, balanced)
            sockets.append(sock)
            address = sock.getsockname()  # port 0: the port the first one got
            sock.listen(backlog)
            sock.set_inheritable(True)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def reserve_port(host: str, port: int) -> socket.socket:
    """A bound, not listening ``SO_REUSEPORT`` socket on ``host``:``port`` (``0``: a free
    port), held by the supervisor so that the workers' gRPC servers (``grpc.so_reuseport``)
    share that port and no other program takes it. CliError where ``SO_REUSEPORT`` is missing."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise CliError(
            "SWITCHBOARD_GRPC_PORT with several workers needs SO_REUSEPORT, which this system "
            "lacks: use --workers 1",
            status=2,
        )
    family, address = _address(host, port)
    return _bound(family, address, True)


@dataclass
class _Child:
    worker: Worker
    pid: int
    ready_r: int
    parent_w: int
    ready: bool = False
    gone: bool = False  # its ready pipe closed: it is exiting
    replaced_by: int | None = None  # during a reload: the pid of its replacement

    @property
    def fds(self) -> tuple[int, int]:
        """The supervisor's ends of its pipes."""
        return self.ready_r, self.parent_w


@dataclass
class Supervisor:
    """Runs ``count`` workers on ``sockets`` (one each, or one shared) until told to stop.

    ``prepare()`` returns the function a forked worker runs (its exit status); it is called once
    at start and again on ``SIGHUP`` (to re-read the settings: a CliError keeps the workers).
    """

    count: int
    sockets: list[socket.socket]
    prepare: Callable[[], Callable[[Worker], int]]
    backoff: float = 0.5
    """Seconds before the first restart of a worker that died; doubled per failure in a row."""
    max_backoff: float = 30.0
    reaped: Callable[[int], None] | None = None
    """Called with the pid of each worker once it has exited (e.g. to drop its live gauges)."""
    children: dict[int, _Child] = field(default_factory=dict)
    failures: list[int] = field(default_factory=list)
    _restart_at: dict[int, float] = field(default_factory=dict)
    _all_ready: bool = False
    _stopping: bool = False
    _status: int = 0

    def run(self) -> int:
        """Fork the workers, supervise them; the exit status: 0 after SIGTERM/SIGINT, 2 when
        a worker stopped for a configuration error (it said why), 1 when one kept failing."""
        self.failures = [0] * self.count
        start = self.prepare()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        old = {sig: signal.signal(sig, lambda *_: None) for sig in _FORWARDED}
        signal.set_wakeup_fd(wake_w)
        try:
            for index in range(self.count):
                self._spawn(index, start, wake=(wake_r, wake_w))
            while self.children or (self._restart_at and not self._stopping):
                for sig in self._wait(wake_r):
                    start = self._on_signal(sig, start, (wake_r, wake_w))
                self._reap()
                self._restarts(start, (wake_r, wake_w))
        finally:
            signal.set_wakeup_fd(-1)
            for sig, handler in old.items():
                signal.signal(sig, handler)
            os.close(wake_r)
            os.close(wake_w)
            for child in self.children.values():  # only on an unexpected error
                _kill(child.pid, signal.SIGKILL)
        return self._status

    def _wait(self, wake_r: int) -> list[int]:
        """Block until a signal, a readiness byte or the next restart is due; the signals."""
        timeout = None
        if self._restart_at and not self._stopping:
            timeout = max(0.0, min(self._restart_at.values()) - time.monotonic())
        pipes = {c.ready_r: c for c in self.children.values() if not c.gone}
        try:
            readable, _, _ = select.select([wake_r, *pipes], [], [], timeout)
        except InterruptedError:
            return []
        signals: list[int] = []
        for fd in readable:
            if fd == wake_r:
                signals.extend(os.read(wake_r, 512))
            elif data := os.read(fd, 512):
                if READY in data and not pipes[fd].ready:
                    self._on_ready(pipes[fd])
                if CHANGED in data:
                    self._relay(pipes[fd])
            else:
                pipes[fd].gone = True
        return signals

    def _relay(self, sender: _Child) -> None:
        """Pass a worker's :data:`CHANGED` on to every other worker (a full pipe already
        holds one for it: nothing is lost)."""
        for child in self.children.values():
            if child is not sender and not child.gone:
                with contextlib.suppress(OSError):
                    os.write(child.parent_w, CHANGED)

    def _on_signal(
        self, sig: int, start: Callable[[Worker], int], wake: tuple[int, int]
    ) -> Callable[[Worker], int]:
        if sig in (signal.SIGTERM, signal.SIGINT):
            if self._stopping:  # a second signal: each worker stops at once
                log.warning("stopping %d workers now: a second signal", len(self.children))
            else:
                log.info("stopping %d workers", len(self.children))
            self._stopping = True
            self._restart_at.clear()
            for child in self.children.values():
                _kill(child.pid, signal.SIGTERM)
        elif sig == signal.SIGHUP and not self._stopping:
            try:
                start = self.prepare()
            except CliError as error:
                log.error("reload refused, the workers keep running: %s", error)
                return start
            log.info("reloading: replacing %d workers", len(self.children))
            for child in list(self.children.values()):
                if child.replaced_by is None:
                    new = self._spawn(child.worker.index, start, wake)
                    child.replaced_by = new.pid
        return start

    def _on_ready(self, child: _Child) -> None:
        child.ready = True
        self.failures[child.worker.index] = 0
        ready = {c.worker.index for c in self.children.values() if c.ready}
        if not self._all_ready and len(ready) == self.count:
            self._all_ready = True
            log.info("all %d workers ready", self.count)  # once: what a launcher waits for
        for old in self.children.values():  # the worker it replaces (a reload's)
            if old is not child and old.worker.index == child.worker.index and old.replaced_by:
                _kill(old.pid, signal.SIGTERM)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            if self.reaped is not None:
                self.reaped(pid)
            for fd in child.fds:
                os.close(fd)
            code = os.waitstatus_to_exitcode(status)
            if self._stopping or child.replaced_by is not None:
                continue
            self._failed(child, code)

    def _failed(self, child: _Child, code: int) -> None:
        index = child.worker.index
        if not child.ready:
            self.failures[index] += 1
        else:
            self.failures[index] = 1
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        if code == _CONFIG_ERROR or self.failures[index] >= MAX_FAILURES:
            log.error(
                "worker %d (pid %d) %s: giving up, stopping the others", index, child.pid, how
            )
            self._status, self._stopping = (2 if code == _CONFIG_ERROR else 1), True
            self._restart_at.clear()
            for other in self.children.values():
                _kill(other.pid, signal.SIGTERM)
            return
        delay = min(self.max_backoff, self.backoff * 2 ** (self.failures[index] - 1))
        log.warning("worker %d (pid %d) %s: restarting in %g s", index, child.pid, how, delay)
        self._restart_at[index] = time.monotonic() + delay

    def _restarts(self, start: Callable[[Worker], int], wake: tuple[int, int]) -> None:
        now = time.monotonic()
        for index, when in list(self._restart_at.items()):
            if when <= now and not self._stopping:
                del self._restart_at[index]
                self._spawn(index, start, wake)

    def _spawn(self, index: int, start: Callable[[Worker], int], wake: tuple[int, int]) -> _Child:
        sock = self.sockets[index % len(self.sockets)]
        ready_r, ready_w = os.pipe()
        parent_r, parent_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            _reset_signals()
            os.close(ready_r)
            os.close(parent_w)
            for fd in (*wake, *(fd for c in self.children.values() for fd in c.fds)):
                os.close(fd)
            for other in self.sockets:
                if other is not sock:
                    other.close()
            _worker_main(start, Worker(index, self.count, sock, ready_w, parent_r))
        os.close(ready_w)
        os.close(parent_r)
        os.set_blocking(parent_w, False)  # a relay never waits for a busy worker
        child = _Child(Worker(index, self.count, sock, -1, -1), pid, ready_r, parent_w)
        self.children[pid] = child
        log.info("worker %d started (pid %d)", index, pid)
        return child


def _worker_main(start: Callable[[Worker], int], worker: Worker) -> None:
    """A forked worker's life: its own process group and signal handlers, then ``start``;
    the process ends here with its exit status (the supervisor's frames never resume)."""
    code = 1
    try:
        os.setpgid(0, 0)  # Ctrl-C goes to the supervisor, which forwards SIGTERM once
        code = start(worker)
    except CliError as error:
        print(f"switchboard: worker {worker.index}: {error}", file=sys.stderr)
        code = error.status
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # what a normal exit runs (e.g. flushing trace exports)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reset_signals() -> None:
    signal.set_wakeup_fd(-1)
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_DFL)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError as error:
        if error.errno != errno.ESRCH:
            raise
