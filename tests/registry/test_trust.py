"""The trust store and the /api/v1/keys routes, against real JWKS servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from jwcrypto import jwk, jws
from sqlmodel import select

from registry import api
from registry.access.authenticate import Authenticator
from registry.api import SETTINGS, access
from registry.crawler import Crawler
from registry.errors import Conflict, NotFound, RegistryError
from registry.jwks import JWKS_MAX_BYTES
from registry.keys_api import KEYS_CHANGED, TRUST, add_key_routes
from registry.openapi import openapi_document
from registry.seedfile import SeedKey
from registry.settings import Settings
from registry.signatures import sign_card, verify_card
from registry.store import Store
from registry.tables import TrustAnchorRow
from registry.trust import LOOKUP_TIMEOUT, TrustStore, jwks_anchor_id
from tests.support.helpers import AUTH, CardServer, card_v1, make_settings

ServerFactory = Callable[..., Awaitable[TestServer]]


# --- helpers ---------------------------------------------------------------------------------


@dataclass
class Clock:
    """A monotonic clock the tests move by hand."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def ec_key(kid: str | None = "k1", **params: Any) -> jwk.JWK:
    return jwk.JWK.generate(kty="EC", crv="P-256", **({"kid": kid} if kid else {}), **params)


def public(key: jwk.JWK, **extra: Any) -> dict[str, Any]:
    return {**key.export_public(as_dict=True), **extra}


def jwks(*keys: jwk.JWK) -> dict[str, Any]:
    return {"keys": [public(k) for k in keys]}


def sign(key: jwk.JWK, payload: bytes = b"{}") -> str:
    token = jws.JWS(payload)
    token.add_signature(key, alg="ES256", protected={"alg": "ES256", "kid": key.get("kid")})
    return token.serialize(compact=True)


def verifies(key: jwk.JWK, compact: str) -> bool:
    token = jws.JWS()
    token.deserialize(compact)
    try:
        token.verify(key)
    except jws.InvalidJWSSignature:
        return False
    return True


@dataclass
class Env:
    trust: TrustStore
    clock: Clock
    store: Store
    crawler: Crawler
    closers: list[Any] = field(default_factory=list)


@pytest.fixture
async def make_trust() -> AsyncIterator[Callable[..., Awaitable[Env]]]:
    """Build loaded trust stores on a database (closed at teardown)."""
    made: list[Env] = []

    async def factory(
        url: str,
        trusted_jku: list[str] | None = None,
        *,
        lookup_timeout: float = LOOKUP_TIMEOUT,
        host_concurrency: int = 4,
        **overrides: Any,
    ) -> Env:
        settings = make_settings(url, **overrides)
        store, crawler, clock = Store(url), Crawler(settings), Clock()
        trust = TrustStore(
            store,
            crawler,
            trusted_jku or [],
            timer=clock,
            lookup_timeout=lookup_timeout,
            host_concurrency=host_concurrency,
        )
        await trust.load()
        env = Env(trust, clock, store, crawler)
        made.append(env)
        return env

    yield factory
    for env in made:
        await env.crawler.close()
        await env.store.close()


def keys_app(settings: Settings) -> web.Application:
    """The admin API's middlewares, a trust store and the /api/v1/keys routes."""
    app = web.Application(middlewares=[api.error_middleware, api.auth_middleware])
    app[SETTINGS] = settings
    app[api.AUTHENTICATOR] = Authenticator(settings)
    store, crawler = Store(settings.database_url), Crawler(settings)
    app[TRUST] = TrustStore(store, crawler, settings.trusted_jku)

    async def resources(app: web.Application) -> AsyncIterator[None]:
        await crawler.start()
        await app[TRUST].load()
        yield
        await crawler.close()
        await store.close()

    app.cleanup_ctx.append(resources)
    add_key_routes(app)
    return app


@dataclass
class Api:
    client: TestClient
    changes: list[int]

    @property
    def trust(self) -> TrustStore:
        return self.client.app[TRUST]

    async def post(self, body: Any, status: int) -> dict[str, Any]:
        resp = await self.client.post("/api/v1/keys", json=body, headers=AUTH)
        assert resp.status == status, await resp.text()
        return await resp.json()


@pytest.fixture
async def keys_api(aiohttp_client: Any, db_url: str) -> Api:
    app = keys_app(make_settings(db_url))
    changes: list[int] = []

    async def changed() -> None:
        changes.append(1)

    app[KEYS_CHANGED] = changed
    return Api(await aiohttp_client(app), changes)


async def rows(store: Store) -> list[TrustAnchorRow]:
    async with store.session() as session:
        return list((await session.exec(select(TrustAnchorRow))).all())


# --- the API: add, list, get, delete ---------------------------------------------------------


async def test_add_list_get_delete_jwk(keys_api: Api) -> None:
    key = ec_key("k1", alg="ES256", use="sig")
    created = await keys_api.post({"jwk": public(key)}, 201)
    thumbprint = key.thumbprint()
    assert created["id"] == thumbprint
    assert created["kind"] == "jwk"
    assert (created["kid"], created["kty"], created["alg"]) == ("k1", "EC", "ES256")
    assert created["jwk"] == public(key)
    assert created["jwks_url"] is None
    assert created["source"] == "api"
    assert created["created_at"].endswith("Z")
    assert keys_api.changes == [1]

    client = keys_api.client
    resp = await client.get("/api/v1/keys")
    assert resp.status == 200
    assert await resp.json() == {"keys": [created]}
    resp = await client.get(f"/api/v1/keys/{thumbprint}")
    assert await resp.json() == created

    resp = await client.delete(f"/api/v1/keys/{thumbprint}", headers=AUTH)
    assert resp.status == 204
    assert keys_api.changes == [1, 1]
    resp = await client.get(f"/api/v1/keys/{thumbprint}")
    assert resp.status == 404
    assert (await resp.json())["error"]["code"] == "not_found"
    resp = await client.delete(f"/api/v1/keys/{thumbprint}", headers=AUTH)
    assert resp.status == 404
    assert keys_api.changes == [1, 1]
    assert (await (await client.get("/api/v1/keys")).json()) == {"keys": []}


