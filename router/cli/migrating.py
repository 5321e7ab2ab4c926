"""The schema step that ``serve`` (its supervisor, before forking) and ``switchboard db`` share:
run the migrations on a database URL, their failures as one line (:mod:`registry.migrations`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from registry.engine import create_engine
from registry.errors import RegistryError
from registry.migrations import MigrationError, Prepared, prepare
from router.cli.errors import CliError
from router.tables import SCHEMA

__all__ = ["on_database", "prepare_schema", "reason", "safe_url"]

_SQLALCHEMY_LINK = re.compile(r"\(Background on this error at: [^)]*\)")

_T = TypeVar("_T")
log = logging.getLogger("switchboard")


def prepare_schema(url: str, failing: str = "cannot start") -> Prepared:
    """Bring the database at ``url`` to this version's schema, under its lock, and log what
    was done; CliError (status 1, the line starting with ``failing``) when it cannot, e.g.
    a newer version's schema."""
    prepared = on_database(url, lambda engine: prepare(engine, SCHEMA), failing)
    if prepared.action != "current":
        log.info(
            "database schema %s: revision %s (was %s)",
            prepared.action,
            prepared.after,
            prepared.before or "none",
        )
    return prepared


def on_database(
    url: str, work: Callable[[AsyncEngine], Awaitable[_T]], failing: str = "cannot start"
) -> _T:
    """``work`` on an engine for ``url``, run in a loop of its own (closed, with the engine's
    connections, before a supervisor forks); failures as CliError, one line: status 2 for
    a URL that cannot be used, 1 for the rest."""
    try:
        engine = create_engine(url)
    except (ArgumentError, ValueError, ImportError, OSError, RegistryError) as exc:
        raise CliError(f"cannot use database {safe_url(url)}: {reason(exc)}", status=2) from None

    async def run() -> _T:
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(run())
    except (RegistryError, MigrationError) as exc:
        raise CliError(f"{failing}: {exc}") from None
    except (SQLAlchemyError, OSError) as exc:
        raise CliError(f"{failing}: database {safe_url(url)}: {reason(exc)}") from None


def safe_url(url: str) -> str:
    """``url`` with its password masked, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(unparsable URL)"


def reason(exc: BaseException) -> str:
    """A one-line description of ``exc`` (the driver's own message for database errors)."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    if isinstance(exc, ImportError):
        text = f"database driver not installed ({exc})"
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    elif isinstance(exc, SQLAlchemyError):
        text = _SQLALCHEMY_LINK.sub("", str(exc)).strip() or type(exc).__name__
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())
