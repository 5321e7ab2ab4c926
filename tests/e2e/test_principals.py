"""Principals end to end (issue 35): an API key and a JWT naming the same tenant and subject
are two callers over JSON-RPC, HTTP+JSON and gRPC; the IDs earlier versions sealed for their
shared scope still open, for one version, for both of them and nobody else; no key or token
ever stands for a built-in principal (docs/security.md, task isolation)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.app import create_app
from router.transport.routes import GRPC_ENDPOINT, ROUTER
from tests.support.helpers import base, make_settings
from tests.support.issuer import Issuer, serve_issuer
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

grpc = pytest.importorskip("grpc")
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")
from a2a.types import a2a_pb2  # noqa: E402  (after the grpc extra is known to be there)

ADMIN = {"Authorization": "Bearer admin-secret"}
V1 = {"A2A-Version": "1.0"}
OLD_ALICE = '["acme","alice"]'  # the scope 0001's code gave alice@acme, key or token
OLD_ADMIN = '["","admin-token"]'  # ... and the admin token


async def _switchboard(aiohttp_server: Any, db_url: str, issuer: Issuer) -> TestServer:
    settings = issuer.settings(client_auth="api-key,jwt", admin_token="admin-secret")
    app = create_app(make_settings(db_url, grpc_port=0, **settings))
    return await aiohttp_server(app)


async def _key(http: httpx.AsyncClient, server: TestServer, subject: str, **fields: Any) -> str:
    made = await http.post(
        base(server) + "/api/v1/clients", json={"subject": subject, **fields}, headers=ADMIN
    )
    assert made.status_code == 201, made.text
    return made.json()["key"]


class Caller:
    """One caller's credentials, and its calls over the three bindings."""

    def __init__(self, http: httpx.AsyncClient, server: TestServer, **auth: str) -> None:
        self.http, self.server = http, server
        self.headers = {"X-API-Key": auth["key"]} if "key" in auth else {}
        if "token" in auth:
            self.headers = {"Authorization": f"Bearer {auth['token']}"}
        self.metadata = (("a2a-version", "1.0"), *((k.lower(), v) for k, v in self.headers.items()))

    async def rpc(self, method: str, params: Any) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = await self.http.post(base(self.server) + "/", json=body, headers=self._h())
        return answer.json()

    async def send(self, text: str, **ids: str) -> dict[str, Any]:
        message = {"role": "ROLE_USER", "messageId": text, "parts": [{"text": text}], **ids}
        answer = await self.rpc("SendMessage", {"message": message})
        assert "result" in answer, answer
        return answer["result"]["task"]

    async def rest(self, path: str) -> httpx.Response:
        return await self.http.get(base(self.server) + path, headers=self._h())

    async def grpc_get(self, task_id: str) -> str | None:
        """The task's id over gRPC, None when it is NOT_FOUND."""
        target = f"127.0.0.1:{self.server.app[GRPC_ENDPOINT].port}"
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            try:
                task = await stub.GetTask(
                    a2a_pb2.GetTaskRequest(id=task_id), metadata=self.metadata
                )
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.NOT_FOUND, error
                return None
            return task.id

    async def grpc_listed(self) -> set[str]:
        target = f"127.0.0.1:{self.server.app[GRPC_ENDPOINT].port}"
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=self.metadata)
            return {task.id for task in listed.tasks}

    async def sees(self, task_id: str) -> bool:
        """Whether GetTask finds the task, the same over JSON-RPC, HTTP+JSON and gRPC."""
        got = await self.rpc("GetTask", {"id": task_id})
        rest = await self.rest(f"/tasks/{task_id}")
        over_grpc = await self.grpc_get(task_id)
        if "result" in got:
            assert got["result"]["id"] == task_id
            assert rest.status_code == 200 and rest.json()["id"] == task_id, rest.text
            assert over_grpc == task_id
            return True
        assert got["error"]["code"] == -32001, got
        assert rest.status_code == 404, rest.text
        assert over_grpc is None
        return False

    async def listed(self) -> set[str]:
        """The tasks ListTasks lists, the same over the three bindings."""
        answer = await self.rpc("ListTasks", {"pageSize": 100})
        ids = {task["id"] for task in answer["result"]["tasks"]}
        rest = await self.rest("/tasks?pageSize=100")
        assert {task["id"] for task in rest.json()["tasks"]} == ids, rest.text
        assert await self.grpc_listed() == ids
        return ids

    def _h(self) -> dict[str, str]:
        return {**V1, **self.headers}


