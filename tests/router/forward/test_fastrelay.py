"""The byte relay (router/forward/fastrelay.py) against the parsed path it stands in for.

Every stream here is served by a real aiohttp agent on 127.0.0.1 and read by a real
:class:`Upstream` through :meth:`Relay.open`, twice: once by a transport that takes bytes
(the byte relay on) and once by one that does not (every event parsed, rewritten and
serialized as before). The client streams must parse to the same JSON, event by event, the
task states recorded must be the same, and no upstream ID may stand where the router puts
its IDs. The streams are generated (hypothesis: status and artifact updates, text and data
parts holding ID-like strings, IDs inside texts, keys and metadata, escaped quotes,
unicode and line separators, several spellings of the JSON) or recorded from the official
SDK servers (``tests/fixtures/wire``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from registry.cards import parse_card
from registry.records import AgentRecord, utcnow
from router.choose.choice import Choice, Target
from router.forward.call import Frames
from router.forward.fastrelay import FastPath, RawAnswer, plain_id, replace_ids
from router.forward.relay import Relay
from router.forward.upstream import Upstream
from router.ids.idmap import IdMap
from router.ids.rewrite import Rewriter
from router.protocol.envelope import Request
from router.protocol.events import result_task_states
from router.protocol.versions import Op, Version, method_name
from tests.support.helpers import card_v1
from tests.support.streams import parse_all, within

WIRE = Path(__file__).parents[2] / "fixtures" / "wire"
AGENT = "ag"
_SERIAL = itertools.count()


# -- a real agent that streams what it is given ------------------------------------------------


@dataclass
class Feed:
    """What the agent streams next: the body, written in chunks of ``chunk`` bytes."""

    body: bytes = b""
    chunk: int = 1 << 20


@dataclass
class Run:
    """One relay of a stream: the client's events (parsed JSON, SSE type) and the states
    recorded."""

    events: list[tuple[Any, str | None]] = field(default_factory=list)
    as_bytes: int = 0
    unparsed: int = 0  # of the events relayed as bytes, those never parsed (their shape known)
    states: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Bench:
    feed: Feed
    target: Target
    relay: Relay
    ids: IdMap
    recorded: list[tuple[str, str]]


@pytest.fixture
async def bench(aiohttp_server: Any, ids: IdMap) -> AsyncIterator[Bench]:
    feed = Feed()

    async def agent(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for at in range(0, len(feed.body), feed.chunk):
            await resp.write(feed.body[at : at + feed.chunk])
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/rpc", agent)
    server = await aiohttp_server(app)
    recorded: list[tuple[str, str]] = []

    async def record(rpc: Request, result: Any, ids: IdMap) -> None:  # as the handler does
        for task_id, state in result_task_states(rpc.version, rpc.op, result):
            recorded.append((task_id, state))
            await ids.record_state(task_id, state)

    async with Upstream(connect_timeout=2.0, read_timeout=5.0) as upstream:
        relay = Relay(upstream, 10, record)
        target = Target(AGENT, str(server.make_url("/rpc")), "1.0")
        yield Bench(feed, target, relay, ids, recorded)


def _choice(target: Target) -> Choice:
    now = utcnow()
    card = parse_card(card_v1(target.url))
    agent = AgentRecord(
        id=AGENT, card=card, source="push", card_sha256="0" * 64,
        created_at=now, updated_at=now, fetched_at=now,
    )  # fmt: skip
    return Choice(agent, target, None, "match")


async def relay(
    bench: Bench, version: Version, rid: Any, body: bytes, as_bytes: bool, scope: str
) -> Run:
    """Relay ``body`` from the agent to a client of ``version``, as a transport that takes
    bytes (``as_bytes``) or one that does not, in the ID space of owner ``scope``."""
    bench.feed.body = body
    bench.recorded.clear()
    target = Target(AGENT, bench.target.url, version)
    rpc = Request(rid, method_name(version, Op.STREAM), {"message": {}}, Op.STREAM, version)
    rewriter = Rewriter(bench.ids.scoped(scope), version, AGENT, None)
    stream = await within(bench.relay.open(rpc, _choice(target), rewriter, {}, {}, None))
    assert not isinstance(stream, dict) and hasattr(stream, "events")
    stream.as_bytes = as_bytes  # type: ignore[union-attr]
    run = Run()
    try:
        async for body_out, kind in stream.events:  # type: ignore[union-attr]
            if type(body_out) is Frames:  # events recognized by their shape, unparsed
                framed = parse_all([body_out])
                assert body_out.event_count == len(framed) and kind is None
                assert body_out.endswith(b"\r\n\r\n") and b"\n" not in body_out.replace(
                    b"\r\n\r\n", b""
                )
                run.as_bytes += len(framed)
                run.unparsed += len(framed)
                run.events.extend((json.loads(e.data), None) for e in framed)
            elif isinstance(body_out, bytes):
                run.as_bytes += 1
                run.events.append((json.loads(body_out), kind))
            else:  # as SseWriter.send writes it
                run.events.append((json.loads(json.dumps(body_out)), kind))
    finally:
        await stream.aclose()  # type: ignore[union-attr]
    run.states = list(bench.recorded)
    return run


def _changes(states: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The recorded states without repeats of a task's last one (recording the same state
    again changes nothing)."""
    last: dict[str, str] = {}
    out = []
    for task_id, state in states:
        if last.get(task_id) != state:
            out.append((task_id, state))
            last[task_id] = state
    return out