async def test_location_header_and_auth(keys_api: Api) -> None:
    client = keys_api.client
    body = {"jwk": public(ec_key())}
    resp = await client.post("/api/v1/keys", json=body)
    assert resp.status == 401
    resp = await client.post("/api/v1/keys", json=body, headers=AUTH)
    assert resp.status == 201
    anchor = await resp.json()
    assert resp.headers["Location"] == f"/api/v1/keys/{anchor['id']}"
    resp = await client.delete(f"/api/v1/keys/{anchor['id']}")
    assert resp.status == 401


@pytest.mark.parametrize(
    "make",
    [
        lambda: ec_key().export(as_dict=True, private_key=True),
        lambda: jwk.JWK.generate(kty="RSA", size=2048, kid="r").export(
            as_dict=True, private_key=True
        ),
        lambda: jwk.JWK.generate(kty="OKP", crv="Ed25519", kid="e").export(
            as_dict=True, private_key=True
        ),
        lambda: {**public(ec_key()), "d": "AAAA"},
    ],
    ids=["ec", "rsa", "ed25519", "public-with-d"],
)
async def test_private_key_refused_and_not_stored(
    keys_api: Api, make: Callable[[], dict[str, Any]]
) -> None:
    body = await keys_api.post({"jwk": make()}, 400)
    assert body["error"]["code"] == "private_key"
    assert "send the public key only" in body["error"]["message"]
    assert "d" in body["error"]["details"]["private_parameters"]
    assert await rows(keys_api.trust.store) == []
    assert keys_api.trust.anchors() == []
    assert keys_api.changes == []


async def test_symmetric_key_refused(keys_api: Api) -> None:
    secret = jwk.JWK.generate(kty="oct", size=256, kid="hmac").export(as_dict=True)
    body = await keys_api.post({"jwk": secret}, 400)
    assert body["error"]["code"] == "symmetric_key"
    assert "oct" in body["error"]["message"]
    body = await keys_api.post({"jwk": {"kty": "oct"}}, 400)
    assert body["error"]["code"] == "symmetric_key"
    assert await rows(keys_api.trust.store) == []


def _off_curve() -> dict[str, Any]:
    data = public(ec_key())
    data["y"] = data["x"]
    return data


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ([1, 2], "JSON object"),
        ({"crv": "P-256"}, "kty"),
        ({"kty": "nope", "x": "AAAA"}, "not a usable public key"),
        ({"kty": "RSA", "n": "AQAB"}, "Missing required value e"),
        ({**public(ec_key()), "x": "abc+/=="}, "base64url"),
        ({**public(ec_key()), "x": 12}, "base64url"),
        (_off_curve(), "not on the curve"),
        (public(ec_key(), use="enc"), "not a usable public key"),
        (public(ec_key(), key_ops=["encrypt"]), "not a usable public key"),
        (public(jwk.JWK.generate(kty="OKP", crv="X25519")), "key agreement"),
        ({**public(ec_key()), "kid": 7}, "kid"),
    ],
    ids=[
        "array",
        "no-kty",
        "unknown-kty",
        "rsa-missing-e",
        "not-base64url",
        "x-not-string",
        "off-curve",
        "use-enc",
        "key-ops-encrypt",
        "x25519",
        "kid-not-string",
    ],
)
async def test_bad_jwk_refused(keys_api: Api, bad: Any, words: str) -> None:
    body = await keys_api.post({"jwk": bad}, 400)
    assert body["error"]["code"] == "invalid_jwk"
    assert words in body["error"]["message"]
    assert await rows(keys_api.trust.store) == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"jwk": {"kty": "EC"}, "jwks_url": "http://127.0.0.1/jwks.json"},
        {"key": {}},
        {"jwks_url": 5},
        {"jwks_url": ""},
        ["jwk"],
    ],
)
async def test_bad_body_refused(keys_api: Api, body: Any) -> None:
    answer = await keys_api.post(body, 400)
    assert answer["error"]["code"] == "invalid_body"


async def test_duplicates_refused(keys_api: Api, card_server: CardServer) -> None:
    key = ec_key("k1")
    first = await keys_api.post({"jwk": public(key)}, 201)
    body = await keys_api.post({"jwk": public(key)}, 409)
    assert body["error"]["code"] == "duplicate_key"
    assert body["error"]["details"] == {"existing_id": first["id"]}
    # the same key material under another kid is the same key
    body = await keys_api.post({"jwk": public(key, kid="other")}, 409)
    assert body["error"]["code"] == "duplicate_key"

    card_server.set("/jwks.json", jwks(ec_key("k2")))
    url = card_server.url("/jwks.json")
    await keys_api.post({"jwks_url": url}, 201)
    body = await keys_api.post({"jwks_url": url}, 409)
    assert body["error"]["code"] == "duplicate_key"
    assert body["error"]["details"] == {"existing_id": jwks_anchor_id(url)}
    assert len(await rows(keys_api.trust.store)) == 2


async def test_duplicate_refused_by_the_database(
    make_trust: Callable[..., Awaitable[Env]], db_url: str
) -> None:
    """Two replicas: the second one's memory does not know the key, the table does."""
    one, two = await make_trust(db_url), await make_trust(db_url)
    key = ec_key()
    await one.trust.add_jwk(public(key))
    with pytest.raises(Conflict) as info:
        await two.trust.add_jwk(public(key))
    assert info.value.code == "duplicate_key"


