"""``switchboard clients ...`` and ``switchboard audit`` against a real running server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from registry.clients_api import CLIENTS
from router.app import create_app
from router.cli import main
from tests.support.helpers import ADMIN, make_settings

KEY = re.compile(r"^key: (sbk_[0-9a-f]{12}_[A-Za-z0-9_-]{43})$", re.M)
NOT_AGAIN = "This key will not be shown again: store it now (e.g. in a secret manager)."


@pytest.fixture
async def server(aiohttp_server: Any, sqlite_url: str) -> TestServer:
    return await aiohttp_server(create_app(make_settings(sqlite_url, read_token="reader")))


async def run(
    capsys: pytest.CaptureFixture[str], server: TestServer, *argv: str, token: str = ADMIN
) -> tuple[int, str, str]:
    """Run ``switchboard`` with ``--server`` and ``--token`` after the (sub)command."""
    command, *rest = argv
    args = [command]
    if command == "clients":
        args.append(rest.pop(0))
    args += ["--server", str(server.make_url("")), "--token", token, *rest]
    status = await asyncio.to_thread(main, args)
    out, err = capsys.readouterr()
    return status, out, err


async def test_create_list_show_rotate_revoke(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    status, out, _ = await run(
        capsys,
        server,
        "clients",
        "create",
        "--subject",
        "alice",
        "--tenant",
        "acme",
        "--group",
        "finance",
        "--group",
        "ops",
        "--role",
        "reader",
        "--description",
        "the finance bot",
        "--expires",
        "2099-01-01T00:00:00Z",
    )
    assert status == 0, out
    match = KEY.search(out)
    assert match is not None, out
    key = match.group(1)
    key_id = key[4:16]
    assert out.splitlines() == [
        f"created {key_id} for alice (tenant acme)",
        f"key: {key}",
        NOT_AGAIN,
    ]
    keys = server.app[CLIENTS]
    assert (await keys.authenticate(key)).groups == frozenset({"finance", "ops"})

    status, out, _ = await run(capsys, server, "clients", "list")
    assert status == 0
    assert out.strip() == (
        f"{key_id}  active   alice (tenant acme)  "
        "[roles: reader; groups: finance, ops; expires 2099-01-01T00:00:00Z]"
    )
    assert key not in out

    status, out, _ = await run(capsys, server, "clients", "show", key_id)
    assert status == 0 and key.split("_", 2)[2] not in out
    assert out.splitlines()[:6] == [
        f"{key_id} (sbk_{key_id}...): active",
        "  subject: alice",
        "  tenant: acme",
        "  groups: finance, ops",
        "  roles: reader",
        "  description: the finance bot",
    ]

    status, out, _ = await run(capsys, server, "clients", "rotate", key_id, "--grace", "60")
    assert status == 0
    new_key = KEY.search(out)
    assert new_key is not None
    new_id = new_key.group(1)[4:16]
    assert out.splitlines()[0] == f"rotated {key_id} to {new_id} for alice (tenant acme)"
    assert NOT_AGAIN in out and f"The old key {key_id} keeps working for 60 more seconds." in out
    assert (await keys.authenticate(key)).key_id == key_id  # during the grace period
    assert (await keys.authenticate(new_key.group(1))).key_id == new_id

    status, out, _ = await run(capsys, server, "clients", "revoke", key_id)
    assert status == 0 and out.strip() == f"revoked {key_id}: it is refused from now on"
    status, out, _ = await run(capsys, server, "clients", "list", "--json")
    listed = json.loads(out)
    assert [(c["id"], c["status"]) for c in listed["clients"]] == [
        (new_id, "active"),
        (key_id, "revoked"),
    ]
    assert "key" not in listed["clients"][0]


async def test_json_create_and_rotate_at_once(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    status, out, err = await run(capsys, server, "clients", "create", "--subject", "bob", "--json")
    assert status == 0
    created = json.loads(out)
    assert created["key"].startswith(created["prefix"] + "_") and err.strip() == NOT_AGAIN
    status, out, _ = await run(capsys, server, "clients", "rotate", created["id"])
    assert status == 0 and f"The old key {created['id']} is refused from now on." in out
    status, out, _ = await run(capsys, server, "clients", "show", created["id"], "--json")
    assert json.loads(out)["status"] == "revoked"


async def test_audit(capsys: pytest.CaptureFixture[str], server: TestServer) -> None:
    status, out, _ = await run(capsys, server, "audit")
    assert status == 0 and out.strip() == "no audit entries"
    await run(capsys, server, "clients", "create", "--subject", "alice")
    status, out, _ = await run(capsys, server, "clients", "create", "--subject", " ")
    assert status == 1
    status, out, _ = await run(capsys, server, "clients", "list")  # a read: not recorded

    status, out, err = await run(capsys, server, "audit", "--limit", "1")
    assert status == 0
    [line] = out.splitlines()
    assert re.fullmatch(r"\S+Z  \S.*  POST /api/v1/clients  -> 400 \(invalid_client\)", line), line
    assert err.startswith("(more results: --all, or --cursor ")

    status, out, _ = await run(capsys, server, "audit", "--all", "--limit", "1", "--json")
    entries = json.loads(out)["entries"]
    assert [(e["action"], e["status"]) for e in entries] == [
        ("POST /api/v1/clients", 400),
        ("POST /api/v1/clients", 201),
    ]
    actor = entries[0]["actor"]
    status, out, _ = await run(capsys, server, "audit", "--actor", actor, "--json")
    assert len(json.loads(out)["entries"]) == 2
    status, out, _ = await run(capsys, server, "audit", "--actor", "nobody")
    assert out.strip() == "no audit entries"
    status, _, err = await run(capsys, server, "audit", "--since", "yesterday")
    assert status == 1 and "since must be an ISO 8601 time with a timezone" in err


async def test_errors(capsys: pytest.CaptureFixture[str], server: TestServer) -> None:
    status, _, err = await run(capsys, server, "clients", "list", token="reader")
    assert status == 1 and "token from --token is valid but this needs the admin role" in err
    status, _, err = await run(capsys, server, "clients", "show", "0123456789ab")
    assert status == 1 and "no client key with id '0123456789ab' (not_found, HTTP 404)" in err
    status, _, err = await run(
        capsys, server, "clients", "create", "--subject", "a", "--expires", "2001-01-01T00:00Z"
    )
    assert status == 1 and "expires_at: must be in the future" in err
    assert "\n  expires_at: must be in the future" in err  # the details, one per line
    status, _, err = await run(
        capsys, server, "clients", "create", "--subject", "a", "--expires", "soon"
    )
    assert status == 1 and '"expires_at" must be an ISO 8601 time with a timezone' in err
    with pytest.raises(SystemExit) as exited:
        await run(capsys, server, "clients", "create", "--subject", "a", "--role", "root")
    assert exited.value.code == 2
    assert "invalid choice: 'root'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        await run(capsys, server, "clients", "rotate", "0123456789ab", "--grace", "-1")
    assert "must be a number of seconds, 0 or more" in capsys.readouterr().err
