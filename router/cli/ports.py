"""One server per port: ``serve`` refuses a host and port that another process holds.

``serve --workers N`` binds one ``SO_REUSEPORT`` socket per worker (fair accept, see
:mod:`router.cli.workers`), and holds the gRPC port and each worker's metrics port with a
bound, not listening ``SO_REUSEPORT`` socket that the workers' servers join (so a reload's new
worker joins the port while the old one still serves). ``SO_REUSEPORT`` lets any socket of the
same user join, listening or not: a second ``serve`` would bind a port the first one holds and
take a share of its connections. So ``serve`` (with any number of workers) *claims* each port
before it binds it (:class:`Ports`), and an address already in use stops it with exit status 1
(``cannot start: HOST:PORT: address already in use``):

1. **A lock per address and port**: ``flock`` on ``<dir>/<address>-<port>.lock``,
   non-blocking, held until ``serve`` ends. Held already means that another ``serve`` of this
   user has the port, whatever it has bound so far (a one-process ``serve`` binds only once
   its app has started; workers bind their metrics ports when they start). The kernel drops a
   lock when its process dies, so the file a crash leaves is harmless; files are never
   removed (removing one that another process has open would split the lock in two). ``<dir>``
   is ``$XDG_RUNTIME_DIR/switchboard``, else ``switchboard-<uid>`` in the temporary directory,
   made with mode 0700. When it cannot be made or belongs to another user there are no locks
   (a warning says so) and the probe decides alone: a process of another user cannot join
   these sockets anyway (the kernel shares ``SO_REUSEPORT`` within one user).
2. **An exclusive bind probe** of each address the host resolves to: a socket without
   ``SO_REUSEPORT`` is bound to it, then closed. Linux refuses such a bind (``EADDRINUSE``)
   while any socket holds an overlapping address (the wildcard overlaps every address; IPv6
   sockets are ``IPV6_V6ONLY``, as ``serve``'s are), listening or merely bound, unless both
   set ``SO_REUSEADDR`` and the other does not listen. Hence three steps: bound without
   ``SO_REUSEADDR``, nobody holds the address. Refused with it too, someone listens there or
   holds it without address reuse: taken. Else only non-listening sockets with address reuse
   hold it: the connections of a server that stopped a moment ago (``TIME_WAIT``: a restart
   must work) or a reservation (such as another ``serve``'s gRPC port before its workers
   listen). Connections show in ``/proc/net/tcp`` and ``tcp6``, reservations do not: with no
   connection on the port there, it is taken (where ``/proc`` is missing, connections are
   assumed).
3. **One claim at a time**: a ``serve`` claims and binds its ports under a per-user lock
   (``<dir>/bind.lock``, blocking, held for the few system calls that takes), so that two
   ``serve`` started at the same moment do not both probe before either has bound, even on
   different but overlapping hosts (``0.0.0.0`` and ``127.0.0.1``), which step 1's locks do
   not share. Exactly one of them binds; the other then finds its sockets.

Port ``0`` (any free port) is not claimed: the kernel picks a port that no socket holds (it
does not share a port it picks), and the first socket bound keeps it for the others.

Claims are made once, at start: a reload (``SIGHUP``) or a worker's restart reuses the sockets
the supervisor holds and probes nothing (it would find them). What stays open: a program of
the same user that binds with ``SO_REUSEPORT`` without claiming (an older Switchboard) still
joins, as the kernel allows; so does one that binds in the moment between a probe and the
bind."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from router.cli.workers import listen_sockets, reserve_port

try:
    import fcntl
except ImportError:  # Windows: no flock (and no workers)
    fcntl = None  # type: ignore[assignment]

__all__ = ["Ports", "lock_directory", "probe"]

log = logging.getLogger("switchboard")

_LISTEN = "0A"  # a listening socket's state in /proc/net/tcp


def _in_use() -> OSError:
    return OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))


def _addresses(host: str, port: int) -> list[tuple[socket.AddressFamily, tuple]]:
    """Every address ``host``:``port`` resolves to for a server (socket.gaierror if none)."""
    found: dict[tuple, socket.AddressFamily] = {}
    for family, _, _, _, address in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        found.setdefault(address, family)
    return [(family, address) for address, family in found.items()]


def _binds(family: socket.AddressFamily, address: tuple, reuse_address: bool) -> None:
    """Bind a socket without ``SO_REUSEPORT`` to ``address`` and close it (OSError if not)."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)


