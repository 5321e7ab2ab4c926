"""router.transport.grpcwire: request messages as 1.0 JSON-RPC requests, results parsed strictly,
JSON-RPC errors as gRPC statuses with their google.rpc details."""

from __future__ import annotations

import json

import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2

from router.protocol.errors import RpcError, error_object

grpc = pytest.importorskip("grpc")  # the grpc extra (CI installs it with the test extra)
grpcwire = pytest.importorskip("router.transport.grpcwire")


def _trailer(trailer: tuple[tuple[str, bytes], ...]) -> status_pb2.Status:
    (key, value), *_ = trailer
    assert key == "grpc-status-details-bin"
    return status_pb2.Status.FromString(value)


def test_every_rpc_of_the_service_is_served() -> None:
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    assert set(grpcwire.RPCS) == set(service.methods_by_name)
    for name, rpc in grpcwire.RPCS.items():
        method = service.methods_by_name[name]
        assert rpc.request.DESCRIPTOR.full_name == method.input_type.full_name
        assert rpc.response.DESCRIPTOR.full_name == method.output_type.full_name
        assert rpc.streaming == method.server_streaming


def test_a_request_becomes_its_json_rpc_request_in_1_0_json() -> None:
    request = a2a_pb2.GetTaskRequest(id="t-1", history_length=2, tenant="acme")
    body = json.loads(grpcwire.rpc_body(grpcwire.RPCS["GetTask"], request, 7))
    assert body == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "GetTask",
        "params": {"id": "t-1", "historyLength": 2, "tenant": "acme"},
    }


def test_results_are_parsed_strictly() -> None:
    rpc = grpcwire.RPCS["GetTask"]
    task = grpcwire.result_message(rpc, {"id": "t", "status": {"state": "TASK_STATE_WORKING"}})
    assert task.status.state == a2a_pb2.TaskState.TASK_STATE_WORKING
    with pytest.raises(json_format.ParseError):
        grpcwire.result_message(rpc, {"id": "t", "kind": "task"})  # a 0.3 member
    delete = grpcwire.RPCS["DeleteTaskPushNotificationConfig"]
    assert grpcwire.result_message(delete, None).ByteSize() == 0


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (-32001, "NOT_FOUND"),
        (-32002, "FAILED_PRECONDITION"),
        (-32003, "FAILED_PRECONDITION"),
        (-32004, "FAILED_PRECONDITION"),
        (-32005, "INVALID_ARGUMENT"),
        (-32006, "INTERNAL"),
        (-32007, "FAILED_PRECONDITION"),
        (-32008, "FAILED_PRECONDITION"),
        (-32009, "FAILED_PRECONDITION"),
        (-32602, "INVALID_ARGUMENT"),
        (-32603, "INTERNAL"),
        (-32050, "NOT_FOUND"),
        (-32052, "UNAVAILABLE"),
        (-32054, "UNAUTHENTICATED"),
        (-32055, "RESOURCE_EXHAUSTED"),
        (-31999, "UNKNOWN"),
    ],
)
def test_codes_map_as_the_specification_table_says(code: int, status: str) -> None:
    assert grpcwire.grpc_code(code) == getattr(grpc.StatusCode, status)


def test_an_error_keeps_its_details_and_explanation() -> None:
    error = RpcError(
        -32602,
        "message.parts must not be empty",
        {"nested": {"a": 1}},
        violations=[("message.parts", "at least one part")],
    )
    code, message, trailer = grpcwire.error_status(error_object("1.0", error))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message == "message.parts must not be empty"
    status = _trailer(trailer)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    info, struct = error_details_pb2.ErrorInfo(), struct_pb2.Struct()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("INVALID_PARAMS", "a2a-protocol.org")
    assert status.details[1].Unpack(struct)
    bad = error_details_pb2.BadRequest()
    assert status.details[2].Unpack(bad)
    assert bad.field_violations[0].field == "message.parts"


def test_an_agents_own_error_gets_an_error_info() -> None:
    code, message, trailer = grpcwire.error_status(
        {"code": -31000, "message": "quota exceeded", "data": {"left": 0}}
    )
    assert (code, message) == (grpc.StatusCode.UNKNOWN, "quota exceeded")
    status = _trailer(trailer)
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("UNKNOWN_ERROR", "switchboard.a2a")
    struct = struct_pb2.Struct()
    assert status.details[1].Unpack(struct) and struct["left"] == 0
