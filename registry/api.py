"""The admin REST API under ``/api/v1``: register, inspect, search and remove agents.

JSON in and out, snake_case fields. Errors are ``{"error": {"code", "message", "details"}}``
with a 4xx status. Writes need ``Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>``; reads are
open unless ``SWITCHBOARD_READ_TOKEN`` is set. ``docs/admin-api.md`` and the OpenAPI
document (:mod:`registry.openapi`) describe every route.
"""

from __future__ import annotations

import hmac
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from registry.apidocs import add_docs_routes
from registry.apimodels import (
    Agent,
    AgentList,
    AgentSettings,
    Card,
    Refresh,
    RefreshReport,
    RefreshRequest,
    Registration,
    Revisions,
    SkillList,
    Stats,
)
from registry.catalog import AGENTS, SKILLS, Query
from registry.errors import RegistryError, number
from registry.health import MAX_REFRESH_INTERVAL, MIN_REFRESH_INTERVAL
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.openapi import PREFIX, Access, documented, openapi_document
from registry.paging import paginate
from registry.queryparams import AgentsQuery, ListingQuery, Q, SkillsQuery, read_query
from registry.records import AgentRecord, iso
from registry.refresh import PassiveHealth, Refresher
from registry.service import Registry
from registry.settings import Settings
from registry.version import switchboard_version

log = logging.getLogger(__name__)

REGISTRY = web.AppKey("registry", Registry)
SETTINGS = web.AppKey("settings", Settings)
REFRESHER = web.AppKey("refresher", Refresher)
PASSIVE_HEALTH = web.AppKey("passive_health", PassiveHealth)

#: POST routes that only read (they take a body but change nothing): the read token suffices.
READ_POSTS = frozenset({f"{PREFIX}/route/explain"})
#: Routes that never need a token: the API's description and its page.
PUBLIC = frozenset({f"{PREFIX}/openapi.json", f"{PREFIX}/docs"})
PUBLIC_PREFIX = f"{PREFIX}/docs/static/"
#: Routes (and everything under them) whose reads need the admin's token too: client API keys
#: and the audit log (registry.clients_api).
ADMIN_READS = (f"{PREFIX}/clients", f"{PREFIX}/audit")
_AGENT = {"agent_id": "The agent's id."}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application) -> None:
    """Register the admin API routes on ``app`` (which holds REGISTRY and SETTINGS)."""
    app.router.add_get(f"{PREFIX}/openapi.json", get_openapi)
    add_docs_routes(app)
    app.router.add_get(f"{PREFIX}/agents", list_agents)
    app.router.add_post(f"{PREFIX}/agents", create_agent)
    app.router.add_get(f"{PREFIX}/agents/{{agent_id}}", get_agent)
    app.router.add_patch(f"{PREFIX}/agents/{{agent_id}}", patch_agent)
    app.router.add_delete(f"{PREFIX}/agents/{{agent_id}}", delete_agent)
    app.router.add_get(f"{PREFIX}/agents/{{agent_id}}/card", get_card)
    app.router.add_put(f"{PREFIX}/agents/{{agent_id}}/card", put_card)
    app.router.add_post(f"{PREFIX}/agents/{{agent_id}}/refresh", refresh_agent)
    app.router.add_get(f"{PREFIX}/agents/{{agent_id}}/revisions", list_revisions)
    app.router.add_post(f"{PREFIX}/refresh", refresh_all)
    app.router.add_get(f"{PREFIX}/skills", list_skills)
    app.router.add_get(f"{PREFIX}/stats", get_stats)


def agent_view(registry: Registry, record: AgentRecord) -> dict[str, Any]:
    """An agent as the API shows it: the record's view plus whether routing may use it."""
    view = record.to_api()
    view["routable"] = registry.routable(record)
    view["health"] = registry.health_of(record.id).to_api()
    return view


