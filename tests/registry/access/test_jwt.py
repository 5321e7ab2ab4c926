"""JwtVerifier: tokens accepted and refused, against a real identity provider on 127.0.0.1
(tests/support/issuer.py; fixtures in conftest.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from jwcrypto.jwe import JWE
from jwcrypto.jwk import JWK

from registry.access.jwt import MAX_TOKEN_BYTES, JwtVerifier
from registry.access.principal import ADMIN, Principal
from registry.jwkeys import b64url_encode
from tests.support.helpers import make_settings
from tests.support.issuer import (
    AUDIENCE,
    Issuer,
    Ticker,
    hmac_token,
    private_key,
    refused,
    serve_issuer,
    sign,
    unsigned_token,
)

ServerFactory = Callable[..., Awaitable[TestServer]]
Make = Callable[..., Awaitable[JwtVerifier]]

# --- valid tokens ----------------------------------------------------------------------------


async def test_rs256_token_via_discovery_gives_the_principal(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    token = issuer.token(
        key="rsa-1",
        sub="alice",
        tenant="acme",
        groups=["ops", "dev"],
        roles=[ADMIN, "superuser", "reader"],
    )
    principal = await verifier.verify(token)
    assert principal == Principal(
        subject="alice",
        tenant="acme",
        groups=frozenset({"ops", "dev"}),
        roles=frozenset({ADMIN, "reader"}),
        method="jwt",
        issuer=issuer.url,
    )
    assert principal.label() == "jwt:alice"
    assert issuer.hits(issuer.discovery_url) == 1
    assert issuer.jwks_hits == 1
    assert verifier.ready and set(verifier.kids) == {"rsa-1", "ec-1"}


async def test_es256_token_via_the_jwks_url(issuer: Issuer, make: Make) -> None:
    verifier = await make(discovery=False)
    principal = await verifier.verify(issuer.token(key="ec-1", sub="bob"))
    assert (principal.subject, principal.tenant, principal.groups, principal.roles) == (
        "bob",
        None,
        frozenset(),
        frozenset(),
    )
    assert issuer.hits(issuer.discovery_url) == 0
    assert issuer.jwks_hits == 1


async def test_custom_claim_names_literal_and_nested(issuer: Issuer, make: Make) -> None:
    verifier = await make(
        jwt_subject_claim="email",
        jwt_tenant_claim="org",
        jwt_groups_claim="https://example.com/groups",
        jwt_roles_claim="realm_access.roles",
    )
    token = issuer.token(
        sub="ignored",
        email="carol@example.com",
        org="globex",
        **{"https://example.com/groups": "sales  support"},
        realm_access={"roles": ["reader", "offline_access"]},
    )
    principal = await verifier.verify(token)
    assert principal.subject == "carol@example.com"
    assert principal.tenant == "globex"
    assert principal.groups == frozenset({"sales", "support"})
    assert principal.roles == frozenset({"reader"})


async def test_other_algorithms_and_a_token_without_kid(
    aiohttp_server: ServerFactory, ticker: Ticker
) -> None:
    issuer = await serve_issuer(aiohttp_server, algs=("PS256", "ES384", "EdDSA", "ES256"))
    verifier = JwtVerifier(make_settings("sqlite://", **issuer.settings()), timer=ticker)
    try:
        for kid in issuer.published:
            assert (await verifier.verify(issuer.token(key=kid))).subject == "alice"
        # no kid: tried against the keys of the algorithm's type
        assert (await verifier.verify(issuer.token(key="ec-1", header={"kid": None}))).subject
        foreign = private_key("ES256", "foreign")
        await refused(verifier, issuer.token(key=foreign, header={"kid": None}), "bad_signature")
    finally:
        await verifier.close()
    assert issuer.jwks_hits == 1  # started lazily, once


async def test_an_injected_session_is_used_and_not_closed(issuer: Issuer) -> None:
    async with aiohttp.ClientSession() as session:
        settings = make_settings("sqlite://", **issuer.settings())
        verifier = JwtVerifier(settings, session=session)
        await verifier.start()
        assert (await verifier.verify(issuer.token())).subject == "alice"
        await verifier.close()
        assert not session.closed


# --- refused tokens --------------------------------------------------------------------------


async def test_times_checked_with_leeway(issuer: Issuer, make: Make) -> None:
    verifier = await make(jwt_leeway=60)
    now = int(time.time())
    message = await refused(verifier, issuer.token(exp=now - 3600), "expired")
    assert "expired at" in message
    await refused(verifier, issuer.token(nbf=now + 3600), "not_yet_valid")
    await refused(verifier, issuer.token(iat=now + 3600), "not_yet_valid")
    # within the leeway
    await verifier.verify(issuer.token(exp=now - 20, nbf=now + 20, iat=now + 20))
    strict = await make(jwt_leeway=0)
    await refused(strict, issuer.token(exp=now - 20), "expired")
    await refused(strict, issuer.token(nbf=now + 20), "not_yet_valid")


async def test_audience(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    await refused(verifier, issuer.token(aud="someone-else"), "bad_audience")
    await refused(verifier, issuer.token(aud=None), "bad_audience")
    await refused(verifier, issuer.token(aud=[AUDIENCE, 5]), "bad_audience")
    await refused(verifier, issuer.token(aud=5), "bad_audience")
    await verifier.verify(issuer.token(aud=["other", AUDIENCE]))
    unchecked = await make(jwt_audience=None)
    await unchecked.verify(issuer.token(aud="someone-else"))
    await unchecked.verify(issuer.token(aud=None))


async def test_issuer(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    await refused(verifier, issuer.token(iss="https://evil.example"), "bad_issuer")
    await refused(verifier, issuer.token(iss=issuer.url + "/"), "bad_issuer")
    await refused(verifier, issuer.token(iss=None), "bad_issuer")


async def test_a_token_never_stands_for_a_built_in_principal(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    for name in ("admin-token", "read-token"):
        message = await refused(verifier, issuer.token(sub=name, roles=[ADMIN]), "bad_claims")
        assert f"built-in principal ({name})" in message
    other = await verifier.verify(issuer.token(sub="admin-tokens", tenant="acme"))
    assert json.loads(other.scope()) == [f"jwt:{issuer.url}", "acme", "admin-tokens"]


async def test_alg_none_is_refused(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    message = await refused(verifier, unsigned_token(issuer.claims()), "bad_algorithm")
    assert "'none'" in message
    await refused(verifier, unsigned_token(issuer.claims(), kid="rsa-1"), "bad_algorithm")


async def test_hmac_with_the_public_key_is_refused(issuer: Issuer, make: Make) -> None:
    """The classic confusion: HS256 keyed with the issuer's public key material."""
    verifier = await make()
    pem = issuer.keys["rsa-1"].export_to_pem()  # the public key, PEM
    jwk_json = json.dumps(issuer.public("rsa-1")).encode()
    for secret in (pem, jwk_json):
        for alg in ("HS256", "HS512"):
            token = hmac_token(secret, issuer.claims(), alg, kid="rsa-1")
            await refused(verifier, token, "bad_algorithm")


