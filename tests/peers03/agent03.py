"""An a2a-sdk 0.3.26 echo agent, run by the python of the 0.3 test venv (see
tests/peers03/__init__.py).

Usage: ``agent03.py [--host H] [--port P] [--gated] [--name N] [--echo-parts] [--sdk-final]
[--rest] [--no-streaming]``

It serves its card at ``/.well-known/agent-card.json`` (and the older ``agent.json``) and
JSON-RPC at ``POST /`` with the official ``A2AStarletteApplication``. A message is answered by
a task: ``task`` (submitted), ``status-update`` working, one ``artifact-update`` per word of
``echo: <text>`` (artifact id ``echo``, ``append`` after the first, ``lastChunk`` on the last),
then ``status-update`` completed (``final``). A message whose text contains ``need input``
first stops in ``input-required`` (``final``); the next message on that task completes it.

With ``--sdk-final`` the input-required update has the SDK's default ``final: false``
(``TaskUpdater.requires_input``), as most a2a-sdk 0.3 agents send it.

With ``--rest`` it serves the HTTP+JSON binding instead (the SDK's ``A2ARESTFastAPIApplication``:
``/v1/message:send``, ...), and its card says ``preferredTransport: HTTP+JSON``, url its base.

With ``--no-streaming`` its card says ``capabilities.streaming: false`` (the SDK then refuses
``message/stream`` and ``tasks/resubscribe``).

With ``--echo-parts`` the file and data parts of a message also come back, as they came, in
an artifact ``parts`` before the final event.

With ``--gated`` the executor waits, before its final event, for one line on stdin (each line
releases one waiting task). End of stdin stops the server.

Stdout, one line each, flushed: ``LISTENING <base_url>`` once the socket listens, then
``REQUEST <json>`` per HTTP request (method, path, headers, parsed body), ``EXECUTE <json>``
per executor run (task/context ids, text, message, request metadata), ``CANCEL <json>`` and
``TAP <json>`` (a resubscribe or cancel attached to a task's event queue: events published
after this line reach it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue, InMemoryQueueManager
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    DataPart,
    FilePart,
    FileWithBytes,
    Part,
    TaskState,
    TextPart,
)
from a2a.utils import new_agent_text_message, new_task


def emit(kind: str, payload: Any) -> None:
    """Print one ``KIND payload`` line and flush it."""
    text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True)
    sys.stdout.write(f"{kind} {text}\n")
    sys.stdout.flush()


def describe(part: Part) -> str:
    """A short text for one message part (text as is; files and data summarised)."""
    root = part.root
    if isinstance(root, TextPart):
        return root.text
    if isinstance(root, FilePart):
        file = root.file
        size = len(file.bytes) if isinstance(file, FileWithBytes) else 0
        return f"[file {file.mime_type or 'application/octet-stream'} b64len={size}]"
    if isinstance(root, DataPart):
        return f"[data {json.dumps(root.data, sort_keys=True)}]"
    return "[unknown part]"


class LoggedQueueManager(InMemoryQueueManager):
    """Prints ``TAP`` once a resubscribe or cancel has tapped a running task's queue."""

    async def tap(self, task_id: str) -> EventQueue | None:
        queue = await super().tap(task_id)
        emit("TAP", {"task_id": task_id, "found": queue is not None})
        return queue


