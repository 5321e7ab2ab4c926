"""``clients ...`` and ``audit``: clients' API keys and the audit log, over the admin API.

``clients create`` makes a key for a principal and prints it once (the server keeps only its
hash); ``clients list``, ``show``, ``revoke`` and ``rotate`` manage keys by id; ``audit``
prints the admin writes, newest first. Every one needs the admin token (reads too), sent like
the other client commands' (:mod:`router.cli.client`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import urllib.parse
from typing import Any

from router.cli.client import client_options, emit, quote, request
from router.cli.errors import CliError

ROLES = ("admin", "reader")
NOT_AGAIN = "This key will not be shown again: store it now (e.g. in a secret manager)."


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``clients create/list/show/revoke/rotate`` and ``audit`` to ``commands``."""
    group = commands.add_parser("clients", help="clients' API keys: create, list, revoke, rotate")
    group.set_defaults(group_parser=group)
    clients = group.add_subparsers(title="client commands")

    create = client_options(
        clients.add_parser(
            "create",
            help="make an API key for a client (printed once)",
            description="Make an API key for a principal. The key is printed once: the "
            "server keeps only its SHA-256.",
        )
    )
    create.add_argument("--subject", required=True, help="who the key stands for")
    create.add_argument("--tenant", help="the tenant the subject belongs to")
    create.add_argument(
        "--group", action="append", default=[], help="a group, for access policies (repeatable)"
    )
    create.add_argument(
        "--role",
        action="append",
        default=[],
        choices=ROLES,
        help="an admin API role (repeatable; none: a client of the router only)",
    )
    create.add_argument("--description", help="what the key is for")
    create.add_argument(
        "--expires", help="when the key stops working: ISO 8601 with a timezone (2030-01-31T00:00Z)"
    )
    create.set_defaults(func=cmd_create)

    listing = client_options(clients.add_parser("list", help="list API keys, newest first"))
    listing.add_argument("--subject", help="only the keys of this subject")
    listing.add_argument("--tenant", help="only the keys of this tenant")
    _paging(listing)
    listing.set_defaults(func=cmd_list)

    show = client_options(clients.add_parser("show", help="show one API key (never the key)"))
    show.add_argument("id", help="key id as clients list shows it")
    show.set_defaults(func=cmd_show)

    revoke = client_options(
        clients.add_parser("revoke", help="revoke an API key (refused at once)")
    )
    revoke.add_argument("id", help="key id as clients list shows it")
    revoke.set_defaults(func=cmd_revoke)

    rotate = client_options(
        clients.add_parser(
            "rotate", help="replace an API key with a new one for the same client (printed once)"
        )
    )
    rotate.add_argument("id", help="key id as clients list shows it")
    rotate.add_argument(
        "--grace",
        type=_seconds,
        default=0,
        metavar="SECONDS",
        help="keep the old key working this long (default 0: refused at once)",
    )
    rotate.set_defaults(func=cmd_rotate)

    audit = client_options(
        commands.add_parser("audit", help="the audit log of admin writes, newest first")
    )
    audit.add_argument("--actor", help="only entries of this actor label or subject")
    audit.add_argument("--action", help="only this action, e.g. 'POST /api/v1/agents'")
    audit.add_argument("--since", help="only entries at or after this time (ISO 8601)")
    _paging(audit)
    audit.set_defaults(func=cmd_audit)


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit", type=_positive_int, help="page size (default: the server's, 50 unless set)"
    )
    parser.add_argument("--all", action="store_true", help="fetch every page, not just the first")
    parser.add_argument("--cursor", help="start from this cursor (a previous next_cursor)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1: {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more: {text!r}")
    return value


# --- commands --------------------------------------------------------------------------------