async def test_an_oct_key_in_the_jwks_is_never_used(issuer: Issuer, make: Make) -> None:
    secret = b"shared-secret-of-32-bytes-length"
    issuer.jwks_extra = [{"kty": "oct", "k": b64url_encode(secret), "kid": "hmac"}]
    verifier = await make(jwt_algorithms=["RS256"])
    assert "hmac" not in verifier.kids
    await refused(verifier, hmac_token(secret, issuer.claims(), kid="hmac"), "bad_algorithm")
    await refused(verifier, issuer.token(header={"kid": "hmac"}), "unknown_key")


async def test_algorithm_allow_list_and_key_type(issuer: Issuer, make: Make) -> None:
    only_es = await make(jwt_algorithms=["ES256"])
    message = await refused(only_es, issuer.token(key="rsa-1"), "bad_algorithm")
    assert "allowed: ES256" in message
    verifier = await make()
    # an RSA key's kid on an ES256 token: the key does not fit the algorithm
    forged = sign(private_key("ES256", "x"), {"alg": "ES256", "kid": "rsa-1"}, issuer.claims())
    await refused(verifier, forged, "bad_algorithm")
    # the right kid, another key of the same type
    forged = sign(private_key("RS256", "x"), {"alg": "RS256", "kid": "rsa-1"}, issuer.claims())
    await refused(verifier, forged, "bad_signature")
    # the same key, another algorithm of its type (the JWK says RS256)
    other = sign(issuer.keys["rsa-1"], {"alg": "PS256", "kid": "rsa-1"}, issuer.claims())
    await refused(verifier, other, "unknown_key")


