"""Agent card signatures (A2A v1.0 section 8.4): verification and signing.

A card signature is a JWS over a canonical form of the card without ``signatures``;
:func:`verify_card` checks it against each payload form of :mod:`registry.payloads`, strictest
first, and records which one matched, what it leaves uncovered and the content it covers
(:attr:`Verification.signed_content`, what a verified card must be read from). :func:`sign_card`
signs the strict RFC 8785 form. Keys come from a :class:`KeyResolver` (the trust store, or
:class:`StaticKeys`); a card's own ``jku`` is only a hint the resolver may follow. Every refusal
is a :class:`Verification` with a one-sentence reason; :func:`verify_card` never raises.

Key checks and generation live in :mod:`registry.jwkeys`, payload forms and cleaning in
:mod:`registry.payloads`; :data:`ALLOWED_ALGS`, :func:`generate_key`, :func:`key_problem`,
:func:`public_jwks`, :func:`payload_forms` and :func:`clean_for_signing` are re-exported here.
"""

from __future__ import annotations

import binascii
import copy
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from jwcrypto.common import JWException
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS

from registry.errors import CardError, RegistryError
from registry.jwkeys import (
    ALLOWED_ALGS,
    as_jwk,
    b64url_decode,
    b64url_encode,
    default_alg,
    generate_key,
    key_id,
    key_problem,
    public_jwks,
    signing_problem,
)
from registry.payloads import (
    Form,
    FormError,
    clean_for_signing,
    covered_content,
    iter_card_forms,
    jcs,
    payload_forms,
    unsigned_part,
)

__all__ = [
    "ALLOWED_ALGS",
    "KeyLookup",
    "KeyResolver",
    "StaticKeys",
    "Status",
    "Verification",
    "clean_for_signing",
    "generate_key",
    "key_problem",
    "payload_forms",
    "public_jwks",
    "sign_card",
    "verify_card",
]

log = logging.getLogger(__name__)

Status = Literal["verified", "unsigned", "invalid", "untrusted-key"]

#: At most this many signatures are checked on one card; more make the card ``invalid``.
MAX_SIGNATURES = 16


# ---------------------------------------------------------------------------------------------
# Results and key resolution


@dataclass(frozen=True)
class Verification:
    """The outcome of checking a card's signatures.

    ``signed_content`` is set only when ``status`` is ``verified``: the card exactly as the
    verified payload form covers it, and so the only thing a verified card may be read from
    (``parse_card(verification.signed_content)``, never the card as received). For the strict
    ``rfc8785`` form it is the card minus ``signatures`` (read back from the signed bytes); for
    an SDK form it is the object the SDK signed (fields unknown to its schema, erased values
    and the 0.3 security schemes' ``type`` left out, empty values dropped) with the defaults
    a2a-sdk 0.3 drops put back (``preferredTransport: "JSONRPC"``, ``protocolVersion:
    "0.3.0"``), so it reads as the SDK read it. It is computed from the signed payload bytes alone
    (:func:`registry.payloads.covered_content`), so the same signature always yields the same
    content whatever was added to, changed in or removed from the card's uncovered parts. It
    never contains ``signatures`` nor any path of ``uncovered_fields``. It is a fresh object
    owned by the caller, and not part of equality, hashing, ``repr`` or :meth:`to_api`.
    """

    status: Status
    kid: str | None = None
    reason: str | None = None
    key_source: str | None = None
    payload_form: str | None = None
    uncovered_fields: tuple[str, ...] = ()
    signed_content: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def to_api(self) -> dict[str, Any]:
        """The JSON shape the API and CLI show."""
        return {
            "status": self.status,
            "kid": self.kid,
            "reason": self.reason,
            "key_source": self.key_source,
            "payload_form": self.payload_form,
            "uncovered_fields": list(self.uncovered_fields),
        }


@dataclass(frozen=True)
class KeyLookup:
    """Candidate public keys for a ``kid``, each with a label saying where it came from."""

    keys: list[tuple[JWK, str]] = field(default_factory=list)
    problem: str | None = None  # why there are none


class KeyResolver(Protocol):
    """Finds the keys that may verify a signature with this ``kid`` (and ``jku`` hint)."""

    async def keys_for(self, kid: str, jku: str | None) -> KeyLookup: ...


