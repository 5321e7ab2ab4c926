"""What the catalog API shows of an agent to a caller that may not see agents' addresses.

With client authentication on, a caller with neither the admin nor the reader role never
receives an agent's URL, interface address or resolved address (docs/security.md). In the
catalog API (:mod:`registry.api`) such a caller gets, instead of what the agent published:

- in every agent view: the interfaces of the agent's card as the router serves it at
  ``/agents/{id}`` (every URL the router's), no source or card URL, no health error, no
  verification reason or key source (they may name the agent's hosts);
- in the one-agent view's ``card`` and at ``.../card``: that card, re-signed with the
  router's key;
- in ``.../revisions``: no card URL, and no interfaces in the diffs.

The router gives the card (:data:`registry.appkeys.ROUTED_CARD`, set by its app); without it
(a registry alone), or for an agent the router serves no card of, such a caller sees no card
(null) and no interfaces. Admins, readers, and everyone with client authentication off keep
the full views.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from registry.apiauth import caller
from registry.appkeys import AUTHENTICATOR, REGISTRY, ROUTED_CARD
from registry.cards import parse_card
from registry.errors import RegistryError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.records import AgentRecord

__all__ = ["plain_card", "plain_revisions", "plain_views", "sees_addresses"]


def sees_addresses(request: web.Request) -> bool:
    """Whether the caller may see agents' addresses: with client authentication off, or
    with the admin or reader role."""
    authenticator = request.app.get(AUTHENTICATOR)
    return authenticator is None or not authenticator.client_auth or caller(request).is_reader


async def plain_card(request: web.Request, record: AgentRecord) -> dict[str, Any] | None:
    """The agent's card as the router serves it to this caller (None: none is served)."""
    routed = request.app.get(ROUTED_CARD)
    if routed is None:
        return None
    try:
        raw = loads_limited(await request.app[REGISTRY].raw_card(record.id), max_depth=256)
    except JsonLimitError:
        return None
    if not isinstance(raw, dict):
        return None
    try:
        return routed(request, record, raw)
    except RegistryError:  # not relayable, not routable: no card at the router
        return None


async def plain_views(
    request: web.Request, records: list[AgentRecord], views: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The agent views of ``records`` (``views``, in the same order) as such a caller sees
    them: the raw cards read in one query, each card as the router serves it."""
    cards = await asyncio.gather(*(plain_card(request, record) for record in records))
    return [plain_view(view, card) for view, card in zip(views, cards, strict=True)]


def plain_view(view: dict[str, Any], card: dict[str, Any] | None) -> dict[str, Any]:
    """One agent view without the agent's addresses; ``card`` is the router's."""
    out = dict(view)
    out["interfaces"] = _interfaces(card)
    out["source"] = {**view.get("source", {}), "url": None}
    out["card_url"] = None
    if isinstance(view.get("health"), dict):
        out["health"] = {**view["health"], "last_error": None, "card_error": None}
    if isinstance(view.get("verification"), dict):
        out["verification"] = {**view["verification"], "reason": None, "key_source": None}
    if "card" in view:
        out["card"] = card
    return out


def plain_revisions(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Card revisions without the card's URL and the interfaces in their diffs."""
    out = []
    for revision in revisions:
        diff = revision.get("diff")
        if isinstance(diff, dict) and "interfaces" in diff:
            diff = {k: v for k, v in diff.items() if k != "interfaces"}
        out.append({**revision, "card_url": None, "diff": diff})
    return out


def _interfaces(card: dict[str, Any] | None) -> list[dict[str, Any]]:
    if card is None:
        return []
    try:
        return [i.model_dump() for i in parse_card(card).interfaces]
    except RegistryError:
        return []
