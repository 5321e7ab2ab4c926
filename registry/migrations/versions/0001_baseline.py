"""Baseline: the schema of Switchboard at commit 979ef09.

Upgrade: creates every table of 979ef09 (:mod:`registry.migrations.baseline`) that is
missing and the catalog counters; a database of an earlier version (no revision recorded)
is brought to 979ef09's schema as 979ef09 did at start: nullable columns added, the old ID
tables moved (:mod:`registry.migrations.legacy`). Nothing is lost.

Downgrade: refused. Below the baseline there is no schema to go back to; to start over,
keep a backup and use a new database.
"""

from __future__ import annotations

import logging

from alembic import op

from registry.migrations.errors import MigrationError
from registry.migrations.legacy import create_baseline

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

log = logging.getLogger("switchboard.migrations")


def upgrade() -> None:
    moved = create_baseline(op.get_bind())
    for table, rows in moved.items():
        if rows:
            log.info("moved %d row(s) of the retired table %s", rows, table)


def downgrade() -> None:
    raise MigrationError(
        "0001 is the baseline: there is no older schema to go back to (to start over, keep "
        "a backup and use a new database)",
        code="below_baseline",
    )
