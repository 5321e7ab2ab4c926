"""``card sign`` and ``card verify``: agent owners sign and check their own cards, offline.

Both work on files with :mod:`registry.signatures`, which is what Switchboard itself verifies
with; no server is needed. ``card verify`` checks against the keys of ``--jwks`` (a JWKS or
JWK file, or an ``http(s)`` URL), or else follows each signature's own ``jku``, which only
shows that the card is intact, not that its signer is who it claims to be.

Also the key and JWKS file helpers the ``keys`` commands share.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from jwcrypto.common import JWException
from jwcrypto.jwk import JWK

from registry.errors import RegistryError
from registry.signatures import (
    KeyLookup,
    StaticKeys,
    Verification,
    clean_for_signing,
    sign_card,
    verify_card,
)
from router.cli import CliError

#: Limits for fetching a JWKS (``--jwks URL`` or a signature's ``jku``).
FETCH_MAX_BYTES = 1024 * 1024
FETCH_TIMEOUT = 10.0
_MAX_REDIRECTS = 3
_JWKS_ACCEPT = "application/jwk-set+json, application/json"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``card sign`` and ``card verify`` to the top-level ``commands``."""
    group = commands.add_parser("card", help="sign or verify an agent card file (offline)")
    group.set_defaults(group_parser=group)
    card = group.add_subparsers(title="card commands")

    sign = card.add_parser(
        "sign",
        help="sign a card with a private JWK",
        description="Print the card, cleaned of empty values, with a new signature appended.",
    )
    sign.add_argument("card", type=Path, help="the agent card (JSON file)")
    sign.add_argument("--key", type=Path, required=True, help="private JWK file (keys generate)")
    sign.add_argument("--kid", help="key id for the header (default: the key's kid or thumbprint)")
    sign.add_argument("--jku", help="URL of the JWKS that holds the public key, for the header")
    sign.add_argument("--out", type=Path, help="write the signed card here instead of stdout")
    sign.set_defaults(func=cmd_sign)

    verify = card.add_parser(
        "verify",
        help="check a card's signatures",
        description="Exit 0 if a signature verifies, 1 if none does.",
    )
    verify.add_argument("card", type=Path, help="the agent card (JSON file)")
    verify.add_argument(
        "--jwks",
        help="trusted keys: a JWKS or JWK file, or an http(s) URL of a JWKS "
        "(default: each signature's own jku, which checks integrity, not trust)",
    )
    verify.add_argument("--json", action="store_true", help="print the verification as JSON")
    verify.set_defaults(func=cmd_verify)


# --- card sign -------------------------------------------------------------------------------


def cmd_sign(args: argparse.Namespace) -> int:
    """``card sign``: the signed card on stdout (or ``--out``); dropped values on stderr."""
    key = load_jwk(args.key)
    if key.get("kty") == "oct":
        raise CliError(
            f"{args.key} is a symmetric (oct) key: agent cards are signed with an EC, RSA or "
            "OKP key (switchboard keys generate)",
            status=2,
        )
    if not key.has_private:
        raise CliError(
            f"{args.key} holds a public key only: sign with the private key "
            "(the NAME.jwk that switchboard keys generate wrote)",
            status=2,
        )
    card = load_card(args.card)
    try:
        signed = sign_card(card, key, kid=args.kid, jku=args.jku)
    except RegistryError as exc:  # a key that cannot sign, or a card with no RFC 8785 form
        raise CliError(f"cannot sign {args.card}: {exc.message}", status=2) from None
    unsigned = {name: value for name, value in card.items() if name != "signatures"}
    dropped = dropped_paths(unsigned, clean_for_signing(unsigned))
    if dropped:
        print(
            "dropped empty or false values before signing (the signed card leaves them out): "
            + ", ".join(dropped),
            file=sys.stderr,
        )
    text = json.dumps(signed, indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_file(args.out, text)
        print(f"signed {args.card} with kid {_signed_kid(signed)}: wrote {args.out}")
    return 0


def dropped_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """Paths of the values in ``before`` that ``after`` (a cleaned copy) no longer has.

    Cleaning only removes members and list items, keeping the order, so list items are
    matched to the cleaned list greedily.
    """
    found: list[str] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            where = f"{path}.{key}" if path else key
            if key in after:
                found += dropped_paths(value, after[key], where)
            else:
                found.append(where)
    elif isinstance(before, list) and isinstance(after, list):
        kept = 0
        for index, item in enumerate(before):
            if kept < len(after) and _prunes_to(item, after[kept]):
                found += dropped_paths(item, after[kept], f"{path}[{index}]")
                kept += 1
            else:
                found.append(f"{path}[{index}]")
    return found


def _prunes_to(before: Any, after: Any) -> bool:
    """Whether removing members and list items from ``before`` can give ``after``."""
    if before == after:
        return True
    if isinstance(before, dict) and isinstance(after, dict):
        return all(key in before and _prunes_to(before[key], after[key]) for key in after)
    if isinstance(before, list) and isinstance(after, list):
        items = iter(before)
        return all(any(_prunes_to(item, wanted) for item in items) for wanted in after)
    return False


def _signed_kid(card: dict[str, Any]) -> str:
    """The kid in the protected header of the card's last signature."""
    protected = card["signatures"][-1]["protected"]
    header = json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4)))
    return str(header["kid"])