class StaticKeys:
    """A :class:`KeyResolver` over a fixed set of JWKs, for the CLI and tests.

    ``jwks`` is a JWKS (``{"keys": [...]}``), a list of JWK objects or one JWK object. A key
    matches a ``kid`` by its ``kid`` member or, if it has none, by its RFC 7638 thumbprint. The
    ``jku`` hint is ignored: these keys are the whole trust set.
    """

    def __init__(self, jwks: dict[str, Any] | list[dict[str, Any]], source: str = "jwks") -> None:
        entries = jwks.get("keys", [jwks]) if isinstance(jwks, dict) else jwks
        if not isinstance(entries, list):
            raise RegistryError(f"{source}: 'keys' is not a list", code="bad_key")
        self.source = source
        self._keys: list[JWK] = []
        for index, entry in enumerate(entries):
            try:
                self._keys.append(as_jwk(entry))
            except ValueError as exc:
                raise RegistryError(
                    f"{source}: key {index} is not a valid JWK: {exc}", code="bad_key"
                ) from None

    async def keys_for(self, kid: str, jku: str | None) -> KeyLookup:
        """The keys whose ``kid`` (or thumbprint, for keys without one) is ``kid``."""
        found = [(key, self.source) for key in self._keys if key_id(key) == kid]
        if found:
            return KeyLookup(keys=found)
        return KeyLookup(problem=f"no key with kid {kid!r} in {self.source}")


# ---------------------------------------------------------------------------------------------
# Verification


@dataclass(frozen=True)
class _Header:
    alg: str
    kid: str
    jku: str | None


class _Refused(Exception):
    def __init__(self, status: Status, reason: str, kid: str | None = None) -> None:
        super().__init__(reason)
        self.status: Status = status
        self.reason = reason
        self.kid = kid


def _parse_header(protected: str) -> _Header:
    try:
        raw = b64url_decode(protected)
    except (ValueError, binascii.Error):
        raise _Refused("invalid", "the protected header is not valid base64url") from None
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_members)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Refused("invalid", "the protected header is not a UTF-8 JSON object") from None
    if not isinstance(header, dict):
        raise _Refused("invalid", "the protected header is not a JSON object")
    kid = header.get("kid")
    kid = kid if isinstance(kid, str) and kid else None
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise _Refused("invalid", "the protected header has no 'alg' string", kid)
    if kid is None:
        raise _Refused("invalid", "the protected header has no 'kid' string", kid)
    if alg.lower() == "none":
        raise _Refused("invalid", "alg 'none' is not allowed", kid)
    if alg.upper().startswith("HS"):
        raise _Refused(
            "invalid",
            f"alg {alg!r} is HMAC, which is refused: card signatures must use public-key "
            "algorithms (algorithm confusion)",
            kid,
        )
    if alg not in ALLOWED_ALGS:
        raise _Refused("invalid", f"alg {alg!r} is not supported", kid)
    if "crit" in header:
        raise _Refused(
            "invalid",
            f"the protected header marks {header['crit']!r} critical, "
            "which this verifier does not understand",
            kid,
        )
    if "b64" in header:
        raise _Refused("invalid", "unencoded payloads (b64) are not supported", kid)
    jku = header.get("jku")
    if jku is not None and not isinstance(jku, str):
        raise _Refused("invalid", "the protected header's 'jku' is not a string", kid)
    return _Header(alg=alg, kid=kid, jku=jku)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate member {key!r}")
        result[key] = value
    return result


def _jws_verifies(protected: str, payload: bytes, signature: str, key: JWK, alg: str) -> bool:
    token = f"{protected}.{b64url_encode(payload)}.{signature}"
    jws = JWS()
    jws.allowed_algs = [alg]
    try:
        jws.deserialize(token)
        jws.verify(key, alg=alg)
    except (JWException, ValueError, TypeError):
        return False
    except Exception:  # jwcrypto or cryptography failing on an odd key: not a match
        log.exception("checking a card signature with kid %r failed unexpectedly", key.get("kid"))
        return False
    return True


