"""The demo agents on real sockets, driven by the official a2a-sdk 1.3 client and by raw JSON-RPC.

The 1.3 client speaks 1.0 to ``currency`` and ``caption`` and, through its 0.3 compat
transport, 0.3 to ``translate``. ``currency`` and ``caption`` also serve 0.3 on the same URL,
as a 1.3 server does in 0.3-compat mode. Raw requests pin the wire shapes to the captures of
the official SDK servers in ``tests/fixtures/wire/`` (leaf key paths spelled out below, or
read from the ``v1compat_v03_*`` captures themselves).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import tomllib
from collections.abc import AsyncIterable, AsyncIterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as types_v03
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.signing import create_signature_verifier
from google.protobuf.json_format import ParseDict

from registry.cards import parse_card
from registry.signatures import StaticKeys, verify_card
from seeds.demo_agents import (
    DEMO_PORTS,
    DemoAgents,
    build_demo_agents,
    describe_image,
    start_demo_agents,
)
from seeds.demo_server import JWKS_PATH
from tests.support.images import gif, jpeg, png
from tests.support.sdk_clients import ask, connect, send

WIRE = Path(__file__).parents[1] / "fixtures" / "wire"
COMPAT_FIELDS = ("preferredTransport", "protocolVersion", "url")  # 1.3's 0.3-compat card fields

# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
async def raw() -> AsyncIterator[httpx.AsyncClient]:
    """For hand-made requests: no default A2A headers."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