async def test_jwks_url_added_and_its_keys_found(keys_api: Api, card_server: CardServer) -> None:
    signer = ec_key("rotating", alg="ES256")
    card_server.set("/keys/jwks.json", jwks(ec_key("old"), signer))
    url = card_server.url("/keys/jwks.json")
    created = await keys_api.post({"jwks_url": url}, 201)
    assert created["id"] == jwks_anchor_id(url)
    assert created["kind"] == "jwks_url"
    assert created["jwks_url"] == url
    assert (created["kid"], created["kty"], created["alg"], created["jwk"]) == (None,) * 4

    lookup = await keys_api.trust.keys_for("rotating", None)
    assert lookup.problem is None
    [(key, label)] = lookup.keys
    assert label == f"jwks:{url}"
    assert key.thumbprint() == signer.thumbprint()
    assert not key.has_private
    assert verifies(key, sign(signer))
    assert card_server.hits("/keys/jwks.json") == 1  # the check at POST filled the cache


@pytest.mark.parametrize(
    ("body", "headers", "code", "words"),
    [
        ("<html>hello</html>", {"Content_Type": "text/html"}, "bad_content_type", "text/html"),
        ({"not": "a jwks"}, {}, "invalid_jwks", "is not a JWKS"),
        ({"keys": []}, {}, "invalid_jwks", "has no keys"),
        ({"keys": [{"kty": "oct", "k": "AAAA"}, 5]}, {}, "invalid_jwks", "2 entries skipped"),
    ],
    ids=["html", "not-jwks", "empty", "unusable"],
)
async def test_jwks_url_refused_when_not_a_jwks(
    keys_api: Api,
    card_server: CardServer,
    body: Any,
    headers: dict[str, str],
    code: str,
    words: str,
) -> None:
    card_server.set("/jwks.json", body, **headers)
    answer = await keys_api.post({"jwks_url": card_server.url("/jwks.json")}, 422)
    assert answer["error"]["code"] == code
    assert words in answer["error"]["message"]
    assert await rows(keys_api.trust.store) == []


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/jwks.json", "http://user:secret@127.0.0.1/jwks.json"]
)
async def test_jwks_url_must_be_plain_http(keys_api: Api, url: str) -> None:
    answer = await keys_api.post({"jwks_url": url}, 422)
    assert answer["error"]["code"] == "bad_url"
    assert "secret" not in json.dumps(answer)
    assert await rows(keys_api.trust.store) == []


async def test_openapi_documents_the_key_routes(keys_api: Api) -> None:
    served = set()
    for route in keys_api.client.app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        path = info.get("path") or info.get("formatter")
        if path and path.startswith("/api/v1/keys") and route.method != "HEAD":
            served.add((route.method, path))
    documented = {
        (method.upper(), path)
        for path, item in openapi_document(keys_api.client.app, access)["paths"].items()
        if path.startswith("/api/v1/keys")
        for method in item
        if method != "parameters"
    }
    assert documented == served


# --- keys_for ----------------------------------------------------------------------------------


async def test_trusted_jwk_found_by_kid_or_thumbprint(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str
) -> None:
    env = await make_trust(sqlite_url)
    with_kid, without_kid = ec_key("k1"), ec_key(None)
    a = await env.trust.add_jwk(public(with_kid))
    b = await env.trust.add_jwk(public(without_kid))
    assert b.kid is None

    lookup = await env.trust.keys_for("k1", None)
    assert [(k.thumbprint(), label) for k, label in lookup.keys] == [
        (with_kid.thumbprint(), f"trust-store:{a.id}")
    ]
    lookup = await env.trust.keys_for(without_kid.thumbprint(), None)
    assert [label for _, label in lookup.keys] == [f"trust-store:{b.id}"]
    # a key that has a kid does not answer to its thumbprint
    lookup = await env.trust.keys_for(with_kid.thumbprint(), None)
    assert lookup.keys == []

    lookup = await env.trust.keys_for("k9", None)
    assert lookup.keys == []
    assert lookup.problem == "no trusted key has kid 'k9'; the card has no jku"


async def test_jwk_expiry_kept(make_trust: Callable[..., Awaitable[Env]], sqlite_url: str) -> None:
    env = await make_trust(sqlite_url)
    anchor = await env.trust.add_jwk(
        public(ec_key("k1"), exp=4_000_000_000, nbf=1_700_000_000, iat=1.5, note="dropped")
    )
    assert anchor.jwk is not None
    assert (anchor.jwk["exp"], anchor.jwk["nbf"], anchor.jwk["iat"]) == (4e9, 1.7e9, 1.5)
    assert "note" not in anchor.jwk
    [(key, _)] = (await env.trust.keys_for("k1", None)).keys
    assert key.get("exp") == 4_000_000_000


