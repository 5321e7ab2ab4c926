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

from registry.catalog import AGENTS, SKILLS, Query
from registry.errors import RegistryError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.openapi import openapi_document
from registry.paging import paginate
from registry.records import AgentRecord, iso
from registry.refresh import PassiveHealth, Refresher
from registry.service import Registry
from registry.settings import Settings
from registry.textsearch import tokenize
from registry.version import switchboard_version

log = logging.getLogger(__name__)

REGISTRY = web.AppKey("registry", Registry)
SETTINGS = web.AppKey("settings", Settings)
REFRESHER = web.AppKey("refresher", Refresher)
PASSIVE_HEALTH = web.AppKey("passive_health", PassiveHealth)

PREFIX = "/api/v1"
_FILTERS = {
    "q",
    "skill",
    "tag",
    "input_mode",
    "output_mode",
    "streaming",
    "push",
    "protocol_version",
    "verified",
    "verification",
    "health",
}
_STATUSES = ("verified", "unsigned", "invalid", "untrusted-key")
_HEALTH = ("healthy", "degraded", "unreachable", "unknown")
_PAGING = {"limit", "cursor"}
#: POST routes that only read (they take a body but change nothing): the read token suffices.
READ_POSTS = frozenset({f"{PREFIX}/route/explain"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application) -> None:
    """Register the admin API routes on ``app`` (which holds REGISTRY and SETTINGS)."""
    app.router.add_get(f"{PREFIX}/openapi.json", get_openapi)
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


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bearer tokens: the admin token for writes, the read token (if set) for reads."""
    if (
        not request.path.startswith(PREFIX + "/")
        or request.path == f"{PREFIX}/openapi.json"
        or request.match_info.http_exception is not None  # 404/405: say so, not 401
    ):
        return await handler(request)
    settings = request.app[SETTINGS]
    write = request.method not in ("GET", "HEAD", "OPTIONS") and request.path not in READ_POSTS
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


def parse_query(request: web.Request) -> tuple[Query, int, str | None]:
    """Catalog filters, page size and cursor from the query string; 400 on anything unknown."""
    params = request.rel_url.query
    unknown = sorted(set(params) - _FILTERS - _PAGING)
    if unknown:
        raise RegistryError(
            f"unknown query parameter {unknown[0]!r}",
            code="unknown_parameter",
            details={"unknown": unknown, "allowed": sorted(_FILTERS | _PAGING)},
        )
    for name in set(params) - {"tag"}:
        if len(params.getall(name)) > 1:
            raise RegistryError(
                f"query parameter {name!r} given more than once",
                code="invalid_parameter",
                details={"parameter": name},
            )
    settings = request.app[SETTINGS]
    limit = _int_param(params.get("limit"), settings.page_size, settings.max_page_size)
    query = Query(
        q=_text_param(params.get("q")),
        skill=params.get("skill") or None,
        tags=tuple(t for t in params.getall("tag", []) if t),
        input_mode=params.get("input_mode") or None,
        output_mode=params.get("output_mode") or None,
        streaming=_bool_param("streaming", params.get("streaming")),
        push=_bool_param("push", params.get("push")),
        protocol_version=params.get("protocol_version") or None,
        verified=_bool_param("verified", params.get("verified")),
        verification=_choice_param("verification", params.get("verification"), _STATUSES),
    )
    return query, limit, params.get("cursor") or None


def _health_keep(request: web.Request) -> Callable[[Any], bool] | None:
    """The ``health`` filter as a predicate on hits (None without the filter)."""
    wanted = _choice_param("health", request.rel_url.query.get("health"), _HEALTH)
    if wanted is None:
        return None
    registry = request.app[REGISTRY]
    return lambda hit: registry.health_of(hit.agent.id).status == wanted


def _healthy_only(request: web.Request, hits: list[Any]) -> list[Any]:
    """``hits`` whose agent has the ``health`` status asked for (all without the filter)."""
    keep = _health_keep(request)
    return hits if keep is None else [hit for hit in hits if keep(hit)]


def _text_param(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    if not tokenize(value):
        raise RegistryError(
            "q has no searchable words (only punctuation or very common words)",
            code="invalid_parameter",
            details={"parameter": "q", "value": value},
        )
    return value.strip()


def _int_param(value: str | None, default: int, maximum: int) -> int:
    if value is None:
        return default
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= maximum:
        raise RegistryError(
            f"limit must be a whole number from 1 to {maximum}",
            code="invalid_parameter",
            details={"parameter": "limit", "value": value, "maximum": maximum},
        )
    return int(value)


def _choice_param(name: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value not in choices:
        raise RegistryError(
            f"{name} must be one of {', '.join(choices)}",
            code="invalid_parameter",
            details={"parameter": name, "value": value, "allowed": list(choices)},
        )
    return value


def _bool_param(name: str, value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise RegistryError(
        f"{name} must be true or false",
        code="invalid_parameter",
        details={"parameter": name, "value": value},
    )


# --- handlers --------------------------------------------------------------------------------


async def get_openapi(request: web.Request) -> web.Response:
    """The OpenAPI 3.1 document of this API."""
    return web.json_response(openapi_document())


async def list_agents(request: web.Request) -> web.Response:
    """Search agents; ``{"agents": [...], "next_cursor": ...}``."""
    query, limit, cursor = parse_query(request)
    registry = request.app[REGISTRY]
    if query.q and not query.skill_filters():
        # ranked text alone: walk the index best first for this page only
        page = registry.catalog.agents_page(query, limit, cursor, _health_keep(request))
    else:
        hits = _healthy_only(request, registry.catalog.agents(query))
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


async def get_card(request: web.Request) -> web.Response:
    """The agent's card exactly as fetched (or pushed)."""
    raw = await request.app[REGISTRY].raw_card(request.match_info["agent_id"])
    return web.Response(body=raw, content_type="application/json")


async def put_card(request: web.Request) -> web.Response:
    """Replace a pushed agent's card."""
    registry = request.app[REGISTRY]
    record = await registry.replace_card(request.match_info["agent_id"], await read_json(request))
    return web.json_response(await _full_view(registry, record.id))


MIN_REFRESH_INTERVAL = 1.0
MAX_REFRESH_INTERVAL = 30 * 86400.0


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
            f'"refresh_interval" must be a number of seconds from {MIN_REFRESH_INTERVAL:g} to '
            f"{MAX_REFRESH_INTERVAL:g}, or null for the default (SWITCHBOARD_REFRESH_INTERVAL)",
            code="invalid_body",
            details={"refresh_interval": value},
        )
    return float(value)


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


