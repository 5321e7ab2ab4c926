"""Alembic, configured in code: the revision scripts of ``versions/`` (package data; no
``alembic.ini``, no ``env.py``), run on a connection the caller holds the schema lock on
(:mod:`registry.migrations.locking`) inside its transaction, so a migration is all or nothing
on both databases.

Alembic is synchronous: these functions take the synchronous connection an async one lends
(``await conn.run_sync(upgrade, "head")``), the documented recipe for async engines; the
engine's SQLite pragmas, WAL and ``BEGIN IMMEDIATE`` (:mod:`registry.engine`) hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError

from registry.migrations.errors import MigrationError, SchemaTooNew, UnknownRevision

HERE = Path(__file__).parent
VERSIONS = HERE / "versions"


@dataclass(frozen=True)
class Revision:
    """One revision script: its id, the one before it, its first docstring line."""

    id: str
    down: str | None
    doc: str


@cache
def _scripts(extra: tuple[str, ...]) -> ScriptDirectory:
    return ScriptDirectory(str(HERE), version_locations=[str(VERSIONS), *extra])


def scripts(extra: Iterable[str | Path] = ()) -> ScriptDirectory:
    """The revision scripts (read once per process); ``extra`` adds version directories
    (tests add a revision of their own)."""
    return _scripts(tuple(str(path) for path in extra))


def head(extra: Iterable[str | Path] = ()) -> str:
    """The newest revision of the scripts (one head: the history is a line)."""
    heads = scripts(extra).get_heads()
    if len(heads) != 1:
        raise MigrationError(
            f"the revision scripts have {len(heads)} heads: {heads}", code="several_heads"
        )
    return heads[0]


def history(extra: Iterable[str | Path] = ()) -> list[Revision]:
    """Every revision, oldest first."""
    found = [
        Revision(s.revision, _single(s.down_revision), (s.doc or "").strip().splitlines()[0])
        for s in scripts(extra).walk_revisions()
    ]
    return found[::-1]


def known(revision: str, extra: Iterable[str | Path] = ()) -> bool:
    """Whether ``revision`` is one of the scripts' (False for a newer Switchboard's)."""
    try:
        return scripts(extra).get_revision(revision) is not None
    except CommandError:
        return False


def current(conn: Any) -> str | None:
    """The database's revision (None: no ``alembic_version`` table, or no row in it)."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(conn: Any, target: str = "head", extra: Sequence[str | Path] = ()) -> None:
    """Run the upgrades from the database's revision to ``target`` in the caller's
    transaction."""
    script = scripts(extra)
    _check(conn, script, target, extra)
    _run(conn, script, target, lambda rev, _ctx: script._upgrade_revs(target, rev))


def downgrade(conn: Any, target: str, extra: Sequence[str | Path] = ()) -> None:
    """Run the downgrades from the database's revision to ``target`` (older) in the caller's
    transaction."""
    script = scripts(extra)
    _check(conn, script, target, extra)
    _run(conn, script, target, lambda rev, _ctx: script._downgrade_revs(target, rev))


def stamp(conn: Any, target: str, extra: Sequence[str | Path] = ()) -> None:
    """Record ``target`` as the database's revision without running anything (the tables
    were just made from the models, which are that revision)."""
    script = scripts(extra)
    _run(conn, script, target, lambda rev, _ctx: script._stamp_revs(target, rev))


def _check(conn: Any, script: ScriptDirectory, target: str, extra: Sequence[str | Path]) -> None:
    """Refuse a database at a revision the scripts do not have, and an unknown target."""
    now = current(conn)
    if now is not None and not known(now, extra):
        raise SchemaTooNew(now, head(extra))
    if target not in ("head", "base") and not known(target, extra):
        raise UnknownRevision(target, [r.id for r in history(extra)])


def _run(conn: Any, script: ScriptDirectory, target: str, step: Any) -> None:
    config = Config()
    config.set_main_option("script_location", str(HERE))
    with EnvironmentContext(config, script, fn=step, destination_rev=target) as env:
        env.configure(connection=conn, target_metadata=None)
        with env.begin_transaction():  # the caller's transaction: no commit of its own
            env.run_migrations()


def _single(down: Any) -> str | None:
    if isinstance(down, tuple | list):
        return ",".join(down)
    return down
