"""``switchboard policies ...`` and ``agents add --tenant`` against a real running server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from registry.api import POLICIES
from router.app import create_app
from router.cli.errors import CliError
from router.cli.policies import parse_allow
from tests.support.cli import run
from tests.support.helpers import card_v1, make_settings


@pytest.fixture
async def server(aiohttp_server: Any, sqlite_url: str) -> TestServer:
    return await aiohttp_server(create_app(make_settings(sqlite_url, client_auth="api-key")))


@pytest.fixture
def card(tmp_path: Path) -> Path:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card_v1("https://wx.example")))
    return path


async def test_set_show_list_and_delete(
    capsys: pytest.CaptureFixture[str], server: TestServer, card: Path
) -> None:
    assert (await run(capsys, server, "agents", "add", "--card", str(card), "--id", "wx"))[0] == 0
    status, out, _ = await run(capsys, server, "policies", "show", "wx")
    assert status == 0
    assert out.splitlines() == [
        "wx: shared",
        "  no rules: SWITCHBOARD_AGENT_ACCESS decides (allow: every caller who sees it)",
    ]

    status, out, _ = await run(
        capsys,
        server,
        "policies",
        "set",
        "wx",
        "--tenant",
        "acme",
        "--allow",
        "groups=ops,sre;skills=forecast",
        "--allow",
        "subject=alice",
    )
    assert status == 0, out
    lines = out.splitlines()
    assert lines[:3] == [
        "set the policy of wx: tenant acme",
        "  allow groups=ops,sre;skills=forecast",
        "  allow subjects=alice",
    ]
    assert lines[3].startswith("  updated ") and lines[3].endswith(" by admin-token")
    policy = server.app[POLICIES].get("wx")
    assert policy is not None and policy.tenant == "acme" and len(policy.rules) == 2

    # what is not given is kept: the tenant here, the rules below
    status, out, _ = await run(capsys, server, "policies", "set", "wx", "--allow", "")
    assert out.splitlines()[:2] == [
        "set the policy of wx: tenant acme",
        "  allow (everyone who sees it)",
    ]
    status, out, _ = await run(capsys, server, "policies", "set", "wx", "--shared", "--json")
    assert json.loads(out)["tenant"] is None
    assert json.loads(out)["rules"] == [{"tenants": [], "groups": [], "subjects": [], "skills": []}]
    status, out, _ = await run(capsys, server, "policies", "set", "wx", "--no-rules")
    assert out.splitlines()[:2] == [
        "set the policy of wx: shared",
        "  no rules: SWITCHBOARD_AGENT_ACCESS decides (allow: every caller who sees it)",
    ]

    status, out, _ = await run(capsys, server, "policies", "list")
    assert status == 0 and out.strip() == "wx  shared  no rules"
    status, out, _ = await run(capsys, server, "policies", "list", "--json")
    assert [p["agent_id"] for p in json.loads(out)["policies"]] == ["wx"]

    status, out, _ = await run(capsys, server, "policies", "delete", "wx")
    assert status == 0 and out.strip() == "deleted the policy of wx: it is shared, without rules"
    status, out, _ = await run(capsys, server, "policies", "list")
    assert out.strip().startswith("no policies")
    status, _, err = await run(capsys, server, "policies", "delete", "wx")
    assert status == 1 and "has no access policy (not_found, HTTP 404)" in err


async def test_set_from_a_file(
    capsys: pytest.CaptureFixture[str], server: TestServer, card: Path, tmp_path: Path
) -> None:
    await run(capsys, server, "agents", "add", "--card", str(card), "--id", "wx")
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"tenant": "globex", "rules": [{"tenants": ["globex"]}]}))
    status, out, _ = await run(capsys, server, "policies", "set", "wx", "--file", str(path))
    assert status == 0 and out.splitlines()[:2] == [
        "set the policy of wx: tenant globex",
        "  allow tenants=globex",
    ]
    path.write_text(json.dumps({"tenant": "globex", "rules": [{"teams": ["a"]}]}))
    status, _, err = await run(capsys, server, "policies", "set", "wx", "--file", str(path))
    assert status == 1
    assert "unknown member(s) teams" in err and "(invalid_policy, HTTP 400)" in err
    assert "\n  rules[0]: unknown member(s) teams" in err
    status, _, err = await run(
        capsys, server, "policies", "set", "wx", "--file", str(path), "--shared"
    )
    assert status == 2 and "--file is the whole policy" in err
    path.write_text("[]")
    status, _, err = await run(capsys, server, "policies", "set", "wx", "--file", str(path))
    assert status == 2 and "expected" in err


async def test_agents_add_with_a_tenant(
    capsys: pytest.CaptureFixture[str], server: TestServer, card: Path
) -> None:
    argv = ("agents", "add", "--card", str(card), "--id", "wx", "--tenant", "acme")
    status, out, _ = await run(capsys, server, *argv)
    assert status == 0 and out.strip() == "registered wx: Weather Agent"
    status, out, _ = await run(capsys, server, "policies", "show", "wx")
    assert out.splitlines()[0] == "wx: tenant acme"


async def test_mistakes_are_told_clearly(
    capsys: pytest.CaptureFixture[str], server: TestServer, card: Path
) -> None:
    status, _, err = await run(capsys, server, "policies", "show", "ghost")
    assert status == 1 and "no agent with id 'ghost' (not_found, HTTP 404)" in err
    status, _, err = await run(capsys, server, "policies", "set", "ghost", "--tenant", "a")
    assert status == 1 and "no agent with id 'ghost'" in err
    await run(capsys, server, "agents", "add", "--card", str(card), "--id", "wx")
    for argv, said in (
        (("wx",), "nothing to set"),
        (("wx", "--tenant", " "), "--tenant needs a tenant name"),
        (("wx", "--allow", "roles=x"), "'roles=x' is not NAME=VALUES"),
    ):
        status, _, err = await run(capsys, server, "policies", "set", *argv)
        assert status == 2 and said in err, err
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error
        await run(capsys, server, "policies", "set", "wx", "--tenant", "a", "--shared")
    assert exited.value.code == 2
    assert "--shared: not allowed with argument --tenant" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ("", {}),
        ("groups=ops", {"groups": ["ops"]}),
        (" tenant = a , b ; skills=s1;", {"tenants": ["a", "b"], "skills": ["s1"]}),
        ("subjects=alice;groups=x", {"subjects": ["alice"], "groups": ["x"]}),
    ],
)
def test_allow_specs(spec: str, rule: dict[str, list[str]]) -> None:
    assert parse_allow(spec) == rule


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("groups", "is not NAME=VALUES"),
        ("colour=red", "is not NAME=VALUES"),
        ("groups=a;group=b", "groups is given twice"),
        ("skills=,", "skills names nothing"),
    ],
)
def test_bad_allow_specs(spec: str, said: str) -> None:
    with pytest.raises(CliError, match=said) as caught:
        parse_allow(spec)
    assert caught.value.status == 2
