"""The HTTP+JSON binding (router.transport.rest): the official a2a-sdk 1.x client on its REST
transport (chosen from the router's card) through the router to an SDK agent, the 0.3 client
on REST, the binding's errors, and the Gate in front of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.app import create_app
from tests.peers03 import agent03, cancel_and_resubscribe03, client03_lines
from tests.support.helpers import base, make_settings
from tests.support.sdk_clients import Keys, answer, ask, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

V1 = {"A2A-Version": "1.0"}
ADMIN = {"Authorization": "Bearer admin-secret"}


async def _switchboard(aiohttp_server: Any, database_url: str, **settings: Any) -> TestServer:
    app = create_app(make_settings(database_url, admin_token="admin-secret", **settings))
    return await aiohttp_server(app)


async def _rest_client(http: httpx.AsyncClient, url: str, *interceptors: Any) -> Any:
    card = await A2ACardResolver(http, url).get_agent_card()
    config = ClientConfig(
        httpx_client=http, streaming=True, supported_protocol_bindings=["HTTP+JSON"]
    )
    return ClientFactory(config).create(card, list(interceptors))


def _message(text: str) -> dict[str, Any]:
    return {"message": {"role": "ROLE_USER", "messageId": text, "parts": [{"text": text}]}}


async def test_the_sdk_rest_client_through_the_router(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        card = (await http.get(base(server) + "/.well-known/agent-card.json", headers=V1)).json()
        assert {"url": base(server), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"} in (
            card["supportedInterfaces"]
        )
        executor.release()
        probe = await http.post(
            base(server) + "/message:send", json=_message("echo probe"), headers=V1
        )
        assert probe.status_code == 200, probe.text
        client = await _rest_client(http, base(server))

        # stream: the task, its updates, the answer (the agent waits for a release)
        executor.release()
        events = [event async for event in client.send_message(ask("echo hello rest"))]
        assert events[0].HasField("task") and events[-1].status_update.status.state == (
            TaskState.TASK_STATE_COMPLETED
        )
        task_id = events[0].task.id
        got = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        assert got.id == task_id and "hello rest" in answer(got)
        assert len(got.history) <= 1
        listed = await client.list_tasks(ListTasksRequest(page_size=10))
        assert task_id in [t.id for t in listed.tasks] and len(listed.tasks) == 2

        # a task left working: subscribe to it, cancel it
        stream = client.send_message(ask("echo cancel me", return_immediately=True))
        first = await anext(aiter(stream))
        await stream.aclose()
        working = first.task.id
        subscribed = client.subscribe(SubscribeToTaskRequest(id=working))
        seen = await anext(aiter(subscribed))
        assert seen.task.id == working
        canceled = await client.cancel_task(CancelTaskRequest(id=working))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await subscribed.aclose()

        # without streaming: one task
        plain = ClientFactory(
            ClientConfig(
                httpx_client=http, streaming=False, supported_protocol_bindings=["HTTP+JSON"]
            )
        ).create(await A2ACardResolver(http, base(server)).get_agent_card())
        executor.release()
        task = await send(plain, ask("echo plain rest"))
        assert "plain rest" in answer(task)

        # the same through the agent's own endpoint
        executor.release()
        pinned = await http.post(
            base(server) + "/agents/tasks/message:send", json=_message("pinned"), headers=V1
        )
        assert pinned.status_code == 200 and "task" in pinned.json(), pinned.text
        # the agent's card through the router offers HTTP+JSON at its per-agent endpoint
        executor.release()
        agent = await _rest_client(http, base(server) + "/agents/tasks")
        events = [event async for event in agent.send_message(ask("anything at all"))]
        got = await agent.get_task(GetTaskRequest(id=events[0].task.id))
        assert "anything at all" in answer(got)


async def test_errors_in_the_bindings_format(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    url = base(server)
    missing = await http.get(url + "/tasks/nope", headers=V1)
    assert missing.status_code == 404, missing.text
    error = missing.json()["error"]
    assert error["code"] == 404 and error["status"] == "NOT_FOUND"
    assert error["details"][0]["reason"] == "TASK_NOT_FOUND"
    assert error["details"][0]["domain"] == "a2a-protocol.org"

    bad = await http.post(url + "/message:send", content=b"{nope", headers=V1)
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
    invalid = await http.post(url + "/message:send", json={"message": {"role": 7}}, headers=V1)
    assert invalid.status_code == 400
    assert invalid.json()["error"]["details"][0]["reason"] == "INVALID_PARAMS"

    for headers in ({}, {"A2A-Version": "0.3"}):  # the 1.0 paths need 1.0
        wrong = await http.post(url + "/message:send", json=_message("x"), headers=headers)
        assert wrong.status_code == 400
        assert wrong.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    unknown = await http.get(url + "/tasks/x", headers={"A2A-Version": "9.9"})
    assert unknown.status_code == 400
    by_query = await http.get(url + "/tasks/nope?A2A-Version=1.0")
    assert by_query.status_code == 404

    push = await http.get(url + "/tasks/x/pushNotificationConfigs", headers=V1)
    assert push.status_code == 404  # the push relay (docs/push.md): no such task
    assert push.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
    extended = await http.get(url + "/extendedAgentCard", headers=V1)
    assert extended.status_code == 400
    assert extended.json()["error"]["details"][0]["reason"] == (
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    )
    streamed = await http.post(url + "/tasks/nope:subscribe", headers=V1)
    assert streamed.status_code == 404 and streamed.json()["error"]["status"] == "NOT_FOUND"


async def test_client_auth_through_the_gate(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url, client_auth="api-key")
    url = base(server)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        keys = []
        for subject in ("alice", "bob"):
            made = await http.post(
                url + "/api/v1/clients", json={"subject": subject}, headers=ADMIN
            )
            keys.append(made.json()["key"])
        alice, bob = keys
        refused = await http.post(url + "/message:send", json=_message("hi"), headers=V1)
        assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
        assert refused.json()["error"]["status"] == "UNAUTHENTICATED"

        client = await _rest_client(http, url, AuthInterceptor(Keys(apiKey=alice)))
        events = [event async for event in client.send_message(ask("echo secret"))]
        task_id = events[0].task.id
        mine = await http.get(url + f"/tasks/{task_id}", headers={**V1, "X-API-Key": alice})
        assert mine.status_code == 200 and mine.json()["id"] == task_id
        theirs = await http.get(url + f"/tasks/{task_id}", headers={**V1, "X-API-Key": bob})
        assert theirs.status_code == 404
        extended = await http.get(url + "/extendedAgentCard", headers={**V1, "X-API-Key": bob})
        assert extended.status_code == 200 and extended.json()["name"]


async def test_the_sdk_03_rest_client_with_client_auth(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url, client_auth="api-key")
    url = base(server)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        made = await http.post(url + "/api/v1/clients", json={"subject": "carol"}, headers=ADMIN)
        key = made.json()["key"]
        # the 0.3 SDK's REST transport applies no interceptors: the key goes as a header
        options = {"transport": "HTTP+JSON", "headers": {"X-API-Key": key}}
        sent = await client03_lines(sdk03_python, url, "send", text="echo with a key", **options)
        assert sent[-1].get("kind") == "task", sent
        card = await client03_lines(sdk03_python, url, "extended-card", **options)
        assert card[-1].get("name") and card[-1]["securitySchemes"]["apiKey"]["in"] == "header", (
            card
        )
        refused = await client03_lines(
            sdk03_python, url, "send", text="echo", transport="HTTP+JSON"
        )
        assert refused[-1]["error"].get("status") == 401, refused


async def test_the_sdk_03_client_on_rest(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        sent = await client03_lines(
            sdk03_python, base(server), "send", text="echo over rest", transport="HTTP+JSON"
        )
        assert sent[-1].get("kind") == "task", sent
        task_id = sent[-1]["id"]
        got = await client03_lines(
            sdk03_python, base(server), "get", task_id=task_id, transport="HTTP+JSON"
        )
        assert got[-1]["id"] == task_id and got[-1]["status"]["state"] == "completed", got
        streamed = await client03_lines(
            sdk03_python, base(server), "stream", text="echo stream rest", transport="HTTP+JSON"
        )
        kinds = [line.get("kind") for line in streamed]
        assert kinds[0] == "task" and "status-update" in kinds, streamed
        raw = await http.get(base(server) + "/v1/tasks/nope")
        assert raw.status_code == 404 and raw.json()["error"]["status"] == "NOT_FOUND"
        stream = await http.post(base(server) + "/v1/tasks/nope:subscribe")
        assert stream.status_code == 404, stream.text  # 0.3's error event, before any data
        wrong = await http.get(base(server) + "/v1/tasks/nope", headers=V1)
        assert wrong.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"


async def test_the_sdk_03_rest_client_to_a_03_agent(
    aiohttp_server: Any, sqlite_url: str, sdk03_python: Path
) -> None:
    """The call an HTTP+JSON request becomes reaches a 0.3 agent with an id (its SDK refuses
    a null one), and proto field names (``message_id``) are read as JSON names."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with agent03(sdk03_python) as agent:
        await server.app[REGISTRY].register_url(agent.base_url, "echo03")
        sent = await client03_lines(
            sdk03_python, base(server), "send", text="echo over rest", transport="HTTP+JSON"
        )
        assert sent[-1].get("kind") in ("task", "message"), sent
        async with httpx.AsyncClient() as http:
            body = {
                "message": {
                    "message_id": "m-snake",
                    "role": "ROLE_USER",
                    "content": [{"text": "echo snake case"}],
                }
            }
            answer = await http.post(base(server) + "/v1/message:send", json=body)
        assert answer.status_code == 200, answer.text


