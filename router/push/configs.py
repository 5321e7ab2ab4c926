"""The clients' push notification configs, stored by the router under router IDs.

A config belongs to one router task (``task_id``, a router ID: the owner's scope is sealed in
it, so a config is only reachable through its owner's task) and has an id of the client's
choosing (by default the task's id, as the SDKs do). The router keeps the client's webhook,
token and ``authentication`` to itself: the agent is given the router's receiver instead
(``receiver_key`` in its URL path, ``receiver_token`` in ``X-A2A-Notification-Token``).

With a :class:`~registry.access.secrets.SecretBox` (``SWITCHBOARD_SECRET_KEY``) the client's
``token`` and ``authentication.credentials`` are stored encrypted (:func:`seal`, marked with
:data:`SEALED`); without one they are stored as given. Either kind is read back.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, or_, select

from registry.access.secrets import SecretBox, SecretError
from registry.records import utcnow
from registry.store import Store
from router.tables import PushConfigRow

__all__ = ["SEALED", "PushConfig", "PushConfigs", "new_receiver", "seal", "unseal"]

SEALED = "sealed:"
"""The prefix of a secret stored encrypted (the rest is a Fernet token)."""


def seal(box: SecretBox | None, secret: str | None) -> str | None:
    """``secret`` as stored: encrypted with ``box`` when there is one, else as given."""
    if secret is None or box is None:
        return secret
    return SEALED + box.encrypt(secret)


def unseal(box: SecretBox | None, stored: str | None) -> str | None:
    """A stored secret in clear; :class:`SecretError` when it is encrypted and no key (or
    not the right one) is configured."""
    if stored is None or not stored.startswith(SEALED):
        return stored
    if box is None:
        raise SecretError(
            "a push notification config's token or credentials are encrypted, and "
            "SWITCHBOARD_SECRET_KEY is not set: set the key they were encrypted with",
            code="secret_key_missing",
        )
    return box.decrypt(stored[len(SEALED) :])


@dataclass(frozen=True)
class PushConfig:
    """One client's push notification config (``authentication``: the 1.0 shape,
    ``{"scheme", "credentials"}``) and the router's receiver for it. ``task_id`` and
    ``config_id`` are None while a config given on a send waits for its task."""

    receiver_key: str
    receiver_token: str
    task_id: str | None
    config_id: str | None
    scope: str
    agent_id: str
    version: str
    url: str
    token: str | None = None
    authentication: dict[str, Any] | None = None
    relayed: bool = False

    def as_1_0(self) -> dict[str, Any]:
        """The config as a 1.0 ``TaskPushNotificationConfig`` the client may read back."""
        out: dict[str, Any] = {"taskId": self.task_id, "id": self.config_id, "url": self.url}
        if self.token:
            out["token"] = self.token
        if self.authentication:
            out["authentication"] = dict(self.authentication)
        return out


def new_receiver() -> tuple[str, str]:
    """A fresh receiver: an unguessable URL key and a token (256 bits each)."""
    return secrets.token_urlsafe(32), secrets.token_urlsafe(32)


def _config(row: PushConfigRow, box: SecretBox | None) -> PushConfig:
    authentication = row.authentication
    if authentication and "credentials" in authentication:
        credentials = unseal(box, authentication["credentials"])
        authentication = {**authentication, "credentials": credentials}
    return PushConfig(
        receiver_key=row.receiver_key,
        receiver_token=row.receiver_token,
        task_id=row.task_id,
        config_id=row.config_id,
        scope=row.scope,
        agent_id=row.agent_id,
        version=row.version,
        url=row.url,
        token=unseal(box, row.token),
        authentication=authentication,
        relayed=row.relayed,
    )


class PushConfigs:
    """The ``router_push_configs`` table: read on every call (replicas share it)."""

    def __init__(self, store: Store, box: SecretBox | None = None) -> None:
        self.store = store
        self.box = box  # set at start from SWITCHBOARD_SECRET_KEY

    def _config(self, row: PushConfigRow) -> PushConfig:
        return _config(row, self.box)

    async def any_secret(self) -> bool:
        """Whether a stored config has a token or an ``authentication``."""
        query = select(PushConfigRow.receiver_key).where(
            or_(
                col(PushConfigRow.token).is_not(None),
                col(PushConfigRow.authentication).is_not(None),
            )
        )
        async with self.store.session() as session:
            return (await session.exec(query.limit(1))).first() is not None

    async def _row(self, session: Any, task_id: str, config_id: str) -> PushConfigRow | None:
        query = (
            select(PushConfigRow)
            .where(col(PushConfigRow.task_id) == task_id)
            .where(col(PushConfigRow.config_id) == config_id)
        )
        return (await session.exec(query)).first()

    async def put(self, config: PushConfig) -> tuple[PushConfig, bool]:
        """Create the config, or replace the one with the same task and config id (which keeps
        its receiver: the agent already knows it). The stored config, and whether it is new."""
        for _ in range(2):  # a concurrent create of the same id: read it, then replace it
            try:
                async with self.store.session() as session, session.begin():
                    row = None
                    if config.task_id is not None and config.config_id is not None:
                        row = await self._row(session, config.task_id, config.config_id)
                    if row is not None:
                        fields = _fields(config, self.box)
                        row.url, row.token = config.url, fields["token"]
                        row.authentication, row.version = fields["authentication"], config.version
                        session.add(row)
                        return self._config(row), False
                    session.add(PushConfigRow(**_fields(config, self.box), created_at=utcnow()))
                return config, True
            except IntegrityError:
                continue
        raise RuntimeError("the push notification config could not be stored")

    async def bind(self, receiver_key: str, task_id: str) -> PushConfig | None:
        """Give a config waiting for its task (given on a send) the router task ``task_id``
        (its id, unless the client chose one, becomes the task's id). The config as bound;
        None if it is unknown or bound to another task (the first binding wins)."""
        try:
            async with self.store.session() as session, session.begin():
                row = await session.get(PushConfigRow, receiver_key, with_for_update=True)
                if row is None:
                    return None
                if row.task_id is None:
                    row.task_id = task_id
                    row.config_id = row.config_id or task_id
                    session.add(row)
                config = self._config(row)
        except IntegrityError:  # the client already has a config of that id on the task
            return None
        return config if config.task_id == task_id else None

    async def get(self, task_id: str, config_id: str) -> PushConfig | None:
        """The config ``config_id`` of router task ``task_id``, or None."""
        async with self.store.session() as session:
            row = await self._row(session, task_id, config_id)
        return None if row is None else self._config(row)

    async def list(self, task_id: str) -> list[PushConfig]:
        """Every config of router task ``task_id``, oldest first."""
        async with self.store.session() as session:
            query = (
                select(PushConfigRow)
                .where(col(PushConfigRow.task_id) == task_id)
                .order_by(col(PushConfigRow.created_at), col(PushConfigRow.config_id))
            )
            rows = (await session.exec(query)).all()
        return [self._config(row) for row in rows]

    async def delete(self, task_id: str, config_id: str) -> PushConfig | None:
        """Remove a config; the removed config, or None if there was none."""
        async with self.store.session() as session, session.begin():
            row = await self._row(session, task_id, config_id)
            if row is None:
                return None
            config = self._config(row)
            await session.delete(row)
        return config

    async def discard(self, receiver_key: str) -> None:
        """Remove the config with this receiver (a send's config whose send failed)."""
        async with self.store.session() as session, session.begin():
            row = await session.get(PushConfigRow, receiver_key)
            if row is not None:
                await session.delete(row)

    async def by_receiver(self, receiver_key: str) -> PushConfig | None:
        """The config whose receiver URL ends in ``receiver_key``, or None."""
        async with self.store.session() as session:
            row = await session.get(PushConfigRow, receiver_key)
        return None if row is None else self._config(row)

    async def mark_relayed(self, receiver_key: str) -> None:
        """Record that the agent accepted the router's config for this one."""
        async with self.store.session() as session, session.begin():
            row = await session.get(PushConfigRow, receiver_key)
            if row is not None:
                row.relayed = True
                session.add(row)


def _fields(config: PushConfig, box: SecretBox | None) -> dict[str, Any]:
    authentication = config.authentication
    if authentication and "credentials" in authentication:
        sealed = seal(box, authentication["credentials"])
        authentication = {**authentication, "credentials": sealed}
    return {
        "receiver_key": config.receiver_key,
        "receiver_token": config.receiver_token,
        "task_id": config.task_id,
        "config_id": config.config_id,
        "scope": config.scope,
        "agent_id": config.agent_id,
        "version": config.version,
        "url": config.url,
        "token": seal(box, config.token),
        "authentication": authentication,
        "relayed": config.relayed,
    }
