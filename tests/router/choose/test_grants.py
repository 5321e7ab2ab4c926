"""Grants: matching sees only what the caller may use (GrantedIndex), and a hidden agent is
answered as an unknown one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from registry.crawler import Crawler
from registry.service import Registry
from registry.signatures import StaticKeys, generate_key
from registry.store import Store
from router.choose.chooser import Chooser
from router.choose.grants import EVERYTHING, Grant, GrantedIndex
from router.choose.matcher import ROUTING_EXTENSION, Matcher
from router.protocol.errors import RpcError
from router.protocol.versions import Op
from router.tables import SCHEMA
from seeds.demo_agents import caption_card, currency_card, translate_card
from tests.support.helpers import make_settings

NO_CURRENCY = Grant("no-currency", lambda agent_id, skill_id: agent_id != "currency")


def _send(text: str, **metadata: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}
    if metadata:
        message["metadata"] = {ROUTING_EXTENSION: metadata}
    return {"message": message}


@pytest.fixture
async def matcher(sqlite_url: str) -> AsyncIterator[Matcher]:
    key = generate_key("ES256", kid="k")
    registry = Registry(
        Store(sqlite_url, SCHEMA),
        Crawler(make_settings(sqlite_url)),
        keys=StaticKeys(json.loads(key.export_public())),
    )
    await registry.load()
    for n, (agent_id, card) in enumerate(
        (("currency", currency_card), ("translate", translate_card), ("caption", caption_card))
    ):
        await registry.register_card(card(f"http://127.0.0.1:{9101 + n}"), agent_id=agent_id)
    yield Matcher(registry, threshold=0.5)
    await registry.store.close()


def _refusal(matcher: Matcher, params: dict[str, Any], grant: Grant) -> RpcError:
    with pytest.raises(RpcError) as caught:
        matcher.choose("1.0", Op.SEND, params, grant=grant)
    return caught.value


async def test_a_hidden_agent_is_no_candidate_and_never_named(matcher: Matcher) -> None:
    text = "convert 100 USD to EUR"
    assert matcher.choose("1.0", Op.SEND, _send(text)).agent.id == "currency"
    refused = _refusal(matcher, _send(text), NO_CURRENCY)
    assert "currency" not in json.dumps([refused.message, refused.data])
    # the only skill that fits is one the caller may not use: the refusal says so, not which
    assert (
        refused.message == "no agent can take this message: no agent you may use offers this skill"
    )
    assert refused.data["reason"] == "not allowed"
    explained = await Chooser(matcher).explain("1.0", Op.SEND, _send(text), grant=NO_CURRENCY)
    assert {c["agent_id"] for c in explained["candidates"]} == {"translate", "caption"}
    # other agents are still chosen as before
    chosen = matcher.choose("1.0", Op.SEND, _send("translate hello to french"), grant=NO_CURRENCY)
    assert chosen.agent.id == "translate"


async def test_hints_and_pinned_calls_answer_a_hidden_agent_as_unknown(matcher: Matcher) -> None:
    hidden = _refusal(matcher, _send("convert 5 USD", agent="currency"), NO_CURRENCY)
    unknown = _refusal(matcher, _send("convert 5 USD", agent="nowhere"), NO_CURRENCY)
    assert hidden.code == unknown.code
    assert hidden.message.replace("currency", "nowhere") == unknown.message
    with pytest.raises(RpcError) as pinned:
        matcher.target_for("1.0", "currency", "pinned", NO_CURRENCY)
    with pytest.raises(RpcError) as missing:
        matcher.target_for("1.0", "nowhere", "pinned", NO_CURRENCY)
    assert pinned.value.code == missing.value.code
    assert matcher.target_for("1.0", "currency", "pinned", EVERYTHING).agent.id == "currency"


async def test_a_view_holds_only_granted_rows_and_is_cached_per_grant(matcher: Matcher) -> None:
    index = matcher.skill_index()
    skills = {row.skill.id for row in index.rows if row.skill is not None}
    one = next(iter(sorted(skills)))
    only_one = Grant(("one", one), lambda agent_id, skill_id: skill_id in (None, one))
    view = matcher.skill_index(only_one)
    assert isinstance(view, GrantedIndex) and view.base is index
    assert set(view.by_skill) == {one}
    assert [n for n in range(len(view.rows)) if view.allowed(n)] == view.by_skill[one]
    assert matcher.skill_index(only_one) is view  # the same key: the same view
    assert matcher.skill_index(EVERYTHING) is index
