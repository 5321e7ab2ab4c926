"""``card fetch``, ``card sign`` and ``card verify``: agent owners get, sign and check cards.

``card fetch`` downloads an agent's card (well-known discovery from a base URL, as the
registry does, or an exact card URL) with the same fetcher ``card verify`` uses for JWKS.

Both work on files with :mod:`registry.signatures`, which is what Switchboard itself verifies
with; no server is needed. ``card verify`` checks against the keys of ``--jwks`` (a JWKS or
JWK file, or an ``http(s)`` URL): only that makes a card ``verified`` (exit 0). Without it, it
follows each signature's own ``jku``, which only shows that the card is intact, not that its
signer is who it claims to be: ``intact (self-asserted key from <jku>)``, exit 3.

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
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from jwcrypto.common import JWException
from jwcrypto.jwk import JWK
from yarl import URL

from registry.crawler import card_candidates, is_card_url
from registry.errors import RegistryError
from registry.signatures import (
    KeyLookup,
    StaticKeys,
    Verification,
    clean_for_signing,
    sign_card,
    verify_card,
)
from router.cli.errors import CliError

#: Limits for fetching a JWKS (``--jwks URL`` or a signature's ``jku``).
FETCH_MAX_BYTES = 1024 * 1024
FETCH_TIMEOUT = 10.0
_MAX_REDIRECTS = 3
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_JWKS_ACCEPT = "application/jwk-set+json, application/json"
_CARD_ACCEPT = "application/json"

#: ``card verify`` exit statuses.
EXIT_VERIFIED = 0  # a signature verified with a key of --jwks
EXIT_NOT_VERIFIED = 1  # unsigned, invalid, untrusted key, or --jwks URL not fetched
EXIT_USAGE = 2  # bad usage, unreadable or non-JSON files
EXIT_INTACT = 3  # a signature verified, but only with a key from the card's own jku

_VERIFY_EPILOG = """\
exit status:
  0  verified: a signature verified with a key of --jwks (the only way to get 0)
  1  unsigned, invalid, untrusted-key, or the --jwks URL could not be fetched
  2  bad usage, or a file that cannot be read or is not JSON
  3  intact: without --jwks, a signature verified with a key from the card's own jku;
     the card is unchanged, but whoever made it chose the key ("self-asserted"), so this
     says nothing about who signed it. Give the signer's trusted keys with --jwks.
"""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``card fetch``, ``card sign`` and ``card verify`` to the top-level ``commands``."""
    group = commands.add_parser("card", help="fetch an agent card; sign or verify a card file")
    group.set_defaults(group_parser=group)
    card = group.add_subparsers(title="card commands")

    fetch = card.add_parser(
        "fetch",
        help="download an agent's card",
        description="Fetch the card of the agent at URL: a base URL (its well-known card "
        "paths, as the registry tries them) or the card's own URL. Prints the card as JSON.",
    )
    fetch.add_argument("url", help="the agent's base URL, or its card URL")
    fetch.add_argument("-o", "--out", type=Path, help="write the card here instead of stdout")
    fetch.set_defaults(func=cmd_fetch)

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
        description="Check a card's signatures against trusted keys (--jwks); without "
        "--jwks, check only that the card is intact, with the keys its own jku names.",
        epilog=_VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("card", type=Path, help="the agent card (JSON file)")
    verify.add_argument(
        "--jwks",
        help="trusted keys: a JWKS or JWK file, or an http(s) URL of a JWKS "
        "(default: each signature's own jku, which checks integrity, not trust: exit 3)",
    )
    verify.add_argument("--json", action="store_true", help="print the verification as JSON")
    verify.set_defaults(func=cmd_verify)


# --- card fetch ------------------------------------------------------------------------------


