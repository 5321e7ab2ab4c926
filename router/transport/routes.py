"""HTTP routes of the router: the A2A endpoints, the cards it serves, and route explain.

- ``POST /`` and ``POST /agents/{agent_id}`` (with or without a trailing slash): JSON-RPC
  (see :mod:`router.transport.jsonrpc`).
- The HTTP+JSON binding's paths (:data:`router.protocol.restpaths.ROUTES`: ``POST
  /message:send``, ``GET /tasks/{id}``, ``/v1/...`` for 0.3, ...) at the root and under
  ``/agents/{agent_id}`` (see :mod:`router.transport.rest`); the 1.0 ones also under a
  tenant's first segment (``/{tenant}/message:send``, ``/agents/{agent_id}/{tenant}/...``).
- ``GET /.well-known/agent-card.json`` (and the legacy ``agent.json``): the router's card.
- ``GET /agents/{agent_id}/.well-known/agent-card.json``: that agent's card with every URL
  pointing at the router. Both cards are re-signed with the router's key.
- ``POST /api/v1/route/explain``: which agent a message would go to, and why
  (:mod:`router.transport.explain`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from registry.api import REGISTRY, SETTINGS
from registry.errors import RegistryError, agent_not_found
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.records import AgentRecord
from router.card import agent_card_via_router, card_for, router_card, without_paths
from router.cardsecurity import with_security
from router.forward.handler import Router
from router.protocol.errors import RpcError
from router.protocol.restpaths import ROUTES, TENANT, TENANT_ROUTES, RestRoute
from router.protocol.versions import VERSION_HEADER, Version
from router.signing import CardSigner
from router.transport import jsonrpc, rest
from router.transport.explain import explain_handler
from router.transport.gate import GATE, Refused
from router.transport.jsonrpc import request_version

ROUTER = web.AppKey("router", Router)
SIGNER = web.AppKey("signer", CardSigner)
explain = explain_handler(ROUTER)


@dataclass
class GrpcEndpoint:
    """The gRPC binding's port once it listens (:mod:`router.transport.grpcserver`), for the
    router's card; None while it does not."""

    port: int | None = None


GRPC_ENDPOINT = web.AppKey("grpc_endpoint", GrpcEndpoint)

_WELL_KNOWN = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_CARD_MAX_AGE = 60
_STARTED = datetime.now(UTC)  # the router card's Last-Modified while no agent is routable


def add_router_routes(app: web.Application) -> None:
    """Register the router's routes on ``app`` (which holds ROUTER, SIGNER, REGISTRY). Every
    A2A path also answers with a trailing slash (clients post to ``<interface url>/``)."""
    app.router.add_post("/", a2a_endpoint)
    for agent_path in ("/agents/{agent_id}", "/agents/{agent_id}/"):
        app.router.add_post(agent_path, a2a_agent_endpoint)
    for route in ROUTES:
        handler = _rest_endpoint(route)
        app.router.add_route(route.verb, route.path, handler)
        app.router.add_route(route.verb, "/agents/{agent_id}" + route.path, handler)
    for route in TENANT_ROUTES:  # a tenant's: never one of the reserved first segments
        handler = _rest_endpoint(route)
        app.router.add_route(route.verb, f"/{TENANT}{route.path}", handler)
        app.router.add_route(route.verb, f"/agents/{{agent_id}}/{TENANT}{route.path}", handler)
    for path in _WELL_KNOWN:
        for slash in ("", "/"):
            app.router.add_get(path + slash, get_router_card)
            app.router.add_get(f"/agents/{{agent_id}}{path}{slash}", get_agent_card)
    app.router.add_post("/api/v1/route/explain", explain)


def base_url(request: web.Request) -> str:
    """Where clients reach Switchboard: ``SWITCHBOARD_PUBLIC_URL``, else this request's origin."""
    return jsonrpc.public_origin(request, request.app[SETTINGS].public_url)