def api_error(status: int, code: str, message: str, details: Any = None) -> web.Response:
    """A JSON error response in the API's error shape."""
    body = {"error": {"code": code, "message": message, "details": details}}
    return web.json_response(body, status=status)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure into the JSON error shape; never leak a stack trace."""
    try:
        return await handler(request)
    except RegistryError as exc:
        return web.json_response(exc.to_json(), status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "http_error")
        details = None
        if exc.status == 405 and isinstance(exc, web.HTTPMethodNotAllowed):
            details = {"allowed_methods": sorted(exc.allowed_methods)}
        response = api_error(exc.status, code, exc.reason, details)
        for name in ("Allow", "WWW-Authenticate"):
            if name in exc.headers:
                response.headers[name] = exc.headers[name]
        return response
    except Exception:
        log.exception("unexpected error on %s %s", request.method, request.path)
        return api_error(500, "internal_error", "an unexpected error occurred; see the server log")


def access(method: str, path: str) -> Access:
    """Which token a request needs: none (public), the read token (if set) or the admin's."""
    if path in PUBLIC or path.startswith(PUBLIC_PREFIX):
        return "public"
    if any(path == p or path.startswith(p + "/") for p in ADMIN_READS):
        return "write"
    if method in ("GET", "HEAD", "OPTIONS") or path in READ_POSTS:
        return "read"
    return "write"


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bearer tokens: the admin token for writes, the read token (if set) for reads."""
    if (
        not request.path.startswith(PREFIX + "/")
        or request.match_info.http_exception is not None  # 404/405: say so, not 401
        or (needed := access(request.method, request.path)) == "public"
    ):
        return await handler(request)
    settings = request.app[SETTINGS]
    write = needed == "write"
    if write and not settings.admin_token:
        raise RegistryError(
            "admin writes are disabled: start Switchboard with SWITCHBOARD_ADMIN_TOKEN set",
            code="writes_disabled",
            status=403,
        )
    accepted = [settings.admin_token] if write else [settings.read_token, settings.admin_token]
    if write or settings.read_token:
        _check_bearer(request, [t for t in accepted if t])
    return await handler(request)


def _check_bearer(request: web.Request, accepted: list[str]) -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    given = token.strip().encode("utf-8", "surrogateescape")  # headers may hold any bytes
    if not any(hmac.compare_digest(given, t.encode()) for t in accepted):
        raise _unauthorized("the bearer token is not valid for this request")


def _unauthorized(message: str) -> web.HTTPUnauthorized:
    return web.HTTPUnauthorized(
        reason=message, headers={"WWW-Authenticate": 'Bearer realm="switchboard"'}
    )


# --- request helpers -------------------------------------------------------------------------


async def read_json(request: web.Request) -> Any:
    """The request body as JSON, within the size and depth limits; 4xx otherwise."""
    settings = request.app[SETTINGS]
    ctype = request.content_type
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise RegistryError(
            f"send the body as application/json, not {ctype or 'no content type'}",
            code="unsupported_media_type",
            status=415,
        )
    body = await request.read()
    try:
        return loads_limited(body, max_depth=settings.max_json_depth)
    except JsonLimitError as exc:
        raise RegistryError(
            f"the request body is not acceptable JSON: {exc.message}",
            code=exc.code,
            details=exc.details,
        ) from None


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RegistryError("the request body must be a JSON object", code="invalid_body")
    return body


def parse_query(request: web.Request, model: type[Q]) -> tuple[Q, Query, int, str | None]:
    """A listing's query (``model``), its catalog filters, page size and cursor; 400 if bad."""
    settings = request.app[SETTINGS]
    params = read_query(model, request.rel_url.query, max_page_size=settings.max_page_size)
    limit = params.limit if params.limit is not None else settings.page_size
    return params, params.catalog_query(), limit, params.cursor


