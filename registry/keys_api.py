"""The trusted keys routes of the admin API: ``/api/v1/keys``.

``POST`` trusts a public JWK (``{"jwk": {...}}``) or a JWKS URL (``{"jwks_url": "..."}``),
``GET`` lists or shows anchors, ``DELETE`` removes one. The app holds the
:class:`~registry.trust.TrustStore` under :data:`TRUST`; after every change the optional
:data:`KEYS_CHANGED` hook is awaited (e.g. to verify the agents' cards again). Auth is the
API's middleware: writes need the admin token.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from registry.api import PREFIX, read_json
from registry.apimodels import NewTrustedKey, TrustedKey, TrustedKeyList
from registry.errors import RegistryError
from registry.openapi import documented
from registry.trust import TrustStore

log = logging.getLogger(__name__)

KeysChanged = Callable[[], Awaitable[None]]

TRUST = web.AppKey("trust", TrustStore)
KEYS_CHANGED: web.AppKey[KeysChanged] = web.AppKey("keys_changed")

_BODY_KEYS = ("jwk", "jwks_url")
_MAX_URL = 2048
_KEY = {"key_id": "The anchor id: a JWK's RFC 7638 thumbprint, or jwks-<16 hex> for a URL."}


def add_key_routes(app: web.Application) -> None:
    """Register the ``/api/v1/keys`` routes on ``app`` (which holds TRUST and SETTINGS)."""
    app.router.add_get(f"{PREFIX}/keys", list_keys)
    app.router.add_post(f"{PREFIX}/keys", create_key)
    app.router.add_get(f"{PREFIX}/keys/{{key_id}}", get_key)
    app.router.add_delete(f"{PREFIX}/keys/{{key_id}}", delete_key)


@documented("Trusted signing keys", "keys", answer=TrustedKeyList)
async def list_keys(request: web.Request) -> web.Response:
    """Every trust anchor, oldest first: ``{"keys": [...]}``."""
    trust = request.app[TRUST]
    await trust.reload()  # the database is the truth: show other replicas' changes too
    return web.json_response({"keys": [anchor.to_api() for anchor in trust.anchors()]})


@documented("One trusted key", "keys", answer=TrustedKey, errors=(404,), params=_KEY)
async def get_key(request: web.Request) -> web.Response:
    """One trust anchor."""
    trust = request.app[TRUST]
    await trust.reload()
    return web.json_response(trust.get(request.match_info["key_id"]).to_api())


@documented(
    "Trust a public JWK or a JWKS URL",
    "keys",
    answer=TrustedKey,
    status=201,
    body=NewTrustedKey,
    errors=(409, 422),
)
async def create_key(request: web.Request) -> web.Response:
    """Trust ``{"jwk": {...}}`` or ``{"jwks_url": "..."}``; 201 with the anchor."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise RegistryError("the request body must be a JSON object", code="invalid_body")
    unknown = sorted(set(body) - set(_BODY_KEYS))
    if unknown or ("jwk" in body) == ("jwks_url" in body):
        raise RegistryError(
            'send exactly one of "jwk" (a public JWK object) or "jwks_url" (a JWKS URL)',
            code="invalid_body",
            details={"unknown": unknown, "allowed": list(_BODY_KEYS)},
        )
    trust = request.app[TRUST]
    if "jwk" in body:
        anchor = await trust.add_jwk(body["jwk"])
    else:
        url = body["jwks_url"]
        if not isinstance(url, str) or not 0 < len(url) <= _MAX_URL:
            raise RegistryError(
                f'"jwks_url" must be a string of 1 to {_MAX_URL} characters', code="invalid_body"
            )
        anchor = await trust.add_jwks_url(url)
    await _changed(request.app)
    return web.json_response(
        anchor.to_api(), status=201, headers={"Location": f"{PREFIX}/keys/{anchor.id}"}
    )


@documented("Stop trusting a key", "keys", status=204, errors=(404,), params=_KEY)
async def delete_key(request: web.Request) -> web.Response:
    """Stop trusting an anchor; 204."""
    await request.app[TRUST].remove(request.match_info["key_id"])
    await _changed(request.app)
    return web.Response(status=204)


async def _changed(app: web.Application) -> None:
    """Await the KEYS_CHANGED hook, if any; its failure does not undo the change."""
    hook = app.get(KEYS_CHANGED)
    if hook is None:
        return
    try:
        await hook()
    except Exception:
        log.exception("the keys-changed hook failed")
