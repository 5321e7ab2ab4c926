"""The outbound credentials routes of the admin API: ``/api/v1/agents/{agent_id}/credentials``.

``PUT`` sets the credential the router sends to that agent (a static header, OAuth2 client
credentials, or pass-through of the client's Authorization), ``GET`` shows it without its
secret, ``DELETE`` removes it. The app holds the
:class:`~registry.access.credentials.AgentCredentials` under :data:`CREDENTIALS`. Secrets are
never answered nor logged. Auth is the API's middleware: writes need an admin.
"""

from __future__ import annotations

import logging

from aiohttp import web

from registry.access.credentials import AgentCredentials, no_credential, parse_credential
from registry.access.principal import PRINCIPAL_KEY, Principal
from registry.api import PREFIX, REGISTRY, read_json
from registry.apimodels import CredentialView, NewCredential
from registry.openapi import documented

__all__ = ["CREDENTIALS", "add_credential_routes"]

log = logging.getLogger(__name__)

CREDENTIALS = web.AppKey("credentials", AgentCredentials)

_PATH = f"{PREFIX}/agents/{{agent_id}}/credentials"
_AGENT = {"agent_id": "The agent's id."}


def add_credential_routes(app: web.Application) -> None:
    """Register the credentials routes on ``app`` (which holds CREDENTIALS and REGISTRY)."""
    app.router.add_get(_PATH, get_credentials)
    app.router.add_put(_PATH, put_credentials)
    app.router.add_delete(_PATH, delete_credentials)


@documented(
    "An agent's outbound credential (never its secret)",
    "credentials",
    answer=CredentialView,
    errors=(404,),
    params=_AGENT,
)
async def get_credentials(request: web.Request) -> web.Response:
    """The credential the router sends to the agent, without the secret: ``has_secret``
    says one is stored."""
    agent_id = request.match_info["agent_id"]
    record = request.app[REGISTRY].get(agent_id)
    credentials = request.app[CREDENTIALS]
    await credentials.sync()  # the database is the truth: show other replicas' changes too
    return web.json_response(credentials.require(agent_id, record.created_at).to_api())


@documented(
    "Set an agent's outbound credential",
    "credentials",
    answer=CredentialView,
    body=NewCredential,
    errors=(404, 409),
    params=_AGENT,
)
async def put_credentials(request: web.Request) -> web.Response:
    """Set (or replace) the credential; 200 with its view (no secret). 409
    ``secret_key_missing`` when the server has no SWITCHBOARD_SECRET_KEY to encrypt it."""
    agent_id = request.match_info["agent_id"]
    request.app[REGISTRY].get(agent_id)  # 404 before reading the body
    spec = parse_credential(await read_json(request))
    by = _who(request)
    credential = await request.app[CREDENTIALS].put(agent_id, spec, by=by)
    log.info("outbound credential of agent %s set (%s) by %s", agent_id, spec.kind, by)
    return web.json_response(credential.to_api())


@documented(
    "Remove an agent's outbound credential", "credentials", status=204, errors=(404,), params=_AGENT
)
async def delete_credentials(request: web.Request) -> web.Response:
    """Remove the credential; 204. 404 when the agent or its credential does not exist."""
    agent_id = request.match_info["agent_id"]
    request.app[REGISTRY].get(agent_id)
    if not await request.app[CREDENTIALS].delete(agent_id):
        raise no_credential(agent_id)
    log.info("outbound credential of agent %s removed by %s", agent_id, _who(request))
    return web.Response(status=204)


def _who(request: web.Request) -> str:
    """Who made the change, for ``updated_by`` and the log."""
    principal = request.get(PRINCIPAL_KEY)
    return principal.label() if isinstance(principal, Principal) else "admin-token"
