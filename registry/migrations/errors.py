"""The errors of schema migrations, each one line for the command line. Not
:class:`registry.errors.RegistryError`s (this package imports nothing of the registry's):
:meth:`registry.store.Store.create_schema` turns them into one, with the same code."""

from __future__ import annotations

from typing import Any


class MigrationError(Exception):
    """A schema change that cannot be made; nothing was changed. ``code``: a stable name."""

    def __init__(self, message: str, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details or {}


class SchemaTooNew(MigrationError):
    """The database is at a revision this version does not know: a newer one migrated it."""

    def __init__(self, revision: str, needs: str) -> None:
        super().__init__(
            f"the database schema is at revision {revision}, newer than this Switchboard, "
            f"which needs revision {needs}: run the newer version (or, with it, "
            f"`switchboard db downgrade {needs}` after a backup)",
            code="schema_too_new",
            details={"revision": revision, "needs": needs},
        )
        self.revision = revision
        self.needs = needs


class UnknownRevision(MigrationError):
    """A revision asked for that the scripts do not have."""

    def __init__(self, revision: str, revisions: list[str]) -> None:
        super().__init__(
            f"no revision {revision!r}: the revisions are {', '.join(revisions)}",
            code="unknown_revision",
            details={"revision": revision},
        )
        self.revision = revision
