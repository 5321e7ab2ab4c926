"""Strict, bounded JSON parsing."""

from __future__ import annotations

import pytest

from registry.jsonsafe import JsonLimitError, json_depth, loads_limited


def test_parses_bytes_and_str() -> None:
    assert loads_limited(b'{"name": "caf\xc3\xa9", "n": [1, 2.5, null]}', max_depth=4) == {
        "name": "café",
        "n": [1, 2.5, None],
    }
    assert loads_limited("[true]", max_depth=1) == [True]


def test_invalid_json_reports_line_and_column() -> None:
    with pytest.raises(JsonLimitError) as info:
        loads_limited(b'{\n  "a": 1,\n  oops\n}', max_depth=8)
    assert info.value.code == "invalid_json"
    assert info.value.details["line"] == 3
    assert info.value.details["column"] == 3
    assert "line 3, column 3" in info.value.message


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(JsonLimitError) as info:
        loads_limited(b'{"a": "\xff"}', max_depth=8)
    assert info.value.code == "invalid_json"
    assert info.value.details == {"problem": "invalid UTF-8", "offset": 7}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_constants_are_refused(constant: str) -> None:
    with pytest.raises(JsonLimitError) as info:
        loads_limited(f'{{"x": {constant}}}', max_depth=8)
    assert info.value.code == "invalid_json"
    assert info.value.details == {"constant": constant}


def test_huge_integer_is_invalid_not_a_crash() -> None:
    with pytest.raises(JsonLimitError) as info:
        loads_limited("1" * 5000, max_depth=8)
    assert info.value.code == "invalid_json"


def test_depth_limit_is_inclusive() -> None:
    assert loads_limited("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(JsonLimitError) as info:
        loads_limited('[[{"a": [1]}]]', max_depth=3)
    assert info.value.code == "json_too_deep"
    assert info.value.details == {"max_depth": 3}


def test_recursion_error_becomes_too_deep() -> None:
    with pytest.raises(JsonLimitError) as info:
        loads_limited("[" * 100_000 + "]" * 100_000, max_depth=32)
    assert info.value.code == "json_too_deep"


def test_json_depth_is_iterative() -> None:
    value: list = []
    node = value
    for _ in range(5000):  # deeper than the recursion limit
        child: list = []
        node.append(child)
        node = child
    assert json_depth(value) == 5001
    assert json_depth(value, stop_after=10) == 11
    assert json_depth(7) == 0
    assert json_depth({"a": [], "b": {"c": {}}}) == 3


def test_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        loads_limited("", max_depth=1)
