"""The operator's migrations (``switchboard db``): upgrade or downgrade to a revision, and
the database's revision, each under the schema lock (:mod:`.locking`) in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncEngine

from registry.migrations import revisions
from registry.migrations.baseline import NAMES as BASELINE_NAMES
from registry.migrations.legacy import OLD_NAMES
from registry.migrations.locking import locked
from registry.migrations.startup import VERSION_TABLE


@dataclass(frozen=True)
class Status:
    """A database's revision (None: none recorded), whether it has Switchboard's tables,
    and this version's head."""

    revision: str | None
    has_tables: bool
    head: str

    @property
    def known(self) -> bool:
        """Whether this version's scripts have the revision (False: a newer version's)."""
        return self.revision is None or revisions.known(self.revision)


async def status(engine: AsyncEngine) -> Status:
    """The database's revision and whether it has any table of Switchboard's."""
    async with engine.connect() as conn:
        return await conn.run_sync(_status)


async def upgrade(
    engine: AsyncEngine, target: str = "head", extra: Sequence[str | Path] = ()
) -> tuple[str | None, str | None]:
    """Upgrade to ``target``; the revisions before and after."""
    return await _migrate(engine, revisions.upgrade, target, extra)


async def downgrade(
    engine: AsyncEngine, target: str, extra: Sequence[str | Path] = ()
) -> tuple[str | None, str | None]:
    """Downgrade to ``target`` (what each step loses: its script's docstring); the revisions
    before and after."""
    return await _migrate(engine, revisions.downgrade, target, extra)


async def _migrate(
    engine: AsyncEngine, step: Any, target: str, extra: Sequence[str | Path]
) -> tuple[str | None, str | None]:
    async with locked(engine) as conn:

        def run(sync: Any) -> tuple[str | None, str | None]:
            before = revisions.current(sync)
            step(sync, target, extra)
            return before, revisions.current(sync)

        return await conn.run_sync(run)


def _status(conn: Any) -> Status:
    names = set(inspect(conn).get_table_names())
    revision = revisions.current(conn) if VERSION_TABLE in names else None
    return Status(revision, not names.isdisjoint(BASELINE_NAMES | OLD_NAMES), revisions.head())