async def test_header_keys_are_ignored(issuer: Issuer, make: Make) -> None:
    """jku, x5u and jwk in a token's header are never fetched nor used."""
    verifier = await make()
    attacker = JWK.generate(kty="EC", crv="P-256")  # signs with the issuer's ES256 kid below
    other = private_key("ES256", "attacker")
    header = {
        "alg": "ES256",
        "jku": str(issuer.server.make_url("/attacker/jwks.json")),
        "x5u": str(issuer.server.make_url("/attacker/cert.pem")),
        "jwk": other.export_public(as_dict=True),
    }
    await refused(
        verifier, sign(attacker, {**header, "kid": "ec-1"}, issuer.claims()), "bad_signature"
    )
    await refused(
        verifier, sign(other, {**header, "kid": "attacker"}, issuer.claims()), "unknown_key"
    )
    await refused(verifier, sign(other, header, issuer.claims()), "bad_signature")
    assert issuer.hits("/attacker/jwks.json") == issuer.hits("/attacker/cert.pem") == 0


async def test_tampered_tokens(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    for kid in ("rsa-1", "ec-1"):
        header, _, signature = issuer.token(key=kid).split(".")
        payload = b64url_encode(json.dumps(issuer.claims(sub="mallory")).encode())
        await refused(verifier, f"{header}.{payload}.{signature}", "bad_signature")
        await refused(verifier, f"{header}.{payload}.", "bad_signature")
    header, payload, signature = issuer.token(key="ec-1").split(".")
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    await refused(verifier, f"{header}.{payload}.{flipped}", "bad_signature")
    await refused(verifier, f"{header}.{payload}.{signature[:-6]}", "bad_signature")  # short


async def test_jwe_is_refused(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    key = JWK.generate(kty="RSA", size=2048)
    jwe = JWE(
        json.dumps(issuer.claims()).encode(), json.dumps({"alg": "RSA-OAEP", "enc": "A256GCM"})
    )
    jwe.add_recipient(key)
    token = jwe.serialize(compact=True)
    message = await refused(verifier, token, "malformed")
    assert "JWE" in message


def _header(**header: Any) -> str:
    return b64url_encode(json.dumps(header).encode())


GARBAGE = [
    "",
    "garbage",
    "a.b",
    "a.b.c.d",
    "a.b.c",
    "é.é.é",
    "x" * (MAX_TOKEN_BYTES + 1),
    f"{b64url_encode(b'[1]')}.e30.",
    f"{b64url_encode(b'not json')}.e30.",
    f"{_header(typ='JWT')}.e30.",
    f"{_header(alg=5)}.e30.",
    f"{_header(alg='RS256')}.bm90IGpzb24.",
    f"{_header(alg='RS256')}.W10.",
    f"{_header(alg='RS256')}.e30.!!!",
    f"{_header(alg='RS256')}.e30=.",
    f"{_header(alg='RS256', crit=['exp'], exp=1)}.e30.",
    f"{_header(alg='RS256', b64=False, crit=['b64'])}.e30.",
    f"{_header(alg='RS256', cty='JWT')}.e30.",
    f"{_header(alg='RS256', typ='dpop+jwt')}.e30.",
    f"{_header(alg='RS256', kid=7)}.e30.",
    f"{_header(alg='RS256', kid='')}.e30.",
    b64url_encode(b'{"alg":"RS256","alg":"none"}') + ".e30.",  # a duplicate member
]


@pytest.mark.parametrize("token", GARBAGE, ids=range(len(GARBAGE)))
async def test_garbage_is_malformed(make: Make, token: str) -> None:
    verifier = await make()
    await refused(verifier, token, "malformed")


async def test_bad_claims(issuer: Issuer, make: Make) -> None:
    verifier = await make()
    cases: list[dict[str, Any]] = [
        {"exp": None},
        {"exp": "tomorrow"},
        {"exp": True},
        {"nbf": "now"},
        {"sub": None},
        {"sub": ""},
        {"sub": 42},
        {"sub": "line\nbreak"},
        {"tenant": 5},
        {"tenant": ["a"]},
        {"groups": {"a": 1}},
        {"groups": ["ok", 3]},
        {"roles": 5},
    ]
    for overrides in cases:
        await refused(verifier, issuer.token(**overrides), "bad_claims")
    for payload in ([], "claims", 5):
        header = {"alg": "RS256", "kid": "rsa-1"}
        await refused(
            verifier, sign(issuer.keys["rsa-1"], header, json.dumps(payload).encode()), "malformed"
        )
    # an empty tenant is no tenant
    assert (await verifier.verify(issuer.token(tenant=""))).tenant is None


def test_the_verifier_needs_an_issuer() -> None:
    with pytest.raises(ValueError, match="jwt_issuer"):
        JwtVerifier(make_settings("sqlite://"))
