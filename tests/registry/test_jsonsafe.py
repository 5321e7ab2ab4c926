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


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+309", "9" * 400 + ".0"])
def test_numbers_beyond_a_double_are_refused(number: str) -> None:
    """They would parse to inf: no canonical form, database or strict client takes that."""
    with pytest.raises(JsonLimitError) as info:
        loads_limited(f'{{"params": {{"n": {number}}}}}', max_depth=8)
    assert info.value.code == "invalid_json"
    assert info.value.details["problem"] == "non-finite number"
    assert "beyond the range of a double" in info.value.message
    assert len(info.value.message) < 200


def test_large_finite_and_tiny_numbers_are_fine() -> None:
    assert loads_limited(
        "[1.7976931348623157e308, 1e-400, -0.0, 12345678901234567890]", max_depth=1
    ) == [1.7976931348623157e308, 0.0, -0.0, 12345678901234567890]


@pytest.mark.parametrize(
    ("text", "member"),
    [
        ('{"url": "https://a.example", "url": "https://evil.example"}', "url"),
        ('{"skills": [{"id": "a", "name": "A", "id": "b"}]}', "id"),
        ('{"a": {}, "a": {}}', "a"),
        ('{"\\u0000": 1, "\\u0000": 2}', "\\x00"),
    ],
)
def test_duplicate_members_are_refused(text: str, member: str) -> None:
    """Parsers disagree on which value wins, so a signature checked on one reading could vouch
    for content a client reads differently from the same bytes."""
    with pytest.raises(JsonLimitError) as info:
        loads_limited(text, max_depth=8)
    assert info.value.code == "invalid_json"
    assert info.value.details == {"problem": "duplicate member", "member": member}
    assert info.value.message == f"an object has the member {member!r} more than once"


def test_same_member_in_different_objects_is_fine() -> None:
    assert loads_limited('[{"a": 1}, {"a": 2, "b": {"a": 3}}]', max_depth=3) == [
        {"a": 1},
        {"a": 2, "b": {"a": 3}},
    ]


def test_nul_is_refused_unless_allowed() -> None:
    text = '{"text": "a\\u0000b", "k\\u0000": 1}'
    with pytest.raises(JsonLimitError) as info:
        loads_limited(text, max_depth=2)
    assert info.value.details == {"problem": "NUL"}
    assert loads_limited(text, max_depth=2, allow_nul=True) == {"text": "a\x00b", "k\x00": 1}


def test_an_unpaired_surrogate_is_refused_even_where_nul_is_allowed() -> None:
    with pytest.raises(JsonLimitError) as info:
        loads_limited('["a\\u0000", "\\ud800"]', max_depth=2, allow_nul=True)
    assert info.value.details == {"problem": "unpaired surrogate"}


def test_numbers_beyond_a_double_parse_to_infinities_when_asked() -> None:
    assert loads_limited('{"id": 1e400, "n": -1e400}', max_depth=2, finite=False) == {
        "id": float("inf"),
        "n": float("-inf"),
    }
    with pytest.raises(JsonLimitError):  # the constants are never JSON
        loads_limited('{"id": NaN}', max_depth=2, finite=False)
