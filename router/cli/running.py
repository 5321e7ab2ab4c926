"""Serving the app until SIGTERM or SIGINT, and stopping without dropping a call on its way in.

This is aiohttp's ``web.run_app`` (its runner, sites and shutdown) with a different start of
the stop. ``run_app`` stops listening and, one turn of the loop later, marks every connection as
closing: from then on aiohttp ignores whatever arrives on it (aiohttp issue 2298), and closes
those with no request in progress. That loses calls a client has every reason to think will be
answered (a ``POST`` is not retried):

- a connection accepted a moment ago whose request has not arrived yet: closed unanswered;
- a request whose head has arrived but whose body has not, all of it: the handler waits for
  the rest until the shutdown's timeout, and the call is cancelled unanswered;
- a keep-alive connection between two calls of a busy client: closed as the client sends its
  next call on it.

With ``--workers`` a reload stops each old worker while the port keeps taking connections (its
replacement shares the listening socket), so every reload lost calls under load (measured in
docs/operations.md, "Stopping").

Here the stop first stops listening (connections still queued go to the processes that share
the socket, or are refused when none does) and answers ``Connection: close`` from then on, then
waits until no connection is expected to send more of a request (``arrivals``: at most
``arrival_wait`` seconds, ``idle_wait`` for connections between keep-alive calls), then shuts
down as ``run_app`` does (``on_shutdown``, up to ``shutdown_timeout`` seconds for the requests
in progress, the cleanup).

While it serves, every answer on a connection it keeps open says for how long it keeps it
idle (``Keep-Alive: timeout=N``, aiohttp's keep-alive timeout), and every answer after which
it closes the connection says ``Connection: close`` (``connection_headers``): once stopping,
and when the request's body has not all arrived (aiohttp would read and drop the rest for
up to 10 s, then close without a word; a client that waits for ``100 Continue`` and got a
final answer instead never sends it). A small body on its way (``Content-Length`` up to
``DRAIN_BYTES``, no ``Expect``) is read to its end first, for up to ``DRAIN_WAIT`` seconds,
so that an answer given before reading it (a 401, say) keeps the connection. A client whose
idle timeout is below ``N`` then never sends a request on a connection the server is
closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import hdrs, web

__all__ = [
    "ARRIVAL_WAIT",
    "CANCEL_WAIT",
    "IDLE_WAIT",
    "arrivals",
    "connection_headers",
    "run",
    "serve_until",
]

log = logging.getLogger("switchboard")

ARRIVAL_WAIT = 1.0
"""Seconds the requests on their way in when the stop begins get to arrive, whole."""
IDLE_WAIT = 0.25
"""Seconds a connection idle between keep-alive requests when the stop begins gets to send its
next request (a busy client sends it within milliseconds of its previous answer)."""
KEEPALIVE_TIMEOUT = 3630
"""Seconds an idle keep-alive connection is kept by default (aiohttp's server's own;
``SWITCHBOARD_KEEPALIVE_TIMEOUT``)."""
DRAIN_BYTES = 65536
"""The largest unread body an early answer's connection waits for (and then is kept)."""
DRAIN_WAIT = 0.5
"""Seconds an early answer waits for such a body's rest (a client sends it at once)."""
CANCEL_WAIT = 5.0
"""Seconds the tasks still running at the end get to finish once cancelled; a task that
ignores its cancellation is logged and left, so that the process ends."""
_POLL = 0.005  # aiohttp says nothing when a request arrives: how often to look
_QUIET_LOOKS = 3  # looks in a row, _POLL apart, that find nothing on its way


