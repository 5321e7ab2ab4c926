"""A test OpenID Connect identity provider: discovery and JWKS served over real HTTP, keys
made with jwcrypto, tokens minted with any header and claims.

Use it from any test with pytest-aiohttp's ``aiohttp_server``::

    issuer = await serve_issuer(aiohttp_server)
    settings = make_settings(db_url, **issuer.settings())   # client_auth=jwt, issuer, audience
    token = issuer.token(sub="alice", tenant="acme", groups=["ops"])
    headers = {"Authorization": f"Bearer {token}"}

Its keys (an RS256 key ``rsa-1`` and an ES256 key ``ec-1`` by default) are published in its
JWKS; :meth:`Issuer.add_key` and :meth:`Issuer.withdraw` rotate them, the attributes
``jwks_status``, ``jwks_headers``, ``jwks_redirect``, ``jwks_extra`` and ``discovery_extra``
change what it serves, and :meth:`Issuer.hits` counts the requests per path. Hand-made
tokens: :func:`sign` (any header), :func:`compact`, :func:`unsigned_token`, :func:`hmac_token`.
:class:`Ticker` is a monotonic clock to give ``JwtVerifier(timer=...)``; :func:`refused`
checks a refusal.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from jwcrypto.jwa import JWA
from jwcrypto.jwk import JWK

from registry.access.errors import AuthError
from registry.access.jwt import JwtVerifier
from registry.jwkeys import b64url_encode

AUDIENCE = "switchboard-tests"
"""The audience of the tokens :meth:`Issuer.token` mints (and :meth:`Issuer.settings` sets)."""
ISSUER_PATH = "/realms/tests"
"""The path of the issuer URL on its server (discovery is below it, as with Keycloak)."""
JWKS_PATH = "/protocol/openid-connect/certs"
"""The JWKS path below the issuer URL."""
DEFAULT_SUBJECT = "alice"

_GENERATE: dict[str, dict[str, Any]] = {
    "RS256": {"kty": "RSA", "size": 2048},
    "RS384": {"kty": "RSA", "size": 2048},
    "RS512": {"kty": "RSA", "size": 2048},
    "PS256": {"kty": "RSA", "size": 2048},
    "ES256": {"kty": "EC", "crv": "P-256"},
    "ES384": {"kty": "EC", "crv": "P-384"},
    "ES512": {"kty": "EC", "crv": "P-521"},
    "EdDSA": {"kty": "OKP", "crv": "Ed25519"},
}

ServerFactory = Callable[..., Awaitable[TestServer]]


@cache
def private_key(alg: str, kid: str) -> JWK:
    """A private signing key for ``alg`` named ``kid`` (made once per test run: RSA keys are
    slow to make). The same (alg, kid) is the same key in every issuer."""
    key = JWK.generate(**_GENERATE[alg], alg=alg, use="sig")
    key["kid"] = kid
    return key


def compact(header: Mapping[str, Any], claims: Mapping[str, Any] | bytes, signature: bytes) -> str:
    """A compact JWS from its parts (claims bytes are used as they are)."""
    payload = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    return ".".join(
        [
            b64url_encode(json.dumps(header).encode()),
            b64url_encode(payload),
            b64url_encode(signature),
        ]
    )


def signing_input(token: str) -> bytes:
    """The part of a compact JWS its signature covers."""
    return token.rsplit(".", 1)[0].encode("ascii")


def sign(key: JWK, header: Mapping[str, Any], claims: Mapping[str, Any] | bytes) -> str:
    """A compact JWS of ``claims`` signed by ``key`` with ``header["alg"]``; the header is
    used exactly as given (``crit``, ``jku``, anything)."""
    signed = signing_input(compact(header, claims, b""))
    signature = JWA.signing_alg(header["alg"]).sign(key, signed)
    return f"{signed.decode()}.{b64url_encode(signature)}"


def unsigned_token(claims: Mapping[str, Any], **header: Any) -> str:
    """An ``alg: none`` token (empty signature)."""
    return compact({"alg": "none", "typ": "JWT", **header}, claims, b"")


def hmac_token(secret: bytes, claims: Mapping[str, Any], alg: str = "HS256", **header: Any) -> str:
    """A token MACed with ``secret`` (e.g. an issuer's public key, for the confusion attack)."""
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    signed = signing_input(compact({"alg": alg, "typ": "JWT", **header}, claims, b""))
    mac = hmac.new(secret, signed, digest).digest()
    return f"{signed.decode()}.{b64url_encode(mac)}"


@dataclass
class Issuer:
    """An identity provider on a real test server (see the module docstring)."""

    path: str = ISSUER_PATH
    keys: dict[str, JWK] = field(default_factory=dict)  # private keys by kid, published or not
    published: list[str] = field(default_factory=list)  # the kids in the JWKS, in order
    requests: list[str] = field(default_factory=list)  # every path requested, in order
    jwks_status: int = 200
    jwks_headers: dict[str, str] = field(default_factory=dict)
    jwks_redirect: str | None = None  # set: the JWKS answers 302 to this URL
    jwks_extra: list[Any] = field(default_factory=list)  # more JWKS entries, as given
    discovery_extra: dict[str, Any] = field(default_factory=dict)  # merged into discovery
    server: TestServer = field(init=False)  # set by serve_issuer

    @property
    def url(self) -> str:
        """The issuer URL (``iss``)."""
        return str(self.server.make_url(self.path))

    @property
    def jwks_url(self) -> str:
        """The URL of the JWKS (also the discovery document's ``jwks_uri``)."""
        return str(self.server.make_url(self.path + JWKS_PATH))

    @property
    def discovery_url(self) -> str:
        """The URL of the OpenID configuration."""
        return str(self.server.make_url(self.path + "/.well-known/openid-configuration"))

    def settings(self, *, discovery: bool = True, **overrides: Any) -> dict[str, Any]:
        """Settings for a Switchboard that accepts this issuer's tokens (``client_auth=jwt``,
        issuer, audience, and the JWKS URL unless ``discovery``), plus ``overrides``."""
        values: dict[str, Any] = {
            "client_auth": "jwt",
            "jwt_issuer": self.url,
            "jwt_audience": AUDIENCE,
        }
        if not discovery:
            values["jwt_jwks_url"] = self.jwks_url
        return {**values, **overrides}

    def add_key(self, alg: str = "RS256", kid: str | None = None, *, publish: bool = True) -> JWK:
        """A new key for ``alg`` (kid ``<alg>-<n>`` unless given), published unless not."""
        kid = kid or f"{alg.lower()}-{len(self.keys) + 1}"
        key = self.keys[kid] = private_key(alg, kid)
        if publish and kid not in self.published:
            self.published.append(kid)
        return key

    def publish(self, kid: str) -> None:
        """Put the key ``kid`` in the JWKS."""
        if kid not in self.published:
            self.published.append(kid)

    def withdraw(self, kid: str) -> None:
        """Take the key ``kid`` out of the JWKS (it still signs)."""
        self.published.remove(kid)

    def public(self, kid: str) -> dict[str, Any]:
        """The public JWK of ``kid`` as the JWKS shows it."""
        return self.keys[kid].export_public(as_dict=True)

    def jwks(self) -> dict[str, Any]:
        """The JWKS document served now."""
        return {"keys": [self.public(kid) for kid in self.published] + list(self.jwks_extra)}

    def hits(self, path: str) -> int:
        """How many requests reached ``path`` (a path, or a URL of this server)."""
        if "://" in path:
            path = "/" + path.split("://", 1)[1].split("/", 1)[1]
        return self.requests.count(path)

    @property
    def jwks_hits(self) -> int:
        """How many times the JWKS was requested."""
        return self.hits(self.path + JWKS_PATH)

    def claims(self, **overrides: Any) -> dict[str, Any]:
        """The claims of a valid token (iss, aud, sub, iat, exp in 5 minutes) with
        ``overrides``; an override of None removes that claim."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": DEFAULT_SUBJECT,
            "iat": now,
            "exp": now + 300,
            **overrides,
        }
        return {name: value for name, value in claims.items() if value is not None}

    def token(
        self,
        claims: Mapping[str, Any] | None = None,
        *,
        key: str | JWK | None = None,
        header: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> str:
        """A signed token: ``claims`` as given, else :meth:`claims` with ``overrides``.

        ``key`` is the kid of one of this issuer's keys (default: the first published) or
        any private JWK; the header is ``alg`` (the key's), ``typ: JWT`` and ``kid``, then
        ``header`` (a None value removes a member, e.g. ``{"kid": None}``).
        """
        if not isinstance(key, JWK):
            key = self.keys[key or self.published[0]]
        base: dict[str, Any] = {"alg": key.get("alg"), "typ": "JWT", "kid": key.get("kid")}
        merged = {**base, **(header or {})}
        merged = {name: value for name, value in merged.items() if value is not None}
        return sign(key, merged, dict(claims) if claims is not None else self.claims(**overrides))

    def app(self) -> web.Application:
        """The aiohttp app: discovery and JWKS under :attr:`path`; every request recorded."""

        @web.middleware
        async def record(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            self.requests.append(request.path)
            return await handler(request)

        async def discovery(request: web.Request) -> web.Response:
            doc = {
                "issuer": self.url,
                "jwks_uri": self.jwks_url,
                "authorization_endpoint": self.url + "/protocol/openid-connect/auth",
                "token_endpoint": self.url + "/protocol/openid-connect/token",
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                **self.discovery_extra,
            }
            return web.json_response(doc)

        async def jwks(request: web.Request) -> web.Response:
            if self.jwks_redirect is not None:
                raise web.HTTPFound(self.jwks_redirect)
            return web.json_response(
                self.jwks(),
                status=self.jwks_status,
                headers=self.jwks_headers,
                content_type="application/jwk-set+json",
            )

        app = web.Application(middlewares=[record])
        app.router.add_get(self.path + "/.well-known/openid-configuration", discovery)
        app.router.add_get(self.path + JWKS_PATH, jwks)
        return app


async def serve_issuer(
    aiohttp_server: ServerFactory,
    *,
    path: str = ISSUER_PATH,
    algs: tuple[str, ...] = ("RS256", "ES256"),
) -> Issuer:
    """An :class:`Issuer` on a new test server with one published key per ``algs``
    (kids ``rsa-1``/``ec-1`` for RS256/ES256, else ``<alg>-1``)."""
    issuer = Issuer(path=path)
    for alg in algs:
        issuer.add_key(alg, {"RS256": "rsa-1", "ES256": "ec-1"}.get(alg, f"{alg.lower()}-1"))
    issuer.server = await aiohttp_server(issuer.app())
    return issuer


@dataclass
class Ticker:
    """A monotonic clock the test moves by hand (``JwtVerifier(timer=...)``)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def refused(verifier: JwtVerifier, token: str, reason: str) -> str:
    """Verify ``token`` expecting :class:`AuthError` with ``reason``; its message, checked
    not to show the token nor any part of it."""
    try:
        principal = await verifier.verify(token)
    except AuthError as error:
        assert error.reason == reason, error.message
        assert not token or token not in error.message
        for part in token.split("."):
            assert len(part) < 12 or part not in error.message, error.message
        return error.message
    raise AssertionError(f"accepted as {principal}, expected refusal {reason!r}")
