"""Agents' answers read strictly (router.forward.answers); the errors they become are tested
through a real upstream in test_upstream.py."""

from __future__ import annotations

import pytest

from router.forward.answers import NotJson, Unacceptable, is_response, parse_answer


def test_json_is_read_exactly_and_a_bom_is_allowed() -> None:
    raw = '\ufeff{"jsonrpc": "2.0", "id": 1, "result": {"n": 123456789012345678901234567890}}'
    value = parse_answer(raw.encode(), max_depth=10)
    assert value["result"]["n"] == 123456789012345678901234567890
    assert is_response(value)


@pytest.mark.parametrize(
    ("raw", "kind", "says"),
    [
        (b"", NotJson, "empty"),
        (b"<html>oops</html>", NotJson, "not JSON"),
        (b"\xff\xfe", NotJson, "UTF-8"),
        (b'{"n": NaN}', Unacceptable, "NaN"),
        (b'{"n": 1e400}', Unacceptable, "out of range"),
        (b"[" * 12 + b"]" * 12, Unacceptable, "deeper than 10"),
        (b"1" * 5000, Unacceptable, "too long"),
    ],
)
def test_what_cannot_be_written_back_is_refused(raw: bytes, kind: type, says: str) -> None:
    with pytest.raises(kind, match=says):
        parse_answer(raw, max_depth=10)


def test_depth_exactly_at_the_limit_and_brackets_inside_strings() -> None:
    assert parse_answer(b"[" * 10 + b"]" * 10, max_depth=10) is not None
    wide = b"[" + b",".join([b"[[]]"] * 20) + b"]"  # 61 brackets, 3 deep
    assert len(parse_answer(wide, max_depth=10)) == 20
    assert parse_answer(b'{"t": "' + b"{[" * 30 + b'"}', max_depth=2) == {"t": "{[" * 30}
    with pytest.raises(Unacceptable, match="deeper than 2"):
        parse_answer(b'{"a": {"b": [], "t": "[[[["}}', max_depth=2)
    with pytest.raises(NotJson, match="BOM"):
        parse_answer("\ufeff{}", max_depth=2)  # text, not bytes: no BOM expected


@pytest.mark.parametrize(
    ("obj", "ok"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": None}, True),
        ({"id": 1, "error": {"code": -32001, "message": "gone"}}, True),
        ({"jsonrpc": "2.0", "id": 1}, False),
        ({"jsonrpc": "2.0", "result": 1, "error": {"code": 1, "message": "x"}}, False),
        ({"jsonrpc": "2.0", "error": {"code": True, "message": "x"}}, False),
        ({"jsonrpc": "1.0", "result": 1}, False),
        ([], False),
    ],
)
def test_is_response(obj: object, ok: bool) -> None:
    assert is_response(obj) is ok
