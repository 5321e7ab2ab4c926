"""Push notifications relayed through the router (docs/push.md): the config methods, a config
given on a send, and the notifications agents post to the router's receiver.

The client's config (webhook, token, ``authentication``) is stored by the router
(:mod:`router.push.configs`) under its router task; the agent is given the router's own config
instead: ``<receiver base>/push/<receiver_key>`` with a per-config token. A notification the
agent posts there (:meth:`PushRelay.receive`) is checked (known receiver, its token, a task of
that agent, the config's task), its IDs rewritten in the owner's scope, put in the client's
version (1.0: one ``StreamResponse`` event per POST; 0.3: the whole Task) and queued in the
durable outbox (:mod:`router.push.outbox`), which delivers it to the client's webhook.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any

from registry.access.secrets import SecretBox
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.netguard import AddressPolicy
from router.choose.choice import Target
from router.compat import translate
from router.compat.push import push_config_to, push_params_to, push_result_to
from router.compat.v01 import task_to_v01
from router.forward.synth import PushWatcher
from router.forward.upstream import Upstream
from router.ids.idmap import IdMap
from router.ids.refs import TaskRef, valid_id
from router.ids.rewrite import Rewriter
from router.protocol import payloads as wire
from router.protocol.envelope import Request
from router.protocol.errors import (
    INVALID_AGENT_RESPONSE,
    PUSH_NOT_SUPPORTED,
    TASK_NOT_FOUND,
    RpcError,
)
from router.protocol.events import event_payload, result_task_states, stream_event_kind
from router.protocol.versions import Op, Version, equivalent_method
from router.push.configs import PushConfig, PushConfigs, new_receiver
from router.push.outbox import TOKEN_HEADER, Outbox
from router.push.watches import Watch, Watches
from router.push.webhook import WebhookRefused, check_webhook

__all__ = ["PUSH_KEYS", "PushRelay", "ReceiverRefused", "SendPush"]

log = logging.getLogger(__name__)

RECEIVER_PATH = "/push/"
MAX_TOKEN_LENGTH = 512
PUSH_KEYS: dict[Version, str] = {
    "0.3": "pushNotificationConfig",
    "1.0": "taskPushNotificationConfig",
}
"""The member of a send's ``configuration`` that carries a push notification config."""

_CREATE, _GET, _LIST, _DELETE = (
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)
_UPSTREAM_METHOD: dict[Version, dict[str, str]] = {
    "1.0": {_CREATE: _CREATE, _DELETE: _DELETE, "get": "GetTask"},
    "0.3": {
        _CREATE: "tasks/pushNotificationConfig/set",
        _DELETE: "tasks/pushNotificationConfig/delete",
        "get": "tasks/get",
    },
}


class ReceiverRefused(Exception):
    """A notification the receiver refuses (nothing is stored): an HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SendPush:
    """A config given on a send, waiting for the send's task (see :meth:`PushRelay.on_send`)."""

    def __init__(self, config: PushConfig, synthesized: bool = False) -> None:
        self.config = config
        self.synthesized = synthesized  # the agent sends none: the router follows the task


