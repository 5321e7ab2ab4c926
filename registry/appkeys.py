"""The typed keys under which the app holds what the admin API's handlers use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from registry.access.authenticate import Authenticator
from registry.access.policy import Policies
from registry.meaningsearch import ScoreByMeaning
from registry.records import AgentRecord
from registry.refresh import PassiveHealth, Refresher
from registry.service import Registry
from registry.settings import Settings

__all__ = [
    "AUTHENTICATOR",
    "PASSIVE_HEALTH",
    "POLICIES",
    "REFRESHER",
    "REGISTRY",
    "ROUTED_CARD",
    "SEARCH_BY_MEANING",
    "SETTINGS",
    "RoutedCard",
]

REGISTRY = web.AppKey("registry", Registry)
SETTINGS = web.AppKey("settings", Settings)
REFRESHER = web.AppKey("refresher", Refresher)
PASSIVE_HEALTH = web.AppKey("passive_health", PassiveHealth)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
POLICIES = web.AppKey("policies", Policies)
SEARCH_BY_MEANING: web.AppKey[ScoreByMeaning] = web.AppKey("search_by_meaning")
"""Set by the router's app: catalog searches with ``match=semantic`` score their text with it
(:mod:`registry.meaningsearch`); without it they go by words."""

RoutedCard = Callable[[web.Request, AgentRecord, dict[str, Any]], dict[str, Any] | None]
"""The card an agent's raw card becomes as the router serves it to this request at
``/agents/{id}`` (URLs at the router, re-signed with its key); None when it serves none."""

ROUTED_CARD: web.AppKey[RoutedCard] = web.AppKey("routed_card")
"""Set by the router's app: what the catalog API shows a caller that may not see agents'
addresses instead of the raw card (:mod:`registry.plainview`); without it, no card."""
