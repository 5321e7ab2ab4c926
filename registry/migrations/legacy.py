"""What the baseline revision does: create 979ef09's schema (:mod:`.baseline`), and bring a
database an earlier version made to it, as 979ef09 itself did at every start.

Before Alembic, each start ran two ad-hoc steps; they live on here, in the baseline only
(a database that has a revision never runs them again):

- ``Store.create_schema`` created missing tables and added every *nullable* column a newer
  version had introduced (``ALTER TABLE ... ADD COLUMN``); a missing non-nullable column
  stopped the start (``schema_outdated``): such a database cannot be upgraded.
- ``router/ids/migrate.py`` moved the ID tables of earlier versions into today's, in the
  anonymous owner scope, each old table dropped once copied:
  ``router_tasks`` -> ``router_task_entries`` (rows the task list lacks, same IDs: clients'
  IDs keep working; the ``owner`` column's index too), ``router_contexts`` ->
  ``router_context_entries``, ``router_task_alias_entries`` then ``router_task_aliases`` ->
  ``router_task_alias_bindings`` (the first wins where both bind one alias, as lookups did).

Both run in the migration's one transaction, under the schema lock.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    MetaData,
    Table,
    and_,
    exists,
    insert,
    inspect,
    literal_column,
    null,
    or_,
    select,
    text,
)

from registry.migrations.baseline import COUNTERS, METADATA, NAMES
from registry.migrations.errors import MigrationError

OLD_TASKS = "router_tasks"
OLD_CONTEXTS = "router_contexts"
OLD_ALIASES = ("router_task_alias_entries", "router_task_aliases")  # the first one wins
OLD_NAMES = frozenset((OLD_TASKS, OLD_CONTEXTS, *OLD_ALIASES))
"""The ID tables of versions before 979ef09."""


def create_baseline(conn: Any) -> dict[str, int]:
    """Create the tables of 979ef09 that are missing; in a database of an earlier version,
    add its missing nullable columns and move its old ID tables; the counters. Returns the
    rows moved per old table."""
    existing = set(inspect(conn).get_table_names())
    METADATA.create_all(conn, checkfirst=True)
    moved: dict[str, int] = {}
    if existing & (NAMES | OLD_NAMES):
        old = [table for table in METADATA.sorted_tables if table.name in existing]
        add_nullable_columns(conn, old)
        missing = missing_columns(conn, old)
        if missing:
            raise MigrationError(
                f"the database was created by a Switchboard too old to upgrade (it lacks "
                f"{missing[0]}): start with a new database",
                code="schema_outdated",
                details={"missing_columns": missing},
            )
        moved = move_id_tables(conn)
    seed_counters(conn)
    return moved


def seed_counters(conn: Any) -> None:
    """The ``catalog_state`` counters, where missing (0)."""
    have = {row[0] for row in conn.execute(text("SELECT key FROM catalog_state"))}
    for key in COUNTERS:
        if key not in have:
            conn.execute(
                text("INSERT INTO catalog_state (key, value) VALUES (:key, 0)"), {"key": key}
            )


def add_nullable_columns(conn: Any, tables: list[Table]) -> None:
    """Add every nullable column of ``tables`` the database lacks."""
    inspector = inspect(conn)
    compiler = conn.dialect.ddl_compiler(conn.dialect, None)
    for table in tables:
        have = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have or not column.nullable or column.primary_key:
                continue
            spec = compiler.get_column_specification(column)
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {spec}"))


def missing_columns(conn: Any, tables: list[Table]) -> list[str]:
    """``table.column`` for every column of ``tables`` the database lacks."""
    inspector = inspect(conn)
    missing = []
    for table in tables:
        have = {column["name"] for column in inspector.get_columns(table.name)}
        missing += [f"{table.name}.{c.name}" for c in table.columns if c.name not in have]
    return missing


def move_id_tables(conn: Any) -> dict[str, int]:
    """Move every old ID table (see the module docs); the rows copied per old table."""
    moved = {OLD_TASKS: _retire_tasks(conn)}
    tasks = METADATA.tables["router_task_entries"]
    for index in tasks.indexes:
        if [c.name for c in index.columns] == ["owner"]:
            index.create(conn, checkfirst=True)
    moved[OLD_CONTEXTS] = _retire_contexts(conn)
    for name in OLD_ALIASES:
        moved[name] = _retire_aliases(conn, name)
    return moved


def _old(conn: Any, name: str) -> Table | None:
    if not inspect(conn).has_table(name):
        return None
    return Table(name, MetaData(), autoload_with=conn)


def _retire_tasks(conn: Any) -> int:
    """``router_tasks`` into the task list (the anonymous scope: the owner is NULL)."""
    old = _old(conn, OLD_TASKS)
    if old is None:
        return 0
    new: Any = METADATA.tables["router_task_entries"]
    names = [c.name for c in new.columns]
    same_task = and_(
        new.c.agent_id == old.c.agent_id, new.c.upstream_task_id == old.c.upstream_task_id
    )
    missing = ~exists().where(or_(same_task, new.c.task_id == old.c.task_id))
    # a column an old table may lack (all nullable) is copied as NULL
    columns = [old.c[n] if n in old.c else null().label(n) for n in names]
    return _copy(conn, old, insert(new).from_select(names, select(*columns).where(missing)))


def _retire_contexts(conn: Any) -> int:
    """``router_contexts`` into ``router_context_entries``, owner ``""``."""
    old = _old(conn, OLD_CONTEXTS)
    if old is None:
        return 0
    new: Any = METADATA.tables["router_context_entries"]
    taken = exists().where(  # the same slot, or the same upstream context, already moved
        new.c.owner == "",
        new.c.agent_id == old.c.agent_id,
        or_(
            new.c.context_id == old.c.context_id,
            new.c.upstream_context_id == old.c.upstream_context_id,
        ),
    )
    names = ["owner", "context_id", "agent_id", "upstream_context_id", "created_at"]
    rows = select(literal_column("''"), *(old.c[n] for n in names[1:])).where(~taken)
    return _copy(conn, old, insert(new).from_select(names, rows))


def _retire_aliases(conn: Any, name: str) -> int:
    """One old alias table into ``router_task_alias_bindings``, owner ``""``."""
    old = _old(conn, name)
    if old is None:
        return 0
    new: Any = METADATA.tables["router_task_alias_bindings"]
    taken = exists().where(new.c.owner == "", new.c.alias == old.c.alias)
    names = ["owner", "alias", "task_id", "created_at"]
    rows = select(literal_column("''"), *(old.c[n] for n in names[1:])).where(~taken)
    return _copy(conn, old, insert(new).from_select(names, rows))


def _copy(conn: Any, old: Table, statement: Any) -> int:
    """Run the copy, drop the old table; the rows copied."""
    first: Any = next(iter(statement.table.primary_key.columns))
    copied = conn.execute(statement.returning(first)).all()  # rowcount: -1 on psycopg
    old.drop(conn)
    return len(copied)
