"""Owner scopes: whose a router task, context or v0.1 task alias is.

A scope is an opaque string (:meth:`registry.access.principal.Principal.scope`): ``""`` is the
anonymous scope (one space shared by every caller, as without client authentication), any
other string one principal's or tenant's space. Tasks and contexts are only ever found in
the scope that made them: in any other they behave as IDs that do not exist.

Tables store a scope in a bounded form, :func:`owner_key`: the scope itself, or a digest of
a long one. In the task list (``router_task_entries.owner``) the anonymous scope is NULL, as
in the rows of earlier versions (:func:`task_owner`, :func:`owns_task`); in the tables whose
key includes the owner it is ``""``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlmodel import col

from router.tables import OWNER_MAX_LENGTH, RouterTaskEntry

__all__ = ["owner_key", "owns_task", "scope_digest", "task_owner"]

_DIGEST = "sha256:"


def owner_key(scope: str) -> str:
    """The stored form of ``scope``: itself when it fits (at most OWNER_MAX_LENGTH bytes of
    UTF-8, so that keys holding it stay within index limits), else ``sha256:`` + the hex
    digest of its UTF-8 (so is a scope that looks like a digest)."""
    raw = scope.encode("utf-8", "surrogatepass")
    if len(raw) <= OWNER_MAX_LENGTH and not scope.startswith(_DIGEST):
        return scope
    return _DIGEST + hashlib.sha256(raw).hexdigest()


def scope_digest(scope: str) -> str:
    """A short digest naming ``scope`` where it must not be spelt out (page tokens); ``""``
    for the anonymous scope."""
    if not scope:
        return ""
    return hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def task_owner(scope: str) -> str | None:
    """The ``owner`` of a task row of ``scope`` (NULL for the anonymous scope)."""
    return owner_key(scope) or None


def owns_task(scope: str) -> Any:
    """The SQL condition: a task row belongs to ``scope``."""
    owner = task_owner(scope)
    column = col(RouterTaskEntry.owner)
    return column.is_(None) if owner is None else column == owner