_ROUTER_ID = re.compile(r"[tc]1\.[\w-]{20,}")


def _named(value: Any, names: dict[str, str]) -> Any:
    """``value`` with the router's IDs named by order of appearance (the two runs are in
    two ID spaces, whose tokens differ), objects walked in key order."""
    if isinstance(value, str) and _ROUTER_ID.fullmatch(value):
        return names.setdefault(value, f"<router id {len(names)}>")
    if isinstance(value, dict):
        return {key: _named(value[key], names) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [_named(item, names) for item in value]
    return value


def _seen(run: Run) -> tuple[Any, Any]:
    """What the client of a run saw, and the state changes recorded, IDs named."""
    names: dict[str, str] = {}
    events = [(_named(body, names), kind) for body, kind in run.events]
    return events, _named(_changes(run.states), names)


def _id_places(version: Version, body: dict[str, Any]) -> list[Any]:
    """The values at every place the router puts its IDs in a client event."""
    result = body.get("result")
    if not isinstance(result, dict):
        return []
    found = [v for k, v in result.items() if isinstance(v, dict)] if version == "1.0" else [result]
    values: list[Any] = []
    for payload in found:
        values += [payload.get("taskId"), payload.get("contextId")]
        if payload.get("kind") == "task" or (version == "1.0" and "task" in result):
            values.append(payload.get("id"))
        status = payload.get("status")
        message = status.get("message") if isinstance(status, dict) else None
        if isinstance(message, dict):
            values += [message.get("taskId"), message.get("contextId")]
            values += message.get("referenceTaskIds") or []
    return [v for v in values if v not in (None, "")]


async def differential(
    bench: Bench, version: Version, rid: Any, body: bytes, upstream_ids: set[str]
) -> Run:
    """Relay ``body`` both ways and check that the client sees the same; the byte run."""
    serial = next(_SERIAL)
    fast = await relay(bench, version, rid, body, as_bytes=True, scope=f"fast-{serial}")
    slow = await relay(bench, version, rid, body, as_bytes=False, scope=f"parsed-{serial}")
    assert slow.as_bytes == 0
    assert _seen(fast) == _seen(slow)
    for body_out, _ in fast.events:
        assert not upstream_ids & set(_id_places(version, body_out)), body_out
    return fast


# -- generated streams -------------------------------------------------------------------------

STATES = {
    "1.0": ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"],
    "0.3": ["working", "input-required", "completed"],
}


@st.composite
def streams(draw: st.DrawFn) -> tuple[Version, Any, bytes, set[str], int]:
    """(version, request id, SSE body, the agent's IDs, chunk size) of an agent's stream."""
    version: Version = draw(st.sampled_from(["1.0", "0.3"]))
    serial = next(_SERIAL)
    task, other, ctx = f"task-{serial}-a", f"task-{serial}-b", f"ctx-{serial}"
    if draw(st.integers(0, 3)) == 0:  # IDs whose JSON strings are not their text in quotes
        task = draw(st.sampled_from([f'k{serial}":"v', f"task-{serial}\\", f"t\u00e9-{serial}"]))
    upstream = {task, other, ctx}
    rid = draw(st.sampled_from([1, 7, "req-1", "x\u00e9"]))
    texts = st.one_of(
        st.sampled_from([task, ctx, other, f"see {task} now", f'"{task}"', f'say \\"{ctx}\\"']),
        st.sampled_from(["chunk", "\u00e9t\u00e9 \u2603", "line\u2028sep", 'q"uote', "back\\"]),
        st.text(max_size=12),
    )
    ids_or_not = st.sampled_from([task, ctx, other, None, ""])
    states = STATES[version]

    def part() -> Any:
        if draw(st.booleans()):
            return (
                {"text": draw(texts)} if version == "1.0" else {"kind": "text", "text": draw(texts)}
            )
        key = draw(st.sampled_from(["taskId", "contextId", "id", "ref", task, f"k{serial}"]))
        data = {key: draw(st.one_of(texts, st.just("v"))), "n": draw(st.integers(-5, 10**20))}
        return {"data": data} if version == "1.0" else {"kind": "data", "data": data}

    def metadata() -> dict[str, Any] | None:
        if not draw(st.booleans()):
            return None
        return {draw(st.sampled_from(["taskId", "note", ctx])): draw(texts)}

    def update(kind: str, task_id: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if task_id is not None:
            out["taskId"] = task_id
        context = draw(st.sampled_from([ctx, ctx, None, "", other]))
        if context is not None:
            out["contextId"] = context
        if kind == "artifact":
            out["artifact"] = {
                "artifactId": "a1",
                "parts": [part() for _ in range(draw(st.integers(1, 2)))],
            }
            if draw(st.booleans()):
                out["append"] = True
        else:
            status: dict[str, Any] = {"state": draw(st.sampled_from(states[:1] * 3 + states[1:]))}
            if draw(st.booleans()):
                message: dict[str, Any] = {
                    "messageId": f"m-{serial}",
                    "role": "ROLE_AGENT" if version == "1.0" else "agent",
                    "parts": [part()],
                }
                if version == "0.3":
                    message["kind"] = "message"
                for key in ("taskId", "contextId"):
                    value = draw(ids_or_not)
                    if value is not None:
                        message[key] = value
                if draw(st.integers(0, 2)) == 0:
                    message["referenceTaskIds"] = [draw(st.sampled_from([task, other]))]
                status["message"] = message
            out["status"] = status
            if version == "0.3":
                out["final"] = draw(st.sampled_from([False, False, True]))
        if (meta := metadata()) is not None:
            out["metadata"] = meta
        if version == "0.3":
            out["kind"] = f"{kind}-update" if kind == "artifact" else "status-update"
            return out
        return {f"{kind}Update": out}

    first_task = {"id": task, "contextId": ctx, "status": {"state": states[0]}}
    results: list[Any] = [
        {"task": first_task} if version == "1.0" else {**first_task, "kind": "task"}
    ]
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["artifact", "artifact", "status"]))
        task_id = draw(st.sampled_from([task, task, task, other, None]))
        results.append(update(kind, task_id))
        # the same update again with other texts, as a token stream goes: the byte relay
        # knows its shape from the first and no longer parses it
        for _ in range(draw(st.sampled_from([0, 0, 1, 4]))):
            results.append(_retext(results[-1], lambda: draw(texts)))
    ascii_only = draw(st.booleans())
    compact = draw(st.booleans())
    sort_keys = draw(st.booleans())
    end = draw(st.sampled_from(["\r\n\r\n", "\n\n"]))
    chunks = []
    for result in results:
        wrong_id = draw(st.integers(0, 9)) == 0
        envelope = {"jsonrpc": "2.0", "id": "other" if wrong_id else rid, "result": result}
        if draw(st.booleans()):
            envelope = {"result": result, "id": envelope["id"], "jsonrpc": "2.0"}
        data = json.dumps(
            envelope,
            ensure_ascii=ascii_only,
            separators=(",", ":") if compact else (", ", ": "),
            sort_keys=sort_keys,
        )
        chunks.append(f"data: {data}{end}".encode())
    return version, rid, b"".join(chunks), upstream, draw(st.sampled_from([7, 64, 1 << 20]))


