"""What a restart loses: an agent that forgot a task the router still lists (docs/routing.md,
"What survives a restart"). The agent is really stopped and started again on its port."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.protocol.errors import ERROR_INFO_TYPE
from seeds.demo_agents import start_demo_agents
from tests.support.helpers import base

V1 = {"A2A-Version": "1.0"}


async def _rpc(
    http: aiohttp.ClientSession, url: str, method: str, params: dict[str, Any], **headers: str
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 200
        return await resp.json()


def _error_info(error: dict[str, Any]) -> dict[str, Any]:
    [info] = [d for d in error["data"] if d.get("@type") == ERROR_INFO_TYPE]
    return info


async def test_a_task_its_agent_forgot_is_not_found_and_says_why(router: TestServer) -> None:
    url = base(router)
    agents = await start_demo_agents(ports={"currency": 0, "translate": 0, "caption": 0})
    port = urlsplit(agents.urls["currency"]).port
    assert port is not None
    try:
        await router.app[REGISTRY].register_url(agents.urls["currency"], "currency")
        async with aiohttp.ClientSession() as http:
            message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "convert 1 USD"}]}
            sent = await _rpc(http, url, "SendMessage", {"message": message}, **V1)
            task = sent["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", sent
            got = await _rpc(http, url, "GetTask", {"id": task["id"]}, **V1)
            assert got["result"]["id"] == task["id"]  # known before the restart

            await agents.close()  # the agent restarts: its tasks were in memory only
            agents = await start_demo_agents(ports={"currency": port, "translate": 0, "caption": 0})

            listed = await _rpc(http, url, "ListTasks", {}, **V1)
            assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]

            v1 = (await _rpc(http, url, "GetTask", {"id": task["id"]}, **V1))["error"]
            assert v1["code"] == -32001
            assert "'currency'" in v1["message"] and "no longer knows it" in v1["message"]
            info = _error_info(v1)
            assert info["reason"] == "TASK_NOT_FOUND"
            assert info["metadata"]["reason"] == "OWNER_FORGOT_TASK"
            assert info["metadata"]["agent"] == "currency"
            assert info["metadata"]["taskId"] == task["id"]
            assert info["metadata"]["agentMessage"].startswith("Task not found")

            v03 = (await _rpc(http, url, "tasks/get", {"id": task["id"]}))["error"]
            assert v03["code"] == -32001 and "no longer knows it" in v03["message"]
            assert v03["data"]["reason"] == "OWNER_FORGOT_TASK"
            assert (v03["data"]["agent"], v03["data"]["taskId"]) == ("currency", task["id"])

            # continuing the task: the same answer
            follow = {**message, "messageId": "m2", "taskId": task["id"]}
            follow["contextId"] = task["contextId"]
            cont = (await _rpc(http, url, "SendMessage", {"message": follow}, **V1))["error"]
            assert cont["code"] == -32001
            assert _error_info(cont)["metadata"]["reason"] == "OWNER_FORGOT_TASK"

            # a task the router never knew stays a plain TaskNotFound
            unknown = (await _rpc(http, url, "tasks/get", {"id": "no-such-task"}))["error"]
            assert unknown["code"] == -32001 and "OWNER_FORGOT_TASK" not in str(unknown)
    finally:
        await agents.close()
