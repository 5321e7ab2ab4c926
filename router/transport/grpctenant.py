"""One agent addressed over the gRPC binding: the A2A 1.0 ``tenant`` ``agents/<agent id>``.

The gRPC binding has one endpoint (``host:port``) and no path to put an agent in, as the HTTP
bindings do (``/agents/{id}``). Every 1.0 request message has a ``tenant`` field, and a card's
``AgentInterface`` names the tenant a client puts in each request (the a2a-sdk 1.x client does
so by itself). So a per-agent card lists the router's gRPC target with the tenant
``agents/<agent id>``, and the gRPC server reads that prefix as the per-agent endpoint:

- ``agents/<id>``: pinned to agent ``<id>``, with no tenant of the agent's own;
- ``agents/<id>/<rest>``: pinned to ``<id>``, ``<rest>`` being the agent's own tenant (the
  one its card names), passed on to it;
- anything else (no tenant, a tenant not under ``agents/``): the routing endpoint, the tenant
  left as it came.

The prefix is the HTTP+JSON per-agent path too: an SDK client on HTTP+JSON puts the tenant
first in the path (``/agents/<id>/message:send``). Agent ids never hold ``/``
(``registry.service``), so the split is unambiguous. No grpc import here: cards
(:mod:`router.card`) name the tenant without the ``grpc`` extra.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AGENT_TENANT_PREFIX", "agent_tenant", "pinned_by_tenant"]

AGENT_TENANT_PREFIX = "agents/"
"""The tenants the router reads as a per-agent endpoint."""


def agent_tenant(agent_id: str, own: str | None = None) -> str:
    """The tenant that addresses ``agent_id`` (``own``: the agent's own tenant, after it)."""
    tenant = f"{AGENT_TENANT_PREFIX}{agent_id}"
    return f"{tenant}/{own}" if own else tenant


def pinned_by_tenant(tenant: Any) -> tuple[str | None, str]:
    """(the agent a request's ``tenant`` pins, the tenant to pass on): ``(id, rest)`` for
    ``agents/<id>[/<rest>]``, ``(None, tenant)`` for any other (``""`` when none)."""
    if not isinstance(tenant, str) or not tenant.startswith(AGENT_TENANT_PREFIX):
        return None, tenant if isinstance(tenant, str) else ""
    agent_id, _, rest = tenant.removeprefix(AGENT_TENANT_PREFIX).partition("/")
    return agent_id, rest