def _retext(value: Any, text: Callable[[], str]) -> Any:
    """``value`` with a new ``text()`` for every text part's text."""
    if isinstance(value, dict):
        return {k: text() if k == "text" else _retext(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_retext(v, text) for v in value]
    return value


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=streams())
async def test_generated_streams_reach_the_client_alike(
    bench: Bench, case: tuple[Version, Any, bytes, set[str], int]
) -> None:
    version, rid, body, upstream, chunk = case
    bench.feed.chunk = chunk
    fast = await differential(bench, version, rid, body, upstream)
    event(f"events relayed as bytes: {'some' if fast.as_bytes else 'none'}")
    event(f"events relayed unparsed: {'some' if fast.unparsed else 'none'}")


# -- recorded streams of the official SDK servers ---------------------------------------------


def _sse_body(capture: str) -> bytes:
    """The SSE body of a capture (its HTTP head and chunked framing dropped)."""
    raw = (WIRE / capture).read_bytes()
    _, _, body = raw.partition(b"\r\n\r\n")
    return body


@pytest.mark.parametrize(
    ("capture", "version"), [("v1_stream.out", "1.0"), ("v03_stream.out", "0.3")]
)
async def test_recorded_sdk_streams_take_the_byte_relay(
    bench: Bench, capture: str, version: Version
) -> None:
    body = _sse_body(capture)
    upstream = set()
    for line in body.splitlines():
        if line.startswith(b"data:"):
            result = json.loads(line[5:])["result"]
            payload = result.get("task") or result.get("statusUpdate") or result
            payload = payload.get("artifactUpdate", payload)
            upstream |= {v for k, v in payload.items() if k in ("id", "taskId", "contextId")}
    assert len(upstream) == 2  # a task and its context
    fast = await differential(bench, version, 2, body, upstream)
    # the artifact updates went as bytes; the task, the working and completed updates parsed
    assert fast.as_bytes == 3, fast.events
    assert len(fast.events) == 6


