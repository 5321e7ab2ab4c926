"""Synthesized push notifications, end to end: an a2a-sdk 1.x agent WITHOUT push support, a
real webhook, the Switchboard app on a real port; the router follows the task itself
(subscribing when the agent streams, polling when it does not), across a restart too, and
keeps the client's token and credentials encrypted at rest (docs/push.md)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.types import (
    AgentCapabilities,
    GetTaskPushNotificationConfigRequest,
    TaskPushNotificationConfig,
)
from sqlmodel import select

from registry.access.secrets import generate_key
from registry.api import REGISTRY
from router.tables import PushConfigRow, PushOutboxRow
from router.transport.routes import ROUTER
from tests.router.forward.test_push import _rpc, _switchboard
from tests.support.helpers import base
from tests.support.sdk_clients import ask, connect, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent
from tests.support.webhooks import completed_1_0, serve_webhook

FAST = {"push_poll_interval": 0.05, "push_poll_cap": 0.2}


async def test_a_streaming_agent_without_push_is_followed_and_secrets_are_sealed(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url, secret_key=generate_key(), **FAST)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor) as agent_url:  # streams, no push
        await server.app[REGISTRY].register_url(agent_url, "plain")
        client = await connect(http, base(server) + "/")
        task = await send(client, ask("hello synth", return_immediately=True))
        config = TaskPushNotificationConfig(task_id=task.id, id="c", url=webhook, token="tok-1")
        config.authentication.scheme = "Bearer"
        config.authentication.credentials = "cred-1"
        made = await client.create_task_push_notification_config(config)
        assert (made.task_id, made.id) == (task.id, "c")
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="c")
        )
        assert (got.token, got.authentication.credentials) == ("tok-1", "cred-1")
        first = await hook.until(lambda body: True)  # the task as the subscription starts
        executor.release()
        seen = first + await hook.until(completed_1_0)
    for headers, body in seen:
        assert headers["X-A2A-Notification-Token"] == "tok-1"
        assert headers["Authorization"] == "Bearer cred-1"
        [event] = body.values()
        assert event.get("taskId", event.get("id")) == task.id  # the router's ID
    async with server.app[REGISTRY].store.session() as session:
        row = (await session.exec(select(PushConfigRow))).one()
        sent = (await session.exec(select(PushOutboxRow))).all()
    assert row.token is not None and row.token.startswith("sealed:") and "tok-1" not in row.token
    assert row.authentication is not None and "cred-1" not in str(row.authentication)
    assert sent and all("tok-1" not in str(r.headers) for r in sent)
    assert all("cred-1" not in str(r.headers) for r in sent)


async def test_an_agent_that_does_not_stream_is_polled_for_a_config_given_on_a_send(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url, **FAST)
    executor = TaskEchoExecutor(gated=True)
    quiet = AgentCapabilities(streaming=False)
    async with serve_sdk_agent(executor=executor, capabilities=quiet) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "quiet")
        message = {
            "kind": "message", "role": "user", "messageId": str(uuid.uuid4()),
            "parts": [{"kind": "text", "text": "hello old client"}],
        }  # fmt: skip
        params = {
            "message": message,
            "configuration": {
                "blocking": False,
                "pushNotificationConfig": {"url": webhook, "token": "t03"},
            },
        }
        answer = await _rpc(http, base(server) + "/", "message/send", params, version="0.3")
        task_id = answer["result"]["id"]
        await hook.until(lambda body: True)  # the first poll's task
        executor.release()
        seen = await hook.until(lambda body: body["status"]["state"] == "completed")
        listed = await _rpc(
            http, base(server) + "/", "tasks/pushNotificationConfig/list", {"id": task_id},
            version="0.3",
        )  # fmt: skip
    for headers, body in seen:
        assert headers["X-A2A-Notification-Token"] == "t03"
        assert body["kind"] == "task" and body["id"] == task_id  # 0.3: the whole Task
    assert [c["pushNotificationConfig"]["url"] for c in listed["result"]] == [webhook]


async def test_following_survives_a_router_restart(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    first = await _switchboard(aiohttp_server, db_url, **FAST)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor) as agent_url:
        await first.app[REGISTRY].register_url(agent_url, "plain")
        client = await connect(http, base(first) + "/")
        task = await send(client, ask("hello restart", return_immediately=True))
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=webhook, token="tok-r")
        )
        await hook.until(lambda body: True)
        assert task.id in first.app[ROUTER].push.watcher.following
        await first.close()  # a clean stop releases the lease
        await _switchboard(aiohttp_server, db_url, **FAST)  # takes the task over
        executor.release()
        seen = await hook.until(completed_1_0)
    assert seen[-1][0]["X-A2A-Notification-Token"] == "tok-r"
    [event] = seen[-1][1].values()
    assert event.get("taskId", event.get("id")) == task.id


async def test_a_streaming_send_with_a_config_for_an_agent_without_push_is_refused(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    _, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "plain")
        text = [{"text": "say hello back"}]
        params = {
            "message": {"role": "ROLE_USER", "messageId": "m1", "parts": text},
            "configuration": {"taskPushNotificationConfig": {"url": webhook}},
        }
        async with http.stream(
            "POST", base(server) + "/", headers={"A2A-Version": "1.0"},
            json={"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params},
        ) as answer:  # fmt: skip
            body = (await answer.aread()).decode()
    assert "-32003" in body and "non-streaming send" in body


async def test_a_v01_client_sets_and_gets_its_config_and_gets_v01_tasks_named_by_its_id(
    aiohttp_server: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, db_url, **FAST)
    url = base(server) + "/"
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:  # no push
        await server.app[REGISTRY].register_url(agent_url, "plain")
        text = {"role": "user", "parts": [{"type": "text", "text": "say hello back"}]}
        push = {"url": webhook, "token": "v01-token"}
        sent = await _rpc(
            http, url, "tasks/send",
            {"id": "mine-1", "message": text, "pushNotification": push}, version="0.3",
        )  # fmt: skip
        assert sent["result"]["id"] == "mine-1", sent  # tasks/send waits for the end
        [(headers, body)] = await hook.until(lambda body: True)
        assert headers["X-A2A-Notification-Token"] == "v01-token"
        got = await _rpc(http, url, "tasks/pushNotification/get", {"id": "mine-1"}, version="0.3")
        assert got["result"] == {"id": "mine-1", "pushNotificationConfig": push}, got
        replaced = {"url": webhook, "token": "v01-new"}
        params = {"id": "mine-1", "pushNotificationConfig": replaced}
        set_ = await _rpc(http, url, "tasks/pushNotification/set", params, version="0.3")
        assert set_["result"] == {"id": "mine-1", "pushNotificationConfig": replaced}, set_
        [(again, _)] = await hook.until(lambda body: True)  # the finished task, once more
        missing = await _rpc(
            http, url, "tasks/pushNotification/get", {"id": "not-mine"}, version="0.3"
        )
    assert missing["error"]["code"] == -32001
    assert again["X-A2A-Notification-Token"] == "v01-new"  # the task's one config, replaced
    assert body["id"] == "mine-1" and "kind" not in body  # a v0.1 Task, the client's ID
    assert body["status"]["state"] == "completed"