class PushRelay:
    """The push notification relay of one router process."""

    def __init__(
        self,
        configs: PushConfigs,
        outbox: Outbox,
        ids: IdMap,
        upstream: Upstream,
        policy: AddressPolicy,
        *,
        receiver_base: str | None = None,
        max_depth: int = 32,
        poll_interval: float = 1.0,
        poll_cap: float = 30.0,
    ) -> None:
        self.configs = configs
        self.outbox = outbox
        self.ids = ids
        self.upstream = upstream
        self.policy = policy
        self.receiver_base = receiver_base
        self.max_depth = max_depth
        self.resolve: Any = None  # tests may set a resolver for webhook host names
        self.watcher = PushWatcher(
            Watches(configs.store), upstream, self._synthesized,
            poll_interval=poll_interval, poll_cap=poll_cap,
        )  # fmt: skip

    async def start(self, box: SecretBox | None) -> None:
        """Use ``box`` (``SWITCHBOARD_SECRET_KEY``) for the clients' tokens and credentials
        at rest; without one, warn when configs are stored (they are kept as given)."""
        self.configs.box = box
        self.outbox.box = box
        if box is None and await self.configs.any_secret():
            log.warning(
                "push notification configs hold clients' tokens or credentials, stored "
                "unencrypted: set SWITCHBOARD_SECRET_KEY to encrypt new ones"
            )

    # --- the config methods ----------------------------------------------------------------

    async def config_call(
        self,
        rpc: Request,
        ref: TaskRef,
        target: Target,
        push_capable: bool,
        base_url: str,
        scope: str,
    ) -> Any:
        """Answer one config method about the caller's task ``ref`` (its owner already
        checked; ``scope``: the caller's); the result in the client's version."""
        method = equivalent_method(rpc.method, "1.0") or rpc.method
        params = rpc.params
        if rpc.version == "0.3":
            params = push_params_to(rpc.method, params, "0.3", "1.0")
        task_id = ref.task_id
        if method == _CREATE:
            config = await self._create(rpc, params, ref, target, push_capable, base_url, scope)
            return self._shown(rpc, config)
        if method == _LIST:
            configs = [c.as_1_0() for c in await self.configs.list(task_id)]
            if rpc.version == "0.3":
                return push_result_to(rpc.method, {"configs": configs}, "1.0", "0.3")
            return {"configs": configs, "nextPageToken": ""}
        config_id = params.get("id") or task_id
        if not isinstance(config_id, str):
            raise wire.params_error([(_id_field(rpc), "must be a string")])
        if method == _GET:
            config = await self.configs.get(task_id, config_id)
            if config is None and rpc.version == "0.3":  # as a2a-sdk 0.3 agents: the first
                config = next(iter(await self.configs.list(task_id)), None)
            if config is None:
                raise _no_config(task_id, config_id)
            return self._shown(rpc, config)
        removed = await self.configs.delete(task_id, config_id)
        if removed is not None and removed.relayed:
            await self._unregister(removed, ref, target)
        return {} if rpc.version == "1.0" else None

    def _shown(self, rpc: Request, config: PushConfig) -> Any:
        shown = config.as_1_0()
        if rpc.version == "0.3":
            return push_result_to(rpc.method, shown, "1.0", "0.3")
        return shown

    async def _create(
        self,
        rpc: Request,
        params: dict[str, Any],
        ref: TaskRef,
        target: Target,
        push_capable: bool,
        base_url: str,
        scope: str,
    ) -> PushConfig:
        where = "pushNotificationConfig." if rpc.version == "0.3" else ""
        config_id = params.get("id") or ref.task_id
        if not isinstance(config_id, str) or not valid_id(config_id):
            raise wire.params_error([(f"{where}id", "must be a non-empty string")])
        config = await self._client_config(rpc.version, params, where, scope, ref.agent_id)
        config = PushConfig(
            **{**config.__dict__, "task_id": ref.task_id, "config_id": config_id,
               "version": _delivered_as(rpc)}
        )  # fmt: skip
        stored, new = await self.configs.put(config)
        if not push_capable:  # synthesized: the router follows the task itself
            await self.watcher.watch(Watch(ref.task_id, ref.agent_id, ref.upstream_task_id, scope))
        elif not stored.relayed:
            try:
                await self._register(stored, ref.upstream_task_id, target, base_url)
            except RpcError:
                if new:
                    await self.configs.delete(ref.task_id, config_id)
                raise
        return stored

    async def _client_config(
        self, version: Version, given: dict[str, Any], where: str, scope: str, agent_id: str
    ) -> PushConfig:
        """A client's config (1.0 shape) checked: url, token, authentication; -32602 naming
        the field (``where``: its prefix in the client's params)."""
        url, token, auth = given.get("url"), given.get("token"), given.get("authentication")
        violations: list[tuple[str, str]] = []
        if not isinstance(url, str) or not url:
            violations.append((f"{where}url", wire.missing_or(url, "a webhook URL string")))
        if token is not None and not isinstance(token, str):
            violations.append((f"{where}token", "must be a string"))
        elif isinstance(token, str) and len(token) > MAX_TOKEN_LENGTH:
            violations.append((f"{where}token", f"must be at most {MAX_TOKEN_LENGTH} characters"))
        if auth is not None:
            auth_where = f"{where}authentication"
            if not isinstance(auth, dict):
                violations.append((auth_where, "must be an object"))
            else:
                scheme_field = "schemes" if version == "0.3" else "scheme"
                if not isinstance(auth.get("scheme"), str) or not auth.get("scheme"):
                    violations.append((f"{auth_where}.{scheme_field}", "must name a scheme"))
                credentials = auth.get("credentials")
                if credentials is not None and not isinstance(credentials, str):
                    violations.append((f"{auth_where}.credentials", "must be a string"))
        if violations:
            raise wire.params_error(violations)
        try:
            if self.resolve is not None:
                await check_webhook(url, self.policy, self.resolve)
            else:
                await check_webhook(url, self.policy)
        except WebhookRefused as exc:
            raise wire.params_error([(f"{where}url", str(exc))]) from None
        receiver_key, receiver_token = new_receiver()
        authentication = None
        if isinstance(auth, dict):
            authentication = {"scheme": auth["scheme"]}
            if auth.get("credentials"):
                authentication["credentials"] = auth["credentials"]
        return PushConfig(
            receiver_key=receiver_key,
            receiver_token=receiver_token,
            task_id=None,
            config_id=None,
            scope=scope,
            agent_id=agent_id,
            version=version,
            url=url,  # type: ignore[arg-type]  # checked a string above
            token=token or None,
            authentication=authentication,
        )

    def _receiver(self, config: PushConfig, base_url: str) -> dict[str, Any]:
        """The router's own config for ``config``, as given to the agent (1.0 shape)."""
        base = (self.receiver_base or base_url).rstrip("/")
        return {
            "id": config.receiver_key,
            "url": f"{base}{RECEIVER_PATH}{config.receiver_key}",
            "token": config.receiver_token,
        }

    async def _register(
        self, config: PushConfig, upstream_task_id: str, target: Target, base_url: str
    ) -> None:
        """Give the agent the router's config for ``config``; RpcError with the agent's error
        (its IDs left out) when it refuses."""
        mine = {"taskId": upstream_task_id, **self._receiver(config, base_url)}
        params = mine if target.version == "1.0" else push_params_to(_CREATE, mine, "1.0", "0.3")
        if target.version == "1.0" and target.tenant:
            params["tenant"] = target.tenant
        method = _UPSTREAM_METHOD[target.version][_CREATE]
        answer = await self.upstream.call(target, method, params, request_id=1, headers={})
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise RpcError(
                PUSH_NOT_SUPPORTED if error.get("code") == PUSH_NOT_SUPPORTED else TASK_NOT_FOUND,
                f"agent {config.agent_id!r} did not accept the router's push notification "
                f"config: {error.get('message', 'no reason given')}",
                {"agent": config.agent_id},
            )
        assert config.task_id is not None
        await self.configs.mark_relayed(config.receiver_key)

    async def _unregister(self, config: PushConfig, ref: TaskRef, target: Target) -> None:
        """Remove the router's config from the agent (best effort: a notification that still
        comes is refused as unknown)."""
        params: dict[str, Any] = {"taskId": ref.upstream_task_id, "id": config.receiver_key}
        if target.version == "0.3":
            params = push_params_to(_DELETE, params, "1.0", "0.3")
        method = _UPSTREAM_METHOD[target.version][_DELETE]
        try:
            await self.upstream.call(target, method, params, request_id=1, headers={})
        except RpcError as exc:
            log.info("agent %s: removing a push config failed: %s", config.agent_id, exc)

    # --- a config given on a send ------------------------------------------------------------

    async def on_send(
        self, rpc: Request, params: dict[str, Any], scope: str, agent_id: str,
        push_capable: bool, base_url: str,
    ) -> tuple[dict[str, Any], SendPush | None]:  # fmt: skip
        """A send's params with the client's push config replaced by the router's (when it
        has one), and the config waiting for the send's task."""
        configuration = params.get("configuration")
        key = PUSH_KEYS[rpc.version]
        if not isinstance(configuration, dict) or not isinstance(configuration.get(key), dict):
            return params, None
        given = configuration[key]
        where = "pushNotification." if rpc.dialect == "0.1" else f"configuration.{key}."
        if rpc.version == "0.3":
            given = push_config_to(given, "1.0")
        config = await self._client_config(rpc.version, given, where, scope, agent_id)
        if not push_capable and rpc.op is Op.STREAM:
            raise _not_capable(rpc.method, agent_id)
        client_id = given.get("id")
        if client_id is not None and not (isinstance(client_id, str) and client_id):
            raise wire.params_error([(f"{where}id", "must be a non-empty string")])
        config = PushConfig(
            **{**config.__dict__, "config_id": client_id, "relayed": push_capable,
               "version": _delivered_as(rpc)}
        )  # fmt: skip
        await self.configs.put(config)
        if not push_capable:  # synthesized: the agent is not told, the router follows
            out_config = {k: v for k, v in configuration.items() if k != key}
            return {**params, "configuration": out_config}, SendPush(config, synthesized=True)
        mine = self._receiver(config, base_url)
        out_config = {**configuration, key: push_config_to(mine, rpc.version)}
        return {**params, "configuration": out_config}, SendPush(config)

    async def bind_send(self, pending: SendPush, rpc: Request, answer: dict[str, Any]) -> None:
        """Give the config of a send its router task, from the send's answer; a send that
        failed (or made no task) leaves no config behind."""
        key = pending.config.receiver_key
        for task_id, _state in result_task_states(rpc.version, Op.SEND, answer.get("result")):
            bound = await self.configs.bind(key, task_id)
            if bound is not None and pending.synthesized:
                await self._watch(bound)
            return
        config = await self.configs.by_receiver(key)
        if config is not None and config.task_id is None:
            await self.configs.discard(key)

    # --- the receiver ------------------------------------------------------------------------

    async def receive(
        self,
        receiver_key: str,
        token: str | None,
        body: bytes,
        target_of: Callable[[str], Target],
    ) -> None:
        """Take one notification the agent posted to ``/push/<receiver_key>``: checked,
        rewritten, translated, queued. :class:`ReceiverRefused` (nothing stored) otherwise."""
        config = await self.configs.by_receiver(receiver_key)
        if config is None:
            raise ReceiverRefused(404, "no such push notification receiver")
        expected = config.receiver_token.encode()
        if token is None or not hmac.compare_digest(token.encode(), expected):
            raise ReceiverRefused(401, f"wrong or missing {TOKEN_HEADER}")
        try:
            # content may hold NUL (as clients' messages may): the outbox keeps the event as
            # JSON, escaped; IDs with NUL are never looked up (router.ids.refs.valid_id)
            event = loads_limited(body, max_depth=self.max_depth, allow_nul=True)
        except JsonLimitError as exc:
            raise ReceiverRefused(
                400, f"the notification is not valid JSON: {exc.message}"
            ) from None
        if not isinstance(event, dict):
            raise ReceiverRefused(400, "a notification must be a JSON object")
        source = _shape(event)
        upstream_task = _task_of(source, event)
        if upstream_task is None:
            raise ReceiverRefused(400, "the notification names no task")
        ids = self.ids.scoped(config.scope) if config.scope else self.ids
        known = await ids.task_by_upstream(config.agent_id, upstream_task)
        if config.task_id is not None and (known is None or known.task_id != config.task_id):
            raise ReceiverRefused(403, "the notification is about a task this config is not for")
        if config.task_id is None and known is not None:
            config = await self.configs.bind(receiver_key, known.task_id) or config
        try:
            await self._queue(config, event, source, upstream_task, target_of)
        except RpcError as error:
            if error.code != INVALID_AGENT_RESPONSE:
                raise
            raise ReceiverRefused(400, f"the notification is invalid: {error.message}") from None

    async def _queue(
        self,
        config: PushConfig,
        event: dict[str, Any],
        source: Version,
        upstream_task: str,
        target_of: Callable[[str], Target],
    ) -> None:
        """Put one event of the agent's (its IDs, ``source`` its version) in the outbox for
        ``config``: IDs rewritten in the owner's scope, in the client's version."""
        ids = self.ids.scoped(config.scope) if config.scope else self.ids
        known = await ids.task_by_upstream(config.agent_id, upstream_task)
        client: Version = "1.0" if config.version == "1.0" else "0.3"
        context = known.context_id if known is not None else None
        rewriter = Rewriter(ids, client, config.agent_id, context)
        if client == "0.3" and stream_event_kind(source, event) != "task":
            event = await self._whole_task(config, upstream_task, target_of)  # 0.3 POSTs a Task
            source = "1.0" if "task" in event else "0.3"
        out = await rewriter.event_from_upstream(translate.event_to(event, source, client))
        if client == "0.3":
            out = event_payload("0.3", out) or out
        if config.version == "0.1":  # a v0.1 Task, named by the client's task ID
            out = task_to_v01(out, config.config_id or "")
        task_ids = [t for t, _ in result_task_states(client, Op.STREAM, out)]
        if config.task_id is None and task_ids:
            config = await self.configs.bind(config.receiver_key, task_ids[0]) or config
        if config.task_id is None:
            raise ReceiverRefused(409, "the config's task is not known yet")
        await self.outbox.enqueue(config, out)

    # --- synthesized push ---------------------------------------------------------------------

    async def _watch(self, config: PushConfig) -> None:
        """Follow ``config``'s task (bound) for it: its agent sends no notifications."""
        assert config.task_id is not None
        ids = self.ids.scoped(config.scope) if config.scope else self.ids
        ref = await ids.task(config.task_id)
        if ref is not None:
            watch = Watch(ref.task_id, ref.agent_id, ref.upstream_task_id, config.scope)
            await self.watcher.watch(watch)

    async def _synthesized(self, watch: Watch, event: dict[str, Any], source: Version) -> bool:
        """Queue one event of a followed task for each of its configs; False when it has none
        left (the router stops following it)."""
        configs = [c for c in await self.configs.list(watch.task_id) if not c.relayed]
        agent_of = self.watcher.agent_of
        assert agent_of is not None
        for config in configs:
            try:
                await self._queue(
                    config, event, source, watch.upstream_task_id, lambda a: agent_of(a)[0]
                )
            except ReceiverRefused as exc:  # a 0.3 client's whole task could not be fetched
                log.info("task %s: a notification was dropped: %s", watch.task_id, exc.message)
        return bool(configs)

    async def _whole_task(
        self, config: PushConfig, upstream_task: str, target_of: Callable[[str], Target]
    ) -> dict[str, Any]:
        """The task as the agent has it now (1.0 ``{"task": ...}`` or a 0.3 Task)."""
        target = target_of(config.agent_id)
        method = _UPSTREAM_METHOD[target.version]["get"]
        answer = await self.upstream.call(
            target, method, {"id": upstream_task}, request_id=1, headers={}
        )
        task = answer.get("result")
        if not isinstance(task, dict):
            raise ReceiverRefused(502, "the agent did not answer the task")
        return {"task": task} if target.version == "1.0" else task


