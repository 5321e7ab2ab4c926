"""``switchboard serve``: check the configuration, then run the server until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import signal
import socket
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from registry.api import SETTINGS
from registry.errors import RegistryError
from registry.settings import CONFIG_VARIABLE, ConfigFileError, Settings
from router.cli.demo import DEMO_NAMES, DEMO_URLS, demo_agents, parse_demo_ports, ready_lines
from router.cli.errors import CliError
from router.cli.logs import LOG_LEVELS, configure_logging
from router.cli.migrating import prepare_schema
from router.cli.migrating import reason as _reason
from router.cli.migrating import safe_url as _safe_url
from router.cli.ports import Ports
from router.cli.running import run as run_server
from router.cli.shutdown import log_draining, log_stopped
from router.cli.workers import Supervisor, Worker
from router.coherence.board import Board
from router.coherence.notify import new_origin
from router.cpus import available_cpus
from router.observe import multiprocess
from router.observe.logformat import ACCESS_LOGGER, RequestAccessLogger

_DATABASES = ("sqlite", "postgresql")
T = TypeVar("T")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` to the top-level ``commands``."""
    serve = commands.add_parser("serve", help="run Switchboard")
    serve.add_argument("--host", help="address to bind (SWITCHBOARD_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (SWITCHBOARD_PORT, default 8080)")
    serve.add_argument("--database-url", help="SWITCHBOARD_DATABASE_URL")
    serve.add_argument("--seeds", action="append", help="seed file to load (repeatable)")
    serve.add_argument(
        "--admin-token",
        help="SWITCHBOARD_ADMIN_TOKEN; prefer the variable: other users can see "
        "command-line arguments (ps)",
    )
    serve.add_argument(
        "--read-token",
        help="SWITCHBOARD_READ_TOKEN; prefer the variable: other users can see "
        "command-line arguments (ps)",
    )
    serve.add_argument("--allow-networks", help="SWITCHBOARD_ALLOW_NETWORKS (CIDRs)")
    serve.add_argument(
        "--demo", action="store_true", help="also start the demo agents and register them"
    )
    serve.add_argument(
        "--demo-ports",
        help="with --demo: the demo agents' ports A,B,C (currency, translate, caption) or a "
        "start port (default: free ports)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        help="processes serving the port (SWITCHBOARD_WORKERS; default: the CPUs available, "
        "1 with --demo)",
    )
    serve.add_argument(
        "--log-level",
        help="DEBUG, INFO (default), WARNING, ERROR (over SWITCHBOARD_LOG_LEVEL)",
    )
    serve.set_defaults(func=cmd_serve)


def _check_tracing() -> None:
    """What :func:`_configure_tracing` would refuse, refused before any worker is forked (the
    exporter's thread it starts is stopped again: a fork copies no threads)."""
    from router.tracing.setup import TracingConfigError, configure

    try:
        provider = configure(install=False)
    except TracingConfigError as error:
        raise CliError(f"cannot export traces: {error}", status=2) from None
    if provider is not None:
        provider.shutdown()


def _configure_tracing() -> None:
    """Install the OpenTelemetry SDK when the ``OTEL_*`` variables ask for it; exit status
    2 with one line when they ask for what cannot be done."""
    from router.tracing.setup import TracingConfigError, configure

    try:
        configure()
    except TracingConfigError as error:
        raise CliError(f"cannot export traces: {error}", status=2) from None


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted: one process, or a supervisor and ``--workers`` worker
    processes on one port (:mod:`router.cli.workers`).

    Everything that can be checked without starting (settings, log level, seed files, the
    database URL and driver) is checked first: exit status 2 with one line. Failures that only
    show at startup (database unreachable, port in use) give exit status 1 with one line.
    """
    if args.log_level is not None and args.log_level.upper() not in LOG_LEVELS:
        raise CliError(
            f"invalid --log-level {args.log_level!r}: use one of {', '.join(LOG_LEVELS)}",
            status=2,
        )
    settings = _checked_settings(args)
    count = _worker_count(args, settings)
    configure_logging(settings.log_level, settings.log_format)
    if count == 1:
        with _claimed(settings):
            return _serve(args, settings, None)
    return _supervise(args, settings, count)


def _checked_settings(args: argparse.Namespace) -> Settings:
    """The settings of ``args`` over the environment, checked as far as can be without
    starting (CliError, status 2)."""
    overrides: dict[str, Any] = {
        key: value
        for key, value in (
            ("host", args.host),
            ("port", args.port),
            ("database_url", args.database_url),
            ("admin_token", args.admin_token),
            ("read_token", args.read_token),
            ("allow_networks", args.allow_networks),
            ("workers", args.workers),
            ("log_level", args.log_level),
        )
        if value is not None
    }
    settings = load_settings(overrides)
    if args.demo_ports:
        parse_demo_ports(args.demo_ports)
    if args.demo_ports and not args.demo:
        raise CliError("--demo-ports needs --demo", status=2)
    if args.seeds:
        settings = settings.model_copy(update={"seeds": [*settings.seeds, *args.seeds]})
    if args.demo:
        settings = _demo_settings(settings)
    _check_seed_files(settings.seeds)
    _check_database_url(settings.database_url)
    return settings


def _worker_count(args: argparse.Namespace, settings: Settings) -> int:
    """``--workers`` / ``SWITCHBOARD_WORKERS``, else the CPUs available (1 with ``--demo``,
    and where there is no ``fork``)."""
    if args.demo:
        if settings.workers not in (None, 1):
            raise CliError("--demo runs one worker: drop --workers", status=2)
        return 1
    if settings.workers is not None:
        if settings.workers > 1 and not hasattr(os, "fork"):
            raise CliError("--workers needs fork(), which this system lacks: use 1", status=2)
        return settings.workers
    return available_cpus() if hasattr(os, "fork") else 1


def _supervise(args: argparse.Namespace, settings: Settings, count: int) -> int:
    """Bind the port(s), then run ``count`` workers under a supervisor."""
    _check_shared_database(settings.database_url)
    _check_tracing()  # the configuration first, then the database, the ports, the schema
    _check_database(settings)  # once, before any worker: a bad database is no reason to retry
    log = logging.getLogger("switchboard")
    ports = Ports(settings.host)  # claimed against other processes (router.cli.ports)
    try:
        with ports.claiming():
            sockets = _bind(settings, settings.port, lambda port: ports.listen(port, count))
            grpc = None
            if settings.grpc_port is not None:
                grpc = _bind(settings, settings.grpc_port, ports.reserve)
            for port in _metrics_ports(settings, count):  # each worker's exporter joins one
                _bind(settings, port, ports.reserve)
        prepare_schema(settings.database_url)  # once, under its lock: workers read the revision
    except BaseException:
        ports.close()
        raise
    grpc_port = grpc.getsockname()[1] if grpc is not None else None
    log.info(
        "%d workers on %s, port %d (%s)", count, settings.host, sockets[0].getsockname()[1],
        "a socket each, SO_REUSEPORT" if len(sockets) > 1 else "one shared socket",
    )  # fmt: skip

    board = Board(2 * count + 8)  # the workers' writes (replacements during a reload too)
    origin = new_origin()  # this serve's name in PostgreSQL notifications, in every worker

    def prepare() -> Callable[[Worker], int]:
        fresh = _checked_settings(args)  # SIGHUP: the config file and variables read again
        held = {"grpc_port": grpc_port, "metrics_port": settings.metrics_port}  # bound at start
        worker_settings = fresh.model_copy(update={"workers": count, **held})

        def start(worker: Worker) -> int:
            return _serve(args, _for_worker(worker_settings, worker.index), worker, (board, origin))

        return start

    metric_files = multiprocess.make_directory()  # for /metrics on the main port, summed
    metrics_reaped = multiprocess.process_dead(metric_files)

    def reaped(pid: int) -> None:
        metrics_reaped(pid)
        board.release(pid)  # no write waits for a dead worker

    try:
        status = Supervisor(count, sockets, prepare, reaped=reaped).run()
    finally:
        multiprocess.remove_directory(metric_files)
        ports.close()
    if status == 2:
        return 2  # a worker's configuration error: the worker said which
    if status:
        raise CliError("workers keep failing: stopped (see the log above)")
    log_stopped()
    return 0


@contextlib.contextmanager
def _claimed(settings: Settings) -> Iterator[None]:
    """The ports of a one-process ``serve`` claimed against other processes until it ends
    (:mod:`router.cli.ports`); it binds them itself once its app has started."""
    ports = Ports(settings.host)
    try:
        with ports.claiming():
            for port in (settings.port, settings.grpc_port, *_metrics_ports(settings, 1)):
                if port is not None:
                    _bind(settings, port, ports.claim)
        yield
    finally:
        ports.close()


def _metrics_ports(settings: Settings, count: int) -> list[int]:
    """The ports of ``count`` workers' ``/metrics`` (``SWITCHBOARD_METRICS_PORT`` + index);
    none for port 0 (a free port each)."""
    if not (settings.metrics and settings.metrics_port):
        return []
    if settings.metrics_port + count - 1 > 65535:
        raise CliError(
            f"SWITCHBOARD_METRICS_PORT={settings.metrics_port} with {count} workers needs ports "
            "beyond 65535",
            status=2,
        )
    return list(range(settings.metrics_port, settings.metrics_port + count))


def _bind(settings: Settings, port: int, bind: Callable[[int], T]) -> T:
    """``bind(port)``, its failure as one line (CliError, status 1)."""
    try:
        return bind(port)
    except socket.gaierror as exc:
        raise CliError(f"cannot start: host {settings.host!r}: {_reason(exc)}") from None
    except OSError as exc:
        reason = _reason(exc)
        raise CliError(
            f"cannot start: {settings.host}:{port}: {reason[:1].lower()}{reason[1:]}"
        ) from None


def _check_shared_database(url: str) -> None:
    """Workers share the database: an in-memory SQLite database would be one per worker."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    memory = not parsed.database or parsed.database == ":memory:"
    if parsed.get_backend_name() == "sqlite" and (memory or "memory" in str(parsed.query)):
        raise CliError(
            "an in-memory SQLite database cannot be shared by several workers: use a file "
            "(sqlite:///./switchboard.db) or --workers 1",
            status=2,
        )


def _for_worker(settings: Settings, index: int) -> Settings:
    """Worker ``index``'s settings: ``SWITCHBOARD_METRICS_PORT`` + ``index`` (each worker is
    its own exporter; ``0`` stays a free port each)."""
    if settings.metrics_port:
        return settings.model_copy(update={"metrics_port": settings.metrics_port + index})
    return settings


def _check_database(settings: Settings) -> None:
    """Connect to the database once, the way the app does (driver import, SQLite directory
    and file), before any worker starts: what would stop every worker alike is one line,
    status 2 for the configuration, 1 for an unreachable database."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from registry.engine import create_engine

    try:
        engine = create_engine(settings.database_url)
    except OSError as exc:  # the SQLite file's directory could not be created
        raise CliError(
            f"cannot use database {_safe_url(settings.database_url)}: "
            f"cannot create directory {_reason(exc)}",
            status=2,
        ) from None
    except (SQLAlchemyError, ImportError, RegistryError) as exc:
        raise CliError(
            f"cannot use database {_safe_url(settings.database_url)}: {_reason(exc)}", status=2
        ) from None
    _check_sqlite_file(settings.database_url)

    async def ping() -> None:
        try:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        finally:
            await engine.dispose()

    try:
        asyncio.run(ping())  # its loop and connections are gone before the workers fork
    except (SQLAlchemyError, OSError) as exc:
        raise CliError(
            f"cannot start: database {_safe_url(settings.database_url)}: {_reason(exc)}"
        ) from None


def _serve(
    args: argparse.Namespace,
    settings: Settings,
    worker: Worker | None,
    shared: tuple[Board, str] | None = None,
) -> int:
    """Run one server process (the only one, or ``worker`` sharing the supervisor's board and
    origin) until it is stopped."""
    # the server's imports are only needed here
    from sqlalchemy.exc import SQLAlchemyError

    from router.app import Siblings, collect_young_every, create_app, freeze_long_lived
    from router.transport.routes import ROUTER

    if worker is not None:
        _worker_metrics(settings)
    _configure_tracing()  # OTEL_EXPORTER_OTLP_ENDPOINT: traces exported (docs/tracing.md)
    siblings = Siblings(shared[0], worker.tell, shared[1]) if worker and shared else None
    try:
        app = create_app(settings, siblings)  # the database engine (driver import, SQLite dir)
    except OSError as exc:  # the SQLite file's directory could not be created
        raise CliError(
            f"cannot use database {_safe_url(settings.database_url)}: "
            f"cannot create directory {_reason(exc)}",
            status=2,
        ) from None
    except (SQLAlchemyError, ImportError) as exc:
        raise CliError(
            f"cannot use database {_safe_url(settings.database_url)}: {_reason(exc)}", status=2
        ) from None
    _check_sqlite_file(settings.database_url)
    if args.demo:
        demo_ports = parse_demo_ports(args.demo_ports) if args.demo_ports else {}
        app.cleanup_ctx.append(demo_agents({n: 0 for n in DEMO_NAMES} | demo_ports))
    log_draining(app, app[ROUTER].relay, settings.shutdown_grace)
    app.on_startup.append(freeze_long_lived)  # after the catalog, indexes and model load
    collect_young_every(settings.gc_threshold)

    log = logging.getLogger("switchboard")
    if worker is None or worker.index == 0:
        _warnings(settings, log)
    _use_uvloop(log)
    where: dict[str, Any] = {"host": settings.host, "port": settings.port}
    if worker is not None:
        where = {"sock": worker.sock}
        app.on_startup.append(lambda app: _watch(app, worker))
    try:
        run_server(
            app,
            **where,
            print=lambda text: _ready(app, text, log, worker),
            access_log=logging.getLogger(ACCESS_LOGGER),
            access_log_class=RequestAccessLogger,  # the request's id on its access log line
            handler_cancellation=True,  # a client that goes away closes its upstream stream
            shutdown_timeout=settings.shutdown_grace,  # open streams' time to finish
            keepalive_timeout=settings.keepalive_timeout,  # announced as Keep-Alive: timeout=N
        )
    except SQLAlchemyError as exc:
        raise CliError(
            f"cannot start: database {_safe_url(settings.database_url)}: {_reason(exc)}"
        ) from None
    except socket.gaierror as exc:
        raise CliError(f"cannot start: host {settings.host!r}: {_reason(exc)}") from None
    except (OSError, RegistryError) as exc:
        raise CliError(f"cannot start: {_reason(exc)}") from None
    if worker is None:
        log_stopped()
    return 0


def _worker_metrics(settings: Settings) -> None:
    """A worker serving ``/metrics`` on the main port writes its metrics to the supervisor's
    directory, so that the one that answers a scrape adds up all of them; one with its own
    metrics port (or none) keeps them in memory."""
    if settings.metrics and settings.metrics_port is None and multiprocess.ENV in os.environ:
        multiprocess.enable()
    else:
        os.environ.pop(multiprocess.ENV, None)


async def _watch(app: web.Application, worker: Worker) -> None:
    """Stop this worker (as SIGTERM would) when its supervisor dies; look at the board of
    writes when another worker says so."""
    from router.transport.fresh import COHERENCE

    worker.watch_parent(lambda: os.kill(os.getpid(), signal.SIGTERM), app[COHERENCE].on_ping)


def _warnings(settings: Settings, log: logging.Logger) -> None:
    """Log what the operator should know about these settings (once, not per worker)."""
    if not settings.admin_token and settings.client_auth == "none":
        log.warning("SWITCHBOARD_ADMIN_TOKEN is not set: the admin API is read-only")
    if settings.client_auth == "none" and not _loopback(settings.host):
        log.warning(
            "!!! SWITCHBOARD_CLIENT_AUTH=none while listening on %s: anyone who reaches this "
            "port may call every agent and read every task; set SWITCHBOARD_CLIENT_AUTH "
            "(docs/security.md) !!!",
            settings.host,
        )


def _ready(
    app: web.Application, text: str, log: logging.Logger, worker: Worker | None = None
) -> None:
    """Once the server accepts requests: log aiohttp's line, print the URLs to use (once:
    the first worker), tell the supervisor."""
    line = text.splitlines()[0].strip("= ")
    if worker is not None:
        line = f"worker {worker.index} (pid {os.getpid()}): {line}"
        worker.ready()
    log.info(line)
    if worker is not None and worker.index != 0:
        return
    url = re.search(r"https?://\S+", line)
    if url is None:
        return
    base, console = url.group(0).rstrip("/"), app[SETTINGS].ui
    for shown in ready_lines(base, app.get(DEMO_URLS, {}), console=console):
        print(shown, flush=True)


def load_settings(overrides: dict[str, Any] | None = None) -> Settings:
    """The settings: ``overrides`` (flags) over ``SWITCHBOARD_*`` variables over the
    ``SWITCHBOARD_CONFIG`` file. CliError (status 2, one line) for a bad file or value."""
    try:
        return Settings(**(overrides or {}))
    except ConfigFileError as exc:
        raise CliError(str(exc), status=2) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["loc"] else e["msg"]
            for e in exc.errors()
        )
        config = os.environ.get(CONFIG_VARIABLE)
        source = f" (flags, SWITCHBOARD_* variables, config file {config})" if config else ""
        raise CliError(f"invalid settings{source}: {problems}", status=2) from None


def _use_uvloop(log: logging.Logger) -> None:
    """Run the server on uvloop when it is installed (a dependency on CPython, not Windows):
    a faster event loop for the router's many small reads and writes."""
    try:
        import uvloop
    except ImportError:
        log.info("event loop: asyncio (uvloop is not installed)")
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    log.info("event loop: uvloop %s", uvloop.__version__)