async def test_rate_limits_in_the_bindings_format(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url, rate_limit_rps=0.01, rate_limit_burst=1)
    url = base(server) + "/tasks/nope"
    assert (await http.get(url, headers=V1)).status_code == 404
    limited = await http.get(url, headers=V1)
    assert limited.status_code == 429 and limited.headers["Retry-After"]
    error = limited.json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["details"][0]["reason"] == "RATE_LIMITED"


class _TenantEcho(TaskEchoExecutor):
    """The task echo agent, keeping the tenant each message came for."""

    def __init__(self) -> None:
        super().__init__()
        self.tenants: list[str] = []

    async def execute(self, context: Any, event_queue: Any) -> None:
        self.tenants.append(context.tenant)
        await super().execute(context, event_queue)


async def test_tenant_paths(aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient) -> None:
    """Every 1.0 path under a tenant's first segment (root and per agent): the tenant reaches
    the agent (JSON-RPC: its ``tenant`` param; HTTP+JSON: its path); the router's own first
    segments are never a tenant."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    url = base(server)
    rpc, rest = _TenantEcho(), _TenantEcho()
    async with (
        serve_sdk_agent(executor=rpc) as rpc_url,
        # the SDK mounts /{tenant} before its path prefix: serve at the root
        serve_sdk_agent(executor=rest, rest_only=True, rpc_path="/") as rest_url,
    ):
        await server.app[REGISTRY].register_url(rpc_url, "rpc")
        await server.app[REGISTRY].register_url(rest_url, "rest")
        for agent, executor in (("rpc", rpc), ("rest", rest)):
            sent = await http.post(
                f"{url}/agents/{agent}/acme/message:send", json=_message("tenant"), headers=V1
            )
            assert sent.status_code == 200, sent.text
            assert executor.tenants == ["acme"], agent
            task_id = sent.json()["task"]["id"]
            got = await http.get(f"{url}/agents/{agent}/acme/tasks/{task_id}", headers=V1)
            assert got.status_code == 200 and got.json()["id"] == task_id, got.text
            # routed (at the root): the tenant's paths, snake_case query names read too
            got = await http.get(f"{url}/acme/tasks/{task_id}?history_length=1", headers=V1)
            assert got.status_code == 200 and len(got.json().get("history", [])) <= 1, got.text
            listed = await http.get(f"{url}/acme/tasks?page_size=5", headers=V1)
            assert listed.status_code == 200 and listed.json()["tasks"], listed.text
            canceled = await http.post(f"{url}/acme/tasks/{task_id}:cancel", json={}, headers=V1)
            assert canceled.status_code == 400, canceled.text  # completed: not cancelable
        streamed = await http.post(
            url + "/globex/message:stream", json=_message("echo s"), headers=V1
        )
        assert streamed.status_code == 200 and "data:" in streamed.text, streamed.text
        assert "globex" in rpc.tenants + rest.tenants
    # the router's own first segments are not tenants
    wrong = await http.get(url + "/v1/tasks/nope", headers=V1)
    assert wrong.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    for path in ("/push/message:send", "/api/message:send", "/.well-known/message:send"):
        answer = await http.post(url + path, json=_message("x"), headers=V1)
        assert answer.status_code in (404, 405) and "ErrorInfo" not in answer.text, path
    nested = await http.get(url + "/tasks/tasks/x", headers=V1)
    assert nested.status_code == 404 and "ErrorInfo" not in nested.text


async def test_draft_paths(aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient) -> None:
    """Seed 002's draft paths, root and per agent: its bodies in, its shapes out (a bare
    Task with ``taskId``, bare states), its errors ``{code, status, message, details}``."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    url = base(server)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        executor.release()
        body = {
            "message": {"role": "user", "parts": [{"text": "echo draft"}], "messageId": "d1"},
            "configuration": {"blocking": True},
        }
        sent = await http.post(url + "/messages", json=body, headers=V1)
        assert sent.status_code == 200, sent.text
        task = sent.json()
        assert task["taskId"] and task["status"]["state"] == "COMPLETED", task
        executor.release()
        streamed = await http.post(url + "/agents/tasks/messages/stream", json=body)
        assert streamed.status_code == 200 and '"taskId"' in streamed.text, streamed.text

        body["configuration"] = {"blocking": False}
        working = (await http.post(url + "/messages", json=body, headers=V1)).json()
        assert working["status"]["state"] in ("SUBMITTED", "WORKING"), working
        async with http.stream("GET", url + f"/tasks/{working['taskId']}/stream") as stream:
            assert stream.status_code == 200
            lines = aiter(stream.aiter_lines())
            first = await anext(line async for line in lines if line.startswith("data:"))
            assert working["taskId"] in first, first
            canceled = await http.delete(url + f"/tasks/{working['taskId']}")
            assert canceled.status_code == 200, canceled.text
            assert canceled.json()["status"]["state"] == "CANCELED", canceled.text
            rest = [line async for line in lines]
            assert any('"CANCELED"' in line for line in rest), rest

        configs = await http.get(url + f"/tasks/{task['taskId']}/notifications")
        assert configs.status_code == 200 and configs.json()["configs"] == [], configs.text
    missing = await http.delete(url + "/tasks/nope")
    assert missing.status_code == 404, missing.text
    error = missing.json()
    assert (error["code"], error["status"]) == (404, "NOT_FOUND") and error["message"]
    assert error["details"][0]["reason"] == "TASK_NOT_FOUND"
    card = await http.get(url + "/agent-card")
    assert card.json()["details"][0]["reason"] == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


async def test_the_sdk_03_rest_client_cancels_and_resubscribes(
    aiohttp_server: Any, sqlite_url: str, sdk03_python: Path
) -> None:
    """The 0.3 client on REST, cancel and resubscribe, to a 1.0 JSON-RPC agent (routed and
    through its own endpoint)."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        for url in (base(server), base(server) + "/agents/tasks"):
            lines = await cancel_and_resubscribe03(sdk03_python, url)
            assert lines[0]["kind"] == "task", lines
        assert len(executor.cancels) == 2
