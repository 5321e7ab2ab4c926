"""The official a2a-sdk 0.3.26 client as a command, run by the python of the 0.3 test venv.

Usage::

    client03.py CARD_BASE_URL OP [--text T] [--task-id ID] [--context-id ID]
        [--file-bytes B64 --mime M] [--file-uri URI --mime M] [--file-name N] [--data JSON]
        [--metadata JSON] [--request-metadata JSON] [--accepted-output-modes a,b]
        [--extensions a,b] [--header 'Name: value']... [--history-length N]
        [--card-path PATH] [--stream] [--timeout S] [--credential SCHEME=VALUE]...
        [--transport JSONRPC|HTTP+JSON] [--push-url URL] [--push-token T] [--config-id ID]

OP is ``send``, ``stream``, ``get``, ``cancel``, ``resubscribe``, ``push-set``,
``push-get``, ``card`` or ``extended-card`` (the client's ``get_card``: the extended card
when the card offers one). ``push-set`` sets the push config ``--push-url``/``--push-token``
(id ``--config-id``) on ``--task-id`` (``set_task_callback``), ``push-get`` reads one back
(``get_task_callback``); on ``send``/``stream``, ``--push-url`` is the client's push config,
sent with the message. The card is resolved with ``A2ACardResolver`` from CARD_BASE_URL; the
client built by ``ClientFactory`` then posts to the URL inside the card, as real clients do.
``send --stream`` is ``stream``. ``--transport`` picks the card's interface of that binding
(the 0.3 SDK's REST transport applies no interceptors: authenticate it with ``--header``).
``--metadata`` goes on the message, ``--request-metadata`` on the request params.

Each response or stream event is printed as one JSON line (the raw event: a task, message,
status-update or artifact-update; the card for ``card``), flushed at once; exit 0. A failure
prints one line ``{"error": {"type": ..., ...}}`` (JSON-RPC errors keep code/message/data,
HTTP errors carry ``status``) and exits 1.

``client03.py --serve`` runs many such clients, at once, in one long-lived process (starting
the 0.3 SDK once instead of once per call): each stdin line ``{"id": N, "argv": [...]}``
runs the command line ``argv`` as above, ``{"id": N, "cancel": true}`` cancels that run
(its connections closed, as if its process had been killed). Every line a run prints comes
as ``{"id": N, "line": ...}``, and its end as ``{"id": N, "end": CODE}`` (its exit status;
-1 once cancelled), written after its connections are closed. End of input ends the process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.client.middleware import ClientCallContext
from a2a.types import (
    DataPart,
    FilePart,
    FileWithBytes,
    FileWithUri,
    GetTaskPushNotificationConfigParams,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TextPart,
)

OPS = (
    "send", "stream", "get", "cancel", "resubscribe", "push-set", "push-get", "card",
    "extended-card",
)  # fmt: skip


RUN: contextvars.ContextVar[int | None] = contextvars.ContextVar("run", default=None)
"""The id of the ``--serve`` run printing (None: a one-shot client)."""


def out(obj: Any) -> None:
    """Print one JSON line (pydantic models dumped without None fields) and flush; in a
    ``--serve`` run, tagged with the run's id."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json", exclude_none=True)
    run_id = RUN.get()
    if run_id is not None:
        obj = {"id": run_id, "line": obj}
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def raw_event(event: Any) -> Any:
    """The event as received: the client yields a Message or (aggregated task, update)."""
    if isinstance(event, tuple):
        task, update = event
        return update if update is not None else task
    return event


def build_message(args: argparse.Namespace) -> Message:
    """The user message described by the command line."""
    parts: list[Part] = []
    if args.text is not None:
        parts.append(Part(root=TextPart(text=args.text)))
    if args.file_bytes is not None:
        file = FileWithBytes(bytes=args.file_bytes, mime_type=args.mime, name=args.file_name)
        parts.append(Part(root=FilePart(file=file)))
    if args.file_uri is not None:
        uri = FileWithUri(uri=args.file_uri, mime_type=args.mime, name=args.file_name)
        parts.append(Part(root=FilePart(file=uri)))
    if args.data is not None:
        parts.append(Part(root=DataPart(data=json.loads(args.data))))
    return Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        parts=parts,
        task_id=args.task_id,
        context_id=args.context_id,
        metadata=json.loads(args.metadata) if args.metadata else None,
    )


class Credentials(CredentialService):
    """The credential of each security scheme the card names (``--credential``), which the
    SDK's AuthInterceptor sends as the scheme says."""

    def __init__(self, by_scheme: dict[str, str]) -> None:
        self.by_scheme = by_scheme

    async def get_credentials(
        self, security_scheme_name: str, context: ClientCallContext | None
    ) -> str | None:
        return self.by_scheme.get(security_scheme_name)


def push_config(args: argparse.Namespace) -> PushNotificationConfig:
    """The push config of ``--push-url``, ``--push-token`` and ``--config-id``."""
    return PushNotificationConfig(url=args.push_url, token=args.push_token, id=args.config_id)


