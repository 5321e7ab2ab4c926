"""Signing keys for agent cards: the JWS algorithms allowed, key checks and key generation.

Also the strict base64url codec JOSE uses, and :func:`public_jwk`: whether a JWK may be
trusted at all (an asymmetric public signature key, no private members, valid lifetime
members), for the trust store and the JWKS documents it fetches. Symmetric (``oct``) keys,
``none`` and ``HS*`` are never accepted; RSA keys need at least 2048 bits.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from jwcrypto.common import JWException
from jwcrypto.jwk import JWK, JWKValuesRegistry, ParmType

from registry.errors import RegistryError

__all__ = [
    "ALLOWED_ALGS",
    "PRIVATE_PARAMS",
    "as_jwk",
    "b64url_decode",
    "b64url_encode",
    "current",
    "default_alg",
    "expired",
    "generate_key",
    "key_id",
    "key_problem",
    "public_jwk",
    "public_jwks",
    "signing_problem",
]

#: Public-key JWS algorithms accepted on card signatures (never ``none`` nor ``HS*``).
ALLOWED_ALGS: frozenset[str] = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)

_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_EDDSA_CURVES = ("Ed25519", "Ed448")
_MIN_RSA_BITS = 2048
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
MAX_NUMERIC_DATE = 253402300799  # 9999-12-31T23:59:59Z

#: Private members of every key type jwcrypto knows (RSA, EC, OKP, oct, AKP).
PRIVATE_PARAMS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"})
_LIFETIME_PARAMS = ("exp", "nbf", "iat")  # kept with the public key (export_public drops them)
_KEY_AGREEMENT_CURVES = frozenset({"X25519", "X448"})


def b64url_decode(text: str) -> bytes:
    """Strict base64url: alphabet only, no padding, canonical trailing bits."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url_encode(data) != text:
        raise ValueError("not canonical base64url")
    return data