# --- card verify -----------------------------------------------------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    """``card verify``: exit 0 when a signature verifies, else 1 with ``<status>: <reason>``."""
    card = load_card(args.card)
    resolver: StaticKeys | JkuKeys
    if args.jwks is None:
        resolver = JkuKeys()
    elif _is_url(args.jwks):
        try:
            document = fetch_json(args.jwks)
        except FetchError as exc:
            raise CliError(f"cannot fetch --jwks {args.jwks}: {exc}") from None
        resolver = _static_keys(document, args.jwks, status=1)
    else:
        resolver = _static_keys(load_json(Path(args.jwks), "JWKS"), args.jwks, status=2)
    result = asyncio.run(verify_card(card, resolver))
    if args.json:
        print(json.dumps(result.to_api(), indent=2, ensure_ascii=False))
    else:
        _print_verification(result)
    return 0 if result.status == "verified" else 1


def _print_verification(result: Verification) -> None:
    if result.status == "verified":
        print(f"verified: kid={result.kid} form={result.payload_form}")
        if result.uncovered_fields:
            print(f"not covered by the signature: {', '.join(result.uncovered_fields)}")
    elif result.status == "unsigned":
        print("unsigned: the card has no signatures")
    else:
        print(f"{result.status}: {result.reason}")


def _static_keys(document: Any, source: str, *, status: int) -> StaticKeys:
    if not isinstance(document, dict | list):
        raise CliError(f"{source} is not a JWKS (a JSON object with 'keys')", status=status)
    try:
        return StaticKeys(document, source=source)
    except RegistryError as exc:
        raise CliError(exc.message, status=status) from None


class JkuKeys:
    """A key resolver that fetches each signature's own ``jku`` (once per URL).

    Says on stderr which URL it uses: keys named by the card itself prove that the card is
    intact and was signed by whoever controls that URL, not that the signer is trusted.
    """

    def __init__(self) -> None:
        self._fetched: dict[str, StaticKeys | str] = {}

    async def keys_for(self, kid: str, jku: str | None) -> KeyLookup:
        """The keys with ``kid`` in the JWKS at ``jku``."""
        if jku is None:
            return KeyLookup(
                problem="the signature names no jku; give the signer's keys with --jwks"
            )
        if jku not in self._fetched:
            self._fetched[jku] = self._fetch(jku)
        keys = self._fetched[jku]
        if isinstance(keys, str):
            return KeyLookup(problem=keys)
        return await keys.keys_for(kid, jku)

    @staticmethod
    def _fetch(url: str) -> StaticKeys | str:
        if not _is_url(url):
            return f"the jku {url!r} is not an http(s) URL"
        print(f"using the card's own jku {url}: this checks integrity, not trust", file=sys.stderr)
        try:
            return StaticKeys(fetch_json(url), source=url)
        except FetchError as exc:
            return f"cannot fetch the jku {url}: {exc}"
        except RegistryError as exc:  # not a JWKS, or a key in it is no valid JWK
            return exc.message


