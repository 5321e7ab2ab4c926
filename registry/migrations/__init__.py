"""Schema migrations with Alembic: one database holds the registry's and the router's tables,
and every change to them is a revision script in ``versions/`` (``README.md`` says how to
write one).

- The baseline, ``0001``, is the schema of Switchboard at commit 979ef09
  (:mod:`.baseline`); a database without a recorded revision (979ef09 or earlier) is adopted
  by it (:mod:`.legacy`: the ad-hoc start-up steps of before, kept there only).
- Every start checks the revision (:func:`prepare`, :mod:`.startup`): at :data:`HEAD` that is
  one read; an empty database gets the tables and the stamp; an older one is upgraded under
  a database lock (:mod:`.locking`), once however many processes start together; a newer one
  (unknown revision) is refused (:class:`SchemaTooNew`, a :class:`MigrationError`).
- ``switchboard db upgrade|downgrade|current`` (:mod:`.commands`, :mod:`.revisions`).

**Rolling upgrades: expand, then contract.** Every revision keeps the code of the version
before it working on the new schema, so replicas can be replaced one at a time: add tables,
nullable columns (or with a server default), indexes; backfill. Never rename or drop what
the previous version reads or writes, nor add a constraint it would break: that is a later
revision ("contract"), shipped once no replica of the version that used it runs. An older
replica refuses to *start* on a revision it does not know rather than guess (a running one
goes on, the schema being a superset of its own).

This package imports no router code (the registry never imports the router): revisions
name tables and columns with ``sqlalchemy`` and ``alembic.op`` only.
"""

from __future__ import annotations

from registry.migrations.errors import MigrationError, SchemaTooNew, UnknownRevision
from registry.migrations.startup import HEAD, HEAD_TABLES, Prepared, prepare, read_revision

__all__ = [
    "HEAD",
    "HEAD_TABLES",
    "MigrationError",
    "Prepared",
    "SchemaTooNew",
    "UnknownRevision",
    "prepare",
    "read_revision",
]
