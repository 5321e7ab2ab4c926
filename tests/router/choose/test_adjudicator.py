"""router.choose.adjudicator: a real chat-completions server in the test; every way an answer can go
(a pick, none, too late, garbage, an error) becomes a verdict, never an exception."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from router.choose.adjudicator import Adjudicator, Option

OPTIONS = [
    Option("flights", "book-flights", "Flight booking", "Books airline tickets.", 0.5),
    Option("hotels", "book-hotels", "Hotel booking", "Reserves hotel rooms.", 0.48),
]


async def _ask(server: TestServer, budget: float = 2.0) -> Any:
    judge = Adjudicator(str(server.make_url("")), "judge", "sk-secret", timeout=budget)
    try:
        return await judge.adjudicate("a room in Lyon for two nights", OPTIONS)
    finally:
        await judge.close()


@pytest.mark.parametrize(
    ("content", "outcome", "agent"),
    [
        ('{"choice": 2, "reason": "a room"}', "picked", "hotels"),
        ('```json\n{"choice": "2"}\n```', "picked", "hotels"),
        ('{"choice": "none", "reason": "no"}', "none", None),
        ('{"choice": 3}', "invalid", None),
        ('{"choice": "hotels"}', "invalid", None),
        ("the second one", "invalid", None),
        ('{"pick": 1}', "invalid", None),
    ],
)
async def test_answers_become_verdicts(
    chat: Any, content: str, outcome: str, agent: str | None
) -> None:
    handler, server = chat
    handler.content = content
    verdict = await _ask(server)
    assert verdict.outcome == outcome, verdict
    assert (verdict.option.agent_id if verdict.option else None) == agent
    [request] = handler.requests
    assert request["model"] == "judge" and request["temperature"] == 0
    user = request["messages"][1]["content"]
    assert "a room in Lyon" in user and "1. Flight booking" in user and "2. Hotel booking" in user


async def test_a_slow_model_times_out(chat: Any) -> None:
    handler, server = chat
    handler.stall = True
    verdict = await _ask(server, budget=0.2)
    assert verdict.outcome == "timeout" and verdict.option is None
    assert verdict.elapsed_ms >= 200


async def test_errors_are_verdicts_without_the_key(chat: Any) -> None:
    handler, server = chat
    handler.status = 500
    verdict = await _ask(server)
    assert verdict.outcome == "error" and "HTTP 500" in verdict.detail
    assert "sk-secret" not in verdict.detail
    judge = Adjudicator("http://127.0.0.1:9", "judge", "sk-secret")
    try:
        verdict = await judge.adjudicate("x", OPTIONS)
    finally:
        await judge.close()
    assert verdict.outcome == "error" and "sk-secret" not in verdict.detail
