"""A minimal, fast A2A 1.0 echo agent in plain aiohttp (not the SDK), for benchmarks.

``python -m bench.echo_agent --port P [--port P2 ...] [--answer task]`` serves, on each port,
its card at ``/.well-known/agent-card.json`` and JSON-RPC at ``POST /``:

- ``SendMessage``: a prebuilt ``{"message": ...}`` answer (no task, no context); with
  ``--answer task`` a completed Task with a new task ID each time, a context ID and one
  artifact, as most real agents answer (so a router has IDs to rewrite).
- ``SendStreamingMessage``: a Task (working), N ``artifactUpdate`` events written as fast as
  possible, then a completed ``statusUpdate``. N is ``message.metadata.bench.events``
  (default 10). With ``message.metadata.bench.idle`` true it sends the Task and then only a
  ``: ping`` comment every 15 s until the client goes away.

It prints ``READY <ports>`` on stdout once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import resource
from typing import Any

from aiohttp import web

SKILL = {
    "id": "echo",
    "name": "Echo",
    "description": "Echoes the text of a message back, for benchmarks.",
    "tags": ["echo", "benchmark"],
    "examples": ["echo hello benchmark"],
}
MESSAGE = b'{"message":{"role":"ROLE_AGENT","messageId":"echo-reply","parts":[{"text":"echo"}]}}'
_NEXT_TASK = itertools.count(1)
_TASK_HEAD = b'{"task":{"id":"u'
_TASK_TAIL = (
    b'","contextId":"ctx-echo","status":{"state":"TASK_STATE_COMPLETED"},'
    b'"artifacts":[{"artifactId":"echo","parts":[{"text":"echo"}]}]}}'
)


def card(base_url: str) -> dict[str, Any]:
    """The agent's 1.0 card, its JSON-RPC interface at ``base_url``/."""
    return {
        "name": "Bench Echo",
        "description": "Echoes messages back; a benchmark peer.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": f"{base_url}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [SKILL],
    }


def _sse(request_id: bytes, result: bytes) -> bytes:
    return b'data: {"jsonrpc":"2.0","id":' + request_id + b',"result":' + result + b"}\r\n\r\n"


async def _stream(request: web.Request, rid: bytes, bench: dict[str, Any]) -> web.StreamResponse:
    task, ctx = f"t{next(_NEXT_TASK)}".encode(), b"c1"
    ids = b'"taskId":"' + task + b'","contextId":"' + ctx + b'"'
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    status = b'"status":{"state":"TASK_STATE_WORKING"}'
    await resp.write(
        _sse(rid, b'{"task":{"id":"' + task + b'","contextId":"' + ctx + b'",' + status + b"}}")
    )
    if bench.get("idle"):
        while True:
            await asyncio.sleep(15)
            await resp.write(b": ping\r\n\r\n")
    artifact = _sse(
        rid,
        b'{"artifactUpdate":{'
        + ids
        + b',"artifact":{"artifactId":"a1","parts":[{"text":"chunk"}]},"append":true}}',
    )
    for _ in range(int(bench.get("events", 10))):
        await resp.write(artifact)
    done = b'{"statusUpdate":{' + ids + b',"status":{"state":"TASK_STATE_COMPLETED"}}}'
    await resp.write(_sse(rid, done))
    await resp.write_eof()
    return resp


ANSWERS = ("message", "task")
ANSWER = web.AppKey("answer", str)


async def rpc(request: web.Request) -> web.StreamResponse:
    """Answer one JSON-RPC call."""
    body = json.loads(await request.read())
    rid = json.dumps(body.get("id")).encode()
    method = body.get("method")
    if method == "SendMessage":
        result = MESSAGE
        if request.app[ANSWER] == "task":
            result = _TASK_HEAD + str(next(_NEXT_TASK)).encode() + _TASK_TAIL
        return web.Response(
            body=b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + result + b"}",
            content_type="application/json",
        )
    if method == "SendStreamingMessage":
        metadata = (body.get("params", {}).get("message", {}).get("metadata")) or {}
        return await _stream(request, rid, metadata.get("bench") or {})
    error = b'{"code":-32601,"message":"method not found"}'
    return web.Response(
        body=b'{"jsonrpc":"2.0","id":' + rid + b',"error":' + error + b"}",
        content_type="application/json",
    )


def make_app(base_url: str, answer: str = "message") -> web.Application:
    """The agent's aiohttp application, its card pointing at ``base_url``; ``answer``
    (``message`` or ``task``) is what ``SendMessage`` answers."""
    card_bytes = json.dumps(card(base_url)).encode()

    async def agent_card(_request: web.Request) -> web.Response:
        return web.Response(body=card_bytes, content_type="application/json")

    app = web.Application()
    app[ANSWER] = answer
    app.router.add_get("/.well-known/agent-card.json", agent_card)
    app.router.add_post("/", rpc)
    app.router.add_post("/agents/{name}", rpc)  # one process behind many cards' interfaces
    return app


def raise_nofile() -> None:
    """Raise this process's open-file limit to its hard limit (many sockets)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def _serve(ports: list[int], answer: str) -> None:
    for port in ports:
        runner = web.AppRunner(make_app(f"http://127.0.0.1:{port}", answer), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    print(f"READY {' '.join(map(str, ports))}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    """Serve until killed (one agent per ``--port``, each with its own card)."""
    parser = argparse.ArgumentParser(description="A fast A2A 1.0 echo agent.")
    parser.add_argument("--port", type=int, action="append", required=True)
    parser.add_argument("--answer", choices=ANSWERS, default="message")
    args = parser.parse_args()
    raise_nofile()
    asyncio.run(_serve(args.port, args.answer))


if __name__ == "__main__":
    main()
