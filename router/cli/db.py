"""``switchboard db``: the database's schema revision and its migrations (Alembic,
:mod:`registry.migrations`; docs/operations.md, "Upgrading").

- ``db current``: the database's revision, and whether this version can use it.
- ``db upgrade [REVISION]``: migrate to this version's head (what ``serve`` does at start),
  or to an older revision.
- ``db downgrade REVISION``: undo the revisions after ``REVISION``, with the version that
  made them (the older one does not have their scripts); each script's docstring says what
  its downgrade loses. Take a backup first.
- ``db history``: the revisions this version knows, oldest first.

The database URL is ``--database-url``, else ``SWITCHBOARD_DATABASE_URL`` or the config file,
as for ``serve``. Every change runs under the database's schema lock, in one transaction.
"""

from __future__ import annotations

import argparse

from router.cli.errors import CliError
from router.cli.logs import configure_logging
from router.cli.migrating import on_database, prepare_schema, safe_url
from router.cli.serve import load_settings

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``db current|upgrade|downgrade|history`` to the top-level commands."""
    group = commands.add_parser("db", help="the database schema: revision and migrations")
    group.set_defaults(group_parser=group)
    sub = group.add_subparsers(title="commands")
    current = _with_url(sub.add_parser("current", help="print the database's revision"))
    current.set_defaults(func=cmd_current)
    upgrade = _with_url(sub.add_parser("upgrade", help="migrate to this version's schema"))
    upgrade.add_argument("revision", nargs="?", help="an older target (default: head)")
    upgrade.set_defaults(func=cmd_upgrade)
    downgrade = _with_url(
        sub.add_parser("downgrade", help="undo the revisions after REVISION (take a backup)")
    )
    downgrade.add_argument("revision", help="the revision to go back to (db history)")
    downgrade.set_defaults(func=cmd_downgrade)
    history = sub.add_parser("history", help="the revisions this version knows")
    history.set_defaults(func=cmd_history)


def _with_url(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--database-url", help="SWITCHBOARD_DATABASE_URL")
    return parser


def _url(args: argparse.Namespace) -> str:
    overrides = {"database_url": args.database_url} if args.database_url else {}
    settings = load_settings(overrides)
    configure_logging(settings.log_level, settings.log_format)
    return settings.database_url


def cmd_current(args: argparse.Namespace) -> int:
    """Print the revision: ``0001 (head)``, ``none (...)``, or a newer version's."""
    from registry.migrations.commands import status as read_status  # Alembic: only here

    status = on_database(_url(args), read_status, "cannot read the revision")
    if status.revision is None:
        print(
            "none: a database made before schema migrations (979ef09 or earlier); "
            "`switchboard db upgrade` adopts it"
            if status.has_tables
            else "none: an empty database (`switchboard db upgrade` or `serve` creates it)"
        )
    elif status.revision == status.head:
        print(f"{status.revision} (head)")
    elif status.known:
        print(f"{status.revision} (this version's head is {status.head}: `switchboard db upgrade`)")
    else:
        print(f"{status.revision} (newer than this Switchboard, which needs {status.head})")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Migrate to head (as ``serve`` does at start) or to ``REVISION``."""
    url = _url(args)
    if args.revision in (None, "head"):
        prepared = prepare_schema(url, "cannot upgrade")
        before, after = prepared.before, prepared.after
    else:
        from registry.migrations.commands import upgrade

        before, after = on_database(url, lambda e: upgrade(e, args.revision), "cannot upgrade")
    print(_moved("upgraded", before, after, url))
    return 0


def cmd_downgrade(args: argparse.Namespace) -> int:
    """Undo the revisions after ``REVISION``."""
    url = _url(args)
    if args.revision == "base":
        raise CliError(
            "no downgrade below the baseline (0001): to start over, keep a backup and use a "
            "new database",
            status=2,
        )
    from registry.migrations.commands import downgrade

    before, after = on_database(url, lambda e: downgrade(e, args.revision), "cannot downgrade")
    print(_moved("downgraded", before, after, url))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """Print the revisions, oldest first, with the first line of each one's docstring."""
    from registry.migrations.revisions import head as newest
    from registry.migrations.revisions import history

    head = newest()
    for revision in history():
        mark = " (head)" if revision.id == head else ""
        print(f"{revision.id}{mark}  {revision.doc}")
    return 0


def _moved(verb: str, before: str | None, after: str | None, url: str) -> str:
    if before == after:
        return f"{safe_url(url)}: already at revision {after}"
    return f"{safe_url(url)}: {verb} from revision {before or 'none'} to {after}"
