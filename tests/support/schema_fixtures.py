"""The fixture databases of earlier versions (``tests/fixtures/schema/``, made by its
``make.py`` with each version's own code): one per schema revision, loaded into a test's
database (a copy of the SQLite file, or the PostgreSQL dump run in the test's schema)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from tests.support.helpers import FIXTURES

SCHEMA_FIXTURES = FIXTURES / "schema"
REVISIONS = sorted(path.stem for path in SCHEMA_FIXTURES.glob("*.json"))
"""Every version a fixture was made of (``979ef09``, ...): each test over them runs for all."""

ALIAS = "v01-fixture-task"  # the v0.1 client's own task ID (fill.py)


def backend(db_url: str) -> str:
    """``sqlite`` or ``postgresql``."""
    return make_url(db_url).get_backend_name()


def load_fixture(revision: str, db_url: str) -> dict[str, Any]:
    """Put version ``revision``'s fixture database at ``db_url`` (empty); what it holds."""
    kind = backend(db_url)
    if kind == "sqlite":
        shutil.copyfile(SCHEMA_FIXTURES / f"{revision}.db", Path(make_url(db_url).database or ""))
    else:
        dump = (SCHEMA_FIXTURES / f"{revision}.postgresql.sql").read_text()
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(dump)  # type: ignore[call-overload]  # a script: no parameters
    expected: dict[str, Any] = json.loads((SCHEMA_FIXTURES / f"{revision}.json").read_text())
    return expected[kind]
