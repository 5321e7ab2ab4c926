# PYTHON_ARGCOMPLETE_OK
"""The ``switchboard`` command: run the server, manage a running one, sign and check cards.

``switchboard serve`` runs Switchboard (:mod:`router.cli.serve`). ``agents`` and ``search``
talk to a running server's admin API (:mod:`router.cli.client`; ``--server`` or
``SWITCHBOARD_URL``, token from ``--token`` or the ``SWITCHBOARD_ADMIN_TOKEN`` /
``SWITCHBOARD_READ_TOKEN`` environment variables). ``card sign``, ``card verify`` and
``keys generate`` work offline on files (:mod:`router.cli.cards`); ``keys add/list/remove``
manage a running server's trusted keys (:mod:`router.cli.keys`), ``policies
list/show/set/delete`` its access policies (:mod:`router.cli.policies`); ``clients ...`` and
``audit`` its clients' API keys and audit log (:mod:`router.cli.clients`). ``models fetch``,
``route explain|feedback`` and ``examples list|delete`` serve routing by meaning
(:mod:`router.cli.routing`). ``status`` prints a running server's summary
(:mod:`router.cli.status`). ``db current|upgrade|downgrade|history``: the database's schema
revision and its migrations (:mod:`router.cli.db`).

Exit status: 0 success, 1 the server refused or could not be reached (or ``serve`` could not
start, or ``card verify`` found no valid signature), 2 bad usage or configuration, 3
``card verify`` found a good signature by a key the card names itself (``jku``, no
``--jwks``): intact, but not trusted. Errors are one ``switchboard:`` line.

Shell completion comes from argcomplete (``eval "$(register-python-argcomplete switchboard)"``;
the ``PYTHON_ARGCOMPLETE_OK`` marker above lets its global completion find this command).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import argcomplete

from registry.version import switchboard_version
from router.cli import cards, client, clients, db, keys, policies, routing, serve, status
from router.cli.errors import CliError

__all__ = ["CliError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``switchboard`` console script."""
    parser = build_parser()
    argcomplete.autocomplete(parser)  # answers shell completion requests (_ARGCOMPLETE), exits
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        # a command group without its subcommand prints that group's help
        (getattr(args, "group_parser", None) or parser).print_help()
        return 2
    try:
        return args.func(args)
    except CliError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("switchboard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout was closed early (e.g. piped into ``head``): not an error worth a traceback;
        # point stdout at /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each command module adds its own subcommands."""
    parser = argparse.ArgumentParser(
        prog="switchboard", description="Registry and router for A2A agents."
    )
    parser.add_argument(
        "--version", action="version", version=f"switchboard {switchboard_version()}"
    )
    commands = parser.add_subparsers(title="commands")
    serve.add_commands(commands)
    client.add_commands(commands)
    cards.add_commands(commands)
    keys.add_commands(commands)
    policies.add_commands(commands)
    clients.add_commands(commands)
    routing.add_commands(commands)
    status.add_commands(commands)
    db.add_commands(commands)
    return parser