def _connections(port: int) -> bool:
    """Whether a TCP socket other than a listener has local port ``port``
    (``/proc/net/tcp*``); True where neither table can be read."""
    suffix, readable = f":{port:04X}", False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as rows:
                entries = [row.split() for row in rows.readlines()[1:]]
        except OSError:
            continue
        readable = True
        if any(e[1].endswith(suffix) and e[3] != _LISTEN for e in entries):
            return True
    return not readable


def probe(host: str, port: int) -> None:
    """Raise OSError (``EADDRINUSE``) when another socket holds ``host``:``port``, listening or
    merely bound (module docstring, step 2); the OSError a bind would raise for an address
    that cannot be bound at all. Port 0: nothing to probe."""
    if port == 0:
        return
    for family, address in _addresses(host, port):
        try:
            _binds(family, address, reuse_address=False)
            continue  # nobody holds it
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
        _binds(family, address, reuse_address=True)  # refused: a listener, or no reuse
        if not _connections(port):
            raise _in_use()  # a reservation: bound, not listening, invisible in /proc


def lock_directory() -> Path | None:
    """Where this user's port locks are (module docstring, step 1), made if missing; None
    when it cannot be made or is not this user's own directory."""
    if fcntl is None:
        return None
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    uid = os.getuid()
    if runtime:
        path = Path(runtime, "switchboard")
    else:
        path = Path(tempfile.gettempdir(), f"switchboard-{uid}")
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as error:
        log.warning("no port locks: cannot make %s (%s)", path, error.strerror)
        return None
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        log.warning("no port locks: %s is not a directory of this user", path)
        return None
    return path


class Ports:
    """The ports of one ``serve`` on ``host``, claimed against other processes (module
    docstring): claim or bind each inside :meth:`claiming`; :meth:`close` (or the end of a
    ``with`` block) closes the sockets and releases the locks."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.directory = lock_directory()
        self.sockets: list[socket.socket] = []
        """The sockets bound by :meth:`listen` and :meth:`reserve`."""
        self._locks: list[int] = []

    def __enter__(self) -> Ports:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def claiming(self) -> Iterator[None]:
        """Hold this user's claiming lock (step 3): one ``serve`` claims and binds at a time."""
        fd = self._open("bind.lock")
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # others hold it for a few system calls
            yield
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock

    def claim(self, port: int) -> None:
        """Lock ``port`` on each address of the host (step 1), then probe it (step 2);
        OSError (``EADDRINUSE``) when another process holds it. Port 0: nothing to claim."""
        if port == 0:
            return
        for _, address in _addresses(self.host, port):
            self._lock(f"{quote(str(address[0]), safe='.')}-{port}.lock")
        probe(self.host, port)

    def listen(self, port: int, count: int) -> list[socket.socket]:
        """Claim ``port``, then bind ``count`` workers' listening sockets to it
        (:func:`~router.cli.workers.listen_sockets`)."""
        self.claim(port)
        sockets = listen_sockets(self.host, port, count)
        self.sockets.extend(sockets)
        return sockets

    def reserve(self, port: int) -> socket.socket:
        """Claim ``port``, then hold it with a bound, not listening ``SO_REUSEPORT`` socket
        that the workers' servers join (:func:`~router.cli.workers.reserve_port`)."""
        self.claim(port)
        sock = reserve_port(self.host, port)
        self.sockets.append(sock)
        return sock

    def close(self) -> None:
        """Close the sockets and release the locks."""
        for sock in self.sockets:
            sock.close()
        for fd in self._locks:
            os.close(fd)
        self.sockets.clear()
        self._locks.clear()

    def _open(self, name: str) -> int | None:
        """The lock file ``name``, open; None without a lock directory, or if it cannot be
        opened (said in a warning)."""
        if self.directory is None:
            return None
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            return os.open(self.directory / name, flags, 0o600)
        except OSError as error:
            log.warning("no port lock: cannot open %s (%s)", self.directory / name, error)
            return None

    def _lock(self, name: str) -> None:
        fd = self._open(name)
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _in_use() from None
        except BaseException:
            os.close(fd)
            raise
        self._locks.append(fd)
