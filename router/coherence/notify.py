"""Writes announced between replicas on PostgreSQL: ``NOTIFY`` after a write, ``LISTEN`` in
every process.

The channel is ``switchboard:<schema>`` (the schema the database URL's ``search_path``
selects: replicas of one deployment share it, other deployments in the same database do not),
the payload the writing ``serve``'s origin (:func:`new_origin`), so that the workers of the writing
``serve`` itself, which the board keeps in step (:mod:`router.coherence.board`), skip it.

The listening connection is one plain psycopg connection per process, opened at start and
opened again after a failure (backing off up to :data:`MAX_BACKOFF` seconds). Nothing depends
on it for correctness: the poll (``SWITCHBOARD_CATALOG_SYNC_INTERVAL``) still runs, and a
notification lost while the connection was down is made up for by one sync when it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["MAX_BACKOFF", "Announcer", "libpq_url", "new_origin"]

log = logging.getLogger(__name__)

MAX_BACKOFF = 10.0
"""Seconds between attempts to reopen the listening connection, at most."""
_PREFIX = "switchboard:"


def new_origin() -> str:
    """A name for one ``serve`` in announcements (its supervisor's pid and random bytes):
    made once by the supervisor for all its workers, or by a process serving alone."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def libpq_url(url: str) -> str:
    """The database URL as libpq reads it (no SQLAlchemy driver name)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Announcer:
    """``NOTIFY`` after each write; ``LISTEN`` for the other replicas' (see the module docs)."""

    def __init__(self, url: str, engine: AsyncEngine, heard: Callable[[], None], me: str) -> None:
        """``heard`` is called (in the event loop) for each write another ``serve`` announced,
        and once after the connection is reopened; ``me`` is this ``serve``'s origin."""
        self._url = libpq_url(url)
        self._engine = engine
        self._heard = heard
        self._me = me
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        """Set while the listening connection is open (tests wait for it)."""
        self.heard = 0
        """Announcements of other ``serve``s received."""
        self.opened = 0
        """Times the listening connection was opened."""
        self.changed = asyncio.Condition()
        """Notified when the connection opens or drops (tests wait on it)."""

    async def announce(self) -> None:
        """Tell the other replicas that a write committed (a failure is logged: they see it
        at their next poll)."""
        try:
            async with self._engine.connect() as conn:
                await conn.execute(
                    text("SELECT pg_notify(:prefix || current_schema(), :me)"),
                    {"prefix": _PREFIX, "me": self._me},
                )
                await conn.commit()
        except Exception:
            log.warning("could not announce a write to the other replicas", exc_info=True)

    async def start(self) -> None:
        """Listen in the background."""
        self._task = asyncio.create_task(self._listen())

    async def close(self) -> None:
        """Stop listening."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        import psycopg  # the PostgreSQL driver: only a PostgreSQL deployment gets here

        backoff, first = 0.5, True
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True
                ) as conn:
                    cursor = await conn.execute("SELECT current_schema()")
                    row = await cursor.fetchone()
                    channel = _PREFIX + (row[0] if row and row[0] else "public")
                    await conn.execute(f'LISTEN "{channel.replace(chr(34), "")}"')
                    self.listening.set()
                    self.opened += 1
                    async with self.changed:
                        self.changed.notify_all()
                    backoff = 0.5
                    if not first:
                        self._heard()  # what was announced while the connection was down
                    first = False
                    async for note in conn.notifies():
                        if note.payload != self._me:
                            self.heard += 1
                            self._heard()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.listening.clear()
                async with self.changed:
                    self.changed.notify_all()
                log.warning(
                    "listening for other replicas' writes failed (%s: %s): again in %g s; "
                    "the poll goes on meanwhile",
                    type(exc).__name__,
                    exc,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)