def _health_keep(request: web.Request, params: ListingQuery) -> Callable[[Any], bool] | None:
    """The ``health`` filter as a predicate on hits (None without the filter)."""
    wanted = params.health
    if wanted is None:
        return None
    registry = request.app[REGISTRY]
    return lambda hit: registry.health_of(hit.agent.id).status == wanted


def _healthy_only(request: web.Request, params: ListingQuery, hits: list[Any]) -> list[Any]:
    """``hits`` whose agent has the ``health`` status asked for (all without the filter)."""
    keep = _health_keep(request, params)
    return hits if keep is None else [hit for hit in hits if keep(hit)]


# --- handlers --------------------------------------------------------------------------------


@documented("This document", "docs", answer="application/json")
async def get_openapi(request: web.Request) -> web.Response:
    """The OpenAPI 3.1 document of this API, generated from its routes and models."""
    return web.json_response(openapi_document(request.app, access))


@documented("Search agents", "agents", answer=AgentList, query=AgentsQuery)
async def list_agents(request: web.Request) -> web.Response:
    """Search agents; ``{"agents": [...], "next_cursor": ...}``."""
    params, query, limit, cursor = parse_query(request, AgentsQuery)
    registry = request.app[REGISTRY]
    if query.q and not query.skill_filters():
        # ranked text alone: walk the index best first for this page only
        page = registry.catalog.agents_page(query, limit, cursor, _health_keep(request, params))
    else:
        hits = _healthy_only(request, params, registry.catalog.agents(query))
        page = paginate(hits, AGENTS, query, limit, cursor)
    agents = []
    for hit in page.items:
        view = agent_view(request.app[REGISTRY], hit.agent)
        if query.q:
            view["score"] = hit.score
        if query.skill_filters() or query.q:
            view["matched_skills"] = list(hit.skills)
        agents.append(view)
    return web.json_response({"agents": agents, "next_cursor": page.next_cursor})


@documented(
    "Register an agent by URL or card",
    "agents",
    answer=Agent,
    status=201,
    body=Registration,
    errors=(409, 413, 422),
)
async def create_agent(request: web.Request) -> web.Response:
    """Register an agent from ``{"url": ...}`` or ``{"card": {...}}`` (optional ``"id"``)."""
    body = _object(await read_json(request))
    allowed = {"url", "card", "id", "refresh_interval"}
    unknown = sorted(set(body) - allowed)
    if unknown or ("url" in body) == ("card" in body):
        raise RegistryError(
            'send exactly one of "url" (an agent base URL or card URL) or "card" '
            '(the card JSON), and optionally "id" and "refresh_interval"',
            code="invalid_body",
            details={"unknown": unknown, "allowed": sorted(allowed)},
        )
    agent_id = body.get("id")
    if agent_id is not None and not isinstance(agent_id, str):
        raise RegistryError('"id" must be a string', code="invalid_body")
    interval = _interval(body.get("refresh_interval"))
    registry = request.app[REGISTRY]
    if "url" in body:
        if not isinstance(body["url"], str) or not 0 < len(body["url"]) <= 2048:
            raise RegistryError(
                '"url" must be a string of 1 to 2048 characters', code="invalid_body"
            )
        record = await registry.register_url(body["url"], agent_id, refresh_interval=interval)
    else:
        record = await registry.register_card(body["card"], agent_id, refresh_interval=interval)
    view = await _full_view(registry, record.id)
    return web.json_response(view, status=201, headers={"Location": f"{PREFIX}/agents/{record.id}"})


@documented("One agent with its raw card", "agents", answer=Agent, errors=(404,), params=_AGENT)
async def get_agent(request: web.Request) -> web.Response:
    """One agent: the normalized view plus the raw card."""
    registry = request.app[REGISTRY]
    return web.json_response(await _full_view(registry, request.match_info["agent_id"]))


async def _full_view(registry: Registry, agent_id: str) -> dict[str, Any]:
    view = agent_view(registry, registry.get(agent_id))
    raw = await registry.raw_card(agent_id)
    try:
        view["card"] = loads_limited(raw, max_depth=256)
    except JsonLimitError:  # stored bytes are always JSON; keep the view usable regardless
        view["card"] = None
    return view


