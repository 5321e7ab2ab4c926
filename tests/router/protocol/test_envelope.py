"""The router's JSON-RPC envelope: method tables, versions, errors, and reading requests."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from router.compat.dialects import served_call
from router.protocol.errors import (
    NO_MATCHING_AGENT,
    STANDARD_MESSAGES,
    VERSION_NOT_SUPPORTED,
    RpcError,
    error_body,
    result_body,
)
from router.protocol.versions import (
    METHODS,
    Op,
    Version,
    client_version,
    equivalent_method,
    method_name,
    version_of,
)
from router.transport.jsonrpc import read_request, request_version
from tests.support.helpers import facts, said

WIRE = Path(__file__).parents[2] / "fixtures" / "wire"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
MAX_BYTES = 4096
MAX_DEPTH = 16

# --- method tables -------------------------------------------------------------------------


def test_method_tables_hold_every_method_of_both_versions() -> None:
    assert METHODS["0.3"] == {
        "message/send": Op.SEND,
        "message/stream": Op.STREAM,
        "tasks/get": Op.GET,
        "tasks/cancel": Op.CANCEL,
        "tasks/resubscribe": Op.SUBSCRIBE,
        "tasks/pushNotificationConfig/set": Op.PUSH_CONFIG,
        "tasks/pushNotificationConfig/get": Op.PUSH_CONFIG,
        "tasks/pushNotificationConfig/list": Op.PUSH_CONFIG,
        "tasks/pushNotificationConfig/delete": Op.PUSH_CONFIG,
    }
    assert METHODS["1.0"] == {
        "SendMessage": Op.SEND,
        "SendStreamingMessage": Op.STREAM,
        "GetTask": Op.GET,
        "ListTasks": Op.LIST,
        "CancelTask": Op.CANCEL,
        "SubscribeToTask": Op.SUBSCRIBE,
        "CreateTaskPushNotificationConfig": Op.PUSH_CONFIG,
        "GetTaskPushNotificationConfig": Op.PUSH_CONFIG,
        "ListTaskPushNotificationConfigs": Op.PUSH_CONFIG,
        "DeleteTaskPushNotificationConfig": Op.PUSH_CONFIG,
    }


def test_method_tables_match_the_official_sdk() -> None:
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher  # imports the adapter

    adapter = sys.modules["a2a.compat.v0_3.jsonrpc_adapter"]

    sdk_v1 = set(JsonRpcDispatcher.METHOD_TO_MODEL) - {"GetExtendedAgentCard"}
    assert set(METHODS["1.0"]) == sdk_v1
    sdk_v03 = set(adapter.JSONRPC03Adapter.METHOD_TO_MODEL) - {"agent/getAuthenticatedExtendedCard"}
    assert set(METHODS["0.3"]) == sdk_v03


@pytest.mark.parametrize(
    ("version", "op", "name"),
    [
        ("0.3", Op.SEND, "message/send"),
        ("0.3", Op.STREAM, "message/stream"),
        ("0.3", Op.GET, "tasks/get"),
        ("0.3", Op.CANCEL, "tasks/cancel"),
        ("0.3", Op.SUBSCRIBE, "tasks/resubscribe"),
        ("1.0", Op.SEND, "SendMessage"),
        ("1.0", Op.STREAM, "SendStreamingMessage"),
        ("1.0", Op.GET, "GetTask"),
        ("1.0", Op.LIST, "ListTasks"),
        ("1.0", Op.CANCEL, "CancelTask"),
        ("1.0", Op.SUBSCRIBE, "SubscribeToTask"),
    ],
)
def test_method_name(version: Version, op: Op, name: str) -> None:
    assert method_name(version, op) == name


@pytest.mark.parametrize(("version", "op"), [("0.3", Op.LIST), ("1.0", Op.PUSH_CONFIG)])
def test_method_name_refuses_missing_or_ambiguous_ops(version: Version, op: Op) -> None:
    with pytest.raises(ValueError, match="methods for"):
        method_name(version, op)


def test_equivalent_method_pairs_names_across_versions() -> None:
    assert equivalent_method("tasks/get", "1.0") == "GetTask"
    assert equivalent_method("GetTask", "0.3") == "tasks/get"
    assert equivalent_method("GetTask", "1.0") == "GetTask"
    assert equivalent_method("tasks/pushNotificationConfig/list", "1.0") == (
        "ListTaskPushNotificationConfigs"
    )
    assert equivalent_method("ListTasks", "0.3") is None
    assert equivalent_method("nope", "1.0") is None


# --- versions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "version"),
    [
        (None, "0.3"),
        ("", "0.3"),
        ("  ", "0.3"),
        ("0.3", "0.3"),
        ("0.3.0", "0.3"),
        ("1.0", "1.0"),
        ("1", "1.0"),
        ("1.0.2", "1.0"),
        (" 1.0 ", "1.0"),
    ],
)
def test_client_version(header: str | None, version: str) -> None:
    assert client_version(header) == version


@pytest.mark.parametrize("header", ["0.2", "0.2.5", "1.1", "2.0", "latest", "1.0,0.3", "v1"])
def test_client_version_refuses_unsupported_versions(header: str) -> None:
    with pytest.raises(RpcError) as info:
        client_version(header)
    error = info.value
    assert error.code == VERSION_NOT_SUPPORTED == -32009
    assert error.data == {"requestedVersion": header, "supportedVersions": ["0.3", "1.0"]}
    assert repr(header) in error.message
    assert "A2A-Version: 1.0" in error.message


@pytest.mark.parametrize(
    ("protocol_version", "version"),
    [
        ("0.3.0", "0.3"),
        ("0.3", "0.3"),
        ("0.2.5", "0.3"),
        ("1.0", "1.0"),
        ("1.0.0", "1.0"),
        ("1", "1.0"),
        ("1.1", None),
        ("2.0", None),
        ("", None),
        ("draft", None),
    ],
)
def test_version_of_agent_interfaces(protocol_version: str, version: str | None) -> None:
    assert version_of(protocol_version) == version


# --- error bodies --------------------------------------------------------------------------


def test_error_body_v03_data_is_a_plain_object() -> None:
    # a standard code: the specification's message, the router's own in data.detail
    error = RpcError(-32001, "Task t-1 not found", {"taskId": "t-1"})
    assert error_body("0.3", 7, error) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32001,
            "message": "Task not found",
            "data": {"detail": "Task t-1 not found", "taskId": "t-1"},
        },
    }


def test_error_body_v03_without_data_omits_it() -> None:
    body = error_body("0.3", "a", RpcError(-32603, "Internal error"))
    assert body["error"] == {"code": -32603, "message": "Internal error"}
    body = error_body("0.3", "a", RpcError(-32050, "no agent"))  # Switchboard's own code
    assert body["error"] == {"code": -32050, "message": "no agent"}


def test_standard_codes_say_the_specifications_message() -> None:
    for code, message in STANDARD_MESSAGES.items():
        for version in ("0.3", "1.0"):
            body = error_body(version, 1, RpcError(code, "what went wrong, in detail"))
            assert body["error"]["message"] == message
            assert said(body["error"]) == "what went wrong, in detail"
    relayed = RpcError.relayed({"code": -32001, "message": "no such task here", "data": None})
    assert error_body("1.0", 1, relayed)["error"]["message"] == "no such task here"


def test_error_body_v1_data_is_a_list_of_typed_details() -> None:
    error = RpcError(
        NO_MATCHING_AGENT,
        "No agent matches",
        {"closest": [{"agent": "a", "score": 0.1}], "threshold": 0.3, "text": "hi"},
    )
    data = error_body("1.0", "r-1", error)["error"]["data"]
    # a refusal's ErrorInfo keeps only its scalar members: the closest skills are in the Struct
    assert data[0] == {
        "@type": ERROR_INFO,
        "reason": "NO_MATCHING_AGENT",
        "domain": "switchboard.a2a",
        "metadata": {"threshold": "0.3", "text": "hi"},
    }
    assert data[1] == {
        "@type": "type.googleapis.com/google.protobuf.Struct",
        "value": {"closest": [{"agent": "a", "score": 0.1}], "threshold": 0.3, "text": "hi"},
    }
    assert len(data) == 2
    # a null member too; other codes keep lists in the metadata as JSON as well
    error = RpcError(NO_MATCHING_AGENT, "No agent matches", {"reason": "no match", "score": None})
    data = error_body("1.0", "r-1", error)["error"]["data"]
    assert data[0]["metadata"] == {"reason": "no match"}
    assert data[1]["value"] == {"reason": "no match", "score": None}
    error = RpcError(-32001, "Task not found", {"taskId": "t", "tries": [1]})
    assert error_body("1.0", 1, error)["error"]["data"][0]["metadata"]["tries"] == "[1]"


def test_error_body_v1_metadata_values_are_strings() -> None:
    error = RpcError(
        -32600, "Request payload validation error", {"n": 1, "ok": True, "none": None, "s": "x"}
    )
    data = error_body("1.0", 1, error)["error"]["data"]
    assert data == [
        {
            "@type": ERROR_INFO,
            "reason": "INVALID_REQUEST",
            "domain": "a2a-protocol.org",
            "metadata": {"n": "1", "ok": "true", "none": "null", "s": "x"},
        }
    ]


def test_error_body_v1_without_data_still_has_error_info() -> None:
    data = error_body("1.0", 1, RpcError(-32001, "Task not found"))["error"]["data"]
    assert data == [
        {
            "@type": ERROR_INFO,
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
            "metadata": {},
        }
    ]


def test_error_body_v1_non_object_data_becomes_a_value_detail() -> None:
    data = error_body("1.0", 1, RpcError(-32050, "x", ["a", "b"]))["error"]["data"]
    assert data[1] == {"@type": "type.googleapis.com/google.protobuf.Value", "value": ["a", "b"]}


def test_field_violations_in_both_shapes() -> None:
    error = RpcError(
        -32602,
        "Invalid params",
        {"fields": ["message.parts"]},
        violations=[("message.parts", "must hold at least one part")],
    )
    v03 = facts(error_body("0.3", 1, error)["error"]["data"])
    assert v03 == {
        "fields": ["message.parts"],
        "fieldViolations": [
            {"field": "message.parts", "description": "must hold at least one part"}
        ],
    }
    v1 = error_body("1.0", 1, error)["error"]["data"]
    assert v1[0]["reason"] == "INVALID_PARAMS"
    assert v1[-1] == {
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [
            {"field": "message.parts", "description": "must hold at least one part"}
        ],
    }


def test_reason_can_be_overridden() -> None:
    error = RpcError(-32700, "too large", {"maxBytes": 1}, reason="REQUEST_TOO_LARGE")
    assert error_body("1.0", None, error)["error"]["data"][0]["reason"] == "REQUEST_TOO_LARGE"


def test_relayed_upstream_errors_pass_through_verbatim() -> None:
    upstream = json.loads((WIRE / "v1_send_noversion.out").read_bytes().split(b"\r\n\r\n", 1)[1])
    error = RpcError.relayed(upstream["error"])
    assert error.shaped
    for version in ("0.3", "1.0"):
        assert error_body(version, 1, error)["error"] == upstream["error"]
    odd = RpcError.relayed({"code": "x", "message": 5})
    assert (odd.code, odd.message, odd.data) == (-32603, "", None)
    assert error_body("0.3", 1, odd)["error"] == {"code": -32603, "message": ""}


@pytest.mark.parametrize("bad_id", [True, float("inf"), float("nan"), {"a": 1}, [1]])
def test_bodies_never_echo_an_invalid_id(bad_id: Any) -> None:
    assert error_body("0.3", bad_id, RpcError(-32600, "x"))["id"] is None
    assert result_body(bad_id, {})["id"] is None


def test_result_body() -> None:
    assert result_body("r", {"task": {}}) == {"jsonrpc": "2.0", "id": "r", "result": {"task": {}}}
    assert result_body(None, None) == {"jsonrpc": "2.0", "id": None, "result": None}


def test_rpc_error_repr_and_str() -> None:
    error = RpcError(-32001, "gone", {"taskId": "t"})
    assert str(error) == "gone"
    assert repr(error) == "RpcError(-32001, 'gone', {'taskId': 't'})"
    assert error.id is None


# --- read_request over a real server --------------------------------------------------------


async def _endpoint(request: web.Request) -> web.Response:
    try:
        version = request_version(request)
    except RpcError as exc:
        return web.json_response(error_body("1.0", None, exc))
    try:
        rpc = await read_request(
            request, version, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, dialects=served_call
        )
    except RpcError as exc:
        return web.json_response(error_body(version, exc.id, exc))
    echo = {"method": rpc.method, "op": rpc.op.value, "version": rpc.version, "params": rpc.params}
    echo["dialect"] = rpc.dialect
    return web.json_response(result_body(rpc.id, echo))


Client = TestClient[web.Request, web.Application]
Post = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
async def post(aiohttp_client: Callable[..., Awaitable[Client]]) -> Post:
    app = web.Application()
    app.router.add_post("/", _endpoint)
    client = await aiohttp_client(app)

    async def send(body: bytes | str | Any, version: str | None = None, **kwargs: Any) -> Any:
        headers = {"Content-Type": "application/json"}
        if version is not None:
            headers["A2A-Version"] = version
        if not isinstance(body, bytes | str) and not hasattr(body, "__aiter__"):
            body = json.dumps(body)
        response = await client.post("/", data=body, headers=headers, **kwargs)
        assert response.status == 200
        return await response.json()

    return send


def _send_v03(**over: Any) -> dict[str, Any]:
    return {**json.loads((WIRE / "v03_send.json").read_text()), **over}


def _send_v1(**over: Any) -> dict[str, Any]:
    return {**json.loads((WIRE / "v1_send.json").read_text()), **over}


async def test_reads_the_captured_sdk_requests(post: Post) -> None:
    body = await post((WIRE / "v03_send.json").read_bytes())
    assert body["id"] == 1
    assert body["result"]["method"] == "message/send"
    assert body["result"]["op"] == "send"
    assert body["result"]["version"] == "0.3"
    assert body["result"]["params"] == _send_v03()["params"]
    body = await post((WIRE / "v1_stream.json").read_bytes(), "1.0")
    assert body["id"] == 2
    assert body["result"]["op"] == "stream"
    assert body["result"]["version"] == "1.0"


async def test_string_and_null_ids_are_echoed(post: Post) -> None:
    assert (await post(_send_v03(id="req-9")))["id"] == "req-9"
    assert (await post(_send_v03(id=None)))["id"] is None
    request = _send_v03()
    del request["id"]
    assert (await post(request))["id"] is None


async def test_version_in_the_query_string(post: Post) -> None:
    app_request = _send_v1()
    body = await post(json.dumps(app_request), params={"A2A-Version": "1.0"})
    assert body["result"]["version"] == "1.0"


async def test_unsupported_version_header(post: Post) -> None:
    body = await post(_send_v1(), "2.0")
    assert body["error"]["code"] == -32009
    assert body["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert body["error"]["data"][0]["metadata"]["supportedVersions"] == '["0.3","1.0"]'


async def test_bad_json_is_a_parse_error_with_id_null(post: Post) -> None:
    body = await post(b'{"jsonrpc": "2.0", "id": 5, "method": ')
    assert body["id"] is None
    assert body["error"]["code"] == -32700
    assert said(body["error"]).startswith("The request body is not valid JSON: ")
    assert "line 1, column" in said(body["error"])
    assert body["error"]["data"]["line"] == 1


@pytest.mark.parametrize("raw", [b"", b"  \r\n"])
async def test_empty_body(post: Post, raw: bytes) -> None:
    body = await post(raw)
    assert body["error"]["code"] == -32700
    assert "empty" in said(body["error"])


async def test_invalid_utf8_and_nan_are_parse_errors(post: Post) -> None:
    body = await post(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}')
    assert body["error"]["code"] == -32700
    assert "UTF-8" in said(body["error"])
    body = await post(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"a": NaN}}')
    assert body["error"]["code"] == -32700
    assert "NaN" in said(body["error"])


async def test_too_deep(post: Post) -> None:
    params: Any = {}
    for _ in range(MAX_DEPTH):
        params = {"x": params}
    body = await post(_send_v03(params=params), "1.0")
    assert body["id"] is None
    assert body["error"]["code"] == -32700
    assert f"deeper than {MAX_DEPTH} levels" in said(body["error"])
    info = body["error"]["data"][0]
    assert info["reason"] == "JSON_TOO_DEEP"
    assert facts(info["metadata"]) == {"maxDepth": str(MAX_DEPTH)}


async def test_too_large_with_content_length(post: Post) -> None:
    raw = json.dumps(_send_v03(params={"pad": "x" * MAX_BYTES})).encode()
    body = await post(raw)
    assert body["id"] is None
    assert body["error"]["code"] == -32700
    assert said(body["error"]) == f"The request body is larger than the limit of {MAX_BYTES} bytes"
    assert facts(body["error"]["data"]) == {"maxBytes": MAX_BYTES, "contentLength": len(raw)}


async def test_too_large_chunked_without_content_length(post: Post) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc": "2.0", "id": 1, "pad": "'
        for _ in range(8):
            yield b"x" * 1024
        yield b'"}'

    body = await post(chunks(), "1.0")
    assert body["error"]["code"] == -32700
    assert body["error"]["data"][0]["reason"] == "REQUEST_TOO_LARGE"
    assert facts(body["error"]["data"][0]["metadata"]) == {"maxBytes": str(MAX_BYTES)}


async def test_chunked_body_within_the_limit_is_read(post: Post) -> None:
    raw = json.dumps(_send_v03()).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 10):
            yield raw[start : start + 10]

    assert (await post(chunks()))["result"]["op"] == "send"


@pytest.mark.parametrize("batch", [[], [{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}]])
async def test_batches_are_refused(post: Post, batch: list[Any]) -> None:
    body = await post(batch)
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert said(body["error"]).startswith("Batch requests are not supported")
    assert facts(body["error"]["data"]) == {"batchSize": len(batch)}


@pytest.mark.parametrize(("document", "kind"), [("hello", "string"), (3, "number"), (None, "null")])
async def test_non_object_requests(post: Post, document: Any, kind: str) -> None:
    body = await post(json.dumps(document))
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert said(body["error"]) == f"A JSON-RPC request must be a JSON object, not {kind}"


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "missing"), ("1.0", '"1.0" (string)'), (2.0, "2.0 (number)"), (2, "2 (number)")],
)
async def test_wrong_jsonrpc_keeps_the_id(post: Post, value: Any, shown: str) -> None:
    request = _send_v03(id="keep-me", jsonrpc=value)
    if value is None:
        del request["jsonrpc"]
    body = await post(request)
    assert body["id"] == "keep-me"
    assert body["error"]["code"] == -32600
    assert shown in said(body["error"])
    assert facts(body["error"]["data"]) == {"field": "jsonrpc"}


@pytest.mark.parametrize(
    ("bad_id", "raw", "kind"),
    [(True, "true", "boolean"), ({}, "{}", "object"), ([], "[]", "array")],
)
@pytest.mark.parametrize("version", [None, "1.0"])
async def test_bad_id_types_answer_with_id_null(
    post: Post, bad_id: Any, raw: str, kind: str, version: str | None
) -> None:
    body = await post(_send_v03(id=bad_id), version)
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert said(body["error"]) == (
        f"'id' must be a string, a finite number or null; got {raw} ({kind})"
    )
    if version is None:
        assert facts(body["error"]["data"]) == {"field": "id", "received": kind}
    else:
        assert facts(body["error"]["data"][0]["metadata"]) == {"field": "id", "received": kind}


@pytest.mark.parametrize("number", ["1.5", "1e+308", "-0.0", "1e-300", "2e-308", "9" * 40, "-7"])
@pytest.mark.parametrize("version", [None, "1.0"])
async def test_any_finite_number_id_is_echoed_as_sent(
    post: Post, number: str, version: str | None
) -> None:
    """JSON-RPC 2.0 allows any number (issue 35: 1.5 and 1e+308 got -32600, id null)."""
    request = _send_v03() if version is None else _send_v1()
    raw = json.dumps({**request, "id": 0}).replace('"id": 0', f'"id": {number}', 1)
    body = await post(raw, version)
    assert "result" in body and json.dumps(body["id"]) == number


@pytest.mark.parametrize(
    ("number", "code"),
    [("1e400", -32600), ("-1E+999", -32600), ("NaN", -32700), ("-Infinity", -32700)],
)
async def test_a_non_finite_id_is_answered_with_id_null(post: Post, number: str, code: int) -> None:
    """A number beyond a double's range is valid JSON (-32600); NaN and Infinity are not JSON
    at all (-32700)."""
    raw = json.dumps({**_send_v1(), "id": 0}).replace('"id": 0', f'"id": {number}', 1)
    body = await post(raw, "1.0")
    assert body["id"] is None and body["error"]["code"] == code
    if code == -32600:
        assert said(body["error"]) == (
            "'id' must be a string, a finite number or null; got a number beyond the range "
            "of a double"
        )
    same = raw.replace('"role"', '"n": 1e400, "role"', 1)  # elsewhere: not JSON it can take
    assert (await post(same.replace(f'"id": {number}', '"id": 3'), "1.0"))["error"]["code"] == (
        -32700
    )


async def test_missing_or_bad_method(post: Post) -> None:
    request = _send_v03(id=4)
    del request["method"]
    body = await post(request)
    assert (body["id"], body["error"]["code"]) == (4, -32600)
    assert said(body["error"]) == "'method' is missing"
    for method, shown in [(7, "7 (number)"), ("", '"" (string)'), (None, "null (null)")]:
        body = await post(_send_v03(id=4, method=method))
        assert (body["id"], body["error"]["code"]) == (4, -32600)
        assert said(body["error"]) == f"'method' must be a non-empty string; got {shown}"


@pytest.mark.parametrize(("params", "kind"), [([1, 2], "array"), ("x", "string"), (None, "null")])
async def test_params_not_an_object(post: Post, params: Any, kind: str) -> None:
    body = await post(_send_v03(id=11, params=params))
    assert body["id"] == 11
    assert body["error"]["code"] == -32600
    assert said(body["error"]) == f"'params' must be an object for A2A methods; got {kind}"


async def test_unknown_method(post: Post) -> None:
    body = await post(_send_v03(id=3, method="tasks/foo"))
    assert body["id"] == 3
    assert body["error"]["code"] == -32601
    assert said(body["error"]) == "Method 'tasks/foo' does not exist in A2A 0.3"
    assert body["error"]["data"]["supportedMethods"] == list(METHODS["0.3"])
    body = await post(_send_v1(id=3, method="Nope"), "1.0")
    assert body["error"]["code"] == -32601
    assert body["error"]["data"][0]["metadata"]["method"] == "Nope"


async def test_a_v03_method_with_a_v1_header(post: Post) -> None:
    body = await post(
        {"jsonrpc": "2.0", "id": "g", "method": "tasks/get", "params": {"id": "t"}}, "1.0"
    )
    assert body["id"] == "g"
    assert body["error"]["code"] == -32601
    assert said(body["error"]) == (
        "tasks/get is an A2A 0.3 method; this request has A2A-Version 1.0: "
        "use GetTask, or drop the A2A-Version header"
    )
    assert facts(body["error"]["data"][0]["metadata"]) == {
        "method": "tasks/get",
        "version": "1.0",
        "methodVersion": "0.3",
        "useMethod": "GetTask",
    }


async def test_a_v1_method_without_a_header(post: Post) -> None:
    body = await post(_send_v1(id=8))
    assert body["id"] == 8
    assert body["error"]["code"] == -32601
    assert said(body["error"]) == (
        "SendMessage is an A2A 1.0 method; this request has no A2A-Version header, so it is "
        "A2A 0.3: use message/send, or send A2A-Version: 1.0"
    )
    assert body["error"]["data"]["useMethod"] == "message/send"
    body = await post({"jsonrpc": "2.0", "id": 9, "method": "ListTasks", "params": {}}, "0.3")
    assert said(body["error"]) == (
        "ListTasks is an A2A 1.0 method; this request has A2A-Version 0.3: "
        "ListTasks exists only in A2A 1.0; send A2A-Version: 1.0 to call it"
    )
    assert body["error"]["data"]["useMethod"] is None


async def test_legacy_and_extended_card_methods(post: Post) -> None:
    # v0.1 names are read as v0.1 (router.compat.v01): these 0.3 params lack the client's task id
    body = await post(_send_v03(method="tasks/send"))
    assert body["error"]["code"] == -32602
    assert body["error"]["data"]["fields"] == ["id"]
    v01 = {"id": "t-1", "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}}
    body = await post(_send_v03(method="tasks/sendSubscribe", params=v01))
    assert body["result"]["method"] == "message/stream"
    assert (body["result"]["version"], body["result"]["dialect"]) == ("0.3", "0.1")
    assert body["result"]["params"]["message"]["parts"] == [{"kind": "text", "text": "hi"}]
    body = await post(_send_v03(method="A2A.SendMessage", params=_send_v1()["params"]))
    assert (body["result"]["method"], body["result"]["version"]) == ("SendMessage", "1.0")
    assert body["result"]["dialect"] == "1.0-prefixed"
    body = await post({"jsonrpc": "2.0", "id": 3, "method": "A2A.GetTask", "params": {}})
    assert body["error"]["code"] == -32602  # (this test endpoint shapes errors by the header)
    # the extended card methods are read as calls the router answers (router.forward.handler)
    body = await post({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}, "1.0")
    assert body["result"]["op"] == "extended-card"
    body = await post({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"})
    assert body["result"]["op"] == "extended-card"


async def test_basic_params_shape_is_checked_with_the_id(post: Post) -> None:
    body = await post(_send_v03(id=21, params={}))
    assert body["id"] == 21
    assert body["error"]["code"] == -32602
    assert said(body["error"]) == "Invalid params: message: is required"
    assert body["error"]["data"]["fieldViolations"] == [
        {"field": "message", "description": "is required"}
    ]
    get = {"jsonrpc": "2.0", "id": 22, "method": "GetTask", "params": {"id": 5}}
    body = await post(get, "1.0")
    assert body["id"] == 22
    assert body["error"]["code"] == -32602
    assert body["error"]["data"][-1]["fieldViolations"] == [
        {"field": "id", "description": "must be a task id string, not a number"}
    ]
    listing = {"jsonrpc": "2.0", "id": 23, "method": "ListTasks", "params": {"pageSize": 500}}
    body = await post(listing, "1.0")
    assert (body["id"], body["error"]["code"]) == (23, -32602)
    body = await post({"jsonrpc": "2.0", "id": 24, "method": "GetTask"}, "1.0")
    assert said(body["error"]) == "Invalid params: id: is required"


async def test_valid_calls_of_every_op(post: Post) -> None:
    calls = [
        ("0.3", "tasks/get", {"id": "t"}, "get"),
        ("0.3", "tasks/cancel", {"id": "t"}, "cancel"),
        ("0.3", "tasks/resubscribe", {"id": "t"}, "subscribe"),
        ("1.0", "ListTasks", {}, "list"),
        ("1.0", "SubscribeToTask", {"id": "t"}, "subscribe"),
    ]
    for version, method, params, op in calls:
        request = {"jsonrpc": "2.0", "id": method, "method": method, "params": params}
        body = await post(request, version)
        assert body["result"]["op"] == op, body
        assert body["id"] == method


async def test_push_config_methods_have_their_params_checked(post: Post) -> None:
    calls = [
        ("0.3", "tasks/pushNotificationConfig/set", {"taskId": "t"}, "pushNotificationConfig"),
        ("0.3", "tasks/pushNotificationConfig/get", {"id": "t", "pushNotificationConfigId": 3},
         "pushNotificationConfigId"),
        ("1.0", "GetTaskPushNotificationConfig", {"taskId": "t", "id": ["c"]}, "id"),
        ("1.0", "ListTaskPushNotificationConfigs", {}, "taskId"),  # no params at all
    ]  # fmt: skip
    for version, method, params, field in calls:
        request = {"jsonrpc": "2.0", "id": method, "method": method, "params": params}
        body = await post(request, version)
        assert body["id"] == method and body["error"]["code"] == -32602, body
        assert field in said(body["error"])
    good = [
        ("0.3", "tasks/pushNotificationConfig/set",
         {"taskId": "t", "pushNotificationConfig": {"url": "https://c.example/h"}}),
        ("1.0", "DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        ("1.0", "GetTaskPushNotificationConfig", {"task_id": "t", "id": "c"}),  # proto names
    ]  # fmt: skip
    for version, method, params in good:
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        body = await post(request, version)
        assert "result" in body, (method, body)
        assert body["result"]["op"] == "push-config", body


async def test_proto_field_names_are_read_as_json_names(post: Post) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "GetTask",
        "params": {"id": "t", "history_length": 2},
    }
    body = await post(request, "1.0")
    assert body["result"]["op"] == "get", body
    assert body["result"]["params"] == {"id": "t", "historyLength": 2}


async def test_params_checks_name_the_full_field_path(post: Post) -> None:
    request = _send_v03(id=31)
    request["params"]["message"]["contextId"] = "c" * 600
    request["params"]["configuration"] = {"historyLength": "abc", "blocking": "yes"}
    request["params"]["metadata"] = 5
    body = await post(request)
    assert (body["id"], body["error"]["code"]) == (31, -32602)
    fields = ["message.contextId", "metadata", "configuration.historyLength"]
    fields.append("configuration.blocking")
    assert body["error"]["data"]["fields"] == fields
    violations = body["error"]["data"]["fieldViolations"]
    assert [v["field"] for v in violations] == fields
    assert violations[0]["description"] == "must be at most 512 characters long, not 600"

    request = _send_v1(id=32)
    request["params"]["message"]["contextId"] = "c" * 600
    request["params"]["configuration"] = {"returnImmediately": "no"}
    body = await post(request, "1.0")
    assert (body["id"], body["error"]["code"]) == (32, -32602)
    info, *_, bad_request = body["error"]["data"]
    assert info["reason"] == "INVALID_PARAMS"
    assert bad_request["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert [v["field"] for v in bad_request["fieldViolations"]] == [
        "message.contextId",
        "configuration.returnImmediately",
    ]
    get = {"jsonrpc": "2.0", "id": 33, "method": "GetTask", "params": {"id": "t"}}
    get["params"]["historyLength"] = -5
    body = await post(get, "1.0")
    assert (body["id"], body["error"]["code"]) == (33, -32602)
    assert body["error"]["data"][-1]["fieldViolations"] == [
        {"field": "historyLength", "description": "must be a non-negative integer, got -5"}
    ]
    listing = {"jsonrpc": "2.0", "id": 34, "method": "ListTasks"}
    listing["params"] = {"statusTimestampAfter": "yesterday"}
    body = await post(listing, "1.0")
    assert (body["id"], body["error"]["code"]) == (34, -32602)
    assert body["error"]["data"][-1]["fieldViolations"][0]["field"] == "statusTimestampAfter"


async def test_a_push_notification_config_in_a_send_must_be_an_object(post: Post) -> None:
    request = _send_v03(id=41)
    request["params"]["configuration"] = {"pushNotificationConfig": "https://c.example/h"}
    body = await post(request)
    assert (body["id"], body["error"]["code"]) == (41, -32602)
    assert body["error"]["data"]["fields"] == ["configuration.pushNotificationConfig"]
    request = _send_v1(id=42)
    request["params"]["configuration"] = {"taskPushNotificationConfig": {"url": "https://h"}}
    body = await post(request, "1.0")
    assert body["result"]["op"] == "send", body  # checked when the router stores it