async def test_a_key_and_a_jwt_of_one_tenant_and_subject_are_two_callers(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    issuer = await serve_issuer(aiohttp_server)
    server = await _switchboard(aiohttp_server, sqlite_url, issuer)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        key = Caller(http, server, key=await _key(http, server, "alice", tenant="acme"))
        jwt = Caller(http, server, token=issuer.token(sub="alice", tenant="acme"))
        by_key = await key.send("echo from the key")
        by_jwt = await jwt.send("echo from the token")
        for me, mine, theirs in ((key, by_key, by_jwt), (jwt, by_jwt, by_key)):
            assert await me.sees(mine["id"]) and not await me.sees(theirs["id"])
            assert await me.listed() == {mine["id"]}
            cancel = await me.rpc("CancelTask", {"id": theirs["id"]})
            assert cancel["error"]["code"] == -32001, cancel
            message = {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "echo more"}]}
            more = await me.rpc("SendMessage", {"message": {**message, "taskId": theirs["id"]}})
            assert more["error"]["code"] == -32001, more
            # the other's context is a context this caller names: a conversation of its own
            joined = await me.send("echo joining", contextId=theirs["contextId"])
            assert not await (jwt if me is key else key).sees(joined["id"])


async def test_ids_of_the_shared_scope_of_earlier_versions_open_for_one_version(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    """Tasks made before the upgrade (sealed for ``[tenant, subject]``, as 0001's code did)
    open for a key and a JWT of that tenant and subject, continue with the IDs the client
    holds, and are listed; never for another caller, nor for a built-in principal."""
    issuer = await serve_issuer(aiohttp_server)
    server = await _switchboard(aiohttp_server, sqlite_url, issuer)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        ids = server.app[ROUTER].ids
        made: dict[str, dict[str, Any]] = {}
        for scope in (OLD_ALICE, OLD_ADMIN):  # as an earlier version made them
            body = {
                "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"role": "ROLE_USER", "messageId": scope,
                                       "parts": [{"text": "echo need input"}]}},
            }  # fmt: skip
            upstream = (await http.post(agent_url + "/a2a", json=body, headers=V1)).json()
            task = upstream["result"]["task"]
            earlier = ids.scoped(scope)
            context = await earlier.context_for_upstream("tasks", task["contextId"], None)
            ref = await earlier.task_for_upstream("tasks", task["id"], context)
            made[scope] = {"id": ref.task_id, "contextId": context}
        await ids.flush()
        old, admins_old = made[OLD_ALICE], made[OLD_ADMIN]

        key = Caller(http, server, key=await _key(http, server, "alice", tenant="acme"))
        jwt = Caller(http, server, token=issuer.token(sub="alice", tenant="acme"))
        bob = Caller(http, server, key=await _key(http, server, "bob", tenant="acme"))
        admin = Caller(http, server, token="admin-secret")
        # the key and the JWT of alice@acme both hold the old scope's IDs (until next version)
        assert await key.sees(old["id"]) and await jwt.sees(old["id"])
        assert not await bob.sees(old["id"])
        # continuing the old task answers with the IDs the client holds
        continued = await key.send("echo and now done", taskId=old["id"])
        assert (continued["id"], continued["contextId"]) == (old["id"], old["contextId"])
        assert continued["status"]["state"] == "TASK_STATE_COMPLETED"
        # a new task in the old conversation is the old scope's too: both see it
        again = await jwt.send("echo one more", contextId=old["contextId"])
        assert again["contextId"] == old["contextId"] and await key.sees(again["id"])
        # new tasks are each caller's own; ListTasks lists the caller's and the old ones
        fresh = await key.send("echo something new")
        assert not await jwt.sees(fresh["id"])
        shared = {old["id"], again["id"]}
        assert await key.listed() == shared | {fresh["id"]}
        assert await jwt.listed() == shared
        assert await bob.listed() == set()
        # built-in names: the admin token's old IDs stay closed, even to the admin token
        assert not await admin.sees(admins_old["id"])
        assert admins_old["id"] not in await admin.listed()
        refused = await http.post(
            base(server) + "/api/v1/clients", json={"subject": "admin-token"}, headers=ADMIN
        )
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "reserved_subject"
        squatter = Caller(http, server, token=issuer.token(sub="admin-token"))
        denied = await squatter.rpc("GetTask", {"id": admins_old["id"]})
        assert denied["error"]["code"] == -32054
        assert "built-in principal" in str(denied["error"])
