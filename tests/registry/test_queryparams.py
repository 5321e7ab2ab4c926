"""The listings' query models: values read, and the exact errors of today's API."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import pytest
from multidict import MultiDict

from registry.catalog import Query
from registry.errors import RegistryError
from registry.queryparams import AgentsQuery, SkillsQuery, read_query


def _read(query: str, model: Any = AgentsQuery) -> Any:
    return read_query(model, MultiDict(parse_qsl(query, keep_blank_values=True)), max_page_size=500)


def test_values_are_read() -> None:
    params = _read(
        "q=%20weather%20&tag=a&tag=&tag=b&streaming=YES&push=no&verified=1&limit=7"
        "&verification=untrusted-key&health=degraded&skill=&cursor=abc&protocol_version=1.0"
        "&match=lexical"
    )
    assert (params.limit, params.cursor, params.health) == (7, "abc", "degraded")
    assert params.match == "lexical"  # not a catalog filter: how q is ranked
    assert params.catalog_query() == Query(
        q="weather",
        tags=("a", "b"),
        streaming=True,
        push=False,
        verified=True,
        verification="untrusted-key",
        protocol_version="1.0",
    )
    empty = _read("", SkillsQuery)
    assert (empty.limit, empty.cursor, empty.catalog_query()) == (None, None, Query())
    assert empty.match is None  # the router's matcher decides


@pytest.mark.parametrize(
    ("query", "code", "message", "details"),
    [
        (
            "limit=%C2%B2",
            "invalid_parameter",
            "limit must be a whole number from 1 to 500",
            {"parameter": "limit", "value": "\u00b2", "maximum": 500},
        ),
        (
            "limit=501&q=the",
            "invalid_parameter",
            "limit must be a whole number from 1 to 500",
            {"parameter": "limit", "value": "501", "maximum": 500},
        ),
        (
            "q=!!",
            "invalid_parameter",
            "q has no searchable words (only punctuation or very common words)",
            {"parameter": "q", "value": "!!"},
        ),
        (
            "push=on",
            "invalid_parameter",
            "push must be true or false",
            {"parameter": "push", "value": "on"},
        ),
        (
            "health=sick&verification=x",
            "invalid_parameter",
            "verification must be one of verified, unsigned, invalid, untrusted-key",
            {
                "parameter": "verification",
                "value": "x",
                "allowed": ["verified", "unsigned", "invalid", "untrusted-key"],
            },
        ),
        (
            "health=",
            "invalid_parameter",
            "health must be one of healthy, degraded, unreachable, unknown",
            {
                "parameter": "health",
                "value": "",
                "allowed": ["healthy", "degraded", "unreachable", "unknown"],
            },
        ),
        (
            "match=Semantic",
            "invalid_parameter",
            "match must be one of semantic, lexical",
            {"parameter": "match", "value": "Semantic", "allowed": ["semantic", "lexical"]},
        ),
        (
            "skill=a&skill=b",
            "invalid_parameter",
            "query parameter 'skill' given more than once",
            {"parameter": "skill"},
        ),
        (
            "tags=x&foo=1",
            "unknown_parameter",
            "unknown query parameter 'foo'",
            {
                "unknown": ["foo", "tags"],
                "allowed": sorted(AgentsQuery.model_fields),
            },
        ),
    ],
)
def test_errors(query: str, code: str, message: str, details: dict[str, Any]) -> None:
    with pytest.raises(RegistryError) as caught:
        _read(query)
    error = caught.value.to_json()["error"]
    assert (caught.value.status, error["code"], error["message"]) == (400, code, message)
    assert error["details"] == details


def test_the_maximum_page_size_is_the_setting() -> None:
    params = MultiDict([("limit", "40")])
    assert read_query(SkillsQuery, params, max_page_size=40).limit == 40
    with pytest.raises(RegistryError, match="from 1 to 39"):
        read_query(SkillsQuery, params, max_page_size=39)
