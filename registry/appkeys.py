"""The typed keys under which the app holds what the admin API's handlers use."""

from __future__ import annotations

from aiohttp import web

from registry.access.authenticate import Authenticator
from registry.access.policy import Policies
from registry.refresh import PassiveHealth, Refresher
from registry.service import Registry
from registry.settings import Settings

__all__ = ["AUTHENTICATOR", "PASSIVE_HEALTH", "POLICIES", "REFRESHER", "REGISTRY", "SETTINGS"]

REGISTRY = web.AppKey("registry", Registry)
SETTINGS = web.AppKey("settings", Settings)
REFRESHER = web.AppKey("refresher", Refresher)
PASSIVE_HEALTH = web.AppKey("passive_health", PassiveHealth)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
POLICIES = web.AppKey("policies", Policies)
