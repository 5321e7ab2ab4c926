"""Many small A2A 1.0 agents on one real aiohttp server: agent ``name`` answers JSON-RPC at
``POST /a/<name>``, so a benchmark or a test registers as many distinct agents as it needs
without a port each, and sees from the answer which one was reached.

- ``SendMessage``: a message ``<name>: <text>``; a text starting with ``task`` gets a completed
  Task instead (a new task ID and context ID), kept for ``GetTask``.
- ``GetTask``: the task, or ``-32001``; ``CancelTask``: ``-32002`` (its tasks are completed),
  or ``-32001``.

:func:`path_card` is the 1.0 card of one such agent, to push to the registry.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

__all__ = ["PathAgents", "path_agents", "path_card"]


class PathAgents:
    """The server and what its agents answered."""

    def __init__(self, server: TestServer) -> None:
        self.server = server
        self.tasks: dict[str, dict[str, Any]] = {}

    def url(self, name: str) -> str:
        """The JSON-RPC URL of agent ``name``."""
        return str(self.server.make_url(f"/a/{name}"))


def path_card(
    url: str, name: str, skill: dict[str, Any], description: str = "An agent of the tests."
) -> dict[str, Any]:
    """An A2A 1.0 card with one JSON-RPC interface at ``url`` and one skill."""
    return {
        "name": name,
        "description": description,
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [skill],
    }


def _answer(request_id: Any, result: Any) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": request_id, "result": result})


@contextlib.asynccontextmanager
async def path_agents() -> AsyncIterator[PathAgents]:
    """Start the server on a free port of 127.0.0.1; stop it at the end."""

    async def rpc(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json()
        params = body.get("params") or {}
        if body.get("method") in ("GetTask", "CancelTask"):
            task = agents.tasks.get(params.get("id", ""))
            if task is None or body["method"] == "CancelTask":
                error = {"code": -32001, "message": "Task not found"}
                if task is not None:
                    error = {"code": -32002, "message": "Task cannot be canceled"}
                return web.json_response({"jsonrpc": "2.0", "id": body.get("id"), "error": error})
            return _answer(body.get("id"), task)
        parts = params.get("message", {}).get("parts", [])
        text = " ".join(p.get("text", "") for p in parts)
        if text.startswith("task"):
            task = {
                "id": uuid.uuid4().hex,
                "contextId": uuid.uuid4().hex,
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "a", "parts": [{"text": f"{name}: {text}"}]}],
            }
            agents.tasks[task["id"]] = task
            return _answer(body.get("id"), {"task": task})
        reply = {"role": "ROLE_AGENT", "messageId": uuid.uuid4().hex}
        reply["parts"] = [{"text": f"{name}: {text}"}]
        return _answer(body.get("id"), {"message": reply})

    app = web.Application()
    app.router.add_post("/a/{name}", rpc)
    server = TestServer(app, host="127.0.0.1")  # a free port, served in this event loop
    await server.start_server()
    agents = PathAgents(server)
    try:
        yield agents
    finally:
        await server.close()
