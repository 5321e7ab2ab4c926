"""``keys ...``: make a signing key pair (offline) and manage a server's trusted keys.

``keys generate`` writes a private JWK (mode 0600) and the matching public JWKS, ready to
publish; private key material is never printed. ``keys secret`` prints a new key for
``SWITCHBOARD_SECRET_KEY`` (the key that encrypts outbound credentials at rest). ``keys add``,
``keys list`` and ``keys remove`` talk to a running server's ``/api/v1/keys`` like the other
client commands; ``keys add --jwk`` sends only the public part of the keys it reads.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from jwcrypto.common import JWException
from jwcrypto.jwk import JWK

from registry.access.secrets import generate_key as generate_secret_key
from registry.errors import RegistryError
from registry.signatures import generate_key, public_jwks
from router.cli.cards import load_json, write_file
from router.cli.client import client_options, emit, quote, request
from router.cli.errors import CliError

#: The algorithms ``keys generate`` offers (registry.signatures can make a few more).
GENERATE_ALGS = ("ES256", "RS256", "EdDSA")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_LIFETIME = ("exp", "nbf", "iat")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``keys generate/secret/add/list/remove`` to the top-level ``commands``."""
    group = commands.add_parser("keys", help="signing keys: make a key pair, manage trusted keys")
    group.set_defaults(group_parser=group)
    keys = group.add_subparsers(title="key commands")

    generate = keys.add_parser(
        "generate",
        help="make a signing key pair (offline)",
        description="Write NAME.jwk (the private key, mode 0600) and NAME.jwks.json (the "
        "public JWKS to publish).",
    )
    generate.add_argument(
        "--alg", choices=GENERATE_ALGS, default="ES256", help="algorithm (default ES256)"
    )
    generate.add_argument("--kid", help="key id (default: the key's RFC 7638 thumbprint)")
    generate.add_argument(
        "--out", help="NAME of the files, a path without extension (default: the kid)"
    )
    generate.add_argument("--force", action="store_true", help="overwrite existing files")
    generate.set_defaults(func=cmd_generate)

    secret = keys.add_parser(
        "secret",
        help="print a new key for SWITCHBOARD_SECRET_KEY (offline)",
        description="Print a new random Fernet key: the value of SWITCHBOARD_SECRET_KEY (or the "
        "content of SWITCHBOARD_SECRET_KEY_FILE), which encrypts outbound credentials at rest. "
        "To rotate, give the new key first and keep the old one after it: NEW,OLD.",
    )
    secret.set_defaults(func=cmd_secret)

    add = client_options(keys.add_parser("add", help="trust a public key or a JWKS URL"))
    source = add.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--jwk",
        type=Path,
        help="JWK or JWKS file; only the public part of each key is sent",
    )
    source.add_argument("--jwks-url", help="URL of a JWKS to trust (fetched by the server)")
    add.set_defaults(func=cmd_add)

    listing = client_options(keys.add_parser("list", help="list the trusted keys"))
    listing.set_defaults(func=cmd_list)

    remove = client_options(keys.add_parser("remove", help="stop trusting a key"))
    remove.add_argument("id", help="key id as keys list shows it (not the kid)")
    remove.set_defaults(func=cmd_remove)


# --- keys generate ---------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    """``keys generate``: write NAME.jwk and NAME.jwks.json; print the kid and the paths."""
    if args.kid is not None and not args.kid:
        raise CliError("--kid must not be empty", status=2)
    if args.out is None and args.kid is not None and not _SAFE_NAME.fullmatch(args.kid):
        raise CliError(
            f"the kid {args.kid!r} is not a safe file name: give the files a name with --out",
            status=2,
        )
    try:
        key = generate_key(args.alg, kid=args.kid)
    except RegistryError as exc:
        raise CliError(exc.message, status=2) from None
    kid = key["kid"]
    name = args.out or kid
    private_path = Path(f"{name}.jwk")
    public_path = Path(f"{name}.jwks.json")
    if not args.force:
        existing = [str(path) for path in (private_path, public_path) if path.exists()]
        if existing:
            raise CliError(
                f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''} "
                "(--force to overwrite)",
                status=2,
            )
    private = json.dumps(json.loads(key.export_private()), indent=2, sort_keys=True) + "\n"
    write_file(private_path, private, mode=0o600, overwrite=args.force)
    public = json.dumps(public_jwks([key]), indent=2, sort_keys=True) + "\n"
    write_file(public_path, public, mode=0o644, overwrite=args.force)
    print(f"kid: {kid}")
    print(f"private key: {private_path} (keep it secret; sign with card sign --key)")
    print(f"public JWKS: {public_path} (publish it, e.g. at /.well-known/jwks.json)")
    return 0


