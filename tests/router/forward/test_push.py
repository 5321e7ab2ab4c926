"""Push notifications relayed through the router, end to end: a real webhook (aiohttp), the
Switchboard app on a real port, a push-capable a2a-sdk 1.x agent, and the SDK client or raw
JSON-RPC calls (docs/push.md)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.app import create_app
from router.transport.routes import ROUTER
from tests.support.helpers import base, make_settings, said
from tests.support.sdk_clients import ask, connect, send
from tests.support.sdk_peers import PushStore, TaskEchoExecutor, serve_sdk_agent
from tests.support.webhooks import completed_1_0, serve_webhook

ADMIN = {"Authorization": "Bearer admin-secret"}


async def _switchboard(aiohttp_server: Any, db_url: str, **settings: Any) -> TestServer:
    settings.setdefault("push_allow_networks", ["127.0.0.0/8"])
    app = create_app(make_settings(db_url, admin_token="admin-secret", **settings))
    return await aiohttp_server(app)


async def _rpc(
    http: httpx.AsyncClient, url: str, method: str, params: Any, *, version: str = "1.0",
    key: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    headers = {"A2A-Version": version} if version == "1.0" else {}
    if key is not None:
        headers["X-API-Key"] = key
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = await http.post(url, json=body, headers=headers)
    return answer.json()


async def test_an_sdk_agents_notifications_reach_the_clients_webhook_with_router_ids(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url)
    executor, store = TaskEchoExecutor(gated=True), PushStore()
    async with serve_sdk_agent(executor=executor, push=store) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        client = await connect(http, base(server) + "/")
        assert client._card.capabilities.push_notifications  # the router's card says so
        task = await send(client, ask("hello push", return_immediately=True))
        config = TaskPushNotificationConfig(
            task_id=task.id, id="mine", url=webhook, token="client-token"
        )
        made = await client.create_task_push_notification_config(config)
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
        [event] = body.values()  # 1.0: one StreamResponse event per POST
        assert event.get("taskId", event.get("id")) == task.id  # the router's ID
    # the agent was given the router's receiver, never the client's webhook or token
    [given] = store.given
    assert given["url"].startswith(base(server) + "/push/")
    assert webhook not in str(store.given) and "client-token" not in str(store.given)


async def test_a_config_on_a_send_is_relayed_and_a_0_3_client_gets_whole_tasks(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url)
    store = PushStore()
    async with serve_sdk_agent(executor=TaskEchoExecutor(), push=store) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        message = {
            "kind": "message", "role": "user", "messageId": str(uuid.uuid4()),
            "parts": [{"kind": "text", "text": "hello old client"}],
        }  # fmt: skip
        params = {
            "message": message,
            "configuration": {"pushNotificationConfig": {"url": webhook, "token": "t03"}},
        }
        answer = await _rpc(http, base(server) + "/", "message/send", params, version="0.3")
        task_id = answer["result"]["id"]
        seen = await hook.until(lambda b: b["status"]["state"] == "completed")
        listed = await _rpc(
            http, base(server) + "/", "tasks/pushNotificationConfig/list", {"id": task_id},
            version="0.3",
        )  # fmt: skip
    for headers, body in seen:
        assert headers["X-A2A-Notification-Token"] == "t03"
        assert body["kind"] == "task" and body["id"] == task_id  # 0.3: the whole Task
    assert [c["pushNotificationConfig"]["url"] for c in listed["result"]] == [webhook]
    assert webhook not in str(store.given)
    # a 0.3 get names a config id the client never set (the conformance suite's "default"):
    # the task's first config, as a2a-sdk 0.3 agents answer; a 1.0 get is exact
    got = await _rpc(
        http, base(server) + "/", "tasks/pushNotificationConfig/get",
        {"id": task_id, "pushNotificationConfigId": "default"}, version="0.3",
    )  # fmt: skip
    assert got["result"]["pushNotificationConfig"]["url"] == webhook, got
    exact = await _rpc(
        http, base(server) + "/", "GetTaskPushNotificationConfig",
        {"taskId": task_id, "id": "default"},
    )  # fmt: skip
    assert exact["error"]["code"] == -32001, exact


async def test_webhooks_on_forbidden_networks_are_refused(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, db_url, push_allow_networks=[])
    async with serve_sdk_agent(executor=TaskEchoExecutor(), push=PushStore()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        client = await connect(http, base(server) + "/")
        task = await send(client, ask("say hello back"))
        for url in ("http://127.0.0.1:8080/hook", "http://169.254.169.254/latest",
                    "ftp://example.com/hook", "http://user:pw@example.com/hook"):  # fmt: skip
            params = {"taskId": task.id, "url": url}
            answer = await _rpc(
                http, base(server) + "/", "CreateTaskPushNotificationConfig", params
            )
            error = answer["error"]
            assert error["code"] == -32602, answer
            assert said(error).startswith("Invalid params: url: webhook URL refused")
            assert "pw" not in str(error)  # never shown back
        loopback = await _rpc(
            http, base(server) + "/", "CreateTaskPushNotificationConfig",
            {"taskId": task.id, "url": "http://127.0.0.1:8080/hook"},
        )  # fmt: skip
        assert "SWITCHBOARD_PUSH_ALLOW_NETWORKS" in said(loopback["error"])
        text = [{"text": "say hello back"}]
        message = {"role": "ROLE_USER", "messageId": "m2", "parts": text}
        params = {
            "message": message,
            "configuration": {"taskPushNotificationConfig": {"url": "http://10.0.0.1/h"}},
        }
        answer = await _rpc(http, base(server) + "/", "SendMessage", params)
        assert answer["error"]["code"] == -32602
        assert "SWITCHBOARD_PUSH_ALLOW_NETWORKS" in said(answer["error"])
        assert "configuration.taskPushNotificationConfig.url" in said(answer["error"])


async def _key(http: httpx.AsyncClient, server: TestServer, subject: str) -> str:
    answer = await http.post(
        base(server) + "/api/v1/clients", json={"subject": subject}, headers=ADMIN
    )
    return answer.json()["key"]


async def test_another_principal_can_neither_read_nor_set_a_tasks_configs(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    _, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url, client_auth="api-key")
    async with serve_sdk_agent(executor=TaskEchoExecutor(), push=PushStore()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        alice, bob = await _key(http, server, "alice"), await _key(http, server, "bob")
        url = base(server) + "/"
        text = [{"text": "say hello back"}]
        params = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": text}}
        sent = await _rpc(http, url, "SendMessage", params, key=alice)
        task_id = sent["result"]["task"]["id"]
        config = {"taskId": task_id, "id": "c", "url": webhook}
        made = await _rpc(http, url, "CreateTaskPushNotificationConfig", config, key=alice)
        assert made["result"]["id"] == "c"
        as_get = await _rpc(http, url, "GetTask", {"id": task_id}, key=bob)
        assert as_get["error"]["code"] == -32001
        for method, params in (
            ("CreateTaskPushNotificationConfig", {**config, "id": "evil"}),
            ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "c"}),
            ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
            ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c"}),
        ):
            answer = await _rpc(http, url, method, params, key=bob)
            assert answer["error"]["code"] == -32001, (method, answer)
            assert said(answer["error"]) == said(as_get["error"])  # as for GetTask
        listed = await _rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": task_id},
                            key=alice)  # fmt: skip
        assert [c["id"] for c in listed["result"]["configs"]] == ["c"]


async def test_the_receiver_refuses_unknown_configs_wrong_tokens_and_oversized_bodies(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url, max_request_bytes=4096)
    store = PushStore()
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor, push=store) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        client = await connect(http, base(server) + "/")
        task = await send(client, ask("say hello back", return_immediately=True))
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=webhook)
        )
        [given] = store.given
        receiver, token = given["url"], given["token"]
        event = {"statusUpdate": {"taskId": given["taskId"], "status": {"state": "x"}}}
        unknown = await http.post(base(server) + "/push/nope", json=event,
                                  headers={"X-A2A-Notification-Token": token})  # fmt: skip
        assert unknown.status_code == 404
        wrong = await http.post(receiver, json=event,
                                headers={"X-A2A-Notification-Token": "guess"})  # fmt: skip
        assert wrong.status_code == 401
        big = await http.post(receiver, content=b"{" + b" " * 5000 + b"}",
                              headers={"X-A2A-Notification-Token": token})  # fmt: skip
        assert big.status_code == 413
        other = {"statusUpdate": {"taskId": "not-this-task", "status": {"state": "x"}}}
        foreign = await http.post(receiver, json=other,
                                  headers={"X-A2A-Notification-Token": token})  # fmt: skip
        assert foreign.status_code == 403
        executor.release()
        await hook.until(completed_1_0)
    outbox = server.app[ROUTER].outbox
    assert {state for state, _ in await outbox.states(task.id)} == {"delivered"}
    dead = await http.get(base(server) + "/api/v1/push/dead", headers=ADMIN)
    assert dead.status_code == 200 and dead.json() == {"deadLetters": []}
