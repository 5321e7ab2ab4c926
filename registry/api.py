"""The admin REST API under ``/api/v1``: register, inspect, search and remove agents.

JSON in and out, snake_case fields. Errors are ``{"error": {"code", "message", "details"}}``
with a 4xx status. Writes need ``Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>``; reads are
open unless ``SWITCHBOARD_READ_TOKEN`` is set. ``docs/admin-api.md`` and the OpenAPI
document (:mod:`registry.openapi`) describe every route.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from registry.access.policy import parse_tenant
from registry.apiauth import ADMIN_READS as ADMIN_READS
from registry.apiauth import PUBLIC as PUBLIC
from registry.apiauth import PUBLIC_PREFIX as PUBLIC_PREFIX
from registry.apiauth import READ_POSTS as READ_POSTS
from registry.apiauth import access as access
from registry.apiauth import auth_middleware as auth_middleware
from registry.apiauth import caller as caller
from registry.apiauth import usable_for
from registry.apiauth import who_is_calling as who_is_calling
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
from registry.appkeys import AUTHENTICATOR as AUTHENTICATOR
from registry.appkeys import PASSIVE_HEALTH as PASSIVE_HEALTH
from registry.appkeys import POLICIES as POLICIES
from registry.appkeys import REFRESHER as REFRESHER
from registry.appkeys import REGISTRY as REGISTRY
from registry.appkeys import SEARCH_BY_MEANING
from registry.appkeys import SETTINGS as SETTINGS
from registry.bodies import ACCEPTED_ENCODINGS, UNREADABLE, BodyError, read_body
from registry.catalog import AGENTS, SKILLS, Query
from registry.errors import NotFound, RegistryError, number
from registry.health import MAX_REFRESH_INTERVAL, MIN_REFRESH_INTERVAL
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.meaningsearch import (
    AGENTS_BY_MEANING,
    SKILLS_BY_MEANING,
    Mode,
    agent_hits,
    search_mode,
    skill_hits,
)
from registry.openapi import PREFIX, documented, openapi_document
from registry.paging import paginate
from registry.plainview import plain_card, plain_revisions, plain_view, plain_views, sees_addresses
from registry.queryparams import AgentsQuery, ListingQuery, Q, SkillsQuery, read_query
from registry.records import AgentRecord, iso
from registry.service import Registry
from registry.version import switchboard_version

log = logging.getLogger(__name__)

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
    except BodyError as exc:
        return _body_error(exc)
    except web.RequestPayloadError:  # a body read by other means than read_body
        return _body_error(BodyError("unreadable", UNREADABLE))
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


def _body_error(exc: BodyError) -> web.Response:
    """A body that cannot be read: 413 too large, 415 a content coding not accepted (with
    ``Accept-Encoding``), 400 one that is not valid data of its coding, or cut short."""
    accepted = list(ACCEPTED_ENCODINGS)
    if exc.problem == "too_large":
        details: dict[str, Any] = {"max_bytes": exc.max_bytes}
        if exc.content_length is not None:
            details["content_length"] = exc.content_length
        if exc.encoding is not None:
            details["content_encoding"] = exc.encoding
        return api_error(413, "request_too_large", exc.message, details)
    if exc.problem == "unsupported_encoding":
        details = {"content_encoding": exc.encoding, "accepted_encodings": accepted}
        response = api_error(415, "unsupported_media_type", exc.message, details)
        response.headers["Accept-Encoding"] = ", ".join(accepted)
        return response
    if exc.problem == "bad_encoding":
        details = {"content_encoding": exc.encoding, "accepted_encodings": accepted}
        return api_error(400, "invalid_content_encoding", exc.message, details)
    return api_error(400, "bad_request", exc.message)


# --- request helpers -------------------------------------------------------------------------


async def read_json(request: web.Request) -> Any:
    """The request body as JSON, within the size and depth limits, its ``Content-Encoding``
    decoded (:func:`registry.bodies.read_body`; a :class:`BodyError` is answered by
    :func:`error_middleware`); 4xx otherwise."""
    settings = request.app[SETTINGS]
    ctype = request.content_type
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise RegistryError(
            f"send the body as application/json, not {ctype or 'no content type'}",
            code="unsupported_media_type",
            status=415,
        )
    body = await read_body(request, settings.max_request_bytes)
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
    """The ``health`` filter and what the caller may see, as a predicate on hits (None when
    every hit is kept)."""
    wanted, usable = params.health, usable_for(request)
    if wanted is None and usable is None:
        return None
    registry = request.app[REGISTRY]

    def keep(hit: Any) -> bool:
        if wanted is not None and registry.health_of(hit.agent.id).status != wanted:
            return False
        skill = getattr(hit, "skill", None)
        return usable is None or usable(hit.agent.id, skill.id if skill is not None else None)

    return keep


def _healthy_only(request: web.Request, params: ListingQuery, hits: list[Any]) -> list[Any]:
    """``hits`` whose agent has the ``health`` status asked for (all without the filter)."""
    keep = _health_keep(request, params)
    return hits if keep is None else [hit for hit in hits if keep(hit)]


async def _search_mode(request: web.Request, params: ListingQuery) -> Mode | None:
    """How ``q`` is ranked (None without ``q``): ``match``, else the router's matcher; by
    words when there is no model to go by meaning (registry/meaningsearch.py)."""
    app = request.app
    default = app[SETTINGS].matcher
    return await search_mode(params.q, params.match, default, app.get(SEARCH_BY_MEANING))


def _mode_view(mode: Mode | None) -> dict[str, Any]:
    """What a search's answer says of its mode: ``match`` (the mode used) with ``q``, and
    ``match_fallback`` (why by words) when it was to go by meaning."""
    if mode is None:
        return {}
    view: dict[str, Any] = {"match": mode.used}
    if mode.fallback is not None:
        view["match_fallback"] = mode.fallback
    return view


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
    mode = await _search_mode(request, params)
    if mode is not None and mode.scored is not None:
        hits = agent_hits(mode.scored, query, usable_for(request))
        hits = _healthy_only(request, params, hits)
        page = paginate(hits, AGENTS_BY_MEANING, query, limit, cursor)
    elif query.q and not query.skill_filters():
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
    if not sees_addresses(request):
        agents = await plain_views(request, [hit.agent for hit in page.items], agents)
    answer = {"agents": agents, "next_cursor": page.next_cursor, **_mode_view(mode)}
    return web.json_response(answer)


@documented(
    "Register an agent by URL or card",
    "agents",
    answer=Agent,
    status=201,
    body=Registration,
    errors=(409, 413, 422),
)
async def create_agent(request: web.Request) -> web.Response:
    """Register an agent from ``{"url": ...}`` or ``{"card": {...}}`` (optional ``"id"``,
    ``"refresh_interval"``, and ``"tenant"``: the agent's access policy then names that
    tenant, docs/admin-api.md#access-policies)."""
    body = _object(await read_json(request))
    allowed = {"url", "card", "id", "refresh_interval", "tenant"}
    unknown = sorted(set(body) - allowed)
    if unknown or ("url" in body) == ("card" in body):
        raise RegistryError(
            'send exactly one of "url" (an agent base URL or card URL) or "card" '
            '(the card JSON), and optionally "id", "refresh_interval" and "tenant"',
            code="invalid_body",
            details={"unknown": unknown, "allowed": sorted(allowed)},
        )
    agent_id = body.get("id")
    if agent_id is not None and not isinstance(agent_id, str):
        raise RegistryError('"id" must be a string', code="invalid_body")
    interval = _interval(body.get("refresh_interval"))
    tenant = parse_tenant(body.get("tenant"))
    registry = request.app[REGISTRY]
    if "url" in body:
        if not isinstance(body["url"], str) or not 0 < len(body["url"]) <= 2048:
            raise RegistryError(
                '"url" must be a string of 1 to 2048 characters', code="invalid_body"
            )
        record = await registry.register_url(body["url"], agent_id, refresh_interval=interval)
    else:
        record = await registry.register_card(body["card"], agent_id, refresh_interval=interval)
    if tenant is not None:
        await _set_tenant(request, record.id, tenant)
    view = await _written_view(registry, record)
    return web.json_response(view, status=201, headers={"Location": f"{PREFIX}/agents/{record.id}"})


async def _written_view(registry: Registry, record: AgentRecord) -> dict[str, Any]:
    """The full view of an agent just written, once its skills' vectors are stored, saying
    whether they are (``"vectors"``: ``"ready"`` or ``"pending"``; absent when routing goes by
    words)."""
    vectors = await registry.vectors_of(record)
    view = await _full_view(registry, record.id)
    if vectors is not None:
        view["vectors"] = vectors
    return view


async def _set_tenant(request: web.Request, agent_id: str, tenant: str) -> None:
    """Make a just registered agent ``tenant``'s (its policy's rules, if any, are kept); if
    that fails the registration is undone, so the agent never stays shared by mistake."""
    policies = request.app[POLICIES]
    current = policies.get(agent_id)
    try:
        await policies.put(
            agent_id, tenant, current.rules if current else (), who_is_calling(request)
        )
    except BaseException:
        try:
            await request.app[REGISTRY].remove(agent_id)
        except Exception:
            log.exception("could not undo the registration of %s", agent_id)
        raise


@documented("One agent with its raw card", "agents", answer=Agent, errors=(404,), params=_AGENT)
async def get_agent(request: web.Request) -> web.Response:
    """One agent: the normalized view plus the raw card."""
    registry = request.app[REGISTRY]
    view = await _full_view(registry, request.match_info["agent_id"])
    if not sees_addresses(request):  # the card as the router serves it, not the agent's
        record = registry.get(view["id"])
        view = plain_view(view, await plain_card(request, record))
    return web.json_response(view)


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
    """The agent's card exactly as fetched (or pushed); to a caller that may not see agents'
    addresses, the card as the router serves it (404 ``no_card`` when it serves none)."""
    registry = request.app[REGISTRY]
    agent_id = request.match_info["agent_id"]
    if not sees_addresses(request):
        card = await plain_card(request, registry.get(agent_id))
        if card is None:
            raise NotFound(
                f"the router serves no card of agent {agent_id!r}",
                code="no_card",
                details={"id": agent_id},
            )
        return web.json_response(card)
    raw = await registry.raw_card(agent_id)
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
    return web.json_response(await _written_view(registry, record))


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
    await registry.indexed()  # the changed cards' vectors, before the answer
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
    view = {"agent": agent_view(registry, record), "changed": changed}
    if (vectors := await registry.vectors_of(record)) is not None:
        view["agent"]["vectors"] = vectors
    return web.json_response(view)


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
    if not sees_addresses(request):
        revisions = plain_revisions(revisions)
    return web.json_response({"revisions": revisions})


@documented("Search skills", "skills", answer=SkillList, query=SkillsQuery)
async def list_skills(request: web.Request) -> web.Response:
    """Search skills, one row per skill with its agent."""
    params, query, limit, cursor = parse_query(request, SkillsQuery)
    registry = request.app[REGISTRY]
    mode = await _search_mode(request, params)
    if mode is not None and mode.scored is not None:
        hits = _healthy_only(request, params, skill_hits(mode.scored, query))
        page = paginate(hits, SKILLS_BY_MEANING, query, limit, cursor)
    elif query.q and not query.skill_filters():
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
    answer = {"skills": skills, "next_cursor": page.next_cursor, **_mode_view(mode)}
    return web.json_response(answer)


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