def run(
    app: web.Application,
    *,
    host: str | None = None,
    port: int | None = None,
    sock: socket.socket | None = None,
    print: Callable[[str], None],
    arrival_wait: float = ARRIVAL_WAIT,
    idle_wait: float = IDLE_WAIT,
    cancel_wait: float = CANCEL_WAIT,
    keepalive_timeout: int = KEEPALIVE_TIMEOUT,
    **runner_kwargs: Any,
) -> None:
    """Serve ``app`` on ``sock``, or on ``host``:``port``, until SIGTERM or SIGINT, then stop
    (module docstring). ``print`` gets ``run_app``'s banner once the server accepts requests;
    ``keepalive_timeout``: seconds an idle connection is kept (and announced);
    ``runner_kwargs`` go to ``web.AppRunner`` (access log, ``shutdown_timeout``, ...). A signal
    during the start cancels it, and a second signal during the stop ends it at once (the
    requests still in progress and the app's cleanup cut short), as with ``run_app``."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stop = asyncio.Event()
    connection_headers(app, stop, keepalive_timeout)
    runner = web.AppRunner(
        app, handle_signals=False, keepalive_timeout=keepalive_timeout, **runner_kwargs
    )
    serving = False

    def sites() -> list[web.BaseSite]:
        if sock is not None:
            return [web.SockSite(runner, sock)]
        return [web.TCPSite(runner, host, port)]

    def started(text: str) -> None:
        nonlocal serving
        serving = True
        print(text)

    main = loop.create_task(
        serve_until(runner, sites, stop, started, arrival_wait=arrival_wait, idle_wait=idle_wait)
    )

    def on_signal() -> None:
        if stop.is_set():  # a second signal: no more waiting
            log.warning("stopping now: a second signal came while stopping")
            main.cancel()
        stop.set()
        if not serving:
            main.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # Windows: SIGINT is KeyboardInterrupt
            loop.add_signal_handler(sig, on_signal)
    try:
        loop.run_until_complete(main)
    except (KeyboardInterrupt, asyncio.CancelledError):  # during the start, or a second signal
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            _cancel_all(loop, cancel_wait)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            asyncio.set_event_loop(None)


async def serve_until(
    runner: web.AppRunner,
    sites: Callable[[], Sequence[web.BaseSite]],
    stop: asyncio.Event,
    print: Callable[[str], None],
    *,
    arrival_wait: float = ARRIVAL_WAIT,
    idle_wait: float = IDLE_WAIT,
) -> None:
    """Set up ``runner`` (unless it is), start its ``sites``, serve until ``stop`` is set, then
    stop: stop listening, wait for the requests on their way in, clean the runner up. The app
    should answer ``Connection: close`` once ``stop`` is set (``connection_headers``)."""
    if runner.server is None:
        await runner.setup()
    try:
        for site in sites():
            await site.start()
        names = ", ".join(sorted(str(site.name) for site in runner.sites))
        print(f"======== Running on {names} ========\n(Press CTRL+C to quit)")
        await stop.wait()
        for site in list(runner.sites):
            await site.stop()
        if runner.server is not None:
            await arrivals(runner.server, arrival_wait, idle_wait)
    finally:
        await runner.cleanup()


def connection_headers(
    app: web.Application, stop: asyncio.Event, keepalive_timeout: int | None = None
) -> None:
    """Make every answer of ``app`` say what becomes of its connection. Before ``app`` starts.

    ``Connection: close`` (and the connection closed once the answer is sent) once ``stop``
    is set, so that a client's next call opens a new connection, to a process that still
    listens; and for a request whose body has not all arrived (module docstring). Otherwise
    ``Keep-Alive: timeout=<keepalive_timeout>`` (the server's; None: no such header)."""
    announced = f"timeout={keepalive_timeout}" if keepalive_timeout else None

    async def connection(request: web.BaseRequest, response: web.StreamResponse) -> None:
        if not response.keep_alive:
            return  # aiohttp said close (a client's Connection: close, HTTP/1.0, an error)
        if not stop.is_set() and not request.content.is_eof() and _drainable(request):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(DRAIN_WAIT):
                    while await request.content.readany():
                        pass  # small and on its way: read and dropped, the connection kept
        if stop.is_set() or not request.content.is_eof():
            response.force_close()  # the connection closes once the answer is sent
            response.headers[hdrs.CONNECTION] = "close"  # the head was made before this hook
        elif announced is not None:
            response.headers[hdrs.KEEP_ALIVE] = announced

    app.on_response_prepare.append(connection)


def _drainable(request: web.BaseRequest) -> bool:
    """A body the client is sending whole, and small: no ``Expect``, a small length."""
    length = request.content_length
    return hdrs.EXPECT not in request.headers and length is not None and length <= DRAIN_BYTES


async def arrivals(server: web.Server, wait: float, idle_wait: float = IDLE_WAIT) -> int:
    """Wait until no connection of ``server`` is expected to send more of a request, at most
    ``wait`` seconds; the number of connections still expected then (aiohttp closes them).

    Expected: a connection that has sent no whole request head yet, a request whose body has
    not all arrived, and for the first ``idle_wait`` seconds a connection idle between
    keep-alive requests (its client may be sending the next one this very moment).

    A connection accepted just before the server stopped listening joins ``server`` a turn
    or two of the loop later (the transport, then ``connection_made``), and a request whose
    head has just been read is not being handled until the next turn; so the connections are
    looked at until ``_QUIET_LOOKS`` looks in a row, ``_POLL`` s apart, find none expected."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    quiet = 0
    logged = False
    while True:
        idle = loop.time() < start + idle_wait
        expected = sum(1 for handler in server.connections if _expected(handler, idle))
        quiet = 0 if expected else quiet + 1
        if expected and not logged:
            logged = True
            log.info(
                "stopped listening: waiting up to %g s for requests on their way in on %d "
                "connection%s",
                wait,
                expected,
                "" if expected == 1 else "s",
            )
        if quiet >= _QUIET_LOOKS or loop.time() >= start + wait:
            return expected
        await asyncio.sleep(_POLL)


def _expected(handler: web.RequestHandler, idle: bool) -> bool:
    """Whether a connection is open and more of a request is expected on it: it has sent no
    whole request head yet, or the body of the request being handled has not all arrived, or
    (when ``idle``) it is between keep-alive requests.

    aiohttp keeps these private (its connection's request count, current request and whether
    one is in progress); where a version lacks them, nothing is expected (its stop as before)."""
    transport = handler.transport
    if transport is None or transport.is_closing():
        return False
    if getattr(handler, "_request_count", 1) == 0:
        return True
    request = getattr(handler, "_current_request", None)
    if request is not None:
        return not request.content.is_eof()
    return idle and not getattr(handler, "_request_in_progress", True)


def _cancel_all(loop: asyncio.AbstractEventLoop, wait: float) -> None:
    """Cancel the tasks still running and let them end (as ``asyncio.run`` does at its end),
    for at most ``wait`` seconds: one that swallows its cancellation and waits for something
    that will not come must not keep the process alive (it is logged, with where it waits)."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=wait))
    for task in pending:
        log.error("a task did not end within %g s of its cancellation: %r", wait, task)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )
