"""The router's own signing key.

The router serves cards whose URLs it rewrites to itself (its own card, per-agent cards),
which breaks the agents' signatures; it re-signs them with this key and publishes the public
half at ``/.well-known/jwks.json``. The key comes from ``SWITCHBOARD_SIGNING_KEY_FILE`` (a
private JWK) or, when unset, is generated once and kept in the database so that every replica
signs with the same key.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from cachetools import LRUCache
from jwcrypto.common import JWException
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from registry.errors import RegistryError
from registry.jwkeys import default_alg
from registry.payloads import payload_forms
from registry.records import utcnow
from registry.signatures import generate_key, public_jwks
from registry.store import Store
from router.tables import SigningKeyRow


class CardSigner:
    """Re-signs cards with the router's key; publishes the key's public half.

    Created with the app, given its key at startup (:meth:`load`).
    """

    def __init__(self, key: JWK | None = None, jku: str | None = None) -> None:
        self._key = key
        self.jku = jku
        # signatures are randomized (ECDSA): remember them so an unchanged card keeps its
        # bytes, and so its ETag
        self._signed: LRUCache[str, dict[str, Any]] = LRUCache(maxsize=256)

    async def load(self, store: Store, key_file: str | None) -> None:
        """Load (or create) the key: see :func:`load_signing_key`."""
        self._key = await load_signing_key(store, key_file)

    @property
    def key(self) -> JWK:
        """The signing key; RuntimeError before :meth:`load`."""
        if self._key is None:
            raise RuntimeError("the router signing key is not loaded yet")
        return self._key

    @property
    def kid(self) -> str:
        """The key id put in every signature."""
        return self.key.get("kid") or self.key.thumbprint()

    def resign(self, card: dict[str, Any], jku: str | None = None) -> dict[str, Any]:
        """``card`` as it is (empty and false values included: SDK clients require some of
        them), its own signatures replaced by one of the router's.

        The signature covers the payload a verifier computes from the served card: the
        a2a-sdk 1.x form for 1.0-shaped cards (what 1.x SDK verifiers check), the strict
        RFC 8785 form for older shapes. Same input, same output while remembered (ECDSA
        signatures are randomized).
        """
        unsigned = {k: v for k, v in card.items() if k != "signatures"}
        jku = jku or self.jku
        key = hashlib.sha256(
            json.dumps([unsigned, jku, self.kid], sort_keys=True).encode()
        ).hexdigest()
        signed = self._signed.get(key)
        if signed is None:
            forms = dict(payload_forms(unsigned))
            payload = forms.get("a2a-sdk-1.x") if "supportedInterfaces" in unsigned else None
            signature = self._sign(payload or forms["rfc8785"], jku)
            signed = {**unsigned, "signatures": [signature]}
            self._signed[key] = signed
        return copy.deepcopy(signed)

    def _sign(self, payload: bytes, jku: str | None) -> dict[str, str]:
        alg = self.key.get("alg") or default_alg(self.key)
        header = {"alg": alg, "kid": self.kid, "typ": "JOSE"}
        if jku:
            header["jku"] = jku
        jws = JWS(payload)
        jws.add_signature(self.key, alg=alg, protected=json.dumps(header, sort_keys=True))
        protected, _, signature = jws.serialize(compact=True).split(".")
        return {"protected": protected, "signature": signature}

    def jwks(self) -> dict[str, Any]:
        """The JWKS to serve at ``/.well-known/jwks.json``."""
        return public_jwks([self.key])


def read_key_file(path: str | Path) -> JWK:
    """A private JWK from a file; :class:`RegistryError` (code ``bad_key``) if unusable."""
    try:
        key = JWK.from_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        message = f"cannot read signing key {path}: {exc.strerror}"
        raise RegistryError(message, code="bad_key") from None
    except (JWException, ValueError, TypeError) as exc:
        raise RegistryError(f"signing key {path} is not a JWK: {exc}", code="bad_key") from None
    if not key.has_private or key.get("kty") == "oct":
        raise RegistryError(
            f"signing key {path} must be a private EC, RSA or OKP key", code="bad_key"
        )
    return key


async def load_signing_key(store: Store, key_file: str | None) -> JWK:
    """The configured key file's key, else the database's key (generated on first use)."""
    if key_file:
        return read_key_file(key_file)
    key = await _oldest(store)
    if key is not None:
        return key
    new = generate_key("ES256")
    try:
        async with store.session() as session, session.begin():
            row = SigningKeyRow(
                kid=new["kid"], jwk=json.loads(new.export()), created_at=utcnow(), slot=1
            )
            session.add(row)
    except IntegrityError:
        pass  # another replica generated it at the same moment: use theirs
    key = await _oldest(store)
    assert key is not None
    return key


async def _oldest(store: Store) -> JWK | None:
    async with store.session() as session:
        # slot 1 first (rows of older versions have none: then the oldest)
        query = select(SigningKeyRow).order_by(
            col(SigningKeyRow.slot).is_(None), col(SigningKeyRow.created_at), col(SigningKeyRow.kid)
        )
        row = (await session.exec(query)).first()
    return JWK(**row.jwk) if row is not None else None