async def a2a_endpoint(request: web.Request) -> web.StreamResponse:
    """The routing A2A endpoint."""
    served = await _served(request, None)
    return served if isinstance(served, web.StreamResponse) else await served


async def a2a_agent_endpoint(request: web.Request) -> web.StreamResponse:
    """One agent's A2A endpoint through the router (no skill matching)."""
    served = await _served(request, request.match_info["agent_id"])
    return served if isinstance(served, web.StreamResponse) else await served


async def _served(request: web.Request, pinned: str | None) -> jsonrpc.Served:
    """The request's answer once the gate let the caller in: a response, or a stream to
    write (awaited by the endpoint: no frame of this function is held while it is written)."""
    gate = request.app[GATE]
    try:
        caller = await gate.admit(request)
    except Refused as refused:
        return refused.response
    return await jsonrpc.serve(request.app[ROUTER], request, pinned, caller=caller, gate=gate)


def _rest_endpoint(route: RestRoute) -> Any:
    """The handler of one HTTP+JSON path (pinned to an agent under ``/agents/{agent_id}``)."""

    async def endpoint(request: web.Request) -> web.StreamResponse:
        gate = request.app[GATE]
        try:
            caller = await gate.admit(request)
        except Refused as refused:
            return rest.refused(refused)
        pinned = request.match_info.get("agent_id")
        router = request.app[ROUTER]
        return await rest.serve(router, request, route, pinned, caller=caller, gate=gate)

    return endpoint


async def get_router_card(request: web.Request) -> web.Response:
    """The router's own card: its skills are those of every routable agent the caller (the
    one its credentials prove, if any) may use."""
    settings = request.app[SETTINGS]
    registry = request.app[REGISTRY]
    caller = await request.app[GATE].identify(request)
    card = router_card(
        registry,
        base_url(request),
        name=settings.router_name,
        description=settings.router_description,
        grant=request.app[ROUTER].grants(caller),
        grpc_target=_grpc_target(request),
    )
    changed = [agent.updated_at for agent in registry.routable_agents()]
    return _card_response(request, card, max(changed, default=_STARTED))


def _grpc_target(request: web.Request) -> str | None:
    """``host:port`` of the gRPC binding, on the host clients reach the card at; None when
    it is not served."""
    endpoint = request.app.get(GRPC_ENDPOINT)
    if endpoint is None or endpoint.port is None:
        return None
    host = urlsplit(base_url(request)).hostname or request.app[SETTINGS].host
    return f"[{host}]:{endpoint.port}" if ":" in host else f"{host}:{endpoint.port}"


async def get_agent_card(request: web.Request) -> web.Response:
    """An agent's card as served through the router (URLs rewritten, re-signed)."""
    registry = request.app[REGISTRY]
    agent_id = request.match_info["agent_id"]
    caller = await request.app[GATE].identify(request)
    if not request.app[ROUTER].grants(caller).allows(agent_id, None):
        raise agent_not_found(agent_id)  # hidden from this caller: as if it did not exist
    record = registry.get(agent_id)
    try:
        raw = loads_limited(await registry.raw_card(agent_id), max_depth=256)
    except JsonLimitError:
        message = "the stored card cannot be read"
        raise RegistryError(message, code="internal_error", status=500) from None
    card = _agent_card(request, record, raw)
    return _card_response(request, card, record.updated_at)


def routed_card(request: web.Request, record: AgentRecord, raw: dict[str, Any]) -> dict[str, Any]:
    """The card of ``record`` (stored as ``raw``) as its per-agent card URL serves it without
    ``A2A-Version``, re-signed: what the catalog API shows a caller that may not see agents'
    addresses (:data:`registry.appkeys.ROUTED_CARD`). RegistryError (404) when the router
    serves no card of it."""
    card = card_for(_agent_card(request, record, raw), None)
    with_security(card, request.app[SETTINGS], None)
    return request.app[SIGNER].resign(card, jku=f"{base_url(request)}/.well-known/jwks.json")


