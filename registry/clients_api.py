"""The clients routes of the admin API: API keys (``/api/v1/clients``) and the audit log
(``/api/v1/audit``).

``POST /api/v1/clients`` makes a key for a principal and answers it once (``key``); ``GET``
lists keys (their ``prefix``, never the key nor its hash) or shows one; ``DELETE`` revokes
one (204, refused at once by every replica); ``POST .../rotate`` makes the successor of a
key (the old one refused at once, or after ``grace_seconds``). ``GET /api/v1/audit`` lists
the admin writes, newest first. Every route here needs the admin role, reads included
(:data:`registry.api.ADMIN_READS`). The app holds :class:`~registry.access.apikeys.ApiKeys` under
:data:`CLIENTS` and :class:`~registry.access.audit.Audit` under
:data:`~registry.access.audit.AUDIT`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from registry.access.apikeys import ApiKeyInfo, ApiKeys
from registry.access.audit import AUDIT
from registry.access.principal import ANONYMOUS, PRINCIPAL_KEY
from registry.api import SETTINGS, read_json
from registry.apimodels import (
    ApiKey,
    ApiKeyList,
    AuditLog,
    AuditQuery,
    ClientsQuery,
    NewApiKey,
    NewClient,
    Rotation,
)
from registry.errors import RegistryError
from registry.openapi import PREFIX, documented

__all__ = ["CLIENTS", "add_client_routes"]

CLIENTS = web.AppKey("clients", ApiKeys)

_CLIENT = {"client_id": "The key's id (12 hex digits, as lists show it)."}
_FIELDS = ("subject", "tenant", "groups", "roles", "description", "expires_at")
M = TypeVar("M", bound=BaseModel)


def add_client_routes(app: web.Application) -> None:
    """Register the ``/api/v1/clients`` and ``/api/v1/audit`` routes on ``app`` (which holds
    CLIENTS, AUDIT and SETTINGS)."""
    app.router.add_get(f"{PREFIX}/clients", list_clients)
    app.router.add_post(f"{PREFIX}/clients", create_client)
    app.router.add_get(f"{PREFIX}/clients/{{client_id}}", get_client)
    app.router.add_delete(f"{PREFIX}/clients/{{client_id}}", revoke_client)
    app.router.add_post(f"{PREFIX}/clients/{{client_id}}/rotate", rotate_client)
    app.router.add_get(f"{PREFIX}/audit", list_audit)


# --- request helpers -------------------------------------------------------------------------


def _by(request: web.Request) -> str:
    """Who makes this change, for ``created_by`` and ``revoked_by``."""
    return request.get(PRINCIPAL_KEY, ANONYMOUS).label()


def _query(request: web.Request, model: type[M]) -> M:
    """The query string as ``model``: 400 ``unknown_parameter`` or ``invalid_parameter``."""
    params = request.rel_url.query
    unknown = sorted(set(params) - set(model.model_fields))
    if unknown:
        raise RegistryError(
            f"unknown query parameter {unknown[0]!r}",
            code="unknown_parameter",
            details={"unknown": unknown, "allowed": sorted(model.model_fields)},
        )
    values: dict[str, str] = {}
    for name in params:
        given = params.getall(name)
        if len(given) > 1:
            raise RegistryError(
                f"query parameter {name!r} given more than once",
                code="invalid_parameter",
                details={"parameter": name},
            )
        values[name] = given[0]
    settings = request.app[SETTINGS]
    try:
        return model.model_validate(values, context={"max_page_size": settings.max_page_size})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        if error["type"] == "invalid_parameter":
            context: Mapping[str, Any] = error.get("ctx") or {}
            raise RegistryError(
                error["msg"], code="invalid_parameter", details=dict(context)
            ) from None
        name = ".".join(str(part) for part in error["loc"])
        raise RegistryError(
            f"{name}: {error['msg']}",
            code="invalid_parameter",
            details={"parameter": name, "value": error["input"]},
        ) from None


def _limit(request: web.Request, limit: int | None) -> int:
    return limit if limit is not None else request.app[SETTINGS].page_size


def _invalid(message: str, **details: Any) -> RegistryError:
    return RegistryError(message, code="invalid_body", details=details or None)


async def _object(request: web.Request, allowed: tuple[str, ...], *, empty: bool) -> dict[str, Any]:
    """The body, a JSON object with no keys but ``allowed`` (no body at all if ``empty``)."""
    if empty and not request.can_read_body:
        return {}
    body = await read_json(request)
    if not isinstance(body, dict):
        raise _invalid("the request body must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise _invalid(
            f"unknown member {unknown[0]!r}: the body takes {', '.join(allowed)}",
            unknown=unknown,
            allowed=list(allowed),
        )
    return body


def _string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise _invalid(f'"{name}" must be a string or null')
    return value


def _strings(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid(f'"{name}" must be a list of strings')
    return value


def _time(body: dict[str, Any], name: str) -> datetime | None:
    value = _string(body, name)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _invalid(
            f'"{name}" must be an ISO 8601 time with a timezone, e.g. 2030-01-31T00:00:00Z',
            **{name: value},
        )
    return parsed


def _created(request: web.Request, info: ApiKeyInfo, key: str) -> web.Response:
    view = info.to_api(request.app[CLIENTS].clock())
    view["key"] = key
    return web.json_response(
        view,
        status=201,
        headers={"Location": f"{PREFIX}/clients/{info.id}", "Cache-Control": "no-store"},
    )


# --- handlers --------------------------------------------------------------------------------


@documented("Client API keys, newest first", "clients", answer=ApiKeyList, query=ClientsQuery)
async def list_clients(request: web.Request) -> web.Response:
    """Every client API key, newest first (revoked and expired ones too): its prefix, the
    principal it stands for and its lifetime; never the key."""
    params = _query(request, ClientsQuery)
    keys = request.app[CLIENTS]
    page = await keys.list(
        limit=_limit(request, params.limit),
        cursor=params.cursor,
        subject=params.subject,
        tenant=params.tenant,
    )
    now = keys.clock()
    return web.json_response(
        {"clients": [info.to_api(now) for info in page.items], "next_cursor": page.next_cursor}
    )


@documented(
    "Create a client API key",
    "clients",
    answer=NewApiKey,
    status=201,
    body=NewClient,
    errors=(422,),
)
async def create_client(request: web.Request) -> web.Response:
    """Make an API key for a principal (subject, tenant, groups, roles); 201 with the key in
    ``key``, shown this once: only its SHA-256 is kept. 422 ``reserved_subject`` for a
    built-in principal's name (``admin-token``, ``read-token``)."""
    body = await _object(request, _FIELDS, empty=False)
    subject = body.get("subject")
    if not isinstance(subject, str):
        raise _invalid('"subject" (who the key stands for) is required: a string')
    info, key = await request.app[CLIENTS].create(
        subject,
        tenant=_string(body, "tenant"),
        groups=_strings(body, "groups"),
        roles=_strings(body, "roles"),
        description=_string(body, "description"),
        expires_at=_time(body, "expires_at"),
        by=_by(request),
    )
    return _created(request, info, key)


