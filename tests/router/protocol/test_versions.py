"""router.protocol.versions: the tables of task states and roles against the SDKs' enums."""

from __future__ import annotations

from a2a.types import a2a_pb2

from router.protocol.versions import (
    ROLE_TABLE,
    TASK_STATES,
    canonical_state,
    role_name,
    task_state,
)


def test_state_numbers_are_the_proto_enum() -> None:
    assert {state.v1: state.number for state in TASK_STATES} == dict(a2a_pb2.TaskState.items())


def test_role_numbers_are_the_proto_enum() -> None:
    numbers = {role.v1: role.number for role in ROLE_TABLE}
    assert numbers == {k: v for k, v in a2a_pb2.Role.items() if k != "ROLE_UNSPECIFIED"}


def test_v01_names_only_the_states_it_has() -> None:
    lossy = {state.v03: state.v01 for state in TASK_STATES if state.v01 != state.v03}
    assert lossy == {"auth-required": "input-required", "rejected": "failed"}


def test_lookups() -> None:
    assert task_state(3) == task_state("completed") == task_state("TASK_STATE_COMPLETED")
    assert task_state(True) is None and task_state(9) is None and task_state("done") is None
    assert canonical_state("unknown") == "TASK_STATE_UNSPECIFIED"
    assert canonical_state("TASK_STATE_RUNNING") is None
    assert role_name("0.3", 2) == "agent"
    assert role_name("1.0", "user") == "ROLE_USER"
    assert role_name("1.0", 1) == 1  # a 0.3 client has no numbers to translate