@documented("The card as fetched or pushed", "agents", answer=Card, errors=(404,), params=_AGENT)
async def get_card(request: web.Request) -> web.Response:
    """The agent's card exactly as fetched (or pushed)."""
    raw = await request.app[REGISTRY].raw_card(request.match_info["agent_id"])
    return web.Response(body=raw, content_type="application/json")


@documented(
    "Replace a pushed agent's card",
    "agents",
    answer=Agent,
    body=Card,
    errors=(404, 409, 422),
    params=_AGENT,
)
async def put_card(request: web.Request) -> web.Response:
    """Replace a pushed agent's card."""
    registry = request.app[REGISTRY]
    record = await registry.replace_card(request.match_info["agent_id"], await read_json(request))
    return web.json_response(await _full_view(registry, record.id))


def _interval(value: Any) -> float | None:
    """A per-agent ``refresh_interval``: seconds, or null for the default schedule."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not MIN_REFRESH_INTERVAL <= value <= MAX_REFRESH_INTERVAL
    ):
        raise RegistryError(
            f'"refresh_interval" must be a number of seconds from {number(MIN_REFRESH_INTERVAL)} '
            f"to {number(MAX_REFRESH_INTERVAL)}, or null for the default "
            "(SWITCHBOARD_REFRESH_INTERVAL)",
            code="invalid_body",
            details={"refresh_interval": value},
        )
    return float(value)


@documented(
    "Change an agent's refresh interval",
    "agents",
    answer=Agent,
    body=AgentSettings,
    errors=(404,),
    params=_AGENT,
)
async def patch_agent(request: web.Request) -> web.Response:
    """Change an agent's settings: ``{"refresh_interval": seconds | null}``."""
    body = _object(await read_json(request))
    unknown = sorted(set(body) - {"refresh_interval"})
    if unknown or "refresh_interval" not in body:
        raise RegistryError(
            'send {"refresh_interval": seconds} (or null for the default schedule)',
            code="invalid_body",
            details={"unknown": unknown, "allowed": ["refresh_interval"]},
        )
    registry = request.app[REGISTRY]
    agent_id = request.match_info["agent_id"]
    await registry.upkeep.set_refresh_interval(agent_id, _interval(body["refresh_interval"]))
    return web.json_response(agent_view(registry, registry.get(agent_id)))


@documented(
    "Run the checks due now, or check every agent or some now",
    "refresh",
    answer=RefreshReport,
    body=RefreshRequest,
    body_required=False,
    errors=(404,),
)
async def refresh_all(request: web.Request) -> web.Response:
    """Run the checks that are due now (no body), or check every agent (``{"all": true}``)
    or some (``{"ids": [...]}``) now, due or not. Returns what was checked, changed, failed
    and skipped (being checked elsewhere at the same moment)."""
    body = _object(await read_json(request)) if request.can_read_body else {}
    unknown = sorted(set(body) - {"ids", "all"})
    ids, every = body.get("ids"), body.get("all", False)
    good_ids = ids is None or (isinstance(ids, list) and all(isinstance(i, str) for i in ids))
    if unknown or not isinstance(every, bool) or not good_ids or (every and ids is not None):
        raise RegistryError(
            'send nothing (the checks due now), {"all": true} (every agent now) or '
            '{"ids": ["agent-id", ...]} (these agents now)',
            code="invalid_body",
            details={"unknown": unknown, "allowed": ["all", "ids"]},
        )
    registry, refresher = request.app[REGISTRY], request.app[REFRESHER]
    await registry.sync()
    for agent_id in ids or []:
        registry.get(agent_id)  # 404 for an unknown id, before anything runs
    if ids is not None or every:
        report = await refresher.run_now(ids)
    else:
        due = await registry.store.due(registry.policy.now(), len(registry.catalog.snapshot))
        report = await refresher.run_now([row.agent_id for row in due], due_only=True)
    return web.json_response(report.to_api())


