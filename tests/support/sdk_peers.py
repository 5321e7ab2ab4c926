"""Real a2a-sdk 1.x agents for tests, served by uvicorn inside the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from a2a.helpers.proto_helpers import (
    get_message_text,
    new_task_from_user_message,
    new_text_message,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Role,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.signing import create_agent_card_signer
from google.protobuf.json_format import MessageToDict
from jwcrypto.jwk import JWK
from jwt import PyJWK
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


class EchoExecutor(AgentExecutor):
    """Answers every message with its own text, prefixed by ``echo:``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = get_message_text(context.message) if context.message else ""
        await event_queue.enqueue_event(new_text_message(f"echo: {text}", role=Role.ROLE_AGENT))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class TaskEchoExecutor(AgentExecutor):
    """A task-based echo agent, like ``tests/peers03/agent03.py`` but on the 1.x SDK.

    A message becomes a task: the task (submitted), working, one artifact chunk per word of
    ``echo: <text>`` (artifact ``echo``), completed. Non-text parts are described in the text
    (``[raw image/png 3 bytes p.png]``, ``[data {...}]``, ``[url ...]``) and sent back as they
    came in a second artifact ``parts``. A text with ``need input`` first stops in
    INPUT_REQUIRED; the next message on the task completes it. With ``gated``, each task waits
    for :meth:`release` before completing. ``messages`` keeps every message received (as
    JSON), ``extensions`` the extension URIs each asked for (the ``A2A-Extensions`` header) and
    ``cancels`` every task id a cancel was asked for.
    """

    def __init__(self, gated: bool = False) -> None:
        self.gate = asyncio.Semaphore(0) if gated else None
        self.messages: list[dict[str, Any]] = []
        self.extensions: list[set[str]] = []  # the extensions each execution was asked for
        self.cancels: list[str] = []
        self._running: dict[str, EventQueue] = {}

    def release(self, count: int = 1) -> None:
        """Let ``count`` waiting tasks complete."""
        assert self.gate is not None
        for _ in range(count):
            self.gate.release()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        self.messages.append(MessageToDict(message))
        self.extensions.append(set(context.requested_extensions))
        task = context.current_task
        resumed = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = " ".join(_describe(part) for part in message.parts)
        if "need input" in text and not resumed:
            await updater.requires_input(updater.new_agent_message([Part(text="What else?")]))
            return
        self._running[task.id] = event_queue
        try:
            await updater.start_work(updater.new_agent_message([Part(text="working")]))
            words = f"echo: {text}".split()
            for index, word in enumerate(words):
                await updater.add_artifact(
                    [Part(text=word if index == 0 else f" {word}")],
                    artifact_id="echo",
                    name="echo",
                    append=index > 0,
                    last_chunk=index == len(words) - 1,
                )
            others = [part for part in message.parts if not part.HasField("text")]
            if others:
                await updater.add_artifact(others, artifact_id="parts", name="parts")
            if self.gate is not None:
                await self.gate.acquire()
            await updater.complete(updater.new_agent_message([Part(text="done")]))
        finally:
            self._running.pop(task.id, None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        self.cancels.append(task_id)
        queue = self._running.get(task_id, event_queue)  # ends the open stream too
        await TaskUpdater(queue, task_id, context_id).cancel()


class PushStore(InMemoryPushNotificationConfigStore):
    """The SDK's push config store, keeping every config an agent was given (``given``)."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[dict[str, Any]] = []

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        self.given.append(MessageToDict(notification_config))
        return await super().set_info(task_id, notification_config, context)


def _describe(part: Part) -> str:
    if part.HasField("text"):
        return part.text
    if part.HasField("raw"):
        return f"[raw {part.media_type} {len(part.raw)} bytes {part.filename}]"
    if part.HasField("url"):
        return f"[url {part.url} {part.media_type}]"
    data = MessageToDict(part.data)
    return f"[data {json.dumps(data, sort_keys=True)}]"


def echo_card(base_url: str, **overrides: Any) -> AgentCard:
    """The card of the SDK echo agent at ``base_url``."""
    fields: dict[str, Any] = {
        "name": "SDK Echo Agent",
        "description": "Echoes text back; served by the official a2a-sdk.",
        "version": "1.3.0",
        "supported_interfaces": [
            AgentInterface(
                url=f"{base_url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        "capabilities": AgentCapabilities(streaming=True),
        "default_input_modes": ["text/plain"],
        "default_output_modes": ["text/plain"],
        "skills": [
            AgentSkill(
                id="sdk-echo",
                name="Echo text",
                description="Repeats the words it is sent.",
                tags=["echo", "sdk"],
                examples=["say hello back"],
                input_modes=["text/plain", "application/json"],
            )
        ],
    }
    fields.update(overrides)
    return AgentCard(**fields)


def sdk_app(
    card: AgentCard,
    signing_key: JWK | None = None,
    jku: str | None = None,
    *,
    compat: bool = False,
    executor: AgentExecutor | None = None,
    rpc_path: str = "/a2a",
    push: tuple[PushStore, httpx.AsyncClient] | None = None,
    rest_only: bool = False,
) -> Starlette:
    """A Starlette app serving ``card`` and JSON-RPC at ``rpc_path`` like a real SDK agent
    (``rest_only``: the SDK's HTTP+JSON routes under ``rpc_path`` instead, no JSON-RPC; with
    ``compat`` the 0.3 ones under ``rpc_path/v1`` too).

    With ``signing_key`` the card is signed by the SDK's own signer (through the SDK's
    ``card_modifier`` hook) and the public key is served at ``/.well-known/jwks.json``.
    ``executor`` defaults to :class:`EchoExecutor` (one message per message). With ``push``
    (a config store and the HTTP client to post with) it sends push notifications.
    """
    push_fields: dict[str, Any] = {}
    if push is not None:
        store, client = push
        push_fields = {
            "push_config_store": store,
            "push_sender": BasePushNotificationSender(client, store),
        }
    handler = DefaultRequestHandler(
        agent_executor=executor or EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        **push_fields,
    )
    modifier = None
    routes: list[Any] = []
    if signing_key is not None:
        signer = create_agent_card_signer(
            signing_key=PyJWK(json.loads(signing_key.export_private())),
            protected_header={
                "alg": signing_key["alg"],
                "kid": signing_key["kid"],
                "jku": jku,
                "typ": "JOSE",
            },
        )

        async def modifier(served: AgentCard) -> AgentCard:
            signed = AgentCard()
            signed.CopyFrom(served)
            return signer(signed)

        jwks = {"keys": [json.loads(signing_key.export_public())]}

        async def serve_jwks(_request: Any) -> JSONResponse:
            return JSONResponse(jwks)

        routes.append(Route("/.well-known/jwks.json", serve_jwks))
    routes += create_agent_card_routes(agent_card=card, card_modifier=modifier)
    if rest_only:
        prefix = rpc_path.rstrip("/")
        routes += create_rest_routes(handler, enable_v0_3_compat=compat, path_prefix=prefix)
    else:
        routes += create_jsonrpc_routes(
            request_handler=handler, rpc_url=rpc_path, enable_v0_3_compat=compat
        )
    return Starlette(routes=routes)


@contextlib.asynccontextmanager
async def serve_sdk_agent(
    signing_key: JWK | None = None,
    *,
    compat: bool = False,
    executor: AgentExecutor | None = None,
    rpc_path: str = "/a2a",
    push: PushStore | None = None,
    rest_only: bool = False,
    versions: tuple[str, ...] | None = None,
    **card_overrides: Any,
) -> AsyncIterator[str]:
    """Run an SDK echo agent on a random 127.0.0.1 port; yield its base URL.

    With ``signing_key`` its card is signed by the SDK, with ``jku`` = its own JWKS URL; with
    ``compat`` it also serves A2A 0.3 on the same URL (and says so in its card); ``executor``
    replaces the message echo (e.g. :class:`TaskEchoExecutor`); ``rpc_path`` is where it
    serves JSON-RPC (``/``: at its base URL, as clients posting to ``<url>/`` need); with
    ``push`` (its config store) it declares and sends push notifications. With
    ``rest_only`` it serves the HTTP+JSON binding there instead (1.0 paths, and with
    ``compat`` the 0.3 ``/v1`` ones) and its card offers only ``HTTP+JSON`` interfaces.
    ``versions`` are the protocol versions its card lists (default: 1.0, and 0.3 with
    ``compat``).
    """
    sock = listening_socket()
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    jku = f"{base_url}/.well-known/jwks.json"
    endpoint = base_url + rpc_path
    if versions is None:
        versions = ("1.0", "0.3") if compat else ("1.0",)  # compat: 0.3 on the same URL too
    binding = "HTTP+JSON" if rest_only else "JSONRPC"
    card_overrides.setdefault(
        "supported_interfaces",
        [
            AgentInterface(url=endpoint, protocol_binding=binding, protocol_version=version)
            for version in versions
        ],
    )
    if push is not None:
        card_overrides.setdefault(
            "capabilities", AgentCapabilities(streaming=True, push_notifications=True)
        )
    card = echo_card(base_url, **card_overrides)
    sender = httpx.AsyncClient(timeout=5.0) if push is not None else None
    app = sdk_app(
        card, signing_key, jku, compat=compat, executor=executor, rpc_path=rpc_path,
        push=(push, sender) if push is not None and sender is not None else None,
        rest_only=rest_only,
    )  # fmt: skip
    try:
        async with serve_asgi(app, sock):
            yield base_url
    finally:
        if sender is not None:
            await sender.aclose()


def listening_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1 and listening: connections queue until
    the server accepts, so nobody waits for its startup."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextlib.asynccontextmanager
async def serve_asgi(app: Any, sock: socket.socket) -> AsyncIterator[None]:
    """Serve the ASGI ``app`` with uvicorn on ``sock`` for the block; then stop and close it."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield
    finally:
        server.should_exit = True
        await task
        sock.close()