# --- keys secret -----------------------------------------------------------------------------


def cmd_secret(args: argparse.Namespace) -> int:
    """``keys secret``: print a new Fernet key (only the key, for ``$(...)``)."""
    print(generate_secret_key())
    return 0


# --- keys add / list / remove ----------------------------------------------------------------


def cmd_add(args: argparse.Namespace) -> int:
    """``keys add``: POST each public key of ``--jwk``, or the ``--jwks-url``."""
    bodies = (
        [{"jwk": jwk} for jwk in public_keys(args.jwk)]
        if args.jwk is not None
        else [{"jwks_url": args.jwks_url}]
    )
    anchors = [request(args, "POST", "/api/v1/keys", body) for body in bodies]
    data: Any = anchors[0] if len(anchors) == 1 else {"keys": anchors}
    emit(args, data, lambda: _print_added(anchors))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``keys list``."""
    result = request(args, "GET", "/api/v1/keys")
    anchors = result.get("keys")
    if not isinstance(anchors, list) or not all(isinstance(a, dict) for a in anchors):
        raise CliError("unexpected answer from the server (no 'keys' list): is it Switchboard?")
    emit(args, result, lambda: _print_anchors(anchors))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """``keys remove``."""
    request(args, "DELETE", f"/api/v1/keys/{quote(args.id)}")
    if not args.json:
        print(f"removed key {args.id}")
    return 0


def public_keys(path: Path) -> list[dict[str, Any]]:
    """The public part of each key in the JWK or JWKS file ``path``: what ``keys add`` sends.

    Private members never leave the machine: a private key file gives its public key. The
    key's lifetime (``exp``, ``nbf``, ``iat``), which jwcrypto's public export drops, is kept:
    the server checks it and honours ``exp``.
    """
    document = load_json(path, "key")
    if isinstance(document, dict) and "keys" in document:
        entries = document["keys"]
        if not isinstance(entries, list) or not entries:
            raise CliError(f"key file {path}: 'keys' is not a list of keys", status=2)
    else:
        entries = [document]
    result = []
    for index, entry in enumerate(entries):
        where = f"key file {path}" + (f", key {index}" if len(entries) > 1 else "")
        if not isinstance(entry, dict):
            raise CliError(f"{where} is not a JWK (a JSON object)", status=2)
        if entry.get("kty") == "oct":
            raise CliError(
                f"{where} is a symmetric (oct) key: only public keys can be trusted", status=2
            )
        try:
            public = JWK(**entry).export_public(as_dict=True)
        except (JWException, ValueError, TypeError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise CliError(f"{where} is not a valid JWK: {reason}", status=2) from None
        public.update({name: entry[name] for name in _LIFETIME if name in entry})
        result.append(public)
    return result


def _print_added(anchors: list[dict[str, Any]]) -> None:
    for anchor in anchors:
        print(f"trusted {_describe(anchor)}")


def _describe(anchor: dict[str, Any]) -> str:
    if anchor.get("kind") == "jwks_url":
        return f"JWKS URL {anchor.get('jwks_url')} (id {anchor.get('id')})"
    kind = "/".join(str(anchor[name]) for name in ("kty", "alg") if anchor.get(name))
    return f"key {anchor.get('id')} (kid {anchor.get('kid') or '-'}, {kind or 'JWK'})"


def _print_anchors(anchors: list[dict[str, Any]]) -> None:
    if not anchors:
        print("no trusted keys")
        return
    width = max(len(str(anchor.get("id"))) for anchor in anchors)
    for anchor in anchors:
        if anchor.get("kind") == "jwks_url":
            what = f"jwks_url {anchor.get('jwks_url')}"
        else:
            kind = "/".join(str(anchor[name]) for name in ("kty", "alg") if anchor.get(name))
            what = f"jwk kid={anchor.get('kid') or '-'} {kind}"
        print(f"{anchor.get('id')!s:<{width}}  {what}  ({anchor.get('source')})")
