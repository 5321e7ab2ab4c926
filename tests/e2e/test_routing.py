"""The router end to end with the official a2a-sdk 1.x client: real agents, real HTTP.

An unmodified SDK client is pointed at the router's card; each query must reach the right
agent, and nothing the client receives may carry an upstream ID.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    Part,
    TaskState,
)
from aiohttp.test_utils import TestServer
from google.protobuf.json_format import MessageToDict

from registry.api import REGISTRY
from registry.signatures import StaticKeys, verify_card
from router.app import create_app
from router.transport.routes import ROUTER
from seeds.demo_agents import DemoAgents
from tests.support.helpers import base, make_settings
from tests.support.images import png
from tests.support.sdk_clients import answer, ask, connect, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent
from tests.support.served import everywhere

AGENTS = ("currency", "translate", "caption")


async def _switchboard(server: Any, demo: DemoAgents) -> Any:
    """``server`` (just started) with the demo agents registered."""
    registry = server.app[REGISTRY]
    for name in AGENTS:
        if name not in registry.catalog.snapshot.agents:
            await registry.register_url(demo.urls[name], name)
    return server


@pytest.fixture
async def switchboard(router: Any, demo: DemoAgents) -> Any:
    """The ``router`` fixture (in this process, or ``switchboard serve --workers N`` with
    ``SWITCHBOARD_TEST_WORKERS``) with the three demo agents registered."""
    for name in AGENTS:
        await router.app[REGISTRY].register_url(demo.urls[name], name)
    return router


async def upstream_ids(server: TestServer) -> set[str]:
    """Every task and context id the agents know (which clients must never see)."""
    ids = server.app[ROUTER].ids
    out = set()
    refs, _ = await ids.tasks.list_tasks(page_size=100)
    for ref in refs:
        out.add(ref.upstream_task_id)
        for agent in AGENTS:
            ctx = await ids.upstream_context(ref.context_id, agent) if ref.context_id else None
            if ctx:
                out.add(ctx)
    return out


def assert_no_upstream_ids(received: Any, upstream: set[str]) -> None:
    text = json.dumps(received) if not isinstance(received, str) else received
    leaked = [i for i in upstream if i in text]
    assert not leaked, f"upstream ids reached the client: {leaked}"


# --- the router's card -------------------------------------------------------------------------


async def test_router_card_serves_both_sdk_generations(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    card = await A2ACardResolver(http, base(switchboard)).get_agent_card()
    skills = {skill.id for skill in card.skills}
    assert {"convert-currency", "translate-text", "caption-image"} <= skills
    urls = {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
    root = base(switchboard)
    assert urls == {
        (root + "/", "JSONRPC", "1.0"),
        (root + "/", "JSONRPC", "0.3"),
        (root, "HTTP+JSON", "1.0"),
        (root, "HTTP+JSON", "0.3"),
    }
    raw = (await http.get(base(switchboard) + "/.well-known/agent-card.json")).json()
    assert raw["url"] == base(switchboard) + "/" and raw["protocolVersion"].startswith("0.3")
    jwks = (await http.get(base(switchboard) + "/.well-known/jwks.json")).json()
    assert (await verify_card(raw, StaticKeys(jwks))).status == "verified"
    again = await http.get(
        base(switchboard) + "/.well-known/agent-card.json",
        headers={
            "If-None-Match": (
                await http.get(base(switchboard) + "/.well-known/agent-card.json")
            ).headers["ETag"]
        },
    )
    assert again.status_code == 304


# --- sending -------------------------------------------------------------------------------------


async def test_sdk_client_is_answered_by_the_right_agent(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    client = await connect(http, base(switchboard))
    task = await send(client, ask("convert 100 USD to EUR"))
    assert "92.00 EUR" in answer(task)
    ref = await switchboard.app[ROUTER].ids.task(task.id)
    assert ref is not None and ref.agent_id == "currency"
    assert ref.upstream_task_id != task.id  # the client holds the router's id only
    caption = await send(
        client, ask(parts=[Part(raw=png(64, 48), media_type="image/png", filename="p.png")])
    )
    assert "64x48" in answer(caption)
    assert_no_upstream_ids(MessageToDict(task), await upstream_ids(switchboard))
    assert_no_upstream_ids(MessageToDict(caption), await upstream_ids(switchboard))


async def test_multi_turn_and_two_agents_in_one_context(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    client = await connect(http, base(switchboard))
    first = await send(client, ask("I need some currency converted"))
    assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    second = await send(
        client, ask("convert 100 USD to EUR", task_id=first.id, context_id=first.context_id)
    )
    assert second.id == first.id and "92.00 EUR" in answer(second)
    # the same conversation continues with another agent
    picture = [Part(raw=png(8, 8), media_type="image/png", filename="p.png")]
    third = await send(client, ask(parts=picture, context_id=first.context_id))
    assert third.context_id == first.context_id and third.id != first.id
    ids = switchboard.app[ROUTER].ids
    assert await ids.context_agents(first.context_id) == {"currency", "caption"}
    currency_ctx = await ids.upstream_context(first.context_id, "currency")
    caption_ctx = await ids.upstream_context(first.context_id, "caption")
    assert None not in (currency_ctx, caption_ctx) and currency_ctx != caption_ctx
    for task in (first, second, third):
        assert_no_upstream_ids(MessageToDict(task), await upstream_ids(switchboard))


async def test_streaming_through_the_router(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    client = await connect(http, base(switchboard), streaming=True)
    events = [event async for event in client.send_message(ask("convert 250 USD to JPY"))]
    assert events[0].HasField("task")
    kinds = [event.WhichOneof("payload") for event in events]
    assert "artifact_update" in kinds and kinds[-1] == "status_update"
    last = events[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_COMPLETED
    router_task = events[0].task.id
    assert all(
        getattr(event, kind).task_id == router_task
        for event, kind in zip(events[1:], kinds[1:], strict=True)
    )
    assert_no_upstream_ids([MessageToDict(e) for e in events], await upstream_ids(switchboard))


async def test_get_and_cancel_through_the_router(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    from a2a.types import CancelTaskRequest, GetTaskRequest
    from a2a.utils.errors import TaskNotCancelableError

    client = await connect(http, base(switchboard))
    task = await send(client, ask("convert 5 EUR to USD"))
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.id == task.id and answer(got) == answer(task)
    with pytest.raises(TaskNotCancelableError):  # relayed from the agent, ids rewritten
        await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_a_restarted_router_still_knows_its_tasks(
    start_router: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    from a2a.types import GetTaskRequest

    first = await _switchboard(await start_router(sqlite_url), demo)
    task = await send(await connect(http, base(first)), ask("convert 1 GBP to EUR"))
    await first.close()
    second = await _switchboard(await start_router(sqlite_url), demo)
    got = await (await connect(http, base(second))).get_task(GetTaskRequest(id=task.id))
    assert got.id == task.id and answer(got) == answer(task)


# --- choosing ------------------------------------------------------------------------------------


async def _rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], version: str = "1.0"
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params}
    headers = {"A2A-Version": version} if version else {}
    return (await http.post(url, json=body, headers=headers)).json()


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}], **extra}


async def test_no_match_is_a_clear_error_not_a_guess(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    answer_ = await _rpc(
        http,
        base(switchboard) + "/",
        "SendMessage",
        {"message": _message("what's the weather in Paris")},
    )
    assert answer_["id"] == "req-1"
    assert answer_["error"]["code"] == -32050, answer_
    assert "closest" in json.dumps(answer_["error"]["data"]).lower() or answer_["error"]["data"]


async def test_unknown_task_and_unknown_version(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    missing = await _rpc(http, base(switchboard) + "/", "GetTask", {"id": "no-such-task"})
    assert missing["error"]["code"] == -32001
    wrong = await _rpc(http, base(switchboard) + "/", "GetTask", {"id": "x"}, version="9.9")
    assert wrong["error"]["code"] == -32009 and wrong["id"] == "req-1"


async def test_routing_hint_names_the_agent(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    from router.choose.matcher import ROUTING_EXTENSION

    # text that matches no skill at all still goes where the hint says
    hinted = _message("good morning", metadata={ROUTING_EXTENSION: {"agent": "currency"}})
    answer_ = await _rpc(http, base(switchboard) + "/", "SendMessage", {"message": hinted})
    task = answer_["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer_  # currency asks
    ref = await switchboard.app[ROUTER].ids.task(task["id"])
    assert ref is not None and ref.agent_id == "currency"
    # a hint that cannot be honoured is an error, never a fallback to matching
    wrong = _message("convert 100 USD", metadata={ROUTING_EXTENSION: {"agent": "caption"}})
    error = await _rpc(http, base(switchboard) + "/", "SendMessage", {"message": wrong})
    assert error["error"]["code"] == -32051 and "text/plain" in error["error"]["message"]
    bad = _message("hello", metadata={ROUTING_EXTENSION: {"skill": "no-such-skill"}})
    error = await _rpc(http, base(switchboard) + "/", "SendMessage", {"message": bad})
    assert error["error"]["code"] == -32051


async def test_explain(switchboard: TestServer, http: httpx.AsyncClient) -> None:
    body = {"message": _message("translate hello world to french"), "version": "1.0"}
    result = (await http.post(base(switchboard) + "/api/v1/route/explain", json=body)).json()
    # translate speaks only 0.3: a 1.0 client reaches it translated
    choice = result["choice"]
    assert (choice["agent_id"], choice["version"]) == ("translate", "0.3"), result
    assert "translated: the client speaks A2A 1.0, the agent A2A 0.3" in choice["reason"]
    body["version"] = "0.3"
    body["message"] = {**body["message"], "role": "user"}
    body["message"]["parts"] = [{"kind": "text", "text": "translate hello world to french"}]
    result = (await http.post(base(switchboard) + "/api/v1/route/explain", json=body)).json()
    assert result["choice"]["agent_id"] == "translate", result
    assert "translated" not in result["choice"]["reason"]


async def test_v1_client_reaches_the_03_only_demo_agent(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    """The demo translate agent speaks A2A 0.3 only: the router translates for the 1.x SDK."""
    client = await connect(http, base(switchboard))
    task = await send(client, ask("translate hello world to french"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "bonjour" in answer(task).lower()
    ref = await switchboard.app[ROUTER].ids.task(task.id)
    assert ref is not None and ref.agent_id == "translate"
    assert_no_upstream_ids(MessageToDict(task), await upstream_ids(switchboard))


# --- per-agent pass-through -------------------------------------------------------------------


async def test_per_agent_endpoint_with_the_sdk_client(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    agent_url = base(switchboard) + "/agents/currency"
    card = await A2ACardResolver(http, agent_url).get_agent_card()
    assert all(i.url.startswith(agent_url) for i in card.supported_interfaces)
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
    # no skill matching here: the pinned agent answers whatever it is sent
    task = await send(client, ask("convert 3 USD to GBP"))
    assert "GBP" in answer(task)
    ref = await switchboard.app[ROUTER].ids.task(task.id)
    assert ref is not None and ref.agent_id == "currency"


async def test_a2a_paths_answer_with_a_trailing_slash(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    # the 1.0 conformance suite's client posts to `<interface url>/`
    url = base(switchboard) + "/agents/currency/"
    params = {"message": _message("convert 3 USD to GBP")}
    answer_ = await _rpc(http, url, "SendMessage", params)
    assert "GBP" in json.dumps(answer_["result"]), answer_
    for path in ("/.well-known/agent-card.json/", "/agents/currency/.well-known/agent-card.json/"):
        card = await http.get(base(switchboard) + path)
        assert card.status_code == 200 and card.json()["name"], path


async def test_a_streaming_call_refused_before_any_event_is_a_plain_json_error(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    """Errors the router raises before streaming, as an a2a-sdk agent answers them: plain JSON
    in 1.0; in 0.3 an SSE stream of one error event once the request is read."""
    url = base(switchboard) + "/"
    calls = [
        ("SendStreamingMessage", {"message": _message("what's the weather in Paris")}, -32050),
        ("SubscribeToTask", {"id": "no-such-task"}, -32001),
    ]
    for method, params, code in calls:
        body = {"jsonrpc": "2.0", "id": "s-1", "method": method, "params": params}
        resp = await http.post(url, json=body, headers={"A2A-Version": "1.0"})
        assert resp.headers["content-type"].startswith("application/json"), method
        assert resp.json()["error"]["code"] == code and resp.json()["id"] == "s-1"
    body = {"jsonrpc": "2.0", "id": "s-2", "method": "tasks/resubscribe", "params": {"id": "x"}}
    resp = await http.post(url, json=body)
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert '"code":-32001' in resp.text.replace(" ", "")


async def test_an_agents_plain_error_to_a_streaming_call_stays_plain(
    start_router: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    """SubscribeToTask on a finished task: the SDK agent answers a plain JSON-RPC error, and
    so does the router, with the agent's code (not an SSE stream of one error event)."""
    server = await start_router(sqlite_url)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        pinned = base(server) + "/agents/tasks"
        direct_url = agent_url + "/a2a"
        answers = []
        for url in (direct_url, pinned):
            sent = await _rpc(http, url, "SendMessage", {"message": _message("hello")})
            task_id = sent["result"]["task"]["id"]
            body = {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "SubscribeToTask",
                "params": {"id": task_id},
            }
            resp = await http.post(url, json=body, headers={"A2A-Version": "1.0"})
            assert resp.headers["content-type"].startswith("application/json"), url
            answers.append(resp.json())
    direct, routed = answers
    assert "error" in direct, direct
    assert routed["id"] == 5 and routed["error"]["code"] == direct["error"]["code"], routed


