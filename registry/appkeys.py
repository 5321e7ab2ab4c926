"""The typed keys under which the app holds what the admin API's handlers use."""

from __future__ import annotations

from aiohttp import web

from registry.access.authenticate import Authenticator
from registry.access.policy import Policies
from registry.meaningsearch import ScoreByMeaning
from registry.refresh import PassiveHealth, Refresher
from registry.service import Registry
from registry.settings import Settings

__all__ = [
    "AUTHENTICATOR",
    "PASSIVE_HEALTH",
    "POLICIES",
    "REFRESHER",
    "REGISTRY",
    "SEARCH_BY_MEANING",
    "SETTINGS",
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