async def collect(events: AsyncIterable[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in events]


def answer_text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text"))


def status_text(task: Task) -> str:
    return "".join(p.text for p in task.status.message.parts)


def image_part(data: bytes) -> Part:
    return Part(raw=data, media_type="image/png", filename="picture.png")


FIRST_TURN = {
    "currency": ("hello", "convert 100 USD to EUR", "100 USD = 92.00 EUR"),
    "translate": ("translate hello world", "translate hello world to spanish", "hola mundo"),
    "caption": ("describe my picture", None, "A 64x48 PNG image"),
}


def second_turn(name: str) -> SendMessageRequest:
    text = FIRST_TURN[name][1]
    return ask(text) if text else ask(parts=[image_part(png(64, 48))])


async def rpc(
    client: httpx.AsyncClient,
    url: str,
    method: str,
    params: Any,
    *,
    version: str | None = None,
    req_id: Any = 7,
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
    return await post(client, url, json.dumps(body), version=version)


async def post(
    client: httpx.AsyncClient, url: str, body: str, *, version: str | None = None
) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if version:
        headers["A2A-Version"] = version
    response = await client.post(f"{url}/", content=body, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


async def rpc_stream(
    client: httpx.AsyncClient, url: str, method: str, params: Any, *, version: str | None = None
) -> list[dict[str, Any]]:
    headers = {"A2A-Version": version} if version else {}
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    response = await client.post(f"{url}/", json=body, headers=headers)
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    frames = response.text.split("\r\n\r\n")
    assert frames[-1] == ""
    assert all(frame.startswith("data: ") for frame in frames[:-1])
    return [json.loads(frame.removeprefix("data: ")) for frame in frames[:-1]]


def leaves(obj: Any, prefix: str = "") -> set[str]:
    """Dotted paths of the scalar values in ``obj`` (``[]`` marks list items)."""
    if isinstance(obj, dict):
        return set().union(*(leaves(v, f"{prefix}.{k}" if prefix else k) for k, v in obj.items()))
    if isinstance(obj, list):
        return set().union(*(leaves(v, f"{prefix}[]") for v in obj))
    return {prefix}


def nest(prefix: str, paths: set[str]) -> set[str]:
    return {f"{prefix}.{path}" for path in paths}


# Leaf paths of the official servers' answers, from protocol/wire/v03_*.out and v1_*.out.
V03_MESSAGE = {"contextId", "kind", "messageId", "parts[].kind", "parts[].text", "role", "taskId"}
V03_ARTIFACT = {"artifactId", "name", "parts[].kind", "parts[].text"}
V03_TASK = {"contextId", "id", "kind", "status.state"} | nest("history[]", V03_MESSAGE)
V03_DONE = V03_TASK | {"status.timestamp"} | nest("artifacts[]", V03_ARTIFACT)
V03_WORKING = {"contextId", "final", "kind", "status.state", "status.timestamp", "taskId"}
V03_STREAM = [
    V03_TASK,
    V03_WORKING | nest("status.message", V03_MESSAGE),
    {"append", "contextId", "kind", "lastChunk", "taskId"} | nest("artifact", V03_ARTIFACT),
    V03_WORKING,
]
V1_MESSAGE = {"contextId", "messageId", "parts[].text", "role", "taskId"}
V1_ARTIFACT = {"artifactId", "name", "parts[].text"}
V1_TASK = {"contextId", "id", "status.state"} | nest("history[]", V1_MESSAGE)
V1_DONE = V1_TASK | {"status.timestamp"} | nest("artifacts[]", V1_ARTIFACT)
V1_STATUS = {"contextId", "status.state", "status.timestamp", "taskId"}
V1_CHUNK = {"contextId", "taskId"} | nest("artifact", V1_ARTIFACT)
V1_STREAM = [
    nest("task", V1_TASK),
    nest("statusUpdate", V1_STATUS | nest("status.message", V1_MESSAGE)),
    nest("artifactUpdate", V1_CHUNK),
    nest("artifactUpdate", V1_CHUNK | {"append"}),
    nest("artifactUpdate", V1_CHUNK | {"append", "lastChunk"}),
    nest("statusUpdate", V1_STATUS),
]
# protocol/wire/v1_send_noversion.out
NO_VERSION_ERROR = {
    "code": -32009,
    "message": "A2A version '0.3' is not supported by this handler. Expected version '1.0'.",
    "data": [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "VERSION_NOT_SUPPORTED",
            "domain": "a2a-protocol.org",
            "metadata": {},
        }
    ],
}


# --- cards ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "skill", "versions", "input_mode"),
    [
        ("currency", "convert-currency", ["1.0", "0.3"], "application/json"),
        ("translate", "translate-text", ["0.3.0"], "text/plain"),
        ("caption", "caption-image", ["1.0", "0.3"], "image/*"),
    ],
)
async def test_sdk_resolver_reads_each_card(
    demo: DemoAgents,
    http: httpx.AsyncClient,
    name: str,
    skill: str,
    versions: list[str],
    input_mode: str,
) -> None:
    base_url = demo.urls[name]
    card = await A2ACardResolver(http, base_url).get_agent_card()

    assert card.provider.organization == "Switchboard demo"
    assert [s.id for s in card.skills] == [skill]
    assert input_mode in card.skills[0].input_modes
    assert card.capabilities.streaming
    interfaces = card.supported_interfaces
    assert {(i.url, i.protocol_binding) for i in interfaces} == {(f"{base_url}/", "JSONRPC")}
    assert [i.protocol_version for i in interfaces] == versions


async def test_cards_are_valid_for_their_version(demo: DemoAgents, raw: httpx.AsyncClient) -> None:
    fixture = json.loads((WIRE.parent / "cards" / "signed_card_v1.json").read_text())
    for name in ("currency", "caption"):
        url = f"{demo.urls[name]}/"
        body = (await raw.get(f"{demo.urls[name]}/.well-known/agent-card.json")).json()
        # as a 1.3 server in compat mode: the 1.0 card, then the three 0.3 fields
        assert list(body)[-3:] == list(fixture)[-3:] == list(COMPAT_FIELDS)
        assert [body[k] for k in COMPAT_FIELDS] == ["JSONRPC", "0.3", url]
        strict = {k: v for k, v in body.items() if k not in COMPAT_FIELDS}
        ParseDict(strict, AgentCard())  # strict: any other unknown field would raise
        assert types_v03.AgentCard.model_validate(body).url == url  # a 0.3 client reads it too
    body = (await raw.get(f"{demo.urls['translate']}/.well-known/agent-card.json")).json()
    card = types_v03.AgentCard.model_validate(body)
    assert card.url == f"{demo.urls['translate']}/"
    assert card.protocol_version == "0.3.0"
    assert "supportedInterfaces" not in body


async def test_registry_reads_both_interfaces_of_the_v1_cards(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    for name, versions in (("currency", ["1.0", "0.3"]), ("caption", ["1.0", "0.3"])):
        body = (await raw.get(f"{demo.urls[name]}/.well-known/agent-card.json")).json()
        card = parse_card(body)
        assert card.card_format == "1.0"
        assert [(i.url, i.binding) for i in card.interfaces] == [
            (f"{demo.urls[name]}/", "JSONRPC")
        ] * 2
        assert [i.protocol_version for i in card.interfaces] == versions
    body = (await raw.get(f"{demo.urls['translate']}/.well-known/agent-card.json")).json()
    card = parse_card(body)
    assert card.card_format == "0.3"
    assert [i.protocol_version for i in card.interfaces] == ["0.3.0"]


async def test_card_etag_cache_control_and_legacy_path(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    url = f"{demo.urls['currency']}/.well-known/agent-card.json"
    first = await raw.get(url)
    assert first.status_code == 200
    assert "max-age=" in first.headers["cache-control"]
    again = await raw.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.headers["etag"] == first.headers["etag"]
    assert again.content == b""

    legacy = await raw.get(f"{demo.urls['translate']}/.well-known/agent.json")
    assert legacy.status_code == 200
    assert legacy.json()["skills"][0]["id"] == "translate-text"
    assert (await raw.get(f"{demo.urls['currency']}/.well-known/agent.json")).status_code == 404


async def test_cards_are_signed_by_the_key_each_agent_publishes(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    """Each card verifies with its agent's JWKS over the whole card (an a2a-sdk 1.x verifier
    accepts the 1.0 ones too); a card changed after signing does not verify."""
    kids = {}
    for name, base_url in demo.urls.items():
        card = (await raw.get(f"{base_url}/.well-known/agent-card.json")).json()
        jwks = (await raw.get(f"{base_url}{JWKS_PATH}")).json()
        assert [set(k) for k in jwks["keys"]] == [{"kty", "crv", "x", "y", "kid", "alg", "use"}]
        kid = kids[name] = jwks["keys"][0]["kid"]
        assert kid.startswith(f"{name}-")
        verification = await verify_card(card, StaticKeys(jwks))
        assert verification.to_api() == {
            "status": "verified",
            "kid": kid,
            "reason": None,
            "key_source": "jwks",
            "payload_form": "rfc8785",
            "uncovered_fields": [],
        }
        header = json.loads(base64.urlsafe_b64decode(card["signatures"][0]["protected"] + "=="))
        jku = f"{base_url}{JWKS_PATH}"
        assert header == {"alg": "ES256", "kid": kid, "typ": "JOSE", "jku": jku}
        tampered = {**card, "description": card["description"] + " (now free of charge)"}
        assert (await verify_card(tampered, StaticKeys(jwks))).status == "invalid"
        if name != "translate":
            strict = {k: v for k, v in card.items() if k not in COMPAT_FIELDS}
            sdk_verifier = create_signature_verifier(
                key_provider=lambda _kid, _jku: jwt.PyJWK(jwks["keys"][0]),  # noqa: B023
                algorithms=["ES256"],
            )
            sdk_verifier(ParseDict(strict, AgentCard()))
    assert len(kids) == 3
    assert build_demo_agents()["currency"].key["kid"] != kids["currency"]  # fresh at each start


def test_seed_file_lists_the_demo_agents_on_their_default_ports() -> None:
    seed = tomllib.loads(files("seeds").joinpath("demo.toml").read_text())
    listed = {entry["id"]: entry["url"] for entry in seed["agents"]}
    assert listed == {name: f"http://127.0.0.1:{port}" for name, port in DEMO_PORTS.items()}
    keys = [entry["jwks_url"] for entry in seed["keys"]]  # each agent's signing key, trusted
    assert keys == [f"http://127.0.0.1:{port}{JWKS_PATH}" for port in DEMO_PORTS.values()]


# --- answers through the SDK client ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "request_", "expected"),
    [
        ("currency", ask("convert 100 USD to EUR"), "100 USD = 92.00 EUR"),
        ("currency", ask("how much is 250 GBP in JPY?"), "250 GBP = 47468.35 JPY"),
        ("translate", ask("translate hello world to french"), "bonjour monde"),
        ("translate", ask("translate good morning my friend into German"), "guten Morgen mein"),
        ("caption", ask(parts=[image_part(png(64, 48))]), "A 64x48 PNG image ("),
    ],
)
async def test_send_gets_the_answer(
    demo: DemoAgents,
    http: httpx.AsyncClient,
    name: str,
    request_: SendMessageRequest,
    expected: str,
) -> None:
    client = await connect(http, demo.urls[name])
    task = await send(client, request_)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task).startswith(expected)
    assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]


async def test_caption_counts_the_bytes(demo: DemoAgents, http: httpx.AsyncClient) -> None:
    image = png(64, 48)
    client = await connect(http, demo.urls["caption"])
    task = await send(client, ask(parts=[image_part(image)]))
    assert answer_text(task) == f"A 64x48 PNG image ({len(image)} bytes)"


async def test_currency_reads_data_parts_and_answers_with_data(
    demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    client = await connect(http, demo.urls["currency"])
    data_part = ParseDict({"data": {"amount": 50, "from": "eur", "to": "usd"}}, Part())
    task = await send(client, ask(parts=[data_part]))

    assert answer_text(task).startswith("50 EUR = 54.35 USD")
    data = [p.data for p in task.artifacts[0].parts if p.HasField("data")]
    assert data[0].struct_value["result"] == pytest.approx(54.35)


def test_describe_image_reads_png_gif_and_jpeg_headers() -> None:
    assert describe_image(png(3, 2)) == ("PNG", 3, 2)
    assert describe_image(gif(640, 480)) == ("GIF", 640, 480)
    assert describe_image(jpeg(1024, 768)) == ("JPEG", 1024, 768)
    assert describe_image(b"not an image") is None
    assert describe_image(b"\xff\xd8\xff") is None


@pytest.mark.parametrize("name", ["currency", "translate"])
async def test_stream_yields_events_in_order(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    client = await connect(http, demo.urls[name], streaming=True)
    events = await collect(client.send_message(second_turn(name)))

    kinds = [e.WhichOneof("payload") for e in events]
    chunks = len(kinds) - 3
    assert kinds == ["task", "status_update", *["artifact_update"] * chunks, "status_update"]
    assert chunks >= 2
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    updates = [e.artifact_update for e in events[2:-1]]
    assert [u.append for u in updates] == [False] + [True] * (chunks - 1)
    assert [u.last_chunk for u in updates] == [False] * (chunks - 1) + [True]
    assert len({u.artifact.artifact_id for u in updates}) == 1
    task_ids = {getattr(e, kind).task_id for e, kind in zip(events[1:], kinds[1:], strict=True)}
    assert task_ids == {events[0].task.id}
    text = "".join(p.text for u in updates for p in u.artifact.parts)
    assert text.startswith(FIRST_TURN[name][2])


# --- multi-turn, get, cancel, subscribe, list --------------------------------------------------


@pytest.mark.parametrize("name", ["currency", "translate", "caption"])
async def test_input_required_then_continue_the_same_task(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    client = await connect(http, demo.urls[name])
    first = await send(client, ask(FIRST_TURN[name][0]))
    assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert first.status.message.role == Role.ROLE_AGENT
    assert "?" in status_text(first) or "please" in status_text(first).lower()

    follow_up = second_turn(name)
    follow_up.message.task_id, follow_up.message.context_id = first.id, first.context_id
    done = await send(client, follow_up)

    assert (done.id, done.context_id) == (first.id, first.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(done).startswith(FIRST_TURN[name][2])
    roles = [m.role for m in done.history]
    assert roles.count(Role.ROLE_USER) == 2
    assert status_text(first) in [m.parts[0].text for m in done.history]


@pytest.mark.parametrize("name", ["currency", "translate"])
async def test_get_task_with_history_length(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    client = await connect(http, demo.urls[name])
    task = await send(client, second_turn(name))

    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(fetched) == answer_text(task)
    assert len(fetched.history) == 2
    last = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
    assert [m.role for m in last.history] == [Role.ROLE_AGENT]


@pytest.mark.parametrize(
    ("name", "terminal_send_error"),
    [("currency", UnsupportedOperationError), ("translate", InvalidParamsError)],
)
async def test_cancel_then_cancel_again(
    demo: DemoAgents, http: httpx.AsyncClient, name: str, terminal_send_error: type
) -> None:
    client = await connect(http, demo.urls[name])
    waiting = await send(client, ask(FIRST_TURN[name][0]))

    canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    fetched = await client.get_task(GetTaskRequest(id=waiting.id))
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=waiting.id))
    with pytest.raises(terminal_send_error, match="terminal state"):
        await send(
            client, ask("convert 1 USD to EUR", task_id=waiting.id, context_id=waiting.context_id)
        )


@pytest.mark.parametrize("name", ["currency", "translate", "caption"])
async def test_unknown_task_is_not_found(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    client = await connect(http, demo.urls[name])
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="no-such-task"))
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(CancelTaskRequest(id="no-such-task"))
    with pytest.raises(TaskNotFoundError):
        await send(client, ask("hello", task_id="no-such-task"))


@pytest.mark.parametrize("name", ["currency", "translate"])
async def test_non_blocking_send_then_subscribe(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    client = await connect(http, demo.urls[name], streaming=True)
    polling = await connect(http, demo.urls[name], streaming=False)
    task = await send(polling, ask(FIRST_TURN[name][0], return_immediately=True))
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert [m.role for m in task.history] == [Role.ROLE_USER]

    events = await collect(client.subscribe(SubscribeToTaskRequest(id=task.id)))
    if name == "currency":  # 1.0 opens a subscription with a Task snapshot; 0.3 does not
        assert events[0].HasField("task")
    last = events[-1]
    final = last.task.status if last.HasField("task") else last.status_update.status
    assert final.state == TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.mark.parametrize("name", ["currency", "translate"])
async def test_subscribe_to_a_finished_task_is_refused(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    client = await connect(http, demo.urls[name], streaming=True)
    task = await collect(client.send_message(second_turn(name)))
    with pytest.raises(UnsupportedOperationError, match="terminal state"):
        await collect(client.subscribe(SubscribeToTaskRequest(id=task[0].task.id)))


async def test_list_tasks_pages_newest_first(demo: DemoAgents, http: httpx.AsyncClient) -> None:
    client = await connect(http, demo.urls["currency"])
    older = await send(client, ask("hello"))
    newer = await send(client, ask("convert 1 USD to EUR"))

    page = await client.list_tasks(ListTasksRequest(page_size=1))
    assert [t.id for t in page.tasks] == [newer.id]
    assert page.total_size == 2
    assert not page.tasks[0].artifacts
    rest = await client.list_tasks(ListTasksRequest(page_size=1, page_token=page.next_page_token))
    assert [t.id for t in rest.tasks] == [older.id]
    assert rest.next_page_token == ""
    waiting = await client.list_tasks(
        ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED, include_artifacts=True)
    )
    assert [t.id for t in waiting.tasks] == [older.id]


# --- raw JSON-RPC: versions, errors, wire shapes --------------------------------------------------


@pytest.mark.parametrize("name", ["currency", "caption"])
async def test_v1_agents_require_the_version_header(
    demo: DemoAgents, raw: httpx.AsyncClient, name: str
) -> None:
    url = demo.urls[name]
    params = {"id": "no-such-task"}
    answer = await rpc(raw, url, "GetTask", params, req_id=1)
    assert answer == {"error": NO_VERSION_ERROR, "id": 1, "jsonrpc": "2.0"}
    answer = await rpc(raw, url, "GetTask", params, version="0.3", req_id="a")
    assert (answer["error"]["code"], answer["id"]) == (-32009, "a")
    answer = await rpc(raw, url, "GetTask", params, version="1.0")
    assert answer["error"]["code"] == -32001
    assert answer["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"


@pytest.mark.parametrize(
    ("name", "version", "get_method"),
    [("currency", "1.0", "GetTask"), ("translate", None, "tasks/get")],
)
@pytest.mark.parametrize(
    ("body", "code", "echo_id"),
    [
        ('{"jsonrpc": "2.0", "id": 5, "method": ', -32700, False),
        ("[]", -32600, False),
        ('{"id": 5, "method": "GET_METHOD", "params": {}}', -32600, True),
        ('{"jsonrpc": "2.0", "id": 5, "method": "tasks/teleport", "params": {}}', -32601, True),
        ('{"jsonrpc": "2.0", "id": 5, "method": "GET_METHOD", "params": []}', -32602, True),
        ('{"jsonrpc": "2.0", "id": 5, "method": "GET_METHOD", "params": {"id": 3}}', -32602, True),
        (
            '{"jsonrpc": "2.0", "id": 5, "method": "GET_METHOD", "params": {"id": "x"}}',
            -32001,
            True,
        ),
    ],
)
async def test_json_rpc_errors(
    demo: DemoAgents,
    raw: httpx.AsyncClient,
    name: str,
    version: str | None,
    get_method: str,
    body: str,
    code: int,
    echo_id: bool,
) -> None:
    answer = await post(
        raw, demo.urls[name], body.replace("GET_METHOD", get_method), version=version
    )
    assert answer["jsonrpc"] == "2.0"
    assert answer["error"]["code"] == code
    assert answer["id"] == (5 if echo_id else None)
    assert "result" not in answer


async def test_the_method_name_picks_the_version_then_the_header_is_checked(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    """As a2a-sdk 1.3 in compat mode (checked against a real one): 0.3 methods go to its 0.3
    handler, whose version error is not a 0.3 code, so it answers -32603; 1.0 methods need
    ``A2A-Version: 1.x`` (-32009 otherwise); a 0.3-only agent knows no 1.0 method name."""
    params = {"id": "x"}
    url = demo.urls["currency"]
    for version in (None, "", "0.3", "0.2"):
        answer = await rpc(raw, url, "tasks/get", params, version=version, req_id=3)
        assert answer == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32001, "data": None, "message": "Task not found: x"},
        }
    for version in ("1.0", "2.0", "junk"):
        answer = await rpc(raw, url, "tasks/get", params, version=version, req_id=3)
        assert answer["error"] == {
            "code": -32603,
            "data": None,
            "message": f"A2A version '{version}' is not supported by this handler. "
            "Expected version '0.3'.",
        }
    for version in ("2.0", "junk"):
        answer = await rpc(raw, url, "GetTask", params, version=version)
        assert answer["error"]["code"] == -32009
    assert (await rpc(raw, url, "GetTask", params, version="1.1"))["error"]["code"] == -32001
    unknown = await rpc(raw, url, "tasks/list", {}, version="1.0")
    assert unknown["error"] == {"code": -32601, "message": "Method not found: tasks/list"}
    v1_on_v03 = await rpc(raw, demo.urls["translate"], "GetTask", params)
    assert v1_on_v03["error"]["code"] == -32601


async def test_v03_params_that_do_not_parse_are_an_invalid_request_in_compat_mode(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    """The 1.3 SDK validates a 0.3 request as a whole (-32600); a 0.3 server says -32602."""
    compat = await rpc(raw, demo.urls["currency"], "tasks/get", {"id": 3})
    assert compat["error"]["code"] == -32600
    assert compat["error"]["message"] == "Invalid Request"
    assert "params.id" in compat["error"]["data"]
    native = await rpc(raw, demo.urls["translate"], "tasks/get", {"id": 3})
    assert native["error"] == {"code": -32602, "message": "params.id must be a non-empty string"}


async def test_v03_wire_shapes_match_the_captures(demo: DemoAgents, raw: httpx.AsyncClient) -> None:
    url = demo.urls["translate"]
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "m-1",
        "parts": [{"kind": "text", "text": "translate hello world to german"}],
    }
    answer = await rpc(raw, url, "message/send", {"message": message}, req_id=1)
    types_v03.SendMessageSuccessResponse.model_validate(answer)
    assert leaves(answer) == {"id", "jsonrpc"} | nest("result", V03_DONE)
    assert answer["result"]["status"]["state"] == "completed"
    assert answer["result"]["history"][0]["messageId"] == "m-1"

    events = await rpc_stream(
        raw, url, "message/stream", {"message": message | {"messageId": "m-2"}}
    )
    for event in events:
        types_v03.SendStreamingMessageSuccessResponse.model_validate(event)
    shapes = [V03_STREAM[min(i, 2)] for i in range(len(events) - 1)] + [V03_STREAM[3]]
    assert [leaves(e["result"]) for e in events] == shapes
    finals = [e["result"].get("final") for e in events]
    assert finals == [None, False, *[None] * (len(events) - 3), True]
    assert "".join(e["result"]["artifact"]["parts"][0]["text"] for e in events[2:-1]) == (
        "hallo Welt"
    )


async def test_v1_wire_shapes_match_the_captures(demo: DemoAgents, raw: httpx.AsyncClient) -> None:
    url = demo.urls["currency"]
    params = {
        "message": {
            "role": "ROLE_USER",
            "messageId": "m-1",
            "parts": [{"text": "convert 1,000 USD to CHF"}],
        },
        "configuration": {"acceptedOutputModes": ["text/plain"]},  # so: no data part
    }
    answer = await rpc(raw, url, "SendMessage", params, version="1.0", req_id=1)
    ParseDict(answer["result"], SendMessageResponse())  # strict ProtoJSON
    assert leaves(answer) == {"id", "jsonrpc"} | nest("result.task", V1_DONE)
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    events = await rpc_stream(raw, url, "SendStreamingMessage", params, version="1.0")
    for event in events:
        ParseDict(event["result"], StreamResponse())
    assert [leaves(e["result"]) for e in events] == V1_STREAM
    text = "".join(
        e["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events[2:5]
    )
    assert text.startswith("1000 USD = 880.00 CHF")


# --- 0.3 on the 1.0 agents, as a 1.3 server in compat mode ------------------------------------

TIMESTAMP_1X = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def capture(name: str) -> list[dict[str, Any]]:
    """The JSON-RPC answers of a capture: one body, or each SSE ``data:`` frame."""
    text = (WIRE / name).read_text()
    frames = [
        line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")
    ]
    return [json.loads(frame) for frame in frames] if frames else [json.loads(text)]


def v03_message(text: str, message_id: str = "m-1", **ids: str) -> dict[str, Any]:
    parts = [{"kind": "text", "text": text}]
    return {"kind": "message", "role": "user", "messageId": message_id, "parts": parts, **ids}


async def test_v03_on_a_v1_agent_matches_the_compat_captures(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    """No ``A2A-Version`` header: 0.3, shaped like v1compat_v03_send.out / _stream.out."""
    url = demo.urls["currency"]
    config = {"acceptedOutputModes": ["text/plain"]}  # so: no data part, as in the capture
    params = {"message": v03_message("convert 1,000 USD to CHF"), "configuration": config}
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}
    response = await raw.post(f"{url}/", json=body)
    answer = response.json()
    (expected,) = capture("v1compat_v03_send.out")
    types_v03.SendMessageSuccessResponse.model_validate(answer)
    assert leaves(answer) == leaves(expected)
    assert response.text == json.dumps(answer, sort_keys=True, separators=(",", ":"))
    result = answer["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "completed")
    assert TIMESTAMP_1X.fullmatch(result["status"]["timestamp"])  # 1.x's, not 0.3's +00:00
    assert [m["role"] for m in result["history"]] == ["user", "agent"]
    text = "".join(p["text"] for p in result["artifacts"][0]["parts"])
    assert text.startswith("1000 USD = 880.00 CHF")

    params["message"] = v03_message("convert 1,000 USD to CHF", "m-2")
    events = await rpc_stream(raw, url, "message/stream", params)
    expected_events = capture("v1compat_v03_stream.out")
    for event in events:
        types_v03.SendStreamingMessageSuccessResponse.model_validate(event)
    assert [leaves(e) for e in events] == [leaves(e) for e in expected_events]
    for key in ("kind", "final", "append", "lastChunk"):
        assert [e["result"].get(key) for e in events] == [
            e["result"].get(key) for e in expected_events
        ]
    assert events[-1]["result"]["status"]["state"] == "completed"
    assert TIMESTAMP_1X.fullmatch(events[-1]["result"]["status"]["timestamp"])


async def test_v03_on_the_caption_agent(demo: DemoAgents, raw: httpx.AsyncClient) -> None:
    image = gif(5, 7)
    file = {"bytes": base64.b64encode(image).decode(), "mimeType": "image/gif", "name": "a.gif"}
    part = {"kind": "file", "file": file}
    message = {"kind": "message", "role": "user", "messageId": "m-1", "parts": [part]}
    answer = await rpc(raw, demo.urls["caption"], "message/send", {"message": message})
    types_v03.SendMessageSuccessResponse.model_validate(answer)
    result = answer["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "completed")
    assert result["history"][0]["parts"] == [part]
    parts = result["artifacts"][0]["parts"]
    assert {p["kind"] for p in parts} == {"text"}
    assert "".join(p["text"] for p in parts) == f"A 5x7 GIF image ({len(image)} bytes)"


async def test_v03_follows_1x_semantics_in_compat_mode(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    """The 1.3 SDK answers 0.3 by converting its 1.0 behaviour: ``final`` only on a terminal
    state (the stream still ends at input-required), 1.0's error on sending to a finished
    task, a resubscription opened by a Task snapshot."""
    url = demo.urls["currency"]
    events = await rpc_stream(raw, url, "message/stream", {"message": v03_message("hello")})
    last = events[-1]["result"]
    assert (last["kind"], last["status"]["state"], last["final"]) == (
        "status-update",
        "input-required",
        False,
    )
    task_id = events[0]["result"]["id"]
    snapshot = await rpc_stream(raw, url, "tasks/resubscribe", {"id": task_id})
    assert [e["result"]["kind"] for e in snapshot] == ["task"]
    assert snapshot[0]["result"]["status"]["state"] == "input-required"

    canceled = await rpc(raw, url, "tasks/cancel", {"id": task_id})
    assert canceled["result"]["status"]["state"] == "canceled"
    again = await rpc(raw, url, "tasks/cancel", {"id": task_id})
    assert again["error"]["code"] == -32002
    follow_up = v03_message("convert 1 USD to EUR", "m-2", taskId=task_id)
    refused = await rpc(raw, url, "message/send", {"message": follow_up})
    assert refused["error"] == {
        "code": -32004,
        "data": None,
        "message": f"Task {task_id} is in terminal state: TASK_STATE_CANCELED",
    }


@pytest.mark.parametrize("name", ["currency", "caption"])
async def test_the_sdk_client_chooses_1_0(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    seen: list[tuple[str | None, str]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            method = json.loads(request.content)["method"]
            seen.append((request.headers.get("A2A-Version"), method))

    http.event_hooks["request"].append(record)
    client = await connect(http, demo.urls[name])
    task = await send(client, second_turn(name))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen == [("1.0", "SendMessage")]


@pytest.mark.parametrize("name", ["currency", "caption"])
async def test_the_sdk_03_transport_works_on_the_compat_interface(
    demo: DemoAgents, http: httpx.AsyncClient, name: str
) -> None:
    """The 1.3 client given only the card's 0.3 interface: its 0.3 transport, end to end."""
    card = await A2ACardResolver(http, demo.urls[name]).get_agent_card()
    del card.supported_interfaces[0]
    assert [i.protocol_version for i in card.supported_interfaces] == ["0.3"]
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)

    events = await collect(client.send_message(second_turn(name)))
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    text = "".join(
        p.text
        for e in events
        if e.HasField("artifact_update")
        for p in e.artifact_update.artifact.parts
    )
    assert text.startswith(FIRST_TURN[name][2])
    fetched = await client.get_task(GetTaskRequest(id=events[0].task.id))
    assert answer_text(fetched) == text


async def test_one_task_store_for_both_versions(
    demo: DemoAgents, http: httpx.AsyncClient, raw: httpx.AsyncClient
) -> None:
    url = demo.urls["currency"]
    client = await connect(http, url)

    # created over 1.0, read over 0.3
    v1_task = await send(client, ask("convert 100 USD to EUR"))
    result = (await rpc(raw, url, "tasks/get", {"id": v1_task.id}))["result"]
    types_v03.Task.model_validate(result)
    assert (result["kind"], result["id"], result["contextId"]) == (
        "task",
        v1_task.id,
        v1_task.context_id,
    )
    assert result["status"]["state"] == "completed"
    assert [m["role"] for m in result["history"]] == ["user", "agent"]
    parts = result["artifacts"][0]["parts"]
    assert [p["kind"] for p in parts] == ["text"] * (len(parts) - 1) + ["data"]
    assert "".join(p.get("text", "") for p in parts) == answer_text(v1_task)
    assert parts[-1]["data"]["result"] == pytest.approx(92.0)

    # started over 0.3, continued over 1.0, read back over both
    asked = (await rpc(raw, url, "message/send", {"message": v03_message("hello")}))["result"]
    assert asked["status"]["state"] == "input-required"
    follow_up = ask("convert 5 GBP to USD")
    follow_up.message.task_id, follow_up.message.context_id = asked["id"], asked["contextId"]
    done = await send(client, follow_up)
    assert (done.id, done.status.state) == (asked["id"], TaskState.TASK_STATE_COMPLETED)
    fetched = (await rpc(raw, url, "tasks/get", {"id": asked["id"]}))["result"]
    assert fetched["status"]["state"] == "completed"
    assert [m["role"] for m in fetched["history"]].count("user") == 2
    assert answer_text(await client.get_task(GetTaskRequest(id=asked["id"]))).startswith(
        "5 GBP = 6.33 USD"
    )

    # created over 1.0, canceled over 0.3
    waiting = await send(client, ask("hello"))
    canceled = (await rpc(raw, url, "tasks/cancel", {"id": waiting.id}))["result"]
    assert canceled["status"]["state"] == "canceled"
    fetched_v1 = await client.get_task(GetTaskRequest(id=waiting.id))
    assert fetched_v1.status.state == TaskState.TASK_STATE_CANCELED


async def test_one_task_followed_in_both_versions_at_once(raw: httpx.AsyncClient) -> None:
    """Each subscriber gets the same events, rendered in its own version."""
    agents = await start_demo_agents(ports=dict.fromkeys(DEMO_PORTS, 0), chunk_delay=0.2)
    try:
        url = agents.urls["currency"]
        message = {
            "role": "ROLE_USER",
            "messageId": "m-1",
            "parts": [{"text": "convert 2 USD to JPY"}],
        }
        config = {"returnImmediately": True, "acceptedOutputModes": ["text/plain"]}
        params = {"message": message, "configuration": config}
        started = await rpc(raw, url, "SendMessage", params, version="1.0")
        task_id = started["result"]["task"]["id"]
        v03, v1 = await asyncio.gather(
            rpc_stream(raw, url, "tasks/resubscribe", {"id": task_id}),
            rpc_stream(raw, url, "SubscribeToTask", {"id": task_id}, version="1.0"),
        )
    finally:
        await agents.close()

    for event in v03:
        types_v03.SendStreamingMessageSuccessResponse.model_validate(event)
    for event in v1:
        ParseDict(event["result"], StreamResponse())
    assert [e["result"]["kind"] for e in v03] == [
        "task",
        "status-update",
        *["artifact-update"] * (len(v03) - 3),
        "status-update",
    ]
    assert [next(iter(e["result"])) for e in v1] == [
        "task",
        "statusUpdate",
        *["artifactUpdate"] * (len(v1) - 3),
        "statusUpdate",
    ]
    assert (v03[-1]["result"]["status"]["state"], v03[-1]["result"]["final"]) == ("completed", True)
    assert v1[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    v03_text = "".join(p["text"] for e in v03[2:-1] for p in e["result"]["artifact"]["parts"])
    v1_text = "".join(
        p["text"] for e in v1[2:-1] for p in e["result"]["artifactUpdate"]["artifact"]["parts"]
    )
    assert v03_text == v1_text
    assert v03_text.startswith("2 USD = 300.00 JPY")


async def test_file_parts_round_trip_in_both_versions(
    demo: DemoAgents, raw: httpx.AsyncClient
) -> None:
    image = gif(5, 7)
    v1_part = {
        "raw": base64.b64encode(image).decode(),
        "mediaType": "image/gif",
        "filename": "a.gif",
    }
    params = {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [v1_part]}}
    answer = await rpc(raw, demo.urls["caption"], "SendMessage", params, version="1.0")
    task = answer["result"]["task"]
    assert task["history"][0]["parts"] == [v1_part]
    text = "".join(p["text"] for p in task["artifacts"][0]["parts"])
    assert text == f"A 5x7 GIF image ({len(image)} bytes)"

    file = {"bytes": base64.b64encode(image).decode(), "mimeType": "image/gif", "name": "a.gif"}
    v03_part = {"kind": "file", "file": file}
    message = {"kind": "message", "role": "user", "messageId": "m-2", "parts": [v03_part]}
    answer = await rpc(raw, demo.urls["translate"], "message/send", {"message": message})
    assert answer["result"]["history"][0]["parts"] == [v03_part]
    assert answer["result"]["status"]["state"] == "input-required"