async def _verify_one(
    entry: Any,
    index: int,
    forms: _Forms,
    resolver: KeyResolver,
    now: float,
) -> Verification:
    where = f"signatures[{index}]"
    if not isinstance(entry, dict):
        raise _Refused("invalid", f"{where} is not an object")
    protected, signature = entry.get("protected"), entry.get("signature")
    if not isinstance(protected, str) or not protected:
        raise _Refused("invalid", f"{where} has no 'protected' string")
    if not isinstance(signature, str):
        raise _Refused("invalid", f"{where} has no 'signature' string")
    if entry.get("header") is not None and not isinstance(entry["header"], dict):
        raise _Refused("invalid", f"{where}.header is not an object")
    header = _parse_header(protected)
    kid = header.kid
    if not signature:
        raise _Refused("invalid", "the signature is empty", kid)
    try:
        b64url_decode(signature)
    except (ValueError, binascii.Error):
        raise _Refused("invalid", "the signature is not valid base64url", kid) from None

    try:
        lookup = await resolver.keys_for(kid, header.jku)
    except Exception as exc:  # a resolver bug or outage must not escape verify_card
        raise _Refused("untrusted-key", f"looking up the key failed ({exc})", kid) from None
    if not lookup.keys:
        raise _Refused("untrusted-key", lookup.problem or f"no trusted key with kid {kid!r}", kid)

    usable: list[tuple[JWK, str]] = []
    refusals: list[str] = []
    for key, source in lookup.keys:
        problem = key_problem(key, header.alg, now=now)
        if problem:
            refusals.append(f"the key from {source} is refused: {problem}")
        else:
            usable.append((as_jwk(key), source))
    if not usable:
        raise _Refused("invalid", "; ".join(refusals), kid)

    if forms.empty():
        raise _Refused("invalid", "the card has no canonical form to verify", kid)
    for key, source in usable:
        for form in forms:
            if _jws_verifies(protected, form.payload, signature, key, header.alg):
                return Verification(
                    "verified",
                    kid=kid,
                    key_source=source,
                    payload_form=form.name,
                    uncovered_fields=form.uncovered,
                    signed_content=covered_content(form.payload),
                )
    tried = ", ".join(form.name for form in forms)
    raise _Refused(
        "invalid", f"the signature does not match the card's content (tried: {tried})", kid
    )


class _Forms:
    """The card's payload forms, strictest first, each built the first time a signature
    check gets to it and kept for the next (:func:`iter_card_forms`)."""

    def __init__(self, card: dict[str, Any]) -> None:
        self._source: Iterator[Form] | None = None
        self._card = card
        self._built: list[Form] = []

    def _next(self) -> Form | None:
        if self._source is None:
            self._source = iter_card_forms(self._card)
        form = next(self._source, None)
        if form is not None:
            self._built.append(form)
        return form

    def empty(self) -> bool:
        """Whether the card has no form at all."""
        return not self._built and self._next() is None

    def __iter__(self) -> Iterator[Form]:
        n = 0
        while n < len(self._built) or self._next() is not None:
            yield self._built[n]
            n += 1


def _combine(failures: list[_Refused]) -> Verification:
    invalid = [f for f in failures if f.status == "invalid"]
    status: Status = "invalid" if invalid else "untrusted-key"
    first = (invalid or failures)[0]
    if len(failures) == 1:
        return Verification(status, kid=first.kid, reason=first.reason)
    parts = [
        f"{f'kid {f.kid!r}' if f.kid else f'signature {i + 1}'}: {f.reason}"
        for i, f in enumerate(failures)
    ]
    return Verification(status, kid=first.kid, reason=f"no signature verified ({'; '.join(parts)})")


async def verify_card(
    card: dict[str, Any], resolver: KeyResolver, *, now: float | None = None
) -> Verification:
    """Check the card's ``signatures``; any one that verifies makes the card ``verified``.

    ``unsigned`` without signatures; otherwise ``invalid`` if some signature is malformed,
    refused or does not match, else ``untrusted-key``. ``now`` (POSIX seconds) is the time key
    expiry is judged against. A ``verified`` result carries ``signed_content``, the card as its
    signature covers it: read the card from that, not from ``card``. Never raises: an
    unexpected failure is logged and makes the card ``invalid`` with a reason saying so.
    """
    try:
        return await _verify_card(card, resolver, time.time() if now is None else now)
    except Exception as exc:
        log.exception("verifying a card's signatures failed unexpectedly")
        return Verification("invalid", reason=_internal_failure(exc))


