"""A graceful stop of ``switchboard serve`` on SIGTERM or SIGINT.

``router.cli.running.run`` turns both signals into a shutdown: it stops listening, lets the
requests on their way in arrive, runs the app's ``on_shutdown`` hooks, waits up to
``shutdown_timeout`` seconds for the requests in progress (the open streams among them) to
finish, cancels the rest, then closes the app's resources.
This module logs that: ``shutting down (draining N streams)`` when it begins, ``stopped`` when
it is over; ``SWITCHBOARD_SHUTDOWN_GRACE`` is the timeout.
"""

from __future__ import annotations

import logging
from typing import Protocol

from aiohttp import web

log = logging.getLogger("switchboard")


class Streams(Protocol):
    """What counts the open streams (``router.forward.relay.Relay``)."""

    open_streams: int


def log_draining(app: web.Application, relay: Streams, grace: float) -> None:
    """Log, when ``app`` starts shutting down, how many streams of ``relay`` it waits for, and
    for how long (``grace`` seconds, the ``shutdown_timeout`` given to the runner)."""

    async def draining(_app: web.Application) -> None:
        streams = relay.open_streams
        if not streams:
            log.info("shutting down (draining 0 streams)")
            return
        log.info(
            "shutting down (draining %d stream%s): up to %g s to finish",
            streams,
            "" if streams == 1 else "s",
            grace,
        )

    app.on_shutdown.append(draining)


def log_stopped() -> None:
    """Log that the server has stopped (after ``running.run`` returned)."""
    log.info("stopped")