def _v1(result: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 5, "result": result}, separators=(",", ":"))


async def test_a_long_stream_goes_as_bytes_after_its_first_event(bench: Bench) -> None:
    ids = {"taskId": "t-long", "contextId": "c-long"}
    working, done = {"state": "TASK_STATE_WORKING"}, {"state": "TASK_STATE_COMPLETED"}
    said = {"messageId": "m", "role": "ROLE_AGENT", **ids, "parts": [{"text": "hm"}]}
    first = _v1({"task": {"id": "t-long", "contextId": "c-long", "status": working}})
    chunk = _v1({"artifactUpdate": {**ids, "artifact": {"parts": [{"text": "tok"}]}}})
    still = _v1({"statusUpdate": {**ids, "status": {**working, "message": said}}})
    last = _v1({"statusUpdate": {**ids, "status": done}})
    events = [first, *[chunk, still] * 50, last]
    body = "".join(f"data: {e}\r\n\r\n" for e in events).encode()
    fast = await differential(bench, "1.0", 5, body, {"t-long", "c-long"})
    assert fast.as_bytes == 100
    assert fast.unparsed == 98  # the first artifact and status updates taught their shapes
    task_id = fast.events[0][0]["result"]["task"]["id"]
    assert fast.states == [(task_id, "TASK_STATE_WORKING"), (task_id, "TASK_STATE_COMPLETED")]


async def test_a_known_shape_is_parsed_again_once_its_task_changed_state(bench: Bench) -> None:
    ids = {"taskId": "t-back", "contextId": "c-back"}
    working, asking = {"state": "TASK_STATE_WORKING"}, {"state": "TASK_STATE_INPUT_REQUIRED"}
    said = {"messageId": "m", "role": "ROLE_AGENT", **ids, "parts": [{"text": "hm"}]}
    first = _v1({"task": {"id": "t-back", "contextId": "c-back", "status": working}})
    still = _v1({"statusUpdate": {**ids, "status": {**working, "message": said}}})
    ask = _v1({"statusUpdate": {**ids, "status": asking}})
    events = [first, still, still, ask, still, still]
    body = "".join(f"data: {e}\n\n" for e in events).encode()
    fast = await differential(bench, "1.0", 5, body, {"t-back", "c-back"})
    # relayed: the first two updates (the second unparsed) and the last; the update back to
    # working after the question is parsed, and recorded
    assert (fast.as_bytes, fast.unparsed) == (3, 2)
    task_id = fast.events[0][0]["result"]["task"]["id"]
    back = [(task_id, s["state"]) for s in (working, asking, working)]
    assert _changes(fast.states) == back


# -- the check itself --------------------------------------------------------------------------

TASKS = {"t1": "RT-1", "t2": "RT-2"}
CONTEXTS = {"c1": "RC-1"}


def _answer(result: Any, rid: Any = 1, **extra: Any) -> RawAnswer:
    obj = {"jsonrpc": "2.0", "id": rid, "result": result, **extra}
    return RawAnswer(obj, json.dumps(obj))


def _artifact(text: Any = "x", **ids: Any) -> dict[str, Any]:
    update = {"taskId": "t1", "contextId": "c1", **ids}
    update["artifact"] = {"artifactId": "a", "parts": [{"text": text}]}
    return {"artifactUpdate": {k: v for k, v in update.items() if v is not None}}