@documented("Remove an agent", "agents", status=204, errors=(404,), params=_AGENT)
async def delete_agent(request: web.Request) -> web.Response:
    """Remove an agent."""
    await request.app[REGISTRY].remove(request.match_info["agent_id"])
    return web.Response(status=204)


@documented(
    "Fetch the card again now", "refresh", answer=Refresh, errors=(404, 409, 422), params=_AGENT
)
async def refresh_agent(request: web.Request) -> web.Response:
    """Fetch an agent's card again now; ``{"agent": {...}, "changed": bool}``."""
    registry = request.app[REGISTRY]
    record, changed = await registry.upkeep.refresh(request.match_info["agent_id"])
    return web.json_response({"agent": agent_view(registry, record), "changed": changed})


@documented(
    "Card revisions, newest first", "agents", answer=Revisions, errors=(404,), params=_AGENT
)
async def list_revisions(request: web.Request) -> web.Response:
    """The card revisions of an agent, newest first."""
    registry = request.app[REGISTRY]
    agent_id = request.match_info["agent_id"]
    registry.get(agent_id)
    rows = await registry.store.revisions(agent_id)
    revisions = [
        {
            "sha256": row["sha256"],
            "fetched_at": iso(row["fetched_at"]),
            "card_url": row["card_url"],
            "size": row["size"],
            "verification_status": row["verification_status"],
            "initial": n == len(rows) - 1,
            # null: recorded by a version that kept no diffs (the first revision has none)
            "diff": {} if row["diff"] is None and n == len(rows) - 1 else row["diff"],
        }
        for n, row in enumerate(rows)
    ]
    return web.json_response({"revisions": revisions})


@documented("Search skills", "skills", answer=SkillList, query=SkillsQuery)
async def list_skills(request: web.Request) -> web.Response:
    """Search skills, one row per skill with its agent."""
    params, query, limit, cursor = parse_query(request, SkillsQuery)
    registry = request.app[REGISTRY]
    if query.q and not query.skill_filters():
        # ranked text alone: walk the index best first for this page only
        page = registry.catalog.skills_page(query, limit, cursor, _health_keep(request, params))
    else:
        hits = _healthy_only(request, params, registry.catalog.skills(query))
        page = paginate(hits, SKILLS, query, limit, cursor)
    skills = []
    for hit in page.items:
        row = {"agent": {"id": hit.agent.id, "name": hit.agent.card.name}}
        row.update(hit.skill.model_dump())
        if query.q:
            row["score"] = hit.score
        skills.append(row)
    return web.json_response({"skills": skills, "next_cursor": page.next_cursor})


@documented("Catalog counts", "agents", answer=Stats)
async def get_stats(request: web.Request) -> web.Response:
    """Catalog counts by protocol version, card format, health and verification; the version
    of Switchboard."""
    snapshot = request.app[REGISTRY].catalog.snapshot
    versions: Counter[str] = Counter()
    formats: Counter[str] = Counter()
    verifications: Counter[str] = Counter()
    health: Counter[str] = Counter()
    registry = request.app[REGISTRY]
    for agent in snapshot.agents.values():
        versions.update(agent.card.canonical_protocol_versions)
        formats[agent.card.card_format] += 1
        verifications[agent.verification.status] += 1
        health[registry.health_of(agent.id).status] += 1
    total = len(snapshot)
    return web.json_response(
        {
            "agents": total,
            "skills": sum(len(a.card.skills) for a in snapshot.agents.values()),
            "catalog_version": snapshot.version,
            "by_protocol_version": dict(sorted(versions.items())),
            "by_card_format": dict(sorted(formats.items())),
            "by_health": dict(sorted(health.items())),
            "by_verification": dict(sorted(verifications.items())),
            "version": switchboard_version(),
        }
    )