def csv(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


async def run(args: argparse.Namespace) -> None:
    headers = dict(h.split(":", 1) for h in args.header)
    headers = {name.strip(): value.strip() for name, value in headers.items()}
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(args.timeout), headers=headers, trust_env=False
    ) as http:
        resolver = A2ACardResolver(http, args.base_url)
        card = await resolver.get_agent_card(relative_card_path=args.card_path)
        if args.op == "card":
            out(card)
            return
        config = ClientConfig(
            httpx_client=http,
            streaming=args.op in ("stream", "resubscribe") or args.stream,
            accepted_output_modes=csv(args.accepted_output_modes),
            extensions=csv(args.extensions),
            supported_transports=[args.transport] if args.transport else ["JSONRPC"],
            push_notification_configs=[push_config(args)] if args.push_url else [],
        )
        credentials = dict(c.split("=", 1) for c in args.credential)
        interceptors = [AuthInterceptor(Credentials(credentials))] if credentials else None
        client = ClientFactory(config).create(card, interceptors=interceptors)
        events: AsyncIterator[Any]
        if args.op in ("send", "stream"):
            request_metadata = json.loads(args.request_metadata) if args.request_metadata else None
            events = client.send_message(build_message(args), request_metadata=request_metadata)
        elif args.op == "resubscribe":
            events = client.resubscribe(TaskIdParams(id=args.task_id))
        elif args.op == "extended-card":  # Client.get_card: the extended card when offered
            out(await client.get_card())
            return
        elif args.op == "push-set":
            config = TaskPushNotificationConfig(
                task_id=args.task_id, push_notification_config=push_config(args)
            )
            out(await client.set_task_callback(config))
            return
        elif args.op == "push-get":
            params = GetTaskPushNotificationConfigParams(
                id=args.task_id, push_notification_config_id=args.config_id
            )
            out(await client.get_task_callback(params))
            return
        elif args.op == "get":
            out(
                await client.get_task(
                    TaskQueryParams(id=args.task_id, history_length=args.history_length)
                )
            )
            return
        else:
            out(await client.cancel_task(TaskIdParams(id=args.task_id)))
            return
        async for event in events:
            out(raw_event(event))


def error_of(exc: BaseException) -> dict[str, Any]:
    """The ``error`` object printed for a failure."""
    error: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, A2AClientJSONRPCError):
        error |= exc.error.model_dump(mode="json", exclude_none=True)
    elif isinstance(exc, A2AClientHTTPError):
        error |= {"status": exc.status_code, "message": exc.message}
    else:
        error["message"] = str(exc)
    return error


def make_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = argparse.ArgumentParser(description="The official a2a-sdk 0.3 client.")
    parser.add_argument("base_url")
    parser.add_argument("op", choices=OPS)
    parser.add_argument("--text")
    parser.add_argument("--task-id")
    parser.add_argument("--context-id")
    parser.add_argument("--file-bytes")
    parser.add_argument("--file-uri")
    parser.add_argument("--mime")
    parser.add_argument("--file-name")
    parser.add_argument("--data")
    parser.add_argument("--metadata")
    parser.add_argument("--request-metadata")
    parser.add_argument("--accepted-output-modes")
    parser.add_argument("--extensions")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--credential", action="append", default=[])
    parser.add_argument("--history-length", type=int)
    parser.add_argument("--card-path")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--transport", help="the binding to use from the card (JSONRPC)")
    parser.add_argument("--push-url")
    parser.add_argument("--push-token")
    parser.add_argument("--config-id")
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line ``argv`` (None: this process's), checked."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.op in ("get", "cancel", "resubscribe", "push-set", "push-get") and not args.task_id:
        parser.error(f"{args.op} needs --task-id")
    return args


async def one_run(run_id: int, argv: list[str]) -> None:
    """One ``--serve`` run: the client of ``argv``, its lines tagged, then its end."""
    RUN.set(run_id)
    code = 0
    try:
        await run(parse(argv))
    except asyncio.CancelledError:
        code = -1
    except SystemExit as exc:  # a bad command line: argparse printed why on stderr
        out({"error": {"type": "UsageError", "message": f"bad arguments (exit {exc.code})"}})
        code = 2
    except Exception as exc:
        out({"error": error_of(exc)})
        code = 1
    RUN.set(None)
    out({"id": run_id, "end": code})


async def serve() -> None:
    """``--serve``: run the clients stdin asks for until its end (module docstring)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    runs: dict[int, asyncio.Task[None]] = {}
    while line := await reader.readline():
        request = json.loads(line)
        run_id = request["id"]
        if request.get("cancel"):
            if run_id in runs:
                runs[run_id].cancel()
            continue
        task = asyncio.create_task(one_run(run_id, request["argv"]))
        runs[run_id] = task
        task.add_done_callback(lambda _, run_id=run_id: runs.pop(run_id, None))
    for task in list(runs.values()):
        task.cancel()
    await asyncio.gather(*runs.values(), return_exceptions=True)


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        asyncio.run(serve())
        return 0
    args = parse(None)
    try:
        asyncio.run(run(args))
    except Exception as exc:
        out({"error": error_of(exc)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