def _shape(event: dict[str, Any]) -> Version:
    """The version a notification is in: 1.0 wraps its event in one member."""
    if any(k in event for k in ("task", "message", "statusUpdate", "artifactUpdate")):
        return "1.0"
    return "0.3"


def _task_of(version: Version, event: dict[str, Any]) -> str | None:
    payload = event_payload(version, event) if stream_event_kind(version, event) else None
    if payload is None and version == "0.3" and "status" in event:
        payload = event  # a 0.3 Task without ``kind``
    if not isinstance(payload, dict):
        return None
    kind = stream_event_kind(version, event)
    value = payload.get("id") if kind in ("task", None) else payload.get("taskId")
    return value if valid_id(value) else None


def _delivered_as(rpc: Request) -> str:
    """The shape a config's notifications are delivered in: the client's version, or its
    dialect for a v0.1 client (whose config id is its own task ID)."""
    return "0.1" if rpc.dialect == "0.1" else rpc.version


def _id_field(rpc: Request) -> str:
    return "pushNotificationConfigId" if rpc.version == "0.3" else "id"


def _no_config(task_id: str, config_id: str) -> RpcError:
    return RpcError(
        TASK_NOT_FOUND,
        f"no push notification config {config_id!r} for task {task_id!r}",
        {"taskId": task_id, "id": config_id},
    )


def _not_capable(method: str, agent_id: str) -> RpcError:
    return RpcError(
        PUSH_NOT_SUPPORTED,
        f"{method}: the agent ({agent_id!r}) does not send push notifications, and a config "
        "given on a streaming send cannot be followed for it; give the config with a "
        "non-streaming send or set it on the task (the router then follows the task itself)",
        {"agent": agent_id},
    )
