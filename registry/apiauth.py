"""Who may use the admin API: the caller authenticated (:mod:`registry.access.authenticate`)
and its role checked against the route (:func:`access`), then left on the request.

Writes need the admin role; so do the reads of API keys and the audit log. Catalog reads need
a caller when ``SWITCHBOARD_READ_TOKEN`` is set or client authentication is on; then a caller
without the reader or admin role sees only the agents and skills its access policies let it
use (:func:`usable_for`), and an agent it may not use answers 404 as an unknown one does.
Failed authentications count against the client address's budget (:data:`AUTH_FAILURES`,
shared with the A2A endpoints): beyond it, 429 ``rate_limited`` with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from registry.access.authenticate import Authenticator
from registry.access.clientaddr import client_address
from registry.access.errors import AuthError
from registry.access.principal import ANONYMOUS, PRINCIPAL_KEY, Principal
from registry.access.throttle import FailureThrottle, retry_after
from registry.appkeys import AUTHENTICATOR, POLICIES, SETTINGS
from registry.errors import RegistryError, agent_not_found
from registry.openapi import PREFIX, Access

__all__ = [
    "ADMIN_READS",
    "AUTH_FAILURES",
    "PUBLIC",
    "PUBLIC_PREFIX",
    "READ_POSTS",
    "access",
    "auth_middleware",
    "caller",
    "usable_for",
    "who_is_calling",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: POST routes that only read (they take a body but change nothing): the read token suffices.
READ_POSTS = frozenset({f"{PREFIX}/route/explain"})
#: Reads only an admin may make: clients' API keys, the audit log, the access policies, the
#: push notifications' dead letters (and agents' outbound credentials, `.../credentials`).
ADMIN_READS = (f"{PREFIX}/clients", f"{PREFIX}/audit", f"{PREFIX}/policies", f"{PREFIX}/push")
#: Routes that never need a token: the API's description and its page.
PUBLIC = frozenset({f"{PREFIX}/openapi.json", f"{PREFIX}/docs"})
PUBLIC_PREFIX = f"{PREFIX}/docs/static/"
AUTH_FAILURES = web.AppKey("auth_failures", FailureThrottle)
"""The failed-authentication throttle (``SWITCHBOARD_RATE_LIMIT_AUTH_FAILURES``; absent: off),
the one the A2A endpoints' Gate counts in too."""


def access(method: str, path: str) -> Access:
    """What a request needs: nothing (public), a reader (the read token, if set, or with
    client authentication on, any caller), the admin role (writes; and reads of the API keys
    and the audit log)."""
    if path in PUBLIC or path.startswith(PUBLIC_PREFIX):
        return "public"
    if any(path == p or path.startswith(p + "/") for p in ADMIN_READS) or path.endswith(
        "/credentials"
    ):
        return "admin"
    if method in ("GET", "HEAD", "OPTIONS") or path in READ_POSTS:
        return "read"
    return "write"


@web.middleware
def auth_middleware(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
    """Who is calling (:class:`~registry.access.authenticate.Authenticator`), left in
    ``request[PRINCIPAL_KEY]``; writes and the admin reads need the admin role, reads a
    caller when the read token is set or client authentication is on. Outside the admin API
    the handler runs as it is (no frame of this middleware held while it runs)."""
    if (
        not request.path.startswith(PREFIX + "/")
        or request.match_info.http_exception is not None  # 404/405: say so, not 401
        or (needed := access(request.method, request.path)) == "public"
    ):
        return handler(request)
    return _authorized(request, handler, needed)


async def _authorized(request: web.Request, handler: Handler, needed: str) -> web.StreamResponse:
    """``handler`` once the caller may do what the request ``needed``."""
    settings = request.app[SETTINGS]
    authenticator = request.app[AUTHENTICATOR]
    admins = bool(settings.admin_token) or authenticator.client_auth
    if needed in ("write", "admin") and not admins:
        raise RegistryError(
            "admin writes are disabled: start Switchboard with SWITCHBOARD_ADMIN_TOKEN set",
            code="writes_disabled",
            status=403,
        )
    guarded = needed != "read" or bool(settings.read_token) or authenticator.client_auth
    principal = ANONYMOUS
    if guarded:
        try:
            found = await authenticator.authenticate(request.headers)
        except AuthError as error:
            if error.reason == "unavailable":
                raise _unauthorized(authenticator, error.message) from None
            return _failed(request, authenticator, error.message)
        if found is None:
            return _failed(
                request, authenticator, "missing credentials: send 'Authorization: Bearer <token>'"
            )
        principal = found
        if needed != "read" and not principal.is_admin:
            raise RegistryError(
                "this needs the admin role", code="forbidden", status=403,
                details={"caller": principal.label()},
            )  # fmt: skip
    request[PRINCIPAL_KEY] = principal
    agent_id = request.match_info.get("agent_id")
    usable = usable_for(request) if agent_id is not None else None
    if agent_id is not None and usable is not None and not usable(agent_id, None):
        raise agent_not_found(agent_id)  # hidden from this caller: as if it did not exist
    return await handler(request)


def caller(request: web.Request) -> Principal:
    """The principal of an admin API request (:data:`ANONYMOUS` where none was needed)."""
    return request.get(PRINCIPAL_KEY, ANONYMOUS)


def _failed(request: web.Request, authenticator: Authenticator, message: str) -> web.Response:
    """401 for credentials that failed; 429 once the client address failed too often."""
    throttle = request.app.get(AUTH_FAILURES)
    wait = throttle.failed(client_address(request)) if throttle is not None else None
    if wait is None:
        raise _unauthorized(authenticator, message)
    seconds = retry_after(wait)
    refused = RegistryError(
        f"too many failed authentications from this address; retry in {seconds} s",
        code="rate_limited",
        status=429,
        details={"retry_after": seconds},
    )
    return web.json_response(refused.to_json(), status=429, headers={"Retry-After": str(seconds)})


def _unauthorized(authenticator: Authenticator, message: str) -> web.HTTPUnauthorized:
    return web.HTTPUnauthorized(
        reason=message, headers={"WWW-Authenticate": authenticator.challenge()}
    )


def usable_for(request: web.Request) -> Callable[[str, str | None], bool] | None:
    """What the caller may use, when it may not read the whole catalog (None: everything):
    with client authentication on, a caller without the reader or admin role sees only the
    agents and skills its access policies let it use."""
    policies = request.app.get(POLICIES)
    principal = caller(request)
    if policies is None or not policies.enforced or principal.is_reader:
        return None
    return lambda agent_id, skill_id: policies.usable(principal, agent_id, skill_id)


def who_is_calling(request: web.Request) -> str:
    """Who made an admin request, for records and logs: the principal's label, else
    ``admin-token`` (without a principal, a write passed with the admin token)."""
    principal = request.get(PRINCIPAL_KEY)
    return principal.label() if isinstance(principal, Principal) else "admin-token"