@documented("One client API key", "clients", answer=ApiKey, errors=(404,), params=_CLIENT)
async def get_client(request: web.Request) -> web.Response:
    """One client API key (never the key)."""
    keys = request.app[CLIENTS]
    info = await keys.get(request.match_info["client_id"])
    return web.json_response(info.to_api(keys.clock()))


@documented("Revoke a client API key", "clients", status=204, errors=(404,), params=_CLIENT)
async def revoke_client(request: web.Request) -> web.Response:
    """Revoke a key: refused from now on, by every replica; 204. Revoking a revoked key
    changes nothing; a rotated key's grace period ends now."""
    await request.app[CLIENTS].revoke(request.match_info["client_id"], _by(request))
    return web.Response(status=204)


@documented(
    "Rotate a client API key",
    "clients",
    answer=NewApiKey,
    status=201,
    body=Rotation,
    body_required=False,
    errors=(404, 409),
    params=_CLIENT,
)
async def rotate_client(request: web.Request) -> web.Response:
    """Make the successor of a key (same principal and expiry); 201 with the new key, shown
    this once. The old key is refused at once, or after ``grace_seconds``."""
    body = await _object(request, ("grace_seconds",), empty=True)
    grace = body.get("grace_seconds", 0)
    if grace is None:
        grace = 0
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise _invalid('"grace_seconds" must be a number of seconds', grace_seconds=grace)
    old_id = request.match_info["client_id"]
    info, key = await request.app[CLIENTS].rotate(old_id, _by(request), grace)
    return _created(request, info, key)


@documented(
    "The audit log of admin writes, newest first", "audit", answer=AuditLog, query=AuditQuery
)
async def list_audit(request: web.Request) -> web.Response:
    """Who changed what and when: every admin write (also those that failed, with their
    status), newest first."""
    params = _query(request, AuditQuery)
    page = await request.app[AUDIT].list(
        _limit(request, params.limit),
        params.cursor,
        actor=params.actor,
        since=params.since,
        action=params.action,
    )
    return web.json_response(
        {"entries": [entry.to_api() for entry in page.items], "next_cursor": page.next_cursor}
    )