def _internal_failure(exc: BaseException) -> str:
    return (
        f"the signatures could not be checked: the verifier failed internally "
        f"({type(exc).__name__}); the card is treated as not verified"
    )


async def _verify_card(card: dict[str, Any], resolver: KeyResolver, now: float) -> Verification:
    if not isinstance(card, dict):
        return Verification("invalid", reason="the card is not a JSON object")
    signatures = card.get("signatures")
    if signatures is None or signatures == []:
        return Verification("unsigned")
    if not isinstance(signatures, list):
        return Verification("invalid", reason="'signatures' is not a list")
    if len(signatures) > MAX_SIGNATURES:
        return Verification(
            "invalid",
            reason=f"the card has {len(signatures)} signatures, more than the "
            f"{MAX_SIGNATURES} checked",
        )

    forms = _Forms(card)
    failures: list[_Refused] = []
    for index, entry in enumerate(signatures):
        try:
            return await _verify_one(entry, index, forms, resolver, now)
        except _Refused as refused:
            failures.append(refused)
        except Exception as exc:  # one odd signature must not hide another that verifies
            log.exception("checking signatures[%d] of a card failed unexpectedly", index)
            failures.append(_Refused("invalid", _internal_failure(exc)))
    return _combine(failures)


# ---------------------------------------------------------------------------------------------
# Signing


def sign_card(
    card: dict[str, Any],
    key: JWK,
    *,
    kid: str | None = None,
    jku: str | None = None,
    alg: str | None = None,
) -> dict[str, Any]:
    """``card`` cleaned (:func:`clean_for_signing`) with a new signature by ``key`` appended.

    The payload is the RFC 8785 form of the cleaned card without ``signatures``; the protected
    header is ``{"alg", "kid", "typ": "JOSE"}`` plus ``jku`` if given. ``alg`` defaults to the
    key's ``alg`` or its type (EC P-256 → ES256, RSA → RS256, OKP → EdDSA); ``kid`` to the key's
    ``kid`` or RFC 7638 thumbprint. Existing signatures are kept as they are (they stay valid
    if they were over the cleaned content). Raises ``RegistryError(code="bad_key")`` for a key
    that cannot sign and ``CardError`` for a card with no RFC 8785 form.
    """
    if not isinstance(key, JWK):
        raise RegistryError("the signing key is not a JWK", code="bad_key")
    if key.get("kty") == "oct":
        raise RegistryError(
            "symmetric (oct) keys cannot sign agent cards; use an EC, RSA or OKP key",
            code="bad_key",
        )
    if not key.has_private:
        raise RegistryError("the signing key has no private part", code="bad_key")
    alg = alg or key.get("alg") or default_alg(key)
    problem = signing_problem(key, alg, now=time.time())
    if problem:
        raise RegistryError(f"the key cannot sign with {alg}: {problem}", code="bad_key")
    if not isinstance(card, dict):
        raise CardError("the card is not a JSON object", details=[])
    existing = card.get("signatures") or []
    if not isinstance(existing, list):
        raise CardError(
            "the card's 'signatures' is not a list",
            details=[{"field": "signatures", "problem": "not a list"}],
        )
    body = clean_for_signing(unsigned_part(card))
    try:
        payload = jcs(body)
    except FormError as exc:
        raise CardError(f"the card has no RFC 8785 form: {exc}", details=[]) from None

    kid = kid or key_id(key)
    if not kid:
        raise RegistryError("the signing key has no usable kid; pass one", code="bad_key")
    header: dict[str, Any] = {"alg": alg, "kid": kid, "typ": "JOSE"}
    if jku is not None:
        header["jku"] = jku
    jws = JWS(payload)
    jws.add_signature(key, alg, protected=json.dumps(header, separators=(",", ":"), sort_keys=True))
    protected, _, signature = jws.serialize(compact=True).split(".")
    return {
        **body,
        "signatures": [*copy.deepcopy(existing), {"protected": protected, "signature": signature}],
    }