def _check_seed_files(paths: Sequence[str]) -> None:
    """Read and validate every seed file now, so a bad one stops ``serve`` before it starts."""
    from registry.seedfile import load_seed_file

    for path in paths:
        try:
            load_seed_file(path)
        except RegistryError as exc:
            raise CliError(str(exc), status=2) from None


def _check_database_url(url: str) -> None:
    """Parse the database URL and check that it names a supported database."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from registry.engine import async_url

    try:
        backend = make_url(async_url(url)).get_backend_name()
    except (ArgumentError, ValueError):
        raise CliError(
            "invalid database URL (SWITCHBOARD_DATABASE_URL or --database-url): expected e.g. "
            "sqlite:///./switchboard.db or postgresql://user:pass@host:5432/db",
            status=2,
        ) from None
    if backend not in _DATABASES:
        raise CliError(
            f"unsupported database {backend!r} in {_safe_url(url)}: "
            "use sqlite:///PATH or postgresql://...",
            status=2,
        )


def _loopback(host: str) -> bool:
    """Whether ``host`` (the bind address) only listens on the loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_sqlite_file(url: str) -> None:
    """Open a SQLite database file once with the standard library before starting.

    A file that cannot be opened or is no database is then a configuration error (status 2)
    instead of a startup failure; and aiosqlite, when its connection fails while the server
    stops, can print a traceback from its worker thread.
    """
    import sqlite3

    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return
    if database.startswith("file:") or parsed.query.get("uri"):
        return  # a SQLite URI filename: leave it to the server
    path = Path(database)
    try:
        connection = sqlite3.connect(path, timeout=5)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise CliError(
            f"cannot open SQLite database {database}: {_reason(exc)}", status=2
        ) from None
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise CliError(
            f"cannot write SQLite database {database}: no write permission on the file or its "
            "directory",
            status=2,
        )


def _demo_settings(settings: Settings) -> Settings:
    """Settings for ``--demo``: 127.0.0.1 allowed, the embedding model fetched at start if it
    is missing (routing by meaning, no extra step). The demo agents are registered from the
    packaged ``seeds/demo.toml`` at their actual URLs (:mod:`router.cli.demo`)."""
    loopback = ipaddress.ip_network("127.0.0.1/32")  # the demo agents' address, nothing more
    networks = list(settings.allow_networks)
    if loopback not in networks:
        networks.append(loopback)
    return settings.model_copy(update={"allow_networks": networks, "model_fetch": True})