def b64url_encode(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def as_jwk(value: JWK | dict[str, Any]) -> JWK:
    """``value`` as a :class:`JWK`; ``ValueError`` if it is not a valid one."""
    if isinstance(value, JWK):
        return value
    if not isinstance(value, dict):
        raise ValueError("a JWK must be a JSON object")
    try:
        return JWK(**value)
    except (JWException, ValueError, TypeError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def key_id(key: JWK) -> str | None:
    """The key's ``kid`` or, without one, its RFC 7638 thumbprint; ``None`` if neither works."""
    kid = key.get("kid")
    if kid is not None:
        return kid if isinstance(kid, str) else None
    try:
        return key.thumbprint()
    except (JWException, ValueError, TypeError):
        return None


def _describe(key: JWK) -> str:
    kty = key.get("kty")
    if kty == "RSA":
        return f"a {_rsa_bits(key)}-bit RSA key"
    if kty in ("EC", "OKP"):
        return f"an {kty} {key.get('crv')} key"
    return f"a {kty} key"


def _rsa_bits(key: JWK) -> int:
    try:
        return int.from_bytes(b64url_decode(key.get("n", "")), "big").bit_length()
    except (ValueError, TypeError):
        return 0


def _fit_problem(key: JWK, alg: str) -> str | None:
    """Why ``key``'s type cannot serve ``alg``, or ``None``."""
    kty = key.get("kty")
    if kty == "oct":
        return "it is a symmetric (oct) key, and card signatures need a public key"
    if alg not in ALLOWED_ALGS:
        return f"alg {alg!r} is not supported"
    if alg in _EC_CURVES:
        if kty != "EC" or key.get("crv") != _EC_CURVES[alg]:
            return f"{alg} needs an EC {_EC_CURVES[alg]} key, not {_describe(key)}"
    elif alg == "EdDSA":
        if kty != "OKP" or key.get("crv") not in _EDDSA_CURVES:
            return f"EdDSA needs an OKP Ed25519 or Ed448 key, not {_describe(key)}"
    elif kty != "RSA":
        return f"{alg} needs an RSA key, not {_describe(key)}"
    elif (bits := _rsa_bits(key)) < _MIN_RSA_BITS:
        return f"its RSA modulus has {bits} bits, fewer than the {_MIN_RSA_BITS} required"
    return None


def _usage_problem(key: JWK, op: str, now: float) -> str | None:
    use = key.get("use")
    if use is not None and use != "sig":
        return f"its use is {use!r}, not 'sig'"
    key_ops = key.get("key_ops")
    if key_ops is not None and (not isinstance(key_ops, list) or op not in key_ops):
        return f"its key_ops {key_ops!r} do not include {op!r}"
    return _lifetime_problem(key, now)


def _numeric_date(value: Any) -> bool:
    """Whether ``value`` is a JSON NumericDate: a finite number (not a bool, not a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _when(value: int | float, member: str) -> str:
    try:
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{member} {value}"


def _lifetime_problem(key: JWK, now: float) -> str | None:
    """The key's validity period: ``exp`` (expiry), ``nbf`` (not before), ``iat`` (issued at).

    Each, if present, must be a NumericDate (a number of POSIX seconds); the key is usable from
    ``nbf`` (inclusive) until ``exp`` (exclusive). ``iat`` is only checked for its type.
    """
    for member in ("exp", "nbf", "iat"):
        value = key.get(member)
        if value is not None and not _numeric_date(value):
            shown = repr(value)
            shown = shown if len(shown) <= 40 else f"{shown[:37]}..."
            return f"its {member} {shown} is not a NumericDate (a number of seconds since 1970)"
    exp, nbf = key.get("exp"), key.get("nbf")
    if exp is not None and exp <= now:
        return f"it expired at {_when(exp, 'exp')}"
    if nbf is not None and nbf > now:
        return f"it is not valid before {_when(nbf, 'nbf')} (nbf)"
    return None


def key_problem(jwk: JWK | dict[str, Any], alg: str, *, now: float | None = None) -> str | None:
    """Why ``jwk`` cannot verify a signature made with ``alg``, or ``None`` if it can.

    Checks ``use`` (must be ``sig`` if present), ``key_ops`` (must include ``verify``), the
    lifetime members (``exp`` a NumericDate in the future, ``nbf`` one not after ``now``,
    ``iat`` a NumericDate; any other type is a problem), ``alg`` (must equal ``alg`` if
    present), the key type and curve for ``alg`` and the RSA size (at least 2048 bits);
    symmetric keys are refused.
    """
    try:
        key = as_jwk(jwk)
    except ValueError as exc:
        return f"it is not a valid JWK ({exc})"
    if key.get("kty") == "oct":
        return _fit_problem(key, alg)
    return (
        _usage_problem(key, "verify", time.time() if now is None else now)
        or _alg_problem(key, alg)
        or _fit_problem(key, alg)
    )


def signing_problem(key: JWK, alg: str, *, now: float) -> str | None:
    """Why ``key`` cannot sign with ``alg`` (its usage, type or own ``alg``), or ``None``."""
    return _usage_problem(key, "sign", now) or _fit_problem(key, alg) or _alg_problem(key, alg)


def _alg_problem(key: JWK, alg: str) -> str | None:
    key_alg = key.get("alg")
    if key_alg is not None and key_alg != alg:
        return f"it is for {key_alg!r}, not {alg!r}"
    return None


def default_alg(key: JWK) -> str:
    """The algorithm to sign with by key type: EC P-256 → ES256, RSA → RS256, OKP → EdDSA."""
    kty, crv = key.get("kty"), key.get("crv")
    if kty == "EC":
        for alg, curve in _EC_CURVES.items():
            if crv == curve:
                return alg
    if kty == "RSA":
        return "RS256"
    if kty == "OKP" and crv in _EDDSA_CURVES:
        return "EdDSA"
    raise RegistryError(f"no signing algorithm for {_describe(key)}", code="bad_key")


_GENERATE: dict[str, dict[str, Any]] = {
    **{alg: {"kty": "EC", "crv": crv} for alg, crv in _EC_CURVES.items()},
    "EdDSA": {"kty": "OKP", "crv": "Ed25519"},
    **{alg: {"kty": "RSA", "size": 3072} for alg in ALLOWED_ALGS if alg[:2] in ("RS", "PS")},
}


def generate_key(alg: str = "ES256", kid: str | None = None) -> JWK:
    """A new private signing key for ``alg`` with ``use: sig`` and ``alg`` set.

    ES256/ES384/ES512 use EC P-256/P-384/P-521, RS*/PS* a 3072-bit RSA key, EdDSA Ed25519.
    ``kid`` defaults to the key's RFC 7638 thumbprint.
    """
    params = _GENERATE.get(alg)
    if params is None:
        choices = ", ".join(sorted(_GENERATE))
        raise RegistryError(
            f"cannot generate a key for alg {alg!r}; use one of {choices}", code="bad_key"
        )
    key = JWK.generate(**params, alg=alg, use="sig")
    key["kid"] = kid or key.thumbprint()
    return key


def public_jwks(keys: Iterable[JWK]) -> dict[str, Any]:
    """A JWKS (``{"keys": [...]}``) of the public halves of ``keys``, e.g. for ``jwks.json``."""
    return {"keys": [json.loads(key.export_public()) for key in keys]}


# --- keys that may be trusted ----------------------------------------------------------------


def _refused(message: str, code: str = "invalid_jwk", details: Any = None) -> RegistryError:
    return RegistryError(message, code=code, status=400, details=details)


def public_jwk(data: object) -> tuple[JWK, dict[str, Any]]:
    """Check a JWK meant for verification; return it parsed and its public members.

    Refuses (400) anything that is not a JSON object jwcrypto accepts as an asymmetric public
    signature key: ``symmetric_key`` for ``oct``, ``private_key`` when private members are
    present, ``invalid_jwk`` otherwise (malformed base64url, a point off the curve, a key
    whose ``use``/``key_ops`` forbid verification, a key-agreement curve, ...).
    """
    if not isinstance(data, dict):
        raise _refused("the JWK must be a JSON object")
    kty = data.get("kty")
    if not isinstance(kty, str) or not kty:
        raise _refused('the JWK has no "kty" (key type)')
    if kty == "oct":
        raise _refused(
            "symmetric (oct) keys cannot be trusted: anyone holding the secret could sign; "
            "send an asymmetric public key (EC, RSA or OKP)",
            code="symmetric_key",
        )
    private = sorted(PRIVATE_PARAMS & set(data))
    if private:
        raise _refused(
            f"the JWK carries private key parameters ({', '.join(private)}): "
            "send the public key only (it was not stored)",
            code="private_key",
            details={"private_parameters": private},
        )
    kid = data.get("kid")
    if kid is not None and (not isinstance(kid, str) or not kid):
        raise _refused('the JWK\'s "kid" must be a non-empty string')
    for name, param in JWKValuesRegistry.get(kty, {}).items():
        if not param.public or param.type not in (ParmType.b64, ParmType.b64u):
            continue
        value = data.get(name)
        if value is not None and (
            not isinstance(value, str) or not value or not _B64URL.fullmatch(value)
        ):
            raise _refused(
                f'the JWK\'s "{name}" is not base64url (unpadded, A-Z a-z 0-9 - _)',
                details={"parameter": name},
            )
    if kty == "OKP" and data.get("crv") in _KEY_AGREEMENT_CURVES:
        raise _refused(f"OKP curve {data['crv']} is for key agreement, not signatures")
    try:
        key = JWK(**data)
        key.get_op_key("verify")  # builds the key: checks the curve point, use and key_ops
    except Exception as exc:  # jwcrypto and cryptography raise many types for bad keys
        reason = str(exc) or type(exc).__name__
        raise _refused(f"the JWK is not a usable public key: {reason}") from None
    if key.has_private:  # pragma: no cover - PRIVATE_PARAMS covers every private member
        raise _refused("the JWK carries a private key: send the public key only", "private_key")
    public = key.export_public(as_dict=True)
    for name in _LIFETIME_PARAMS:
        if name in data:
            public[name] = _checked_numeric_date(name, data[name])
    return JWK(**public), public


def _checked_numeric_date(name: str, value: object) -> int | float:
    """``value`` if it is a NumericDate (RFC 7519: seconds since 1970 as a JSON number)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (isinstance(value, int) or math.isfinite(value))
        or not 0 <= value <= MAX_NUMERIC_DATE
    ):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise _refused(
            f'the JWK\'s "{name}" must be a NumericDate (seconds since 1970-01-01T00:00:00Z '
            f"as a number up to year 9999), not {shown}",
            details={"parameter": name},
        )
    return value


def current(key: JWK) -> bool:
    """Whether ``key`` has not expired (its ``exp``, if any, is in the future)."""
    exp = key.get("exp")
    return not isinstance(exp, int | float) or exp > time.time()


def expired(public: dict[str, Any], now: float) -> RegistryError | None:
    """The refusal (400 ``invalid_jwk``) of a key whose ``exp`` has passed at ``now``
    (POSIX seconds), if it has."""
    exp = public.get("exp")
    if exp is None or exp > now:
        return None
    when = datetime.fromtimestamp(exp, UTC).isoformat(timespec="seconds")
    return _refused(
        f"the JWK expired at {when} (its exp is {exp}): an expired key verifies nothing; "
        "send a current key",
        details={"parameter": "exp", "exp": exp},
    )