# --- files and fetching ----------------------------------------------------------------------


def load_json(path: Path, what: str) -> Any:
    """The JSON document in ``path``; CliError (status 2) naming ``what`` if unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CliError(f"cannot read {what} file {path}: {reason}", status=2) from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CliError(f"{what} file {path} is not JSON: {exc}", status=2) from None


def load_card(path: Path) -> dict[str, Any]:
    """The agent card in ``path``: a JSON object."""
    card = load_json(path, "card")
    if not isinstance(card, dict):
        raise CliError(f"card file {path} is not a JSON object", status=2)
    return card


def load_jwk(path: Path) -> JWK:
    """The one JWK in ``path`` (a JWK, or a JWKS holding exactly one key)."""
    document = load_json(path, "key")
    if isinstance(document, dict) and isinstance(document.get("keys"), list):
        if len(document["keys"]) != 1:
            raise CliError(
                f"key file {path} is a JWKS with {len(document['keys'])} keys: give one JWK",
                status=2,
            )
        document = document["keys"][0]
    if not isinstance(document, dict):
        raise CliError(f"key file {path} is not a JWK (a JSON object)", status=2)
    try:
        return JWK(**document)
    except (JWException, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise CliError(f"key file {path} is not a valid JWK: {reason}", status=2) from None


def write_file(path: Path, text: str, *, mode: int = 0o644, overwrite: bool = True) -> None:
    """Write ``text`` to ``path`` with ``mode``; CliError (status 2) on failure.

    The file has ``mode`` from the start (a key file is never readable by others, not even
    for a moment). Without ``overwrite`` an existing file is an error; with it, the new file
    is written next to the old one and renamed over it.
    """
    try:
        if overwrite:
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                os.fchmod(fd, mode)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(temp, path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
    except FileExistsError:
        raise CliError(f"{path} already exists (--force to overwrite)", status=2) from None
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}", status=2) from None


class FetchError(Exception):
    """A JWKS could not be fetched; the message says why, in a few words."""


class _Redirects(urllib.request.HTTPRedirectHandler):
    max_redirections = _MAX_REDIRECTS

    def redirect_request(  # type: ignore[override]
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if not _is_url(newurl):
            raise FetchError(f"redirected to {newurl!r}, which is not an http(s) URL")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch_json(url: str) -> Any:
    """GET ``url`` (http or https) and parse it as JSON.

    At most :data:`FETCH_MAX_BYTES`, :data:`FETCH_TIMEOUT` seconds in all and 3 redirects.
    Raises :class:`FetchError`.
    """
    if not _is_url(url):
        raise FetchError("not an http(s) URL")
    opener = urllib.request.build_opener(_Redirects())
    req = urllib.request.Request(
        url, headers={"Accept": _JWKS_ACCEPT, "User-Agent": "switchboard-cli"}
    )
    deadline = time.monotonic() + FETCH_TIMEOUT
    try:
        with opener.open(req, timeout=FETCH_TIMEOUT) as response:
            body = bytearray()
            while chunk := response.read(64 * 1024):
                body += chunk
                if len(body) > FETCH_MAX_BYTES:
                    raise FetchError(f"larger than {FETCH_MAX_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise FetchError(f"took longer than {FETCH_TIMEOUT:g} s")
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(str(exc.reason)) from None
    except TimeoutError:
        raise FetchError(f"no answer within {FETCH_TIMEOUT:g} s") from None
    except (OSError, ValueError) as exc:
        raise FetchError(str(exc) or type(exc).__name__) from None
    try:
        return json.loads(bytes(body))
    except (ValueError, RecursionError):
        raise FetchError("the answer is not JSON") from None


def _is_url(text: str) -> bool:
    parts = urllib.parse.urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
