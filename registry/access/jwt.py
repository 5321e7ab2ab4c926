"""JWT bearer tokens from an OpenID Connect identity provider: :class:`JwtVerifier`.

A token is accepted when it is a compact JWS (never a JWE) of at most
:data:`MAX_TOKEN_BYTES`, signed with an allowed asymmetric algorithm
(``SWITCHBOARD_JWT_ALGORITHMS``: never ``none`` nor HMAC) by a key of the issuer's JWKS
(:mod:`registry.access.idpkeys`) whose type fits that algorithm (RS*/PS*: RSA, ES256/384/512:
EC P-256/P-384/P-521, EdDSA: OKP Ed25519/Ed448), and its claims hold: ``exp`` (required),
``nbf`` and ``iat`` within ``SWITCHBOARD_JWT_LEEWAY``, ``iss`` equal to
``SWITCHBOARD_JWT_ISSUER``, ``aud`` naming ``SWITCHBOARD_JWT_AUDIENCE`` (when set), a
subject that is not a built-in principal's name (``admin-token``, ``read-token``). Its claims
become a :class:`~registry.access.principal.Principal` (``method="jwt"``).

A token naming a key the JWKS lacks makes it be fetched again (within a rate limit); with no
keys at all tokens are refused with reason ``unavailable``. Header members that name other
keys (``jku``, ``x5u``, ``jwk``, ``x5c``) are ignored: keys only ever come from the issuer's
JWKS. ``crit`` is refused. Error messages never show the token.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from jwcrypto.jwa import JWA
from jwcrypto.jwk import JWK

from registry.access.errors import AuthError
from registry.access.idpkeys import REFETCH_INTERVAL, REFRESH_INTERVAL, IssuerKeys
from registry.access.principal import BUILT_IN, ROLES, Principal
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.jwkeys import b64url_decode, key_problem
from registry.settings import Settings

__all__ = ["MAX_TOKEN_BYTES", "JwtVerifier"]

MAX_TOKEN_BYTES = 8 * 1024
"""The longest bearer token read (a JWT with its header, claims and signature)."""

# The key type each algorithm needs: (kty, allowed curves or None for RSA).
_KEY_TYPES: dict[str, tuple[str, frozenset[str] | None]] = {
    **{f"{p}{n}": ("RSA", None) for p in ("RS", "PS") for n in (256, 384, 512)},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}
_EC_SIGNATURE_BYTES = {"ES256": 64, "ES384": 96, "ES512": 132}
_TOKEN_TYPES = frozenset({"jwt", "at+jwt", "application/jwt", "application/at+jwt"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_JSON_DEPTH = 16


@dataclass(frozen=True)
class _Token:
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes
    alg: str
    kid: str | None


class JwtVerifier:
    """Verifies the bearer JWTs of one issuer (the ``jwt_*`` settings) against its JWKS.

    Call :meth:`start` (fetches the keys; a failure is logged, not raised) and :meth:`close`,
    or let the first :meth:`verify` start it. ``session`` is used for the fetches instead of a
    session of its own (it is not closed). ``clock`` is the wall clock for the token's times,
    ``timer`` the monotonic clock of the JWKS fetches (tests move both); ``refetch_interval``
    (the least time between fetches for unknown keys) and ``refresh_interval`` (the periodic
    fetch without ``max-age``) are :mod:`~registry.access.idpkeys`'s defaults.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        session: aiohttp.ClientSession | None = None,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
        refetch_interval: float = REFETCH_INTERVAL,
        refresh_interval: float = REFRESH_INTERVAL,
    ) -> None:
        self.settings = settings
        self.keys = IssuerKeys(
            settings,
            session=session,
            timer=timer,
            refetch_interval=refetch_interval,
            refresh_interval=refresh_interval,
        )
        self.issuer = self.keys.issuer
        self._clock = clock

    @property
    def ready(self) -> bool:
        """Whether the issuer's keys are loaded (tokens can be verified)."""
        return self.keys.ready

    @property
    def refreshing(self) -> bool:
        """Whether a fetch of the JWKS is under way."""
        return self.keys.refreshing

    @property
    def kids(self) -> list[str | None]:
        """The ``kid`` of each key loaded (None for a key without one)."""
        return [k.kid for k in self.keys.keys]

    async def start(self) -> None:
        """Open the HTTP session and fetch the keys once (idempotent; a failed fetch is
        logged, and tokens are refused as ``unavailable`` until keys come)."""
        await self.keys.start()

    async def close(self) -> None:
        """Stop a fetch under way and close the session (if it is this verifier's own)."""
        await self.keys.close()

    async def refresh(self) -> bool:
        """Fetch the JWKS now, or wait for the fetch under way; whether it succeeded."""
        return await self.keys.refresh()

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` proves, or :class:`AuthError` (reasons ``malformed``,
        ``bad_algorithm``, ``unknown_key``, ``bad_signature``, ``expired``,
        ``not_yet_valid``, ``bad_issuer``, ``bad_audience``, ``bad_claims``,
        ``unavailable``). Messages never show the token."""
        parsed = _parse(token, self.settings.jwt_algorithms)
        if not self.keys.started:
            await self.keys.start()
        keys = await self._keys_for(parsed)
        _check_signature(parsed, keys)
        return self._principal(parsed.claims)

    async def _keys_for(self, token: _Token) -> list[JWK]:
        """The keys that may have signed ``token``: the JWKS fetched again (within its rate
        limit) when it has none ``token`` could name; refused when none fits."""
        self.keys.tick()
        found = self._candidates(token)
        if found is None:
            which = f"kid {_shown(token.kid)}" if token.kid else f"a key for {token.alg}"
            if await self.keys.refetch(f"a token names {which}, which it lacks"):
                found = self._candidates(token)
        if not self.keys.ready:
            raise AuthError(
                "unavailable",
                "the identity provider's signing keys could not be fetched; try again later",
            )
        if found is None:
            raise AuthError(
                "unknown_key",
                f"the token was signed with a key the issuer does not publish ({which})",
            )
        return found

    def _candidates(self, token: _Token) -> list[JWK] | None:
        """The usable keys for ``token``; None when the JWKS has no key it could name."""
        now = self._clock()
        if token.kid is not None:
            named = [k.key for k in self.keys.keys if k.named(token.kid)]
            if not named:
                return None
            fitting = [key for key in named if _fits(key, token.alg)]
            if not fitting:
                raise AuthError(
                    "bad_algorithm",
                    f"the token's key {_shown(token.kid)} is not a key for {token.alg}",
                )
            usable = [key for key in fitting if key_problem(key, token.alg, now=now) is None]
            if not usable:
                problem = key_problem(fitting[0], token.alg, now=now)
                raise AuthError(
                    "unknown_key", f"the token's key {_shown(token.kid)} is unusable: {problem}"
                )
            return usable
        usable = [
            k.key
            for k in self.keys.keys
            if _fits(k.key, token.alg) and key_problem(k.key, token.alg, now=now) is None
        ]
        return usable or None

    # -- claims ----------------------------------------------------------------------------

    def _principal(self, claims: dict[str, Any]) -> Principal:
        s = self.settings
        now, leeway = self._clock(), s.jwt_leeway
        exp = _numeric_date(claims, "exp")
        if exp is None:
            raise AuthError("bad_claims", "the token has no exp (expiry) claim")
        if now - leeway >= exp:
            raise AuthError("expired", f"the token expired at {_when(exp)}")
        nbf = _numeric_date(claims, "nbf")
        if nbf is not None and nbf > now + leeway:
            raise AuthError("not_yet_valid", f"the token is not valid before {_when(nbf)}")
        iat = _numeric_date(claims, "iat")
        if iat is not None and iat > now + leeway:
            raise AuthError("not_yet_valid", f"the token is issued in the future ({_when(iat)})")
        if claims.get("iss") != self.issuer:
            raise AuthError(
                "bad_issuer", f"the token was not issued by {self.issuer} (its iss claim)"
            )
        if s.jwt_audience is not None and not _has_audience(claims.get("aud"), s.jwt_audience):
            raise AuthError(
                "bad_audience", f"the token is not meant for {s.jwt_audience} (its aud claim)"
            )
        subject = _claim(claims, s.jwt_subject_claim)
        if not isinstance(subject, str) or not subject or _CONTROL.search(subject):
            raise AuthError(
                "bad_claims",
                f"the token's {s.jwt_subject_claim} claim is not a non-empty string "
                "(it names the caller)",
            )
        if subject in BUILT_IN:  # never the admin or read token's principal
            raise AuthError(
                "bad_claims",
                f"the token's {s.jwt_subject_claim} claim names a built-in principal "
                f"({subject}): no token may stand for it",
            )
        tenant = _claim(claims, s.jwt_tenant_claim)
        if tenant is not None and (not isinstance(tenant, str) or _CONTROL.search(tenant)):
            raise AuthError("bad_claims", f"the token's {s.jwt_tenant_claim} claim is not a string")
        groups = _names(_claim(claims, s.jwt_groups_claim), s.jwt_groups_claim)
        roles = _names(_claim(claims, s.jwt_roles_claim), s.jwt_roles_claim) & ROLES
        return Principal(
            subject=subject,
            tenant=tenant or None,
            groups=groups,
            roles=roles,
            method="jwt",
            issuer=self.issuer,
        )


# -- the token -------------------------------------------------------------------------------


def _malformed(message: str) -> AuthError:
    return AuthError("malformed", message)


def _parse(token: str, algorithms: list[str]) -> _Token:
    """The compact JWS ``token`` split and decoded, its header checked (no key used yet)."""
    if not isinstance(token, str) or not token:
        raise _malformed("the bearer token is empty")
    if len(token) > MAX_TOKEN_BYTES:
        raise _malformed(f"the bearer token is longer than {MAX_TOKEN_BYTES} bytes")
    if not token.isascii():
        raise _malformed("the bearer token is not a JWT (it has non-ASCII characters)")
    parts = token.split(".")
    if len(parts) == 5:
        raise _malformed("encrypted tokens (JWE) are not accepted: send a signed JWT (JWS)")
    if len(parts) != 3:
        raise _malformed("the bearer token is not a JWT (three base64url parts joined by dots)")
    header = _json_part(parts[0], "header")
    alg = header.get("alg")
    if not isinstance(alg, str) or not alg:
        raise _malformed("the token's header names no algorithm (alg)")
    if alg not in algorithms:
        raise AuthError(
            "bad_algorithm",
            f"the token is signed with {_shown(alg)}, which is not accepted "
            f"(allowed: {', '.join(algorithms)})",
        )
    if "crit" in header:
        raise _malformed("the token's header names critical extensions (crit): none is supported")
    if "b64" in header or "cty" in header or "enc" in header:
        raise _malformed("the token's header is not a plain signed JWT's (b64, cty or enc)")
    typ = header.get("typ")
    if typ is not None and (not isinstance(typ, str) or typ.lower() not in _TOKEN_TYPES):
        raise _malformed("the token's typ is not JWT nor at+jwt")
    kid = header.get("kid")
    if kid is not None and (not isinstance(kid, str) or not kid):
        raise _malformed("the token's kid is not a non-empty string")
    claims = _json_part(parts[1], "payload")
    try:
        signature = b64url_decode(parts[2])
    except ValueError:
        raise _malformed("the token's signature is not base64url") from None
    return _Token(
        claims=claims,
        signing_input=f"{parts[0]}.{parts[1]}".encode("ascii"),
        signature=signature,
        alg=alg,
        kid=kid,
    )


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        value = loads_limited(b64url_decode(text), max_depth=_JSON_DEPTH)
    except (ValueError, JsonLimitError):
        value = None
    if not isinstance(value, dict):
        raise _malformed(f"the token's {what} is not a base64url-encoded JSON object")
    return value


def _fits(key: JWK, alg: str) -> bool:
    """Whether ``key``'s type (and curve) is the one ``alg`` needs."""
    kty, curves = _KEY_TYPES[alg]
    return key.get("kty") == kty and (curves is None or key.get("crv") in curves)


def _check_signature(token: _Token, keys: list[JWK]) -> None:
    """Raise ``bad_signature`` unless one of ``keys`` verifies ``token``'s signature."""
    size = _EC_SIGNATURE_BYTES.get(token.alg)
    if token.signature and (size is None or len(token.signature) == size):
        engine = JWA.signing_alg(token.alg)
        for key in keys:
            try:
                engine.verify(key, token.signing_input, token.signature)
            except Exception:  # cryptography and jwcrypto raise several types for a bad one
                continue
            return
    raise AuthError("bad_signature", "the token's signature does not verify")


# -- claims ----------------------------------------------------------------------------------


def _claim(claims: dict[str, Any], name: str) -> Any:
    """The claim ``name``; a dotted name not present as such is a path into nested objects
    (``realm_access.roles``). None when absent."""
    if name in claims or "." not in name:
        return claims.get(name)
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _numeric_date(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AuthError(
            "bad_claims", f"the token's {name} claim is not a NumericDate (seconds since 1970)"
        )
    return float(value)


def _has_audience(aud: object, audience: str) -> bool:
    if isinstance(aud, str):
        return aud == audience
    return isinstance(aud, list) and all(isinstance(a, str) for a in aud) and audience in aud


def _names(value: object, claim: str) -> frozenset[str]:
    """Groups or roles: a list of strings, or one space-separated string; absent: none."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item for item in value if item and not _CONTROL.search(item))
    raise AuthError(
        "bad_claims",
        f"the token's {claim} claim is not a list of strings nor a space-separated string",
    )


def _when(value: float) -> str:
    try:
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{value:.0f} (seconds since 1970)"


def _shown(value: str | None) -> str:
    """A value from the token, quoted and cut short for a message."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."
