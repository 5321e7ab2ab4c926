"""The principal a request was authenticated as: subject, tenant, groups and admin roles.

Every request to the router or the admin API is made by one :class:`Principal`: the caller
of an API key or a JWT, the holder of ``SWITCHBOARD_ADMIN_TOKEN`` or ``SWITCHBOARD_READ_TOKEN``,
or :data:`ANONYMOUS` when client authentication is off (``SWITCHBOARD_CLIENT_AUTH=none``).
Its :meth:`~Principal.scope` is the owner of the tasks and contexts it creates: how it signed
in (``api-key``, ``jwt:<issuer>``, or a built-in token), its tenant and its subject, so a key
and a JWT naming the same subject are two callers, and no key or JWT is a built-in principal
(:data:`BUILT_IN`). :meth:`~Principal.old_scope` is the scope earlier versions gave it (their
IDs open for one version more).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web

__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "BUILT_IN",
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
BUILT_IN = frozenset({"admin-token", "read-token"})
"""The names of the built-in principals (the holders of ``SWITCHBOARD_ADMIN_TOKEN`` and
``SWITCHBOARD_READ_TOKEN``): no API key may be made for them, no JWT may name them."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``subject`` within ``tenant`` (None: no tenant), its ``groups`` (for
    access policies) and ``roles`` (for the admin API); ``method`` says how it was
    authenticated, ``key_id`` names its API key and ``issuer`` its JWT's issuer, if any."""

    subject: str
    tenant: str | None = None
    groups: frozenset[str] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)
    method: Method = "none"
    key_id: str | None = None
    issuer: str | None = None

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

    @property
    def built_in(self) -> bool:
        """Whether this is the admin token's or the read token's principal."""
        return self.method in BUILT_IN

    def scope(self, task_scope: TaskScope = "subject") -> str:
        """The owner of the tasks and contexts this caller creates: ``""`` when
        unauthenticated (one shared space, as without client authentication), else how it
        signed in (``api-key``, ``jwt:<issuer>``, ``admin-token``, ``read-token``), its
        tenant and its subject; with ``task_scope="tenant"`` its tenant alone (a principal
        without a tenant, and a built-in one, keep their own)."""
        if not self.authenticated:
            return ""
        if task_scope == "tenant" and self.tenant and not self.built_in:
            return _scope(["tenant", self.tenant])
        how = f"jwt:{self.issuer or ''}" if self.method == "jwt" else self.method
        return _scope([how, self.tenant or "", self.subject])

    def old_scope(self, task_scope: TaskScope = "subject") -> str | None:
        """The scope earlier versions gave this caller (``[tenant, subject]``, shared by a
        key and a JWT that name the same ones), when it differs from :meth:`scope`: the IDs
        made in it still open for this caller for one version. None for a built-in
        principal, a subject that names one, and the anonymous caller."""
        if not self.authenticated or self.built_in or self.subject in BUILT_IN:
            return None
        if task_scope == "tenant" and self.tenant:
            old = _scope(["tenant", self.tenant])
        else:
            old = _scope([self.tenant or "", self.subject])
        return None if old == self.scope(task_scope) else old

    def label(self) -> str:
        """Who, for logs and the audit log: ``api-key:<id> <subject>``, ``jwt:<subject>``,
        ``admin-token``, ..."""
        if self.method == "api-key":
            return f"api-key:{self.key_id} {self.subject}"
        if self.method == "jwt":
            return f"jwt:{self.subject}"
        return self.method if self.method != "none" else "anonymous"


def _scope(parts: list[str]) -> str:
    return json.dumps(parts, separators=(",", ":"))


ANONYMOUS = Principal(subject="anonymous")
"""The caller when client authentication is off: one shared space, every agent open."""


PRINCIPAL_KEY = web.RequestKey("principal", Principal)
"""Where the authentication middleware leaves a request's :class:`Principal` (``request[...]``)."""
