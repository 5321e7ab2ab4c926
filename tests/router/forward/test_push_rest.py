"""Push notifications through the router on the HTTP+JSON binding (router.forward.push over
router.transport.rest and router.forward.upstream_rest): the 1.x SDK client on REST and the
0.3 SDK client on REST set, read, list and delete configs, a real webhook gets the
notifications with the router's IDs, and a push-capable REST-only agent is given the
router's own config over its HTTP+JSON binding (docs/push.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)

from registry.api import REGISTRY
from tests.peers03 import client03_lines
from tests.router.forward.test_push import _switchboard
from tests.support.helpers import base
from tests.support.sdk_clients import ask, send
from tests.support.sdk_peers import PushStore, TaskEchoExecutor, serve_sdk_agent
from tests.support.webhooks import completed_1_0, serve_webhook


async def test_the_rest_client_and_a_rest_only_push_agent(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    """The 1.x client on HTTP+JSON creates, reads, lists and deletes a config; the REST-only
    agent gets the router's receiver over its HTTP+JSON binding; the client's webhook gets
    the agent's notifications named with the router's task ID."""
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor, store = TaskEchoExecutor(gated=True), PushStore()
    async with serve_sdk_agent(executor=executor, push=store, rest_only=True) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        card = await A2ACardResolver(http, base(server)).get_agent_card()
        assert card.capabilities.push_notifications
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_protocol_bindings=["HTTP+JSON"]
        )
        client = ClientFactory(config).create(card)
        task = await send(client, ask("hello rest push", return_immediately=True))
        made = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=task.id, id="mine", url=webhook, token="client-token"
            )
        )
        assert (made.task_id, made.id, made.url) == (task.id, "mine", webhook)
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
        )
        assert got.token == "client-token"
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["mine"]
        executor.release()
        seen = await hook.until(completed_1_0)
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(listed.configs) == []
    for headers, body in seen:
        assert headers["X-A2A-Notification-Token"] == "client-token"
        [event] = body.values()
        assert event.get("taskId", event.get("id")) == task.id  # the router's ID
    [given] = store.given
    assert given["url"].startswith(base(server) + "/push/")
    assert webhook not in str(store.given) and "client-token" not in str(store.given)


@pytest.mark.parametrize("rest_only", [False, True], ids=["jsonrpc-agent", "rest-agent"])
async def test_the_03_rest_client_sets_configs_on_a_send_and_by_path(
    aiohttp_server: Any,
    sqlite_url: str,
    http: httpx.AsyncClient,
    sdk03_python: Path,
    rest_only: bool,
) -> None:
    """The 0.3 client on HTTP+JSON: a config on its send (the webhook gets the whole 0.3
    Task, with the router's ID), another by path (set, get; the list through the path)."""
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, sqlite_url)
    store = PushStore()
    async with serve_sdk_agent(
        executor=TaskEchoExecutor(), push=store, rest_only=rest_only
    ) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        rest = {"transport": "HTTP+JSON"}
        sent = await client03_lines(
            sdk03_python, base(server), "send", text="hello 0.3 push",
            push_url=webhook, push_token="t03", **rest,
        )  # fmt: skip
        assert sent[-1].get("kind") == "task", sent
        task_id = sent[-1]["id"]
        seen = await hook.until(lambda b: b.get("status", {}).get("state") == "completed")
        made = await client03_lines(
            sdk03_python, base(server), "push-set", task_id=task_id, config_id="second",
            push_url=webhook, push_token="t2", **rest,
        )  # fmt: skip
        assert made[-1].get("taskId") == task_id, made
        assert made[-1]["pushNotificationConfig"]["url"] == webhook, made
        got = await client03_lines(
            sdk03_python, base(server), "push-get", task_id=task_id, config_id="second", **rest
        )
        assert got[-1]["pushNotificationConfig"]["token"] == "t2", got
        listed = await http.get(base(server) + f"/v1/tasks/{task_id}/pushNotificationConfigs")
        assert listed.status_code == 200, listed.text
        # the 0.3 specification's DELETE (the a2a-sdk 0.3 client has no delete)
        path = f"/v1/tasks/{task_id}/pushNotificationConfigs/second"
        deleted = await http.delete(base(server) + path)
        assert deleted.status_code == 200, deleted.text
        left = await http.get(base(server) + f"/v1/tasks/{task_id}/pushNotificationConfigs")
        assert "second" not in left.text and webhook in left.text, left.text
    for headers, body in seen:
        assert headers["X-A2A-Notification-Token"] == "t03"
        assert body["kind"] == "task" and body["id"] == task_id  # 0.3: the whole Task
    assert webhook in listed.text
    assert store.given and webhook not in str(store.given)
    assert all(given["url"].startswith(base(server) + "/push/") for given in store.given)