def _agent_card(request: web.Request, record: AgentRecord, raw: dict[str, Any]) -> dict[str, Any]:
    """The agent's card with the router's URLs (unsigned); 404 ``not_routable`` or
    ``not_relayable`` when the router serves none."""
    registry = request.app[REGISTRY]
    if not registry.routable(record, health=False):  # a card is served whatever its health
        raise RegistryError(
            f"agent {record.id!r} is not routable (SWITCHBOARD_REQUIRE_SIGNED_CARDS: its card "
            f"is {record.verification.status})",
            code="not_routable",
            status=404,
            details={"id": record.id, "verification": record.verification.status},
        )
    if record.verification.status == "verified":
        # the router's signature must not vouch for what the agent's did not cover
        raw = without_paths(raw, record.verification.uncovered_fields)
    return agent_card_via_router(record, raw, base_url(request), _grpc_target(request))


def _card_response(request: web.Request, card: dict[str, Any], modified: datetime) -> web.Response:
    """The card in the shape the client's version reads (see :func:`router.card.card_for`),
    re-signed, with ``ETag``, ``Last-Modified`` and ``Cache-Control``; 304 when the client's
    ``If-None-Match`` (or, without one, ``If-Modified-Since``) says it has it."""
    version = _card_version(request)
    card = card_for(card, version)
    with_security(card, request.app[SETTINGS], version)
    signer = request.app[SIGNER]
    # the ETag follows the content and the key, not the (randomized) signature bytes, so
    # every replica and restart agrees on it
    tag = json.dumps([card, signer.kid], sort_keys=True, separators=(",", ":")).encode()
    etag = '"' + hashlib.sha256(tag).hexdigest()[:32] + '"'
    if modified.tzinfo is None:  # stored as UTC
        modified = modified.replace(tzinfo=UTC)
    modified = modified.replace(microsecond=0)
    headers = {
        "ETag": etag,
        "Last-Modified": format_datetime(modified.astimezone(UTC), usegmt=True),
        "Cache-Control": f"public, max-age={_CARD_MAX_AGE}",
        "Vary": VERSION_HEADER,
    }
    if request.app[GATE].authenticator.client_auth:
        # the card shows what the caller may use: a shared cache must not hand it on
        headers["Vary"] = f"{VERSION_HEADER}, Authorization, X-API-Key"
        if "Authorization" in request.headers or "X-API-Key" in request.headers:
            headers["Cache-Control"] = f"private, max-age={_CARD_MAX_AGE}"
    if_none_match = request.headers.get("If-None-Match")
    if _etag_matches(if_none_match, etag) or (
        if_none_match is None and _not_modified_since(request, modified)
    ):
        return web.Response(status=304, headers=headers)
    signed = signer.resign(card, jku=f"{base_url(request)}/.well-known/jwks.json")
    body = json.dumps(signed, ensure_ascii=False, separators=(",", ":")).encode()
    return web.Response(body=body, content_type="application/json", headers=headers)


def _card_version(request: web.Request) -> Version | None:
    """The client's A2A version for a card request (header or query), None if absent or
    not one the router speaks."""
    if not (request.headers.get(VERSION_HEADER) or request.query.get(VERSION_HEADER)):
        return None
    try:
        return request_version(request)
    except RpcError:
        return None


def _not_modified_since(request: web.Request, modified: datetime) -> bool:
    """RFC 9110 If-Modified-Since: the card has not changed since that date."""
    header = request.headers.get("If-Modified-Since")
    if not header:
        return False
    try:
        since = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return False
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return modified <= since


def _etag_matches(header: str | None, etag: str) -> bool:
    """RFC 9110 If-None-Match: ``*`` or a list of (possibly weak) entity tags."""
    if not header:
        return False
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or any(tag.removeprefix("W/") == etag for tag in tags)
