"""One server per port (router/cli/ports.py): the bind probe, the port locks and the claiming
lock, in process, against sockets that hold a port the ways a stranger can."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from router.cli import ports as ports_mod
from router.cli.ports import Ports, lock_directory, probe


@pytest.fixture(autouse=True)
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own lock directory (``$XDG_RUNTIME_DIR/switchboard``)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path / "switchboard"


def _holder(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    reuse_address: bool = False,
    reuse_port: bool = False,
    listen: bool = False,
) -> socket.socket:
    """A stranger's socket on ``host``:``port``: bound, maybe listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if reuse_address:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    sock.bind((host, port))
    if listen:
        sock.listen()
    return sock


def _in_use(call: object, *args: object) -> None:
    with pytest.raises(OSError) as caught:
        call(*args)  # type: ignore[operator]
    assert caught.value.errno == errno.EADDRINUSE


@pytest.mark.parametrize(
    ("reuse_address", "reuse_port", "listen"),
    [
        (False, False, True),  # a plain server
        (True, False, True),  # a server with address reuse (aiohttp, serve --workers 1)
        (False, True, True),  # SO_REUSEPORT, listening: what a second serve would join
        (False, True, False),  # SO_REUSEPORT, merely bound
        (True, True, True),  # serve --workers N's sockets
        (True, True, False),  # a reservation (serve's gRPC and metrics ports)
        (True, False, False),  # bound with address reuse, not listening
        (False, False, False),  # merely bound
    ],
)
def test_the_probe_refuses_a_port_held_any_way(
    reuse_address: bool, reuse_port: bool, listen: bool
) -> None:
    with _holder(reuse_address=reuse_address, reuse_port=reuse_port, listen=listen) as held:
        port = held.getsockname()[1]
        _in_use(probe, "127.0.0.1", port)
        _in_use(probe, "0.0.0.0", port)  # the wildcard overlaps it
        _in_use(probe, "localhost", port)
    probe("127.0.0.1", port)  # free again


def test_a_wildcard_holder_refuses_every_address_and_ipv6_is_apart() -> None:
    with _holder("0.0.0.0", reuse_port=True, listen=True) as held:
        port = held.getsockname()[1]
        _in_use(probe, "127.0.0.1", port)
        _in_use(probe, "0.0.0.0", port)
        if socket.has_ipv6 and _ipv6():
            probe("::1", port)  # our IPv6 sockets are IPV6_V6ONLY: another address family


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6(), reason="no IPv6 loopback")
def test_the_probe_refuses_an_ipv6_port_held() -> None:
    with _holder("::1", reuse_port=True) as held:
        port = held.getsockname()[1]
        _in_use(probe, "::1", port)
        _in_use(probe, "::", port)
        probe("127.0.0.1", port)


def test_connections_left_by_a_server_that_stopped_do_not_hold_its_port() -> None:
    """A restart right after a stop: the connections the server closed first wait in
    ``TIME_WAIT`` on its port, which a bind without address reuse refuses."""
    with _holder(reuse_address=True, listen=True) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server closes first: its side goes to TIME_WAIT
            assert client.recv(1) == b""
    with pytest.raises(OSError, match="in use"), socket.socket() as strict:
        strict.bind(("127.0.0.1", port))  # the leftovers are there
    probe("127.0.0.1", port)
    with Ports("127.0.0.1") as ports, ports.claiming():
        assert ports.listen(port, 2)


def test_port_zero_is_not_probed_and_picks_a_port_nobody_holds() -> None:
    probe("127.0.0.1", 0)
    with _holder(reuse_port=True, listen=True) as held, Ports("127.0.0.1") as ports:
        with ports.claiming():
            sockets = ports.listen(0, 2)
            grpc = ports.reserve(0)
        picked = {sock.getsockname()[1] for sock in sockets}
        assert len(picked) == 1 and held.getsockname()[1] not in picked
        assert grpc.getsockname()[1] not in picked | {held.getsockname()[1]}


def test_a_port_claimed_by_another_serve_of_this_user_is_refused(locks: Path) -> None:
    """The lock decides before anything is bound: a one-process ``serve`` binds late."""
    free = _free_port()
    with Ports("127.0.0.1") as first:
        with first.claiming():
            first.claim(free)  # claimed, not bound (yet)
        probe("127.0.0.1", free)  # the probe alone sees nothing
        with Ports("127.0.0.1") as second, second.claiming():
            _in_use(second.claim, free)
            _in_use(second.listen, free, 2)
        with Ports("localhost") as second:
            _in_use(second.claim, free)  # the same address, by another name
        assert (locks / f"127.0.0.1-{free}.lock").exists()
    with Ports("127.0.0.1") as again:  # released by close(); the file stays, harmless
        again.claim(free)


def test_one_serve_cannot_claim_one_port_twice() -> None:
    """e.g. ``SWITCHBOARD_GRPC_PORT`` equal to the port: refused."""
    free = _free_port()
    with Ports("127.0.0.1") as ports, ports.claiming():
        ports.listen(free, 2)
        _in_use(ports.reserve, free)


def test_a_reservation_is_seen_without_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a lock directory (another user's), the probe still finds another serve's
    gRPC reservation: a bound ``SO_REUSEADDR`` + ``SO_REUSEPORT`` socket, not listening."""
    monkeypatch.setattr(ports_mod, "lock_directory", lambda: None)
    with Ports("127.0.0.1") as first:
        grpc = first.reserve(0)
        port = grpc.getsockname()[1]
        with Ports("127.0.0.1") as second:
            assert second.directory is None
            _in_use(second.reserve, port)
            _in_use(second.listen, port, 2)


def test_the_claiming_lock_is_held_while_claiming(locks: Path) -> None:
    with Ports("127.0.0.1") as ports:
        with (
            ports.claiming(),
            _opened(locks / "bind.lock") as fd,
            pytest.raises(BlockingIOError),
        ):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with _opened(locks / "bind.lock") as fd:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once claimed


def test_the_lock_directory_is_this_users_own(
    locks: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert lock_directory() == locks
    assert locks.stat().st_mode & 0o777 == 0o700
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)  # the directory is someone else's
    assert lock_directory() is None
    assert "no port locks" in caplog.text
    free = _free_port()
    with Ports("127.0.0.1") as first, Ports("127.0.0.1") as second:
        first.claim(free)
        second.claim(free)  # no locks: the probe alone (nothing bound, nothing seen)


def test_without_xdg_runtime_dir_the_locks_are_in_a_per_user_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(ports_mod.tempfile, "tempdir", None)  # read TMPDIR again
    assert lock_directory() == tmp_path / "tmp" / f"switchboard-{os.getuid()}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR)
    try:
        yield fd
    finally:
        os.close(fd)