async def delete_agent(request: web.Request) -> web.Response:
    """Remove an agent."""
    await request.app[REGISTRY].remove(request.match_info["agent_id"])
    return web.Response(status=204)


async def refresh_agent(request: web.Request) -> web.Response:
    """Fetch an agent's card again now; ``{"agent": {...}, "changed": bool}``."""
    registry = request.app[REGISTRY]
    record, changed = await registry.upkeep.refresh(request.match_info["agent_id"])
    return web.json_response({"agent": agent_view(registry, record), "changed": changed})


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


async def list_skills(request: web.Request) -> web.Response:
    """Search skills, one row per skill with its agent."""
    query, limit, cursor = parse_query(request)
    registry = request.app[REGISTRY]
    if query.q and not query.skill_filters():
        # ranked text alone: walk the index best first for this page only
        page = registry.catalog.skills_page(query, limit, cursor, _health_keep(request))
    else:
        hits = _healthy_only(request, registry.catalog.skills(query))
        page = paginate(hits, SKILLS, query, limit, cursor)
    skills = []
    for hit in page.items:
        row = {"agent": {"id": hit.agent.id, "name": hit.agent.card.name}}
        row.update(hit.skill.model_dump())
        if query.q:
            row["score"] = hit.score
        skills.append(row)
    return web.json_response({"skills": skills, "next_cursor": page.next_cursor})


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
        versions.update(agent.card.protocol_versions)
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