class EchoExecutor(AgentExecutor):
    """Streams task, working, one artifact chunk per word, completed."""

    def __init__(
        self, gate: asyncio.Semaphore | None, echo_parts: bool = False, sdk_final: bool = False
    ) -> None:
        self.gate = gate
        self.echo_parts = echo_parts
        self.sdk_final = sdk_final
        self.running: dict[str, EventQueue] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        resumed = task is not None and task.status.state == TaskState.input_required
        if task is None:
            task = new_task(message)
            await event_queue.enqueue_event(task)
        text = " ".join(describe(part) for part in message.parts)
        emit(
            "EXECUTE",
            {
                "task_id": task.id,
                "context_id": task.context_id,
                "text": text,
                "message": message.model_dump(mode="json", exclude_none=True),
                "metadata": context.metadata,
            },
        )
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if "need input" in text and not resumed:
            question = new_agent_text_message("What else?", task.context_id, task.id)
            if self.sdk_final:
                await updater.requires_input(question)  # final=False, the SDK's default
            else:
                await updater.requires_input(question, final=True)
            return
        self.running[task.id] = event_queue
        try:
            await updater.start_work(new_agent_text_message("working", task.context_id, task.id))
            words = f"echo: {text}".split()
            for index, word in enumerate(words):
                await updater.add_artifact(
                    [Part(root=TextPart(text=word if index == 0 else f" {word}"))],
                    artifact_id="echo",
                    name="echo",
                    append=index > 0,
                    last_chunk=index == len(words) - 1,
                )
            others = [part for part in message.parts if not isinstance(part.root, TextPart)]
            if self.echo_parts and others:
                await updater.add_artifact(others, artifact_id="parts", name="parts")
            if self.gate is not None:
                await self.gate.acquire()
            await updater.complete(new_agent_text_message("done", task.context_id, task.id))
        finally:
            self.running.pop(task.id, None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        emit("CANCEL", {"task_id": task_id, "context_id": context_id})
        # Publish on the running execution's queue, so its open stream ends with the
        # canceled event too (the handler's tap of that queue sees it as well).
        queue = self.running.get(task_id, event_queue)
        await TaskUpdater(queue, task_id, context_id).cancel()


def agent_card(base_url: str, name: str, rest: bool = False, streaming: bool = True) -> AgentCard:
    """The echo agent's 0.3 card (``rest``: its one transport is HTTP+JSON)."""
    return AgentCard(
        name=name,
        description="Echoes text back word by word; served by the official a2a-sdk 0.3.26.",
        url=base_url if rest else f"{base_url}/",
        preferred_transport="HTTP+JSON" if rest else "JSONRPC",
        protocol_version="0.3.0",
        version="0.3.26",
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo03",
                name="Echo words (0.3)",
                description="Repeats the words it is sent, one streamed chunk per word.",
                tags=["echo", "sdk03"],
                examples=["echo hello world"],
                input_modes=["text/plain", "application/json", "image/png"],
                output_modes=["text/plain"],
            )
        ],
    )


def logged(app: Any) -> Any:
    """Wrap an ASGI app so every HTTP request is printed as a ``REQUEST`` line."""

    async def wrapper(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for key, value in scope["headers"]:
            name = key.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[name] = f"{headers[name]}, {text}" if name in headers else text
        info: dict[str, Any] = {"method": scope["method"], "path": scope["path"]}
        info["headers"] = headers
        if scope["method"] != "POST":
            emit("REQUEST", info)
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def receive_logged() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    body = b"".join(chunks)
                    try:
                        info["body"] = json.loads(body)
                    except ValueError:
                        info["body"] = body.decode("utf-8", "replace")
                    emit("REQUEST", info)
            return message

        await app(scope, receive_logged, send)

    return wrapper


async def watch_stdin(gate: asyncio.Semaphore, server: uvicorn.Server) -> None:
    """Release the gate once per stdin line; stop the server at end of input."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        gate.release()
    server.should_exit = True


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--gated", action="store_true")
    parser.add_argument("--name", default="Echo agent (a2a-sdk 0.3)")
    parser.add_argument("--echo-parts", action="store_true")
    parser.add_argument("--sdk-final", action="store_true")
    parser.add_argument("--rest", action="store_true")
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)  # connections queue until uvicorn accepts them
    base_url = f"http://{args.host}:{sock.getsockname()[1]}"

    gate = asyncio.Semaphore(0)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(gate if args.gated else None, args.echo_parts, args.sdk_final),
        task_store=InMemoryTaskStore(),
        queue_manager=LoggedQueueManager(),
    )
    card = agent_card(base_url, args.name, args.rest, streaming=not args.no_streaming)
    if args.rest:
        from a2a.server.apps import A2ARESTFastAPIApplication

        app: Any = A2ARESTFastAPIApplication(agent_card=card, http_handler=handler)
    else:
        app = A2AStarletteApplication(agent_card=card, http_handler=handler)
    config = uvicorn.Config(
        logged(app.build()), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    watcher = asyncio.create_task(watch_stdin(gate, server))
    emit("LISTENING", base_url)
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


if __name__ == "__main__":
    asyncio.run(main())
