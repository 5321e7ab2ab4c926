"""The access policy routes of the admin API: ``/api/v1/policies``.

``GET /api/v1/policies`` lists every stored policy; ``GET``, ``PUT`` and ``DELETE``
``/api/v1/policies/{agent_id}`` show, set (replace) and delete one agent's. The app holds the
:class:`~registry.access.policy.Policies` under :data:`~registry.api.POLICIES`; the model is
:mod:`registry.access.policy`'s. Auth is the API's middleware: writes need the admin token.
"""

from __future__ import annotations

from aiohttp import web

from registry.access.policy import Policy, parse_rules, parse_tenant
from registry.api import POLICIES, PREFIX, REGISTRY, read_json, who_is_calling
from registry.apimodels import AgentPolicy, NewPolicy, PolicyList
from registry.errors import NotFound, RegistryError
from registry.openapi import documented

__all__ = ["add_policy_routes"]

_BODY_KEYS = ("tenant", "rules")
_AGENT = {"agent_id": "The agent's id."}


def add_policy_routes(app: web.Application) -> None:
    """Register the ``/api/v1/policies`` routes on ``app`` (which holds POLICIES, REGISTRY
    and SETTINGS)."""
    app.router.add_get(f"{PREFIX}/policies", list_policies)
    app.router.add_get(f"{PREFIX}/policies/{{agent_id}}", get_policy)
    app.router.add_put(f"{PREFIX}/policies/{{agent_id}}", put_policy)
    app.router.add_delete(f"{PREFIX}/policies/{{agent_id}}", delete_policy)


@documented("Access policies", "policies", answer=PolicyList)
async def list_policies(request: web.Request) -> web.Response:
    """Every stored policy, by agent id: ``{"policies": [...]}``. Agents without one are
    shared and have no rules."""
    policies = request.app[POLICIES]
    await policies.sync()  # the database is the truth: show other replicas' changes too
    return web.json_response({"policies": [policy.to_api() for policy in policies.all()]})


@documented(
    "One agent's access policy", "policies", answer=AgentPolicy, errors=(404,), params=_AGENT
)
async def get_policy(request: web.Request) -> web.Response:
    """The agent's policy; for an agent without one, the default (shared, no rules,
    ``updated_at`` null). 404 when there is neither an agent nor a policy of that id."""
    agent_id = request.match_info["agent_id"]
    policies = request.app[POLICIES]
    await policies.sync()
    policy = policies.get(agent_id)
    if policy is None:
        registry = request.app[REGISTRY]
        await registry.sync()
        registry.get(agent_id)  # 404 for an unknown agent
        policy = Policy(agent_id)
    return web.json_response(policy.to_api())


@documented(
    "Set an agent's access policy",
    "policies",
    answer=AgentPolicy,
    body=NewPolicy,
    errors=(404,),
    params=_AGENT,
)
async def put_policy(request: web.Request) -> web.Response:
    """Replace the agent's policy with ``{"tenant": name | null, "rules": [...]}`` (a member
    left out: null, no rules). The agent must exist."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise RegistryError("the request body must be a JSON object", code="invalid_body")
    unknown = sorted(set(body) - set(_BODY_KEYS))
    if unknown:
        raise RegistryError(
            'send {"tenant": "name" or null, "rules": [{"tenants": [...], "groups": [...], '
            '"subjects": [...], "skills": [...]}, ...]}',
            code="invalid_body",
            details={"unknown": unknown, "allowed": list(_BODY_KEYS)},
        )
    tenant, rules = parse_tenant(body.get("tenant")), parse_rules(body.get("rules", []))
    agent_id = request.match_info["agent_id"]
    registry = request.app[REGISTRY]
    await registry.sync()
    registry.get(agent_id)  # 404 for an unknown agent
    policy = await request.app[POLICIES].put(agent_id, tenant, rules, who_is_calling(request))
    return web.json_response(policy.to_api())


@documented("Delete an agent's access policy", "policies", status=204, errors=(404,), params=_AGENT)
async def delete_policy(request: web.Request) -> web.Response:
    """Delete the agent's policy: it becomes shared, without rules; 204. 404 when it has
    none."""
    agent_id = request.match_info["agent_id"]
    if not await request.app[POLICIES].delete(agent_id, who_is_calling(request)):
        raise NotFound(f"agent {agent_id!r} has no access policy", details={"id": agent_id})
    return web.Response(status=204)