def _fast(version: Version = "1.0") -> FastPath:
    fast = FastPath(version, 1, TASKS, CONTEXTS)
    working = "TASK_STATE_WORKING" if version == "1.0" else "working"
    fast.seen(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"statusUpdate": {"taskId": "t1", "status": {"state": working}}},
        }
        if version == "1.0"
        else {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"kind": "status-update", "taskId": "t1", "status": {"state": working}},
        }
    )
    return fast


def test_an_artifact_update_is_relayed_with_the_ids_swapped() -> None:
    out = _fast().relay(_answer(_artifact("hello")))
    assert out is not None
    assert json.loads(out) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": _artifact("hello", taskId="RT-1", contextId="RC-1"),
    }


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(_answer(_artifact(taskId="t-new")), id="a task the stream does not know"),
        pytest.param(_answer(_artifact(contextId="c-new")), id="a context it does not know"),
        pytest.param(_answer(_artifact(taskId=7)), id="a task id that is not a string"),
        pytest.param(_answer(_artifact("t1")), id="the task id as a text"),
        pytest.param(_answer(_artifact("c1")), id="the context id as a text"),
        pytest.param(_answer({**_artifact(), "note": {"t1": 1}}), id="the task id as a key"),
        pytest.param(_answer(_artifact(), rid=2), id="another request id"),
        pytest.param(_answer(_artifact(), rid=1.0), id="the request id as a float"),
        pytest.param(_answer(_artifact(), rid="1"), id="the request id as a string"),
        pytest.param(_answer(_artifact(), extra=1), id="an unknown envelope member"),
        pytest.param(
            RawAnswer({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m"}}, "{}"),
            id="an error",
        ),
        pytest.param(
            _answer(
                {"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}}
            ),
            id="a task snapshot",
        ),
        pytest.param(_answer({"message": {"messageId": "m", "parts": []}}), id="a message"),
        pytest.param(_answer({**_artifact(), "statusUpdate": {"taskId": "t1"}}), id="two updates"),
        pytest.param(
            _answer(
                {
                    "statusUpdate": {
                        "taskId": "t1",
                        "contextId": "c1",
                        "status": {"state": "TASK_STATE_COMPLETED"},
                    }
                }
            ),
            id="a terminal state",
        ),
        pytest.param(
            _answer(
                {
                    "statusUpdate": {
                        "taskId": "t1",
                        "contextId": "c1",
                        "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
                    }
                }
            ),
            id="another state",
        ),
        pytest.param(
            _answer(
                {
                    "statusUpdate": {
                        "taskId": "t2",
                        "contextId": "c1",
                        "status": {"state": "TASK_STATE_WORKING"},
                    }
                }
            ),
            id="a state not seen for that task",
        ),
        pytest.param(
            _answer(
                {
                    "statusUpdate": {
                        "taskId": "t1",
                        "status": {
                            "state": "TASK_STATE_WORKING",
                            "message": {"referenceTaskIds": ["t2"]},
                        },
                    }
                }
            ),
            id="referenceTaskIds",
        ),
        pytest.param(
            _answer(
                {
                    "statusUpdate": {
                        "taskId": "t1",
                        "status": {"state": "TASK_STATE_WORKING", "message": {"taskId": "t9"}},
                    }
                }
            ),
            id="an unknown task in the status message",
        ),
        pytest.param({"jsonrpc": "2.0", "id": 1, "result": _artifact()}, id="no bytes"),
    ],
)
def test_what_takes_the_parsed_path(answer: Any) -> None:
    assert _fast().relay(answer) is None


def test_escaped_ids_line_breaks_and_unicode() -> None:
    fast = _fast()
    escaped = _answer(_artifact()).raw.replace('"t1"', '"t\\u0031"')
    assert fast.relay(RawAnswer(json.loads(escaped), escaped)) is None  # t1, spelled otherwise
    for text, relayed in [("\u00e9t\u00e9", True), ("a\u2028b", False), ("a\u0085b", False)]:
        obj = {"jsonrpc": "2.0", "id": 1, "result": _artifact(text)}
        raw = json.dumps(obj, ensure_ascii=False)
        assert (fast.relay(RawAnswer(obj, raw)) is not None) is relayed, text
        assert fast.relay(RawAnswer(obj, json.dumps(obj))) is not None  # escaped: one line
    pretty = json.dumps({"jsonrpc": "2.0", "id": 1, "result": _artifact()}, indent=1)
    assert fast.relay(RawAnswer(json.loads(pretty), pretty)) is None  # several data lines


def test_one_string_as_a_task_and_a_context() -> None:
    fast = FastPath("1.0", 1, {"same": "RT"}, {"same": "RC"})
    assert fast.relay(_answer({"artifactUpdate": {"taskId": "same", "contextId": "same"}})) is None
    assert fast.relay(_answer({"artifactUpdate": {"taskId": "same"}})) is not None


def test_0_3_final_and_kinds() -> None:
    fast = _fast("0.3")
    update = {
        "kind": "status-update",
        "taskId": "t1",
        "contextId": "c1",
        "status": {"state": "working"},
    }
    assert fast.relay(_answer({**update, "final": False})) is not None
    assert fast.relay(_answer({**update, "final": True})) is None
    assert (
        fast.relay(_answer({"kind": "artifact-update", "taskId": "t1", "artifact": {}})) is not None
    )
    assert fast.relay(_answer({"taskId": "t1", "artifact": {}})) is None  # no kind: parsed


def test_plain_ids_and_replacement() -> None:
    assert plain_id("task-1") and plain_id("\u00e9")
    assert not plain_id('a"b') and not plain_id("a\\b") and not plain_id("a\u2028b")
    assert (
        replace_ids('{"a":"t1","b":"t10","c":"xt1"}', {"t1": "R"})
        == '{"a":"R","b":"t10","c":"xt1"}'
    )


def test_an_id_whose_json_is_not_its_text_in_quotes() -> None:
    """``k":"v`` in quotes is what ``{"k":"v"}`` holds: such an ID is never swapped as bytes."""
    fast = FastPath("1.0", 1, {'k":"v': "RT"}, CONTEXTS)
    obj = {"jsonrpc": "2.0", "id": 1, "result": _artifact(taskId='k":"v')}
    obj["result"]["artifactUpdate"]["artifact"]["parts"] = [{"data": {"k": "v"}}]
    assert fast.relay(RawAnswer(obj, json.dumps(obj, separators=(",", ":")))) is None


def test_a_stray_member_does_not_make_an_update_an_artifact() -> None:
    """What the update is comes from the event's kind (as the parsed path reads it), not
    from any member's presence: a final 0.3 status update with an ``artifactUpdate``
    member, or a 1.0 event with two update members, is parsed."""
    fast = _fast("0.3")
    final = {"kind": "status-update", "taskId": "t1", "contextId": "c1", "final": True}
    final["status"] = {"state": "completed"}
    assert fast.relay(_answer({**final, "artifactUpdate": 0})) is None
    fast = _fast("1.0")
    done = {"taskId": "t1", "status": {"state": "TASK_STATE_COMPLETED"}}
    assert fast.relay(_answer({"statusUpdate": done, "artifactUpdate": 0})) is None
    assert fast.relay(_answer({**_artifact(), "statusUpdate": 0})) is None


def test_an_event_with_a_key_twice_is_parsed() -> None:
    """A client may read the first of two equal keys where the check read the last."""
    fast = _fast("1.0")
    ok = _answer(_artifact())
    assert fast.relay(ok) is not None
    twice = ok.raw.replace('"taskId": "t1"', '"taskId": "t2", "taskId": "t1"')
    assert fast.relay(RawAnswer(json.loads(twice), twice)) is None
    late = ok.raw[:-1] + ', "result": {"statusUpdate": {"taskId": "up-9"}}}'
    assert fast.relay(RawAnswer(json.loads(late), late)) is None


def test_an_id_that_is_the_text_between_two_strings_is_never_swapped_as_bytes() -> None:
    """``":"`` is in every ``"key": "value"`` written without spaces: swapping it there
    would break the JSON."""
    fast = FastPath("1.0", 1, {":": "RT"}, CONTEXTS)
    obj = {"jsonrpc": "2.0", "id": 1, "result": _artifact(taskId=":")}
    spaced = json.dumps(obj, separators=(", ", ": "))
    assert fast.relay(RawAnswer(obj, spaced)) is not None  # only the value is '":"' here
    fast = FastPath("1.0", 1, {":": "RT"}, CONTEXTS)
    mixed = spaced.replace('"taskId": ":"', '"taskId":":"')
    assert mixed.count('":"') == 1  # the count matches, but at the key's end...
    assert fast.relay(RawAnswer(obj, mixed)) is None  # ...between two strings