async def test_proto_field_names_are_rewritten_like_json_names(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    """``context_id`` (a proto name ProtoJSON parsers accept) names the router's context and
    reaches the agent as the agent's own, as ``contextId`` would."""
    url = base(switchboard) + "/agents/currency"
    first = await _rpc(http, url, "SendMessage", {"message": _message("convert 3 USD to GBP")})
    context = first["result"]["task"]["contextId"]
    follow_up = {
        "role": "ROLE_USER",
        "message_id": str(uuid.uuid4()),
        "context_id": context,
        "parts": [{"text": "convert 4 USD to EUR"}],
    }
    second = await _rpc(http, url, "SendMessage", {"message": follow_up})
    assert second["result"]["task"]["contextId"] == context, second


async def test_a_media_type_no_agent_accepts_is_content_type_not_supported(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    part = {"url": "https://files.example.com/a.xyz", "mediaType": "application/x-unknown"}
    params = {"message": _message("convert this", parts=[{"text": "convert this"}, part])}
    for version in ("1.0", "0.3"):
        if version == "0.3":
            params = {
                "message": {
                    "role": "user",
                    "messageId": str(uuid.uuid4()),
                    "kind": "message",
                    "parts": [
                        {"kind": "text", "text": "convert this"},
                        {
                            "kind": "file",
                            "file": {"uri": part["url"], "mimeType": part["mediaType"]},
                        },
                    ],
                }
            }
        method = "SendMessage" if version == "1.0" else "message/send"
        answer_ = await _rpc(http, base(switchboard) + "/", method, params, version=version)
        assert answer_["error"]["code"] == -32005, answer_
        assert "application/x-unknown" in json.dumps(answer_["error"]["data"]), answer_


async def test_the_default_route_takes_what_no_tier_is_confident_about(
    start_router: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    server = await start_router(sqlite_url, default_agent="currency")
    for name in AGENTS:
        await server.app[REGISTRY].register_url(demo.urls[name], name)
    weather = {"message": _message("what's the weather in Paris")}
    answer_ = await _rpc(http, base(server) + "/", "SendMessage", weather)
    task = answer_["result"]["task"]
    ref = await server.app[ROUTER].ids.task(task["id"])
    assert ref is not None and ref.agent_id == "currency", answer_
    explained = await http.post(
        base(server) + "/api/v1/route/explain", json={"version": "1.0", **weather}
    )
    choice = explained.json()["choice"]
    assert choice["agent_id"] == "currency" and choice["tier"] == "default", choice
    # a message a skill matches still goes there
    converted = await _rpc(
        http, base(server) + "/", "SendMessage", {"message": _message("translate hello to French")}
    )
    ref = await server.app[ROUTER].ids.task(converted["result"]["task"]["id"])
    assert ref is not None and ref.agent_id == "translate"


async def test_a_default_route_that_cannot_take_the_call_leaves_the_refusal(
    start_router: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    server = await start_router(sqlite_url, default_agent="caption")  # takes images only
    for name in AGENTS:
        await server.app[REGISTRY].register_url(demo.urls[name], name)
    weather = {"message": _message("what's the weather in Paris")}
    answer_ = await _rpc(http, base(server) + "/", "SendMessage", weather)
    assert answer_["error"]["code"] == -32050, answer_
    assert "caption" in json.dumps(answer_["error"]["data"]), answer_


async def test_cards_are_negotiated_by_version_and_carry_last_modified(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    for path in ("/.well-known/agent-card.json", "/agents/currency/.well-known/agent-card.json"):
        url = base(switchboard) + path
        both = await http.get(url)  # no A2A-Version: 0.3 is assumed, a card both versions read
        v1 = await http.get(url, headers={"A2A-Version": "1.0"})
        assert "protocolVersion" in both.json() and "url" in both.json()
        assert not {"url", "preferredTransport", "protocolVersion"} & set(v1.json()), path
        v03 = await http.get(url, headers={"A2A-Version": "0.3"})
        assert "supportedInterfaces" not in v03.json() and v03.json()["url"], path
        assert v1.headers["Vary"] == "A2A-Version" and v1.headers["ETag"] != both.headers["ETag"]
        # the 1.x SDK client, sending its version, reads the 1.0 card
        resolver = A2ACardResolver(http, url.removesuffix("/.well-known/agent-card.json"))
        card = await resolver.get_agent_card(http_kwargs={"headers": {"A2A-Version": "1.0"}})
        assert card.supported_interfaces[0].url.startswith(base(switchboard))
        modified = both.headers["Last-Modified"]
        assert modified.endswith(" GMT")
        again = await http.get(url, headers={"If-Modified-Since": modified})
        assert again.status_code == 304 and again.headers["Last-Modified"] == modified
        earlier = await http.get(
            url, headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}
        )
        assert earlier.status_code == 200


async def test_a_message_without_words_is_not_guessed(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    answer_ = await _rpc(
        http, base(switchboard) + "/", "SendMessage", {"message": _message("what is it?")}
    )
    assert answer_["error"]["code"] == -32050, answer_


async def test_a_hint_that_contradicts_the_task_owner_is_refused(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    from router.choose.matcher import ROUTING_EXTENSION

    client = await connect(http, base(switchboard))
    task = await send(client, ask("I want some money converted"))
    follow_up = _message(
        "convert 100 USD to EUR",
        taskId=task.id,
        contextId=task.context_id,
        metadata={ROUTING_EXTENSION: {"agent": "caption"}},
    )
    error = await _rpc(http, base(switchboard) + "/", "SendMessage", {"message": follow_up})
    assert error["error"]["code"] == -32051 and "currency" in error["error"]["message"]


async def test_list_tasks_from_the_mapping_table(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    client = await connect(http, base(switchboard))
    first = await send(client, ask("convert 1 USD to EUR"))
    second = await send(client, ask("convert 2 USD to EUR", context_id=first.context_id))
    other = await send(client, ask("convert 3 USD to EUR"))
    listed = await _rpc(http, base(switchboard) + "/", "ListTasks", {"contextId": first.context_id})
    ids = [task["id"] for task in listed["result"]["tasks"]]
    assert ids == [second.id, first.id]  # newest first, only this conversation
    assert other.id not in ids
    assert all("artifacts" not in task for task in listed["result"]["tasks"])
    full = await _rpc(
        http,
        base(switchboard) + "/",
        "ListTasks",
        {"contextId": first.context_id, "includeArtifacts": True, "pageSize": 1},
    )
    assert [t["id"] for t in full["result"]["tasks"]] == [second.id]
    assert full["result"]["tasks"][0]["artifacts"] and full["result"]["nextPageToken"]
    assert full["result"]["totalSize"] == 2


async def test_unverified_agents_are_not_routed_with_the_policy_on(
    start_router: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    server = await start_router(sqlite_url, require_signed_cards=True)
    await server.app[REGISTRY].register_url(demo.urls["currency"], "currency")
    answer_ = await _rpc(
        http, base(server) + "/", "SendMessage", {"message": _message("convert 1 USD to EUR")}
    )
    assert answer_["error"]["code"] == -32050, answer_  # the demo cards are unsigned
    card = await http.get(base(server) + "/agents/currency/.well-known/agent-card.json")
    assert card.status_code == 404 and card.json()["error"]["code"] == "not_routable"
    router_card = (await http.get(base(server) + "/.well-known/agent-card.json")).json()
    assert router_card.get("skills", []) == []  # empty lists are dropped when signing


async def test_sdk_13_verifier_accepts_the_cards_the_router_serves(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    from a2a.types import AgentCard
    from a2a.utils.signing import create_signature_verifier
    from google.protobuf.json_format import ParseDict
    from jwt import PyJWK

    jwks = (await http.get(base(switchboard) + "/.well-known/jwks.json")).json()
    keys = {key["kid"]: PyJWK(key) for key in jwks["keys"]}
    verifier = create_signature_verifier(lambda kid, _jku: keys[kid], ["ES256"])
    for path in ("/.well-known/agent-card.json", "/agents/currency/.well-known/agent-card.json"):
        raw = (await http.get(base(switchboard) + path)).json()
        verifier(ParseDict(raw, AgentCard(), ignore_unknown_fields=True))  # raises if invalid


async def test_concurrent_first_messages_share_one_conversation(
    aiohttp_server: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    """In one process (not on the ``router`` fixture: across workers or replicas two first
    messages can start two conversations, as docs/operations.md says)."""
    import asyncio

    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    switchboard = await _switchboard(server, demo)
    client = await connect(http, base(switchboard))
    context = str(uuid.uuid4())  # a client's own, unseen context id becomes a router context
    tasks = await asyncio.gather(
        *(send(client, ask(f"convert {n} USD to EUR", context_id=context)) for n in range(4))
    )
    assert {task.context_id for task in tasks} == {context}
    ids = switchboard.app[ROUTER].ids
    assert await ids.context_agents(context) == {"currency"}
    upstream = await ids.upstream_context(context, "currency")
    refs = [await ids.task(task.id) for task in tasks]
    assert upstream and all(ref is not None and ref.context_id == context for ref in refs)


async def test_card_etag_is_stable_and_honours_star(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    url = base(switchboard) + "/.well-known/agent-card.json"
    first = await http.get(url)
    from router.transport.routes import SIGNER

    switchboard.app[SIGNER]._signed.clear()  # as after a restart: new signature bytes
    second = await http.get(url)
    assert first.headers["ETag"] == second.headers["ETag"]
    assert (await http.get(url, headers={"If-None-Match": "*"})).status_code == 304
    weak = f'"nope", W/{first.headers["ETag"]}'
    assert (await http.get(url, headers={"If-None-Match": weak})).status_code == 304


async def test_states_from_get_and_cancel_are_recorded_for_list_tasks(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    client = await connect(http, base(switchboard))
    waiting = await send(client, ask("I need money converted"))  # input-required
    url = base(switchboard) + "/"
    canceled = await _rpc(http, url, "CancelTask", {"id": waiting.id})
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
    listed = await _rpc(http, url, "ListTasks", {"status": "TASK_STATE_CANCELED"})
    assert [t["id"] for t in listed["result"]["tasks"]] == [waiting.id]
    later = await _rpc(http, url, "ListTasks", {"statusTimestampAfter": "2999-01-01T00:00:00Z"})
    assert later["result"]["tasks"] == []
    bad = await _rpc(http, url, "ListTasks", {"statusTimestampAfter": "yesterday"})
    assert bad["error"]["code"] == -32602


async def test_a_push_config_on_a_stream_for_an_agent_without_push_is_refused(
    switchboard: TestServer, http: httpx.AsyncClient
) -> None:
    message = _message("convert 1 USD to EUR")
    params = {
        "message": message,
        "configuration": {"taskPushNotificationConfig": {"url": "https://93.184.216.34/h"}},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
    answer_ = await http.post(base(switchboard) + "/", json=body, headers={"A2A-Version": "1.0"})
    assert '"code": -32003' in answer_.text or '"code":-32003' in answer_.text, answer_.text
    assert "non-streaming send" in answer_.text  # synthesized push follows unary sends only


async def test_per_agent_card_drops_fields_the_agents_signature_did_not_cover(
    start_router: Any, sqlite_url: str
) -> None:
    """The router re-signs per-agent cards: it must not vouch for unsigned content."""
    import aiohttp

    from registry.signatures import generate_key, sign_card
    from tests.support.helpers import AUTH, card_v1

    key = generate_key("ES256", kid="owner")
    server = await start_router(sqlite_url)
    async with aiohttp.ClientSession(base_url=server.make_url("")) as client:
        public = _json_loads(key.export_public())
        trusted = await client.post("/api/v1/keys", json={"jwk": public}, headers=AUTH)
        assert trusted.status == 201
        await everywhere(server, trusted.headers["Location"], lambda got: got.status_code == 200)
        signed = sign_card(card_v1("https://w.example"), key)
        signed["x-unsigned"] = "added after signing"
        agent = await (
            await client.post("/api/v1/agents", json={"card": signed, "id": "wx"}, headers=AUTH)
        ).json()
        assert agent["verification"]["status"] == "verified"
        assert "x-unsigned" in agent["verification"]["uncovered_fields"]
        await everywhere(server, "/api/v1/agents/wx", lambda got: got.status_code == 200)
        served = await (await client.get("/agents/wx/.well-known/agent-card.json")).json()
    assert "x-unsigned" not in served
    assert served["name"] == "Weather Agent"


def _json_loads(text: str) -> Any:
    return json.loads(text)
