"""router.forward.eventshape: a text that matches a checked event's shape is valid JSON with
the same structure, keys and deciding values; only free strings differ."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from router.forward.eventshape import DECIDING, Shape, split

_KEYS = st.sampled_from(["text", "taskId", "contextId", "id", "kind", "state", "data", "a\u00e9"])
_STRINGS = st.text(max_size=8) | st.sampled_from(['"', "\\", "\u2028", "\n", "t-1", "\x00"])
_SCALARS = st.none() | st.booleans() | st.integers(-(10**20), 10**20) | _STRINGS
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)
_STYLES = st.sampled_from([((",", ":"), True), ((", ", ": "), False), ((",", ": "), True)])


def _dumps(value: Any, style: tuple[tuple[str, str], bool]) -> str:
    separators, ascii_only = style
    return json.dumps(value, separators=separators, ensure_ascii=ascii_only)


def _deciding(value: Any) -> list[Any]:
    """The structure with every free string blanked: what a match must keep."""
    if isinstance(value, dict):
        return [
            (k, v if f'"{k}"' in DECIDING and isinstance(v, str) else _deciding(v))
            for k, v in value.items()
        ]
    if isinstance(value, list):
        return [_deciding(v) for v in value]
    return "" if isinstance(value, str) else value


def _retext(value: Any, new: list[str]) -> Any:
    """``value`` with its free strings replaced, in order, from ``new`` (cycled)."""
    if isinstance(value, dict):
        return {
            k: v if f'"{k}"' in DECIDING and isinstance(v, str) else _retext(v, new)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_retext(v, new) for v in value]
    if isinstance(value, str) and new:
        new.append(new.pop(0))
        return new[-1]
    return value


def test_the_parts_of_a_json_text() -> None:
    parts = split('{"a": "x\\"y", "n": [1, "\\u00e9"]}')
    assert parts == ["{", '"a"', ": ", '"x\\"y"', ", ", '"n"', ": [1, ", '"\\u00e9"', "]}"]


@given(_JSON, _STYLES)
def test_every_quote_of_valid_json_is_in_one_of_its_strings(value: Any, style: Any) -> None:
    parts = split(_dumps(value, style))
    assert not any('"' in between for between in parts[0::2])
    assert [json.loads(s) for s in parts[1::2]] == [s for s in _strings(value)]


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in [k, *_strings(v)]]
    if isinstance(value, list):
        return [x for v in value for x in _strings(v)]
    return [value] if isinstance(value, str) else []


@given(_JSON, _STYLES, st.lists(_STRINGS, min_size=1, max_size=4))
def test_the_same_event_with_other_free_strings_matches(
    value: Any, style: Any, new: list[str]
) -> None:
    shape = Shape.of(split(_dumps(value, style)))
    assume(shape is not None)  # no key written with an escape
    assert shape is not None
    other = _retext(value, list(new))
    assert shape.matches(_dumps(other, style))


@given(_JSON, _STYLES, st.data())
def test_a_matching_text_is_json_with_the_same_deciding_values(
    value: Any, style: Any, data: st.DataObject
) -> None:
    text = _dumps(value, style)
    shape = Shape.of(split(text))
    assume(shape is not None)
    assert shape is not None
    # the text damaged anywhere: cut, a character inserted or replaced
    at = data.draw(st.integers(0, len(text)))
    char = data.draw(st.sampled_from(['"', "\\", "x", "1", ",", ":", "{", "]", " ", "\x01", "u"]))
    how = data.draw(st.sampled_from(["insert", "replace", "cut"]))
    if how == "insert":
        damaged = text[:at] + char + text[at:]
    elif how == "replace":
        damaged = text[:at] + char + text[at + 1 :]
    else:
        damaged = text[:at]
    if shape.matches(damaged):
        assert _deciding(json.loads(damaged)) == _deciding(value)


def test_deciding_values_keys_and_numbers_must_stay() -> None:
    base = {"jsonrpc": "2.0", "id": 1, "result": {"taskId": "t", "text": "a", "n": 2}}
    shape = Shape.of(split(json.dumps(base)))
    assert shape is not None
    for changed in (
        {**base, "jsonrpc": "2.1"},
        {**base, "id": 2},
        {**base, "result": {"taskId": "u", "text": "a", "n": 2}},
        {**base, "result": {"taskId": "t", "text": "a", "n": 3}},
        {**base, "result": {"taskId": "t", "txt": "a", "n": 2}},
        {**base, "result": {"taskId": "t", "text": ["a"], "n": 2}},
    ):
        assert not shape.matches(json.dumps(changed)), changed
    assert shape.matches(json.dumps({**base, "result": {**base["result"], "text": "b"}}))


def test_a_key_written_with_an_escape_gives_no_shape() -> None:
    assert Shape.of(split('{"task\\u0049d": "t", "text": "a"}')) is None
