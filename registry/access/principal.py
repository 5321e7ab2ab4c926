"""The principal a request was authenticated as: subject, tenant, groups and admin roles.

Every request to the router or the admin API is made by one :class:`Principal`: the caller
of an API key or a JWT, the holder of ``SWITCHBOARD_ADMIN_TOKEN`` or ``SWITCHBOARD_READ_TOKEN``,
or :data:`ANONYMOUS` when client authentication is off (``SWITCHBOARD_CLIENT_AUTH=none``).
Its :meth:`~Principal.scope` is the owner of the tasks and contexts it creates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "PRINCIPAL_KEY",
    "READER",
    "ROLES",
    "Method",
    "Principal",
    "TaskScope",
]

ADMIN = "admin"
"""The role that may write through the admin API (and read)."""
READER = "reader"
"""The role that may read the whole catalog through the admin API."""
ROLES = frozenset({ADMIN, READER})

Method = Literal["none", "api-key", "jwt", "admin-token", "read-token"]
"""How a principal was authenticated (``none``: client authentication is off)."""
TaskScope = Literal["subject", "tenant"]
"""``SWITCHBOARD_TASK_SCOPE``: tasks belong to their creator, or are shared in its tenant."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``subject`` within ``tenant`` (None: no tenant), its ``groups`` (for
    access policies) and ``roles`` (for the admin API); ``method`` says how it was
    authenticated and ``key_id`` names its API key, if one."""

    subject: str
    tenant: str | None = None
    groups: frozenset[str] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)
    method: Method = "none"
    key_id: str | None = None

    @property
    def authenticated(self) -> bool:
        """Whether the caller proved who it is (false only for :data:`ANONYMOUS`)."""
        return self.method != "none"

    @property
    def is_admin(self) -> bool:
        """Whether the caller may write through the admin API and sees every agent."""
        return ADMIN in self.roles

    @property
    def is_reader(self) -> bool:
        """Whether the caller may read the whole catalog (admins may too)."""
        return READER in self.roles or ADMIN in self.roles

    def scope(self, task_scope: TaskScope = "subject") -> str:
        """The owner of the tasks and contexts this caller creates: ``""`` when
        unauthenticated (one shared space, as without client authentication), else its
        tenant and subject, or its tenant alone with ``task_scope="tenant"`` (a principal
        without a tenant is always scoped by subject)."""
        if not self.authenticated:
            return ""
        if task_scope == "tenant" and self.tenant:
            return json.dumps(["tenant", self.tenant], separators=(",", ":"))
        return json.dumps([self.tenant or "", self.subject], separators=(",", ":"))

    def label(self) -> str:
        """Who, for logs and the audit log: ``api-key:<id> <subject>``, ``jwt:<subject>``,
        ``admin-token``, ..."""
        if self.method == "api-key":
            return f"api-key:{self.key_id} {self.subject}"
        if self.method == "jwt":
            return f"jwt:{self.subject}"
        return self.method if self.method != "none" else "anonymous"


ANONYMOUS = Principal(subject="anonymous")
"""The caller when client authentication is off: one shared space, every agent open."""


PRINCIPAL_KEY = web.RequestKey("principal", Principal)
"""Where the authentication middleware leaves a request's :class:`Principal` (``request[...]``)."""