@pytest.mark.parametrize(
    ("member", "raw"),
    [
        ("exp", '"never"'),
        ("exp", "true"),
        ("exp", "null"),
        ("exp", "-1"),
        ("exp", "1" + "0" * 40),
        ("nbf", '"2025-01-01"'),
        ("iat", "[1]"),
    ],
)
async def test_key_lifetime_must_be_a_numeric_date(keys_api: Api, member: str, raw: str) -> None:
    """Finding: ``{"exp": "never"}`` was stored (201) and burnt the key's thumbprint forever."""
    key = ec_key("k1")
    body = json.dumps({"jwk": public(key)})[:-2] + f', "{member}": {raw}}}}}'
    resp = await keys_api.client.post(
        "/api/v1/keys", data=body, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert resp.status == 400, await resp.text()
    error = (await resp.json())["error"]
    assert error["code"] == "invalid_jwk"
    assert f'"{member}" must be a NumericDate' in error["message"]
    assert error["details"] == {"parameter": member}
    assert await rows(keys_api.trust.store) == []
    # the key is not burnt: the same key with a proper lifetime is trusted
    created = await keys_api.post({"jwk": public(key, **{member: 4_000_000_000})}, 201)
    assert created["id"] == key.thumbprint()


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
async def test_key_lifetime_must_be_finite(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, value: float
) -> None:
    """What JSON bodies cannot hold, a TOML seed file can (``exp = inf``)."""
    env = await make_trust(sqlite_url)
    with pytest.raises(RegistryError, match='"exp" must be a NumericDate'):
        await env.trust.add_jwk(public(ec_key("k1"), exp=value))
    with pytest.raises(RegistryError, match="must be a NumericDate"):
        await env.trust.apply_seed_keys([SeedKey(jwk=public(ec_key("k1"), exp=value))])
    assert env.trust.anchors() == []


async def test_expired_key_refused_when_added(keys_api: Api) -> None:
    key = ec_key("k1")
    body = await keys_api.post({"jwk": public(key, exp=1_700_000_000)}, 400)
    assert body["error"]["code"] == "invalid_jwk"
    assert body["error"]["message"].startswith(
        "the JWK expired at 2023-11-14T22:13:20+00:00 (its exp is 1700000000)"
    )
    assert await rows(keys_api.trust.store) == []
    await keys_api.post({"jwk": public(key, exp=4_000_000_000)}, 201)


async def test_expiry_judged_against_now(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str
) -> None:
    env = await make_trust(sqlite_url)
    with pytest.raises(RegistryError, match="expired"):
        await env.trust.add_jwk(public(ec_key("k1"), exp=1000), now=1000)
    anchor = await env.trust.add_jwk(public(ec_key("k1"), exp=1000), now=999)
    assert anchor.jwk is not None and anchor.jwk["exp"] == 1000


async def test_jku_followed_only_when_allowed(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    signer = ec_key("card-key")
    card_server.set("/agent/jwks.json", jwks(signer))
    jku = card_server.url("/agent/jwks.json")
    env = await make_trust(sqlite_url)

    lookup = await env.trust.keys_for("card-key", jku)
    assert lookup.keys == []
    assert lookup.problem == (
        f"no trusted key has kid 'card-key'; the card's jku {jku} is not on SWITCHBOARD_TRUSTED_JKU"
    )
    assert card_server.hits("/agent/jwks.json") == 0

    env.trust.trusted_jku = [card_server.url("/agent")]
    lookup = await env.trust.keys_for("card-key", jku)
    assert lookup.problem is None
    [(key, label)] = lookup.keys
    assert label == f"jku:{jku}"
    assert verifies(key, sign(signer))

    lookup = await env.trust.keys_for("other", jku)
    assert lookup.problem == (
        f"no trusted key has kid 'other'; the JWKS at {jku} has no key with kid 'other'"
    )


async def test_jku_that_is_a_trusted_jwks_url_is_not_fetched_twice(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    card_server.set("/jwks.json", jwks(ec_key("k1")))
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url)  # the jku is not on the allow-list: trusted anyway
    await env.trust.add_jwks_url(url)
    lookup = await env.trust.keys_for("k1", url)
    assert [label for _, label in lookup.keys] == [f"jwks:{url}"]
    assert card_server.hits("/jwks.json") == 1


@pytest.mark.parametrize(
    ("prefix", "url", "allowed"),
    [
        ("https://a.example", "https://a.example", True),
        ("https://a.example", "https://a.example/jwks.json", True),
        ("https://a.example", "https://a.example/", True),
        ("https://a.example/", "https://a.example", True),
        ("https://a.example", "https://a.example?x=1", False),  # query: its own fetch
        ("https://a.example", "https://a.example/jwks.json?1", False),
        ("https://a.example", "https://a.example/jwks.json?", False),
        ("https://a.example", "https://a.example#k", False),
        ("https://a.example", "https://a.example/jwks.json#", False),
        ("https://a.example", "https://a.example.evil/", False),
        ("https://a.example", "https://a.example.evil/jwks.json", False),
        ("https://a.example", "https://a.example@evil.net/jwks.json", False),
        ("https://a.example", "https://a.example:8443/jwks.json", False),
        ("https://a.example", "https://a.examples/jwks.json", False),
        ("https://a.example", "http://a.example/jwks.json", False),
        ("https://a.example/team", "https://a.example/team/jwks.json", True),
        ("https://a.example/team", "https://a.example/teams/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/jwks.json", True),
        ("https://a.example/team/", "https://a.example/team", False),
        ("https://a.example/team/", "https://a.example/team/../other/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/%2e%2E/other/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/./jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/x/jwks.json", True),
        ("https://a.example/team/", "https://a.example/team//jwks.json", True),
        ("https://a.example/team/", "https://a.example/team/..\t/other/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/.\t./other/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/..%2f..%2fother/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/..%2F/other/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/%2e%2e%2fother/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/..;/other/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/x;y/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/..\\other\\jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/..%5cother/jwks.json", False),
        ("https://a.example/team/", "https://a.example/team/%7ex/jwks.json", False),  # not normal
        ("https://a.example/team/", "https://a.example/team/a b.json", False),
        ("https://a.example/team/", "https://a.example/team/\x00.json", False),
        ("https://a.example/team/", "https://a.example/team/ü.json", False),
        ("https://a.example/team/", "https://A.example/team/jwks.json", False),
        ("https://a.example/team/", "https://a.example:443/team/jwks.json", False),
        ("https://a.example/team/", "https://u@a.example/team/jwks.json", False),
        ("https://a.example/team/", "https://a.example\\@evil.net/team/jwks.json", False),
        ("https://a.example/team/", "https://a.example#@evil.net/team/jwks.json", False),
        ("https://a.example/team/", "/team/jwks.json", False),
        ("https://a.example/team/", "ftp://a.example/team/jwks.json", False),
        ("https://A.example:443/team/", "https://a.example/team/jwks.json", True),
        ("http://a.example:8080/k/", "http://a.example:8080/k/jwks.json", True),
        ("http://a.example:8080/k/", "http://a.example:8081/k/jwks.json", False),
        ("http://a.example:8080/k/", "http://a.example/k/jwks.json", False),
    ],
)
async def test_jku_allowed_at_a_boundary(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, prefix: str, url: str, allowed: bool
) -> None:
    env = await make_trust(sqlite_url, trusted_jku=[prefix])
    assert env.trust.jku_allowed(url) is allowed


async def test_boundary_trick_is_not_fetched(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str
) -> None:
    env = await make_trust(sqlite_url, trusted_jku=["https://a.example"])
    lookup = await env.trust.keys_for("k1", "https://a.example.evil/jwks.json")
    assert lookup.problem is not None
    assert "https://a.example.evil/jwks.json is not on SWITCHBOARD_TRUSTED_JKU" in lookup.problem


class Seen(list[str]):
    """Paths a server was asked for; sets ``event`` once it holds ``count`` of them."""

    def __init__(self, event: asyncio.Event, count: int) -> None:
        super().__init__()
        self.event, self.count = event, count

    def append(self, path: str) -> None:
        super().append(path)
        if len(self) >= self.count:
            self.event.set()


def gated_jwks_app(
    gate: asyncio.Event,
    document: dict[str, Any],
    seen: list[str] | None = None,
    *,
    open_gate: bool = False,
) -> web.Application:
    """A JWKS server whose every answer waits for ``gate``; ``seen`` records the paths."""
    if open_gate:
        gate.set()

    async def handler(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append(request.path)
        await gate.wait()
        return web.json_response(document)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app


@pytest.mark.parametrize(
    "tail",
    [
        "..\t/uploads/evil.json",
        "..%2f..%2fuploads/evil.json",
        "..%2F/uploads/evil.json",
        "..;/uploads/evil.json",
        "..\\uploads\\evil.json",
        "%2e%2e/uploads/evil.json",
        ".\n./uploads/evil.json",
    ],
    ids=["tab", "encoded-slash", "encoded-slash-upper", "semicolon", "backslash", "dots", "nl"],
)
async def test_jku_cannot_escape_the_allowed_prefix(
    make_trust: Callable[..., Awaitable[Env]],
    sqlite_url: str,
    card_server: CardServer,
    tail: str,
) -> None:
    """Finding: ``/keys/..\\t/uploads/evil.json`` passed the check; yarl stripped the tab,
    resolved ``..`` and fetched ``/uploads/evil.json`` (say, user uploads on the key host)."""
    evil = ec_key("evil-k")
    card_server.set("/uploads/evil.json", jwks(evil))
    env = await make_trust(sqlite_url, trusted_jku=[card_server.url("/keys/")])
    jku = card_server.url("/keys/") + tail
    card = sign_card(card_v1("https://evil.example"), evil, jku=jku)

    result = await verify_card(card, env.trust)
    assert result.status == "untrusted-key"
    assert f"the card's jku {jku!r} is refused: it " in (result.reason or "")
    assert card_server.requests == []  # nothing fetched at all


async def test_jku_query_variants_are_not_fetched(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    """Finding: ``jwks.json?1``, ``?2``, ... each made a fetch and a cache entry."""
    card_server.set("/keys/jwks.json", jwks(ec_key("k1")))
    jku = card_server.url("/keys/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[card_server.url("/keys/")])
    for n in range(5):
        lookup = await env.trust.keys_for("k1", f"{jku}?{n}")
        assert lookup.keys == []
        assert "is refused: it has a query or a fragment" in (lookup.problem or "")
        lookup = await env.trust.keys_for("k1", f"{jku}#{n}")
        assert lookup.keys == []
    assert card_server.requests == []
    assert len((await env.trust.keys_for("k1", jku)).keys) == 1
    assert [r.path_qs for r in card_server.requests] == ["/keys/jwks.json"]


async def test_jku_fetched_as_checked(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    """The allowed URL is the one requested, byte for byte (percent-encoding kept)."""
    card_server.set("/keys/a b/jwks.json", jwks(ec_key("k1")))
    jku = card_server.url("/keys/") + "a%20b/jwks.json"
    env = await make_trust(sqlite_url, trusted_jku=[card_server.url("/keys/")])
    [(_, label)] = (await env.trust.keys_for("k1", jku)).keys
    assert label == f"jku:{jku}"
    [request] = card_server.requests
    assert request.raw_path == "/keys/a%20b/jwks.json"


async def test_jku_redirect_to_another_origin_refused(
    make_trust: Callable[..., Awaitable[Env]],
    sqlite_url: str,
    card_server: CardServer,
    aiohttp_server: ServerFactory,
) -> None:
    """Finding: an open redirect under the allowed prefix handed out another host's keys,
    credited to the allowed jku; then (issue 15) the other origin was still requested: a
    redirect is checked before it is followed."""
    evil_key = ec_key("evil-k")
    evil_seen: list[str] = []
    evil = await aiohttp_server(
        gated_jwks_app(asyncio.Event(), jwks(evil_key), evil_seen, open_gate=True)
    )  # another port on 127.0.0.1: another origin
    evil_url = str(evil.make_url("/evil.json"))
    card_server.set("/keys/go", {}, status=302, Location=evil_url)
    jku = card_server.url("/keys/go")
    env = await make_trust(sqlite_url, trusted_jku=[card_server.url("/keys/")])

    card = sign_card(card_v1("https://evil.example"), evil_key, jku=jku)
    result = await verify_card(card, env.trust)
    assert result.status == "untrusted-key"
    assert result.reason == (
        f"no trusted key has kid 'evil-k'; the JWKS at {jku} redirected to {evil_url}, another "
        "origin (a JWKS must be served from its own origin)"
    )

    # a trusted JWKS URL that redirects away is refused too, when added and when used
    card_server.set("/trusted.json", {}, status=301, Location=evil_url)
    trusted = card_server.url("/trusted.json")
    with pytest.raises(RegistryError) as info:
        await env.trust.add_jwks_url(trusted)
    assert (info.value.code, info.value.status) == ("invalid_jwks", 422)
    assert "another origin" in info.value.message
    await env.trust.apply_seed_keys([SeedKey(jwks_url=trusted)])
    lookup = await env.trust.keys_for("evil-k", None)
    assert lookup.keys == []
    assert f"the JWKS at {trusted} redirected to {evil_url}, another origin" in (
        lookup.problem or ""
    )
    assert evil_seen == []  # never requested


async def test_jku_redirect_within_the_origin_checked_again(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    """A same-origin redirect out of the allowed prefix is refused before it is requested;
    inside it, the key source names the URL the keys came from."""
    signer = ec_key("k1")
    card_server.set("/uploads/evil.json", jwks(signer))
    card_server.set("/keys/v2/jwks.json", jwks(signer))
    card_server.set("/keys/out", {}, status=302, Location="/uploads/evil.json")
    card_server.set("/keys/current", {}, status=302, Location="/keys/v2/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[card_server.url("/keys/")])

    out = card_server.url("/keys/out")
    lookup = await env.trust.keys_for("k1", out)
    assert lookup.keys == []
    assert lookup.problem == (
        f"no trusted key has kid 'k1'; the JWKS at {out} redirected to "
        f"{card_server.url('/uploads/evil.json')}, which is not on SWITCHBOARD_TRUSTED_JKU"
    )
    assert card_server.hits("/uploads/evil.json") == 0

    current = card_server.url("/keys/current")
    [(_, label)] = (await env.trust.keys_for("k1", current)).keys
    assert label == f"jku:{current} -> {card_server.url('/keys/v2/jwks.json')}"


async def test_trusted_jwk_found_without_waiting_for_jwks(
    make_trust: Callable[..., Awaitable[Env]],
    sqlite_url: str,
    aiohttp_server: ServerFactory,
    never: asyncio.Event,
) -> None:
    """Finding: a slow trusted JWKS URL delayed every lookup, even of a trusted JWK's kid."""
    seen: list[str] = []
    slow = await aiohttp_server(gated_jwks_app(never, jwks(ec_key("other")), seen))
    env = await make_trust(sqlite_url)
    await env.trust.apply_seed_keys([SeedKey(jwks_url=str(slow.make_url("/jwks.json")))])
    anchor = await env.trust.add_jwk(public(ec_key("k1")))

    lookup = await asyncio.wait_for(env.trust.keys_for("k1", None), LOOKUP_TIMEOUT / 2)
    assert [label for _, label in lookup.keys] == [f"trust-store:{anchor.id}"]
    assert seen == []  # the JWKS was not even asked


async def test_expired_trusted_jwk_does_not_stop_the_lookup(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    """A trusted JWK that has expired since it was added does not end the search."""
    fresh = ec_key("k1")
    card_server.set("/jwks.json", jwks(fresh))
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url)
    await env.trust.apply_seed_keys([SeedKey(jwks_url=url)])
    old = await env.trust.add_jwk(public(ec_key("k1"), exp=1000), now=0)
    lookup = await env.trust.keys_for("k1", None)
    assert [label for _, label in lookup.keys] == [f"trust-store:{old.id}", f"jwks:{url}"]
    card = sign_card(card_v1("https://agent.example"), fresh)
    result = await verify_card(card, env.trust)
    assert (result.status, result.key_source) == ("verified", f"jwks:{url}")


async def test_lookup_waits_for_jwks_at_most_the_lookup_timeout(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, aiohttp_server: ServerFactory
) -> None:
    gate, both_asked = asyncio.Event(), asyncio.Event()
    signer = ec_key("k1")
    seen = Seen(both_asked, 2)
    slow = await aiohttp_server(gated_jwks_app(gate, jwks(signer), seen))
    urls = [str(slow.make_url(f"/{n}.json")) for n in range(2)]
    env = await make_trust(sqlite_url, lookup_timeout=0.05)
    await env.trust.apply_seed_keys([SeedKey(jwks_url=url) for url in urls])

    lookup = await env.trust.keys_for("k1", None)
    assert lookup.keys == []
    assert lookup.problem == (
        "no trusted key has kid 'k1'; "
        f"the JWKS at {urls[0]} did not answer within 0.05 s; "
        f"the JWKS at {urls[1]} did not answer within 0.05 s; the card has no jku"
    )
    # both fetches are under way at once (one after the other, the second would never start)
    await asyncio.wait_for(both_asked.wait(), 10)
    assert sorted(seen) == ["/0.json", "/1.json"]
    # the fetches went on: once they are answered, the keys are there, with no new fetch
    gate.set()
    env.trust.lookup_timeout = LOOKUP_TIMEOUT  # wait for the answers now
    lookup = await env.trust.keys_for("k1", None)
    assert [label for _, label in lookup.keys] == [f"jwks:{urls[0]}"]
    assert len(seen) == 2


async def test_jwks_fetches_limited_per_host(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, aiohttp_server: ServerFactory
) -> None:
    gate, two_in = asyncio.Event(), asyncio.Event()
    signer = ec_key("k1")
    in_flight: list[int] = [0, 0]  # now, most

    async def handler(request: web.Request) -> web.Response:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        if in_flight[0] == 2:
            two_in.set()
        await gate.wait()
        in_flight[0] -= 1
        return web.json_response(jwks(signer))

    app = web.Application()
    app.router.add_get("/keys/{name}", handler)
    server = await aiohttp_server(app)
    prefix = str(server.make_url("/keys/"))
    env = await make_trust(sqlite_url, trusted_jku=[prefix], host_concurrency=2)

    lookups = asyncio.gather(*(env.trust.keys_for("k1", f"{prefix}{n}.json") for n in range(5)))
    await two_in.wait()
    assert env.trust.host_fetches("127.0.0.1") == (2, 3)
    gate.set()
    assert all(len(lookup.keys) == 1 for lookup in await lookups)
    assert in_flight == [0, 2]
    assert env.trust.host_fetches("127.0.0.1") == (0, 0)


async def test_slow_jwks_endpoint(
    make_trust: Callable[..., Awaitable[Env]],
    sqlite_url: str,
    aiohttp_server: ServerFactory,
    never: asyncio.Event,
) -> None:
    async def stall(request: web.Request) -> web.Response:
        await never.wait()
        return web.json_response({"keys": []})

    app = web.Application()
    app.router.add_get("/jwks.json", stall)
    server = await aiohttp_server(app)
    url = str(server.make_url("/jwks.json"))
    env = await make_trust(sqlite_url, trusted_jku=[url], read_timeout=0.2)
    lookup = await env.trust.keys_for("k1", url)
    assert lookup.keys == []
    assert lookup.problem == (
        f"no trusted key has kid 'k1'; the JWKS at {url} could not be fetched: "
        f"fetching {url} timed out"
    )


HUGE = b'{"keys": ["' + b"a" * JWKS_MAX_BYTES + b'"]}'


@pytest.mark.parametrize(
    ("body", "headers", "words"),
    [
        (
            HUGE,
            {},
            f"could not be fetched: the document at {{url}} is too large "
            f"({len(HUGE)} bytes, the limit is {JWKS_MAX_BYTES})",
        ),
        (
            "<!doctype html><p>Sign in</p>",
            {"Content_Type": "text/html; charset=utf-8"},
            "could not be fetched: the document at {url} (HTTP 200) has content type "
            "'text/html; charset=utf-8', expected JSON",
        ),
        ([{"kty": "EC"}], {}, 'the document at {url} is not a JWKS (a JSON object with a "keys"'),
        ({"keys": "k1"}, {}, "is not a JWKS"),
        (
            {"keys": [{"kty": "oct", "k": "AAAA", "kid": "k1"}]},
            {},
            "the JWKS at {url} has no usable key (1 entry skipped; the first: symmetric (oct)",
        ),
        (b"{nope", {}, "could not be fetched: the document at {url} was refused"),
        ({"error": "gone"}, {"status": 404}, "answered HTTP 404 Not Found"),
    ],
    ids=["huge", "html", "array", "keys-not-a-list", "only-oct", "invalid-json", "404"],
)
async def test_broken_jwks_endpoint_explained(
    make_trust: Callable[..., Awaitable[Env]],
    sqlite_url: str,
    card_server: CardServer,
    body: Any,
    headers: dict[str, Any],
    words: str,
) -> None:
    status = headers.pop("status", 200)
    card_server.set("/jwks.json", body, status=status, **headers)
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[url])
    lookup = await env.trust.keys_for("k1", url)
    assert lookup.keys == []
    assert lookup.problem is not None
    assert lookup.problem.startswith("no trusted key has kid 'k1'; ")
    assert words.format(url=url) in lookup.problem


async def test_trusted_jwks_url_failure_explained(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    card_server.set("/jwks.json", jwks(ec_key("k1")))
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url)
    await env.trust.add_jwks_url(url)
    card_server.set("/jwks.json", {"error": "down"}, status=503)
    assert (await env.trust.keys_for("nope", None)).problem == (
        "no trusted key has kid 'nope'; the card has no jku"
    )
    env.clock.advance(301)  # the cached copy expires; the endpoint now fails
    lookup = await env.trust.keys_for("k1", None)
    assert lookup.keys == []
    assert lookup.problem == (
        f"no trusted key has kid 'k1'; the JWKS at {url} could not be fetched: "
        f"the server at {url} answered with HTTP 503 Service Unavailable; the card has no jku"
    )


async def test_verify_card_through_the_trust_store(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    """The trust store as the verifier's KeyResolver: jku off, then on the allow-list."""
    signer = ec_key("agent-2025", alg="ES256")
    card_server.set("/agent/jwks.json", jwks(signer))
    jku = card_server.url("/agent/jwks.json")
    card = sign_card(card_v1("https://agent.example"), signer, jku=jku)
    env = await make_trust(sqlite_url)

    result = await verify_card(card, env.trust)
    assert result.status == "untrusted-key"
    assert "not on SWITCHBOARD_TRUSTED_JKU" in (result.reason or "")

    env.trust.trusted_jku = [card_server.url("/agent/")]
    result = await verify_card(card, env.trust)
    assert (result.status, result.kid) == ("verified", "agent-2025")
    assert result.key_source == f"jku:{jku}"


# --- caching -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_control", "ttl"),
    [
        ("public, max-age=120", 120),
        (None, 300),
        ("max-age=5", 60),
        ("max-age=0, must-revalidate", 60),
        ("max-age=999999999", 86400),
    ],
)
async def test_cache_honours_max_age(
    make_trust: Callable[..., Awaitable[Env]],
    sqlite_url: str,
    card_server: CardServer,
    cache_control: str | None,
    ttl: int,
) -> None:
    headers = {"Cache_Control": cache_control} if cache_control else {}
    card_server.set("/jwks.json", jwks(ec_key("k1")), **headers)
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[url])

    assert (await env.trust.keys_for("k1", url)).keys
    assert (await env.trust.keys_for("k1", url)).keys
    assert card_server.hits("/jwks.json") == 1
    env.clock.advance(ttl - 1)
    assert (await env.trust.keys_for("k1", url)).keys
    assert card_server.hits("/jwks.json") == 1
    env.clock.advance(1)
    assert (await env.trust.keys_for("k1", url)).keys
    assert card_server.hits("/jwks.json") == 2


async def test_failure_cached_briefly(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    card_server.set("/jwks.json", {"error": "boom"}, status=500, Cache_Control="max-age=3600")
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[url])
    for _ in range(3):
        lookup = await env.trust.keys_for("k1", url)
        assert "answered with HTTP 500" in (lookup.problem or "")
    assert card_server.hits("/jwks.json") == 1
    env.clock.advance(29)
    await env.trust.keys_for("k1", url)
    assert card_server.hits("/jwks.json") == 1

    env.clock.advance(1)  # the endpoint recovered; its next answer is used
    card_server.set("/jwks.json", jwks(ec_key("k1")))
    lookup = await env.trust.keys_for("k1", url)
    assert lookup.problem is None
    assert len(lookup.keys) == 1
    assert card_server.hits("/jwks.json") == 2


async def test_unknown_kid_refetches_after_a_minute(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    """A rotated key shows up without waiting for a long max-age, at most once a minute."""
    old, new = ec_key("2024"), ec_key("2025")
    card_server.set("/jwks.json", jwks(old), Cache_Control="max-age=86400")
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[url])
    assert (await env.trust.keys_for("2024", url)).keys
    card_server.set("/jwks.json", jwks(old, new), Cache_Control="max-age=86400")

    assert (await env.trust.keys_for("2025", url)).keys == []
    env.clock.advance(59)
    assert (await env.trust.keys_for("2025", url)).keys == []
    assert card_server.hits("/jwks.json") == 1
    env.clock.advance(2)
    [(key, _)] = (await env.trust.keys_for("2025", url)).keys
    assert key.thumbprint() == new.thumbprint()
    assert card_server.hits("/jwks.json") == 2
    assert (await env.trust.keys_for("nope", url)).keys == []
    assert card_server.hits("/jwks.json") == 2


async def test_concurrent_lookups_share_one_fetch(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    card_server.set("/jwks.json", jwks(ec_key("k1")))
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[url])
    lookups = await asyncio.gather(*(env.trust.keys_for("k1", url) for _ in range(8)))
    assert all(len(lookup.keys) == 1 for lookup in lookups)
    assert card_server.hits("/jwks.json") == 1


async def test_jwks_fetch_sends_jwk_set_accept(
    make_trust: Callable[..., Awaitable[Env]], sqlite_url: str, card_server: CardServer
) -> None:
    body = json.dumps(jwks(ec_key("k1")))
    card_server.set("/jwks.json", body, Content_Type="application/jwk-set+json")
    url = card_server.url("/jwks.json")
    env = await make_trust(sqlite_url, trusted_jku=[url])
    assert (await env.trust.keys_for("k1", url)).keys
    [request] = card_server.requests
    assert request.headers["Accept"] == "application/jwk-set+json, application/json"


# --- storage: seeds, reload ------------------------------------------------------------------


async def test_seed_keys_idempotent(
    make_trust: Callable[..., Awaitable[Env]], db_url: str, card_server: CardServer
) -> None:
    card_server.set("/jwks.json", jwks(ec_key("from-url")))
    url = card_server.url("/jwks.json")
    key = ec_key("seeded")
    seeds = [SeedKey(jwk=public(key)), SeedKey(jwks_url=url)]
    env = await make_trust(db_url)
    assert await env.trust.apply_seed_keys(seeds) == 2
    assert await env.trust.apply_seed_keys(seeds) == 0
    assert card_server.hits("/jwks.json") == 0  # seed URLs are fetched when needed
    anchors = env.trust.anchors()
    assert {(a.kind, a.source) for a in anchors} == {("jwk", "seed"), ("jwks_url", "seed")}
    assert len(await rows(env.store)) == 2

    other = await make_trust(db_url)  # another replica starting with the same seeds
    assert await other.trust.apply_seed_keys(seeds) == 0
    assert {a.id for a in other.trust.anchors()} == {a.id for a in anchors}
    assert (await other.trust.keys_for("from-url", None)).keys


async def test_seed_key_with_private_material_stops(
    make_trust: Callable[..., Awaitable[Env]], db_url: str
) -> None:
    env = await make_trust(db_url)
    seeds = [
        SeedKey(jwk=public(ec_key("fine"))),
        SeedKey(jwk=ec_key("secret").export(as_dict=True, private_key=True)),
    ]
    with pytest.raises(RegistryError) as info:
        await env.trust.apply_seed_keys(seeds)
    assert info.value.code == "bad_seed_file"
    assert "seed key 1 (secret)" in info.value.message
    assert "send the public key only" in info.value.message
    assert await rows(env.store) == []


async def test_anchors_survive_reload(
    make_trust: Callable[..., Awaitable[Env]], db_url: str, card_server: CardServer
) -> None:
    signer = ec_key("k1", alg="ES256")
    card_server.set("/jwks.json", jwks(ec_key("k2")))
    url = card_server.url("/jwks.json")
    first = await make_trust(db_url)
    a = await first.trust.add_jwk(public(signer, exp=4_000_000_000))
    b = await first.trust.add_jwks_url(url)

    second = await make_trust(db_url)
    assert second.trust.anchors() == [a, b]
    assert [x.to_api() for x in second.trust.anchors()] == [a.to_api(), b.to_api()]
    [(key, label)] = (await second.trust.keys_for("k1", None)).keys
    assert label == f"trust-store:{a.id}"
    assert key.get("exp") == 4_000_000_000
    assert verifies(key, sign(signer))
    assert (await second.trust.keys_for("k2", None)).keys

    await first.trust.remove(a.id)
    assert await second.trust.reload() is True
    assert [x.id for x in second.trust.anchors()] == [b.id]
    assert await second.trust.reload() is False
    with pytest.raises(NotFound):
        second.trust.get(a.id)
    with pytest.raises(NotFound):
        await second.trust.remove(a.id)