def cmd_fetch(args: argparse.Namespace) -> int:
    """``card fetch``: the card on stdout (or ``--out``); exit 1 with one line if no card."""
    url = args.url
    if not _is_url(url):
        raise CliError(f"{url!r} is not an http(s) URL: give the agent's base URL", status=2)
    card, final = asyncio.run(_fetch_card(url))
    text = json.dumps(card, indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_file(args.out, text)
        print(f"card of {final} written to {args.out}", file=sys.stderr)
    return 0


async def _fetch_card(url: str) -> tuple[dict[str, Any], str]:
    """The card at ``url`` (a card URL) or found from it (a base URL), and where it was."""
    candidates = [url] if is_card_url(url) else card_candidates(url)
    problems = []
    for candidate in candidates:
        try:
            document, final = await fetch_json(candidate, accept=_CARD_ACCEPT)
        except FetchError as exc:
            problems.append(f"{candidate}: {exc}")
            continue
        if not isinstance(document, dict):
            problems.append(f"{candidate}: not a JSON object")
            continue
        return document, final
    raise CliError(
        f"no agent card found for {url} ({'; '.join(problems)}); check the URL, or give the "
        "card's own URL"
    )


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
    """``card verify``: exit 0 only when a signature verifies with a key of ``--jwks``.

    Without ``--jwks`` a good signature over a key from the card's own ``jku`` prints
    ``intact (self-asserted key from <jku>): ...`` and exits 3 (:data:`EXIT_INTACT`), so
    that ``card verify CARD && deploy`` is not fooled by a card its maker signed with a key of
    their own choosing. Otherwise 1 with ``<status>: <reason>``.
    """
    card = load_card(args.card)
    return asyncio.run(_verify(args, card))


async def _verify(args: argparse.Namespace, card: dict[str, Any]) -> int:
    resolver: StaticKeys | JkuKeys
    if args.jwks is None:
        resolver = JkuKeys()
    elif _is_url(args.jwks):
        try:
            document, _ = await fetch_json(args.jwks)
        except FetchError as exc:
            raise CliError(f"cannot fetch --jwks {args.jwks}: {exc}") from None
        resolver = _static_keys(document, args.jwks, status=EXIT_NOT_VERIFIED)
    else:
        resolver = _static_keys(load_json(Path(args.jwks), "JWKS"), args.jwks, status=EXIT_USAGE)
    result = await verify_card(card, resolver)
    self_asserted = args.jwks is None and result.status == "verified"
    if args.json:
        shown = result.to_api()
        if self_asserted:
            shown["status"] = "intact"
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        _print_verification(result, self_asserted=self_asserted)
    if self_asserted:
        return EXIT_INTACT
    return EXIT_VERIFIED if result.status == "verified" else EXIT_NOT_VERIFIED


def _print_verification(result: Verification, *, self_asserted: bool = False) -> None:
    if result.status == "verified":
        if self_asserted:
            print(
                f"intact (self-asserted key from {result.key_source}): "
                f"kid={result.kid} form={result.payload_form}"
            )
        else:
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

    The key source is the jku, or ``<jku> -> <final URL>`` after a (same-origin) redirect.
    ``time_limit`` and ``clock`` are passed to :func:`fetch_json`.
    """

    def __init__(
        self, *, time_limit: float = FETCH_TIMEOUT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fetched: dict[str, StaticKeys | str] = {}
        self._time_limit = time_limit
        self._clock = clock

    async def keys_for(self, kid: str, jku: str | None) -> KeyLookup:
        """The keys with ``kid`` in the JWKS at ``jku``."""
        if jku is None:
            return KeyLookup(
                problem="the signature names no jku; give the signer's keys with --jwks"
            )
        if jku not in self._fetched:
            self._fetched[jku] = await self._fetch(jku)
        keys = self._fetched[jku]
        if isinstance(keys, str):
            return KeyLookup(problem=keys)
        return await keys.keys_for(kid, jku)

    async def _fetch(self, url: str) -> StaticKeys | str:
        if not _is_url(url):
            return f"the jku {url!r} is not an http(s) URL"
        print(f"using the card's own jku {url}: this checks integrity, not trust", file=sys.stderr)
        try:
            document, final = await fetch_json(url, time_limit=self._time_limit, clock=self._clock)
            return StaticKeys(document, source=url if final == url else f"{url} -> {final}")
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
    """A JWKS or card could not be fetched; the message says why, in a few words."""


async def fetch_json(
    url: str,
    *,
    time_limit: float = FETCH_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
    accept: str = _JWKS_ACCEPT,
) -> tuple[Any, str]:
    """GET ``url`` (http or https) and parse it as JSON: the document and the final URL.

    ``accept`` is the ``Accept`` header (a JWKS by default). At most :data:`FETCH_MAX_BYTES`
    and 3 redirects, each to the same origin (scheme, host, port: a JWKS or card is not taken
    from elsewhere). ``time_limit`` seconds in all, from connecting to the last byte: a server
    that trickles its answer is cut off. ``clock`` (monotonic seconds) is what the deadline is
    checked against between reads. Raises :class:`FetchError`.
    """
    if not _is_url(url):
        raise FetchError("not an http(s) URL")
    deadline = clock() + time_limit
    too_slow = f"took longer than {time_limit:g} s"

    def left() -> float:
        remaining = deadline - clock()
        if remaining <= 0:
            raise FetchError(too_slow)
        return remaining

    try:
        async with asyncio.timeout(time_limit):  # the hard limit, whatever the clock says
            return await _fetch(URL(url), left, accept)
    except TimeoutError:
        raise FetchError(too_slow) from None
    except aiohttp.ClientError as exc:
        raise FetchError(str(exc) or type(exc).__name__) from None
    except (OSError, ValueError) as exc:
        raise FetchError(str(exc) or type(exc).__name__) from None


async def _fetch(url: URL, left: Callable[[], float], accept: str) -> tuple[Any, str]:
    headers = {"Accept": accept, "User-Agent": "switchboard-cli"}
    # trust_env would also send ~/.netrc credentials: proxies are taken from the environment
    # by hand instead (_proxy_for)
    async with aiohttp.ClientSession(headers=headers, trust_env=False) as session:
        current = url
        for _ in range(_MAX_REDIRECTS + 1):
            remaining = left()  # before making the coroutine: left() may raise
            response = await asyncio.wait_for(_get(session, current), remaining)
            async with response:
                if response.status in _REDIRECTS:
                    current = _redirect_target(current, response.headers.get("Location"))
                    continue
                if not 200 <= response.status < 300:
                    raise FetchError(f"HTTP {response.status} {response.reason or ''}".rstrip())
                body = bytearray()
                while True:
                    remaining = left()
                    chunk = await asyncio.wait_for(response.content.readany(), remaining)
                    if not chunk:
                        break
                    body += chunk
                    if len(body) > FETCH_MAX_BYTES:
                        raise FetchError(f"larger than {FETCH_MAX_BYTES} bytes")
            try:
                return json.loads(bytes(body)), str(current)
            except (ValueError, RecursionError):
                raise FetchError("the answer is not JSON") from None
    raise FetchError(f"more than {_MAX_REDIRECTS} redirects")


async def _get(session: aiohttp.ClientSession, url: URL) -> aiohttp.ClientResponse:
    return await session.get(url, allow_redirects=False, proxy=_proxy_for(url))


def _proxy_for(url: URL) -> str | None:
    """The proxy the environment (``https_proxy``, ``no_proxy``...) names for ``url``."""
    proxy = urllib.request.getproxies().get(url.scheme)
    if proxy is None or urllib.request.proxy_bypass(url.host or ""):
        return None
    return proxy


def _redirect_target(current: URL, location: str | None) -> URL:
    """Where a redirect from ``current`` leads; FetchError unless it is the same origin."""
    if not location:
        raise FetchError("a redirect without Location")
    try:
        target = current.join(URL(location))
    except (ValueError, TypeError):
        raise FetchError(f"redirected to {location!r}, which is not a URL") from None
    if not _is_url(str(target)):
        raise FetchError(f"redirected to {location!r}, which is not an http(s) URL")
    if (target.scheme, target.host, target.port) != (current.scheme, current.host, current.port):
        raise FetchError(f"redirected to {target}, another origin (refused)")
    return target


def _is_url(text: str) -> bool:
    parts = urllib.parse.urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