def cmd_create(args: argparse.Namespace) -> int:
    """``clients create``: print the new key once."""
    body: dict[str, Any] = {"subject": args.subject, "groups": args.group, "roles": args.role}
    for name, value in (
        ("tenant", args.tenant),
        ("description", args.description),
        ("expires_at", args.expires),
    ):
        if value is not None:
            body[name] = value
    created = request(args, "POST", "/api/v1/clients", body)
    _print_new(args, created, "created")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``clients list``."""
    params = [(name, getattr(args, name)) for name in ("subject", "tenant")]
    return _listing(args, "/api/v1/clients", "clients", params, _print_keys)


def cmd_show(args: argparse.Namespace) -> int:
    """``clients show``."""
    key = request(args, "GET", f"/api/v1/clients/{quote(args.id)}")
    emit(args, key, lambda: _print_key(key))
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    """``clients revoke``."""
    request(args, "DELETE", f"/api/v1/clients/{quote(args.id)}")
    if not args.json:
        print(f"revoked {args.id}: it is refused from now on")
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    """``clients rotate``: print the new key once, and when the old one stops working."""
    body = {"grace_seconds": args.grace} if args.grace else None
    created = request(args, "POST", f"/api/v1/clients/{quote(args.id)}/rotate", body)
    _print_new(args, created, f"rotated {args.id} to")
    if not args.json:
        if args.grace:
            print(f"The old key {args.id} keeps working for {args.grace:g} more seconds.")
        else:
            print(f"The old key {args.id} is refused from now on.")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """``audit``."""
    params = [(name, getattr(args, name)) for name in ("actor", "action", "since")]
    return _listing(args, "/api/v1/audit", "entries", params, _print_entries)


# --- helpers ---------------------------------------------------------------------------------


def _print_new(args: argparse.Namespace, created: dict[str, Any], verb: str) -> None:
    key = created.get("key")
    if not isinstance(key, str) or not isinstance(created.get("id"), str):
        raise CliError("unexpected answer from the server (no key): is it Switchboard?")
    if args.json:
        emit(args, created, lambda: None)
        print(NOT_AGAIN, file=sys.stderr)
        return
    print(f"{verb} {created['id']} for {_who(created)}")
    print(f"key: {key}")
    print(NOT_AGAIN)


def _listing(
    args: argparse.Namespace,
    path: str,
    name: str,
    filters: list[tuple[str, str | None]],
    show: Any,
) -> int:
    """Fetch one page (every page with ``--all``) of a listing and print it."""
    params = [(k, v) for k, v in filters if v is not None]
    if args.limit:
        params.append(("limit", str(args.limit)))
    items: list[dict[str, Any]] = []
    cursor: str | None = args.cursor
    seen: set[str] = set()
    while True:
        query = [*params, ("cursor", cursor)] if cursor else params
        result = request(args, "GET", f"{path}?{urllib.parse.urlencode(query)}")
        page, cursor = result.get(name), result.get("next_cursor")
        if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
            raise CliError(
                f"unexpected answer from the server (no {name!r} list): is it Switchboard?"
            )
        items += page
        if not args.all or not cursor:
            break
        if cursor in seen:
            raise CliError(f"the server returned the same next_cursor twice: {cursor}")
        seen.add(cursor)
    if args.all:
        result = {name: items, "next_cursor": cursor}
    emit(args, result, lambda: show(items))
    if cursor:
        print(f"(more results: --all, or --cursor {shlex.quote(cursor)})", file=sys.stderr)
    return 0


def _who(key: dict[str, Any]) -> str:
    who = str(key.get("subject"))
    if key.get("tenant"):
        who += f" (tenant {key['tenant']})"
    return who


def _print_keys(keys: list[dict[str, Any]]) -> None:
    if not keys:
        print("no client keys")
        return
    for key in keys:
        extras = []
        if key.get("roles"):
            extras.append(f"roles: {', '.join(key['roles'])}")
        if key.get("groups"):
            extras.append(f"groups: {', '.join(key['groups'])}")
        if key.get("expires_at"):
            extras.append(f"expires {key['expires_at']}")
        if key.get("rotated_to"):
            extras.append(f"rotated to {key['rotated_to']}")
        tail = f"  [{'; '.join(extras)}]" if extras else ""
        print(f"{key.get('id')}  {key.get('status'):<7}  {_who(key)}{tail}")


def _print_key(key: dict[str, Any]) -> None:
    print(f"{key.get('id')} ({key.get('prefix')}...): {key.get('status')}")
    print(f"  subject: {key.get('subject')}")
    print(f"  tenant: {key.get('tenant') or '-'}")
    print(f"  groups: {', '.join(key.get('groups') or []) or '-'}")
    print(f"  roles: {', '.join(key.get('roles') or []) or '-'}")
    if key.get("description"):
        print(f"  description: {key['description']}")
    print(f"  created: {key.get('created_at')} by {key.get('created_by')}")
    print(f"  expires: {key.get('expires_at') or 'never'}")
    if key.get("revoked_at"):
        print(f"  revoked: {key['revoked_at']} by {key.get('revoked_by')}")
    if key.get("rotated_to"):
        print(f"  rotated to: {key['rotated_to']}")


def _print_entries(entries: list[dict[str, Any]]) -> None:
    if not entries:
        print("no audit entries")
        return
    for entry in entries:
        line = f"{entry.get('at')}  {entry.get('actor')}  {entry.get('action')}"
        if entry.get("target"):
            line += f"  {entry['target']}"
        line += f"  -> {entry.get('status')}"
        error = (entry.get("details") or {}).get("error")
        if error:
            line += f" ({error})"
        print(line)
