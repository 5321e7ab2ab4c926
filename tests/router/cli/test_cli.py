"""The ``switchboard`` CLI against a real running server (the CLI is sync: run it in a thread)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from router.app import create_app
from router.cli import main
from tests.support.cli import run
from tests.support.helpers import (
    ADMIN,
    AUTH,
    FIXTURES,
    CardServer,
    card_v03,
    card_v1,
    make_settings,
)
from tests.support.sdk_peers import serve_sdk_agent

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def server(aiohttp_server: Any, sqlite_url: str) -> TestServer:
    return await aiohttp_server(create_app(make_settings(sqlite_url)))


async def test_add_list_show_search_refresh_remove(
    capsys: pytest.CaptureFixture[str], server: TestServer, card_server: CardServer
) -> None:
    card_server.set("/.well-known/agent-card.json", card_v1(card_server.url()))
    status, out, _ = await run(capsys, server, "agents", "add", card_server.url())
    assert status == 0 and out.strip() == "registered weather-agent: Weather Agent"

    status, out, _ = await run(capsys, server, "agents", "list")
    assert status == 0 and "weather-agent  Weather Agent  [A2A 1.0]" in out

    status, out, _ = await run(capsys, server, "agents", "show", "weather-agent")
    assert "skill forecast: Weather forecast [weather, forecast]" in out
    assert "capabilities: streaming" in out

    status, out, _ = await run(capsys, server, "search", "rain tomorrow", "--skills")
    assert out.splitlines()[0].startswith("weather-agent/forecast  Weather forecast")

    status, out, _ = await run(capsys, server, "search", "--output-mode", "image/*", "--json")
    assert [a["id"] for a in json.loads(out)["agents"]] == ["weather-agent"]
    status, out, _ = await run(capsys, server, "search", "rain", "--match", "semantic", "--json")
    answer = json.loads(out)  # asked by meaning; this server goes by words (no model)
    assert answer["match"] == "lexical" and "MATCHER=lexical" in answer["match_fallback"]

    status, out, _ = await run(capsys, server, "agents", "refresh", "weather-agent")
    assert status == 0 and out.strip() == "refreshed weather-agent: card unchanged"

    status, out, _ = await run(capsys, server, "agents", "remove", "weather-agent")
    assert status == 0
    status, out, _ = await run(capsys, server, "agents", "list")
    assert out.strip() == "no agents found"


async def test_lists_show_protocol_versions_as_major_dot_minor(
    capsys: pytest.CaptureFixture[str], server: TestServer, tmp_path: Path
) -> None:
    """``0.3.0`` and ``0.3`` are one version, shown as ``0.3``; ``--json`` keeps the card's
    spelling."""
    interfaces = [
        {"url": "https://w.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0.0"},
        {"url": "https://w.example/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
        {"url": "https://w.example/v3", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card_v1("https://w.example", supportedInterfaces=interfaces)))
    status, _, err = await run(capsys, server, "agents", "add", "--card", str(path), "--id", "w")
    assert status == 0, err

    status, out, _ = await run(capsys, server, "agents", "list")
    assert status == 0 and "w  Weather Agent  [A2A 1.0,0.3] [unsigned]  skills:" in out
    status, out, _ = await run(capsys, server, "search", "forecast")
    assert status == 0 and "[A2A 1.0,0.3]" in out
    status, out, _ = await run(capsys, server, "agents", "show", "w")
    assert "interface: https://w.example/a2a (JSONRPC, A2A 1.0)" in out
    assert "interface: https://w.example/v03 (JSONRPC, A2A 0.3)" in out
    assert "interface: https://w.example/v3 (HTTP+JSON, A2A 0.3)" in out
    status, out, _ = await run(capsys, server, "agents", "show", "w", "--json")
    assert json.loads(out)["protocol_versions"] == ["1.0.0", "0.3.0", "0.3"]


async def test_add_card_file(
    capsys: pytest.CaptureFixture[str], server: TestServer, tmp_path: Path
) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card_v03("https://inv.example")))
    status, out, _ = await run(capsys, server, "agents", "add", "--card", str(path), "--id", "inv")
    assert status == 0 and out.startswith("registered inv:")


async def test_sdk_agent_found_by_skill_via_cli(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    async with serve_sdk_agent() as base_url:
        status, _, err = await run(capsys, server, "agents", "add", base_url)
        assert status == 0, err
    status, out, _ = await run(capsys, server, "search", "--skill", "sdk-echo")
    assert out.startswith("sdk-echo-agent  SDK Echo Agent")
    status, out, _ = await run(capsys, server, "search", "--tag", "sdk", "--skills")
    assert out.startswith("sdk-echo-agent/sdk-echo  Echo text  (text/plain,application/json")


async def test_errors_are_one_clear_line(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    status, _, err = await run(capsys, server, "agents", "show", "nope")
    assert status == 1
    assert err.strip() == "switchboard: no agent with id 'nope' (not_found, HTTP 404)"

    status, _, err = await run(capsys, server, "agents", "add", "--card", "/does/not/exist")
    assert status == 2 and "cannot read card file" in err

    status, _, err = await run(capsys, server, "agents", "add")
    assert status == 2 and "give an agent URL or --card FILE" in err


async def test_unreachable_server_says_how_to_point_elsewhere(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, unused_tcp_port: int
) -> None:
    nobody = f"http://127.0.0.1:{unused_tcp_port}"
    status = await asyncio.to_thread(main, ["agents", "list", "--server", nobody])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1, err
    assert err.startswith(f"switchboard: cannot reach Switchboard at {nobody} (--server): ")
    assert "switchboard serve" in err and "--server URL or SWITCHBOARD_URL" in err

    monkeypatch.setenv("SWITCHBOARD_URL", nobody)
    status = await asyncio.to_thread(main, ["search", "weather"])
    err = capsys.readouterr().err
    assert status == 1 and f"cannot reach Switchboard at {nobody} (SWITCHBOARD_URL)" in err


async def test_server_from_switchboard_url_and_token_from_variables(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    server: TestServer,
    tmp_path: Path,
) -> None:
    """``SWITCHBOARD_URL`` and ``SWITCHBOARD_ADMIN_TOKEN`` do what ``--server`` and ``--token``
    do; the flags win."""
    monkeypatch.setenv("SWITCHBOARD_URL", str(server.make_url("")))
    monkeypatch.setenv("SWITCHBOARD_ADMIN_TOKEN", ADMIN)
    card = tmp_path / "card.json"
    card.write_text(json.dumps(card_v1("https://weather.example")), encoding="utf-8")
    status = await asyncio.to_thread(main, ["agents", "add", "--card", str(card)])
    out, err = capsys.readouterr()
    assert status == 0 and out.startswith("registered weather-agent"), err
    status = await asyncio.to_thread(main, ["search", "forecast"])
    out, _ = capsys.readouterr()
    assert status == 0 and out.startswith("weather-agent  Weather Agent"), out
    status = await asyncio.to_thread(main, ["search", "--server", "http://127.0.0.1:1"])
    assert status == 1 and "(--server)" in capsys.readouterr().err


async def test_auth_errors_say_which_variable_or_flag(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_switchboard_environment: None,
    aiohttp_server: Any,
    sqlite_url: str,
) -> None:
    guarded = await aiohttp_server(create_app(make_settings(sqlite_url, read_token="reader")))
    url = str(guarded.make_url(""))

    async def cli(*argv: str) -> str:
        status = await asyncio.to_thread(main, [*argv, "--server", url])
        err = capsys.readouterr().err
        assert status == 1 and err.startswith("switchboard: ") and err.count("\n") == 1, err
        assert "Authorization: Bearer" not in err
        return err

    err = await cli("search", "weather")
    assert "needs a token (unauthorized, HTTP 401)" in err
    assert "set SWITCHBOARD_ADMIN_TOKEN" in err and "or pass --token" in err
    err = await cli("agents", "remove", "x", "--token", "wrong")
    assert "refused the token from --token (unauthorized, HTTP 401)" in err
    monkeypatch.setenv("SWITCHBOARD_READ_TOKEN", "reader")
    err = await cli("agents", "remove", "x")  # a read token cannot write
    assert "token from SWITCHBOARD_READ_TOKEN is valid but this needs the admin role" in err
    assert "HTTP 403" in err and "SWITCHBOARD_ADMIN" in err

    read_only = await aiohttp_server(create_app(make_settings(sqlite_url, admin_token=None)))
    status = await asyncio.to_thread(
        main, ["agents", "remove", "x", "--server", str(read_only.make_url(""))]
    )
    err = capsys.readouterr().err
    assert status == 1 and "(writes_disabled, HTTP 403)" in err, err
    assert "restart it with SWITCHBOARD_ADMIN_TOKEN set" in err and "--token" in err


async def test_not_a_switchboard(
    capsys: pytest.CaptureFixture[str], card_server: CardServer
) -> None:
    """Another server at the URL: its 404 (or other error) is not taken for Switchboard's."""
    card_server.set("/api/v1/agents/x", "<html>gone</html>", status=410)
    for argv, answer in (
        (["search", "weather"], "HTTP 404 Not Found"),  # {"error": "not found"}: not ours
        (["agents", "show", "x"], "HTTP 410 Gone"),
    ):
        status = await asyncio.to_thread(main, [*argv, "--server", card_server.url()])
        err = capsys.readouterr().err
        assert status == 1 and err.count("\n") == 1, err
        assert err.startswith(f"switchboard: {answer} from {card_server.url().rstrip('/')}")
        assert "does not look like a Switchboard" in err
        assert "--server URL or SWITCHBOARD_URL" in err


def test_version_is_the_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    installed = metadata.version(project["name"])
    assert installed == project["version"]  # the metadata is this tree's, not a stale install
    assert capsys.readouterr().out == f"switchboard {installed}\n"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("switchboard ", {"serve", "agents", "search", "card", "keys", "route"}),
        ("switchboard ag", {"agents"}),
        ("switchboard agents re", {"refresh", "refresh-all", "remove"}),
        ("switchboard serve --data", {"--database-url"}),
        ("switchboard --vers", {"--version"}),
    ],
)
def test_shell_completion(line: str, expected: set[str], tmp_path: Path) -> None:
    """argcomplete's protocol, as the shell hook drives it: the command run with
    ``_ARGCOMPLETE``, ``COMP_LINE`` and ``COMP_POINT``; the candidates written to a file."""
    out = tmp_path / "completions"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "_ARGC"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    result = subprocess.run(
        [sys.executable, "-m", "router.cli"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    candidates = {word.strip() for word in out.read_text().split("\n")}
    assert expected <= candidates, candidates
    if len(expected) < 4:
        assert candidates == expected


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "serve" in capsys.readouterr().out


_SERVE_MISTAKES = {
    "bad setting": (["--allow-networks", "not-a-network"], "invalid settings"),
    "missing seed file": (["--seeds", "{tmp}/nonexistent.toml"], "cannot read seed file"),
    "seed file not TOML": (["--seeds", "{tmp}/bad.toml"], "is not valid TOML"),
    "seed file bad entry": (["--seeds", "{tmp}/wrong.toml"], "unknown key 'host'"),
    "seed file is a directory": (["--seeds", "{tmp}"], "cannot read seed file"),
    "unsupported database": (
        ["--database-url", "mysql://user:secret@db.example/switchboard"],
        "unsupported database 'mysql' in mysql://user:***@db.example/switchboard",
    ),
    "garbage database URL": (["--database-url", "not a url"], "invalid database URL"),
    "bad port in database URL": (
        ["--database-url", "postgresql://user:secret@db.example:port/x"],
        "invalid database URL",
    ),
    "SQLite directory cannot be created": (
        ["--database-url", "sqlite:///{tmp}/a-file/x.db"],
        "cannot create directory {tmp}/a-file: File exists",
    ),
    "SQLite path is a directory": (
        ["--database-url", "sqlite:///{tmp}"],
        "cannot open SQLite database {tmp}: unable to open database file",
    ),
    "SQLite file is no database": (
        ["--database-url", "sqlite:///{tmp}/bad.toml"],
        "file is not a database",
    ),
    "sync driver": (["--database-url", "sqlite+pysqlite:///x.db"], "requires an async driver"),
    "log level": (["--log-level", "bogus"], "invalid --log-level 'bogus'"),
}


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch, no_switchboard_environment: None) -> None:
    """``serve`` must stop before starting a server; no SWITCHBOARD_* variable of the
    environment running the tests is seen."""

    def must_not_start(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("serve started despite a bad configuration")

    monkeypatch.setattr("router.cli.serve.run_server", must_not_start)


@pytest.mark.parametrize("mistake", list(_SERVE_MISTAKES))
def test_serve_rejects_bad_configuration(
    mistake: str, capsys: pytest.CaptureFixture[str], no_server: None, tmp_path: Path
) -> None:
    """Checked before starting: one line, status 2, no server started."""
    (tmp_path / "bad.toml").write_text("[[agents]\nurl = ")
    (tmp_path / "wrong.toml").write_text('[[agents]]\nhost = "x"\n')
    (tmp_path / "a-file").write_text("")
    argv, expected = _SERVE_MISTAKES[mistake]
    base = ["serve", "--database-url", f"sqlite:///{tmp_path / 'ok.db'}"]
    assert main([*base, *(arg.format(tmp=tmp_path) for arg in argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("switchboard: ") and err.count("\n") == 1, err
    assert expected.format(tmp=tmp_path) in err and "secret" not in err, err
    assert not (tmp_path / "ok.db").exists()


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        ("missing.toml", None, "cannot read config file {file} (SWITCHBOARD_CONFIG)"),
        ("bad.toml", "port = = 1", "config file {file} (SWITCHBOARD_CONFIG) is not valid TOML"),
        ("bad.toml", "prot = 1", "unknown setting 'prot' in config file {file}"),
        ("bad.env", "SWITCHBOARD_PROT=1", "unknown setting 'SWITCHBOARD_PROT'"),
        ("bad.toml", "port = 70000", "invalid settings (flags, SWITCHBOARD_* variables, config"),
    ],
)
def test_serve_rejects_a_bad_config_file(
    file: str,
    text: str | None,
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_server: None,
    tmp_path: Path,
) -> None:
    """``SWITCHBOARD_CONFIG`` names a file that cannot be used: one line, status 2."""
    path = tmp_path / file
    if text is not None:
        path.write_text(text + "\n", encoding="utf-8")
    monkeypatch.setenv("SWITCHBOARD_CONFIG", str(path))
    assert main(["serve", "--database-url", f"sqlite:///{tmp_path / 'ok.db'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("switchboard: ") and err.count("\n") == 1, err
    assert expected.format(file=path) in err, err
    assert not (tmp_path / "ok.db").exists()


async def _push_cards(server: TestServer, cards: dict[str, dict[str, Any]]) -> None:
    """Register ``cards`` (id -> card) through the API."""
    async with aiohttp.ClientSession() as http:
        for agent_id, card in cards.items():
            body = {"card": card, "id": agent_id}
            async with http.post(server.make_url("/api/v1/agents"), json=body, headers=AUTH) as r:
                assert r.status == 201, await r.text()


def _ids(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()]


async def test_list_and_search_pages(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    names = [f"agent-{n}" for n in range(5)]
    await _push_cards(server, {n: card_v03(f"https://{n}.example", name=n) for n in names})

    # one page: what is cut is said on stderr, with the cursor to go on from
    status, out, err = await run(capsys, server, "agents", "list", "--limit", "2")
    first = _ids(out)
    assert status == 0 and len(first) == 2
    assert err.startswith("(more results: --all, or --cursor ") and err.count("\n") == 1
    cursor = err.strip().removeprefix("(more results: --all, or --cursor ").removesuffix(")")
    status, out, err = await run(
        capsys, server, "agents", "list", "--limit", "2", "--cursor", cursor
    )
    second = _ids(out)
    assert status == 0 and len(second) == 2 and not set(first) & set(second)
    assert "--cursor" in err

    # --all follows next_cursor to the end; nothing is cut, so nothing on stderr
    status, out, err = await run(capsys, server, "agents", "list", "--limit", "2", "--all")
    assert status == 0 and err == ""
    assert _ids(out) == sorted(names) and _ids(out)[:4] == first + second
    status, out, err = await run(capsys, server, "search", "--limit", "2", "--all", "--json")
    assert status == 0 and err == ""
    merged = json.loads(out)
    assert merged["next_cursor"] is None and [a["id"] for a in merged["agents"]] == sorted(names)
    status, out, _ = await run(capsys, server, "search", "--skills", "--limit", "2", "--all")
    assert [line.split()[0] for line in out.splitlines()] == [
        f"{n}/extract-invoice" for n in sorted(names)
    ]

    # without a limit the server's page size applies: all five fit
    status, out, err = await run(capsys, server, "agents", "list")
    assert len(_ids(out)) == 5 and err == ""

    # a cursor that is not one is the server's one-line error
    status, _, err = await run(capsys, server, "agents", "list", "--cursor", "garbage")
    assert status == 1 and err.startswith("switchboard: ") and err.count("\n") == 1


async def test_push_filter(capsys: pytest.CaptureFixture[str], server: TestServer) -> None:
    await _push_cards(
        server,
        {"pull": card_v1("https://pull.example"), "push": card_v03("https://push.example")},
    )
    status, out, _ = await run(capsys, server, "agents", "list", "--push")
    assert status == 0 and _ids(out) == ["push"]
    status, out, _ = await run(capsys, server, "search", "--no-push")
    assert status == 0 and _ids(out) == ["pull"]
    status, out, _ = await run(capsys, server, "search", "--push", "--skills")
    assert _ids(out) == ["push/extract-invoice"]


async def test_bad_client_input_is_one_line(
    capsys: pytest.CaptureFixture[str], server: TestServer, card_server: CardServer
) -> None:
    async def cli(*argv: str) -> tuple[int, str]:
        status = await asyncio.to_thread(main, list(argv))
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.startswith("switchboard: ") and err.count("\n") == 1
        return status, err

    status, err = await cli("agents", "list", "--server", "localhost:8080")
    assert status == 2 and "invalid server URL" in err
    status, err = await cli("agents", "list", "--server", "http://127.0.0.1:port")
    assert status == 2 and "invalid server URL" in err and "port" in err
    url, token = str(server.make_url("")), "line\nbreak-secret"
    status, err = await cli("agents", "list", "--server", url, "--token", token)
    assert status == 2 and "token" in err and "secret" not in err

    # a server that is not Switchboard
    card_server.set("/api/v1/agents", "<html>hello</html>")
    status, err = await cli("agents", "list", "--server", card_server.url())
    assert status == 1 and "not a JSON object" in err
    card_server.set("/api/v1/skills", {"hello": "world"})
    status, err = await cli("search", "--skills", "--server", card_server.url())
    assert status == 1 and "unexpected answer" in err and "SWITCHBOARD_URL" in err


def test_limit_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["agents", "list", "--limit", "0"])
    assert exit_info.value.code == 2
    assert "must be a whole number of at least 1" in capsys.readouterr().err


async def test_verification_in_list_show_and_filter(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    signed = json.loads((FIXTURES / "cards" / "signed_card_v1.json").read_text(encoding="utf-8"))
    await _push_cards(server, {"plain": card_v1("https://plain.example"), "signed": signed})

    status, out, _ = await run(capsys, server, "agents", "list")
    markers = {line.split()[0]: line for line in out.splitlines()}
    assert "[A2A 1.0] [unsigned]  skills:" in markers["plain"]
    assert "] [untrusted-key]  skills:" in markers["signed"]  # no trusted key for its kid

    status, out, _ = await run(capsys, server, "agents", "show", "plain")
    assert "  verification: unsigned\n" in out
    status, out, _ = await run(capsys, server, "agents", "show", "signed")
    assert "  verification: untrusted-key: " in out and "echo-key-1" in out

    status, out, _ = await run(capsys, server, "agents", "list", "--verified")
    assert status == 0 and out.strip() == "no agents found"
    status, out, _ = await run(capsys, server, "search", "--no-verified")
    assert status == 0 and sorted(_ids(out)) == ["plain", "signed"]


async def test_keys_add_list_remove_and_verified_agents(
    capsys: pytest.CaptureFixture[str],
    server: TestServer,
    card_server: CardServer,
    tmp_path: Path,
) -> None:
    """An owner's flow: make a key, sign a card, trust the key, see the agent verified."""
    status, out, _ = await run(capsys, server, "keys", "list")
    assert (status, out) == (0, "no trusted keys\n")

    key = tmp_path / "owner"
    assert main(["keys", "generate", "--kid", "owner-1", "--out", str(key)]) == 0
    card = tmp_path / "card.json"
    card.write_text(json.dumps(card_v1("https://owner.example")))
    assert main(["card", "sign", str(card), "--key", f"{key}.jwk", "--out", str(card)]) == 0
    capsys.readouterr()
    status, _, err = await run(capsys, server, "agents", "add", "--card", str(card), "--id", "own")
    assert status == 0, err
    status, out, _ = await run(capsys, server, "agents", "show", "own")
    assert "  verification: untrusted-key: " in out

    # the private key file: only its public part is sent (the server refuses private keys)
    status, out, err = await run(capsys, server, "keys", "add", "--jwk", f"{key}.jwk")
    assert status == 0, err
    key_id = out.split()[2]
    assert out == f"trusted key {key_id} (kid owner-1, EC/ES256)\n"
    status, out, _ = await run(capsys, server, "agents", "show", "own")
    assert "  verification: verified (kid owner-1, rfc8785)\n" in out
    status, out, _ = await run(capsys, server, "agents", "list", "--verified")
    assert _ids(out) == ["own"] and "[verified]" in out

    # a JWKS URL, fetched by the server
    card_server.set("/jwks.json", json.loads((FIXTURES / "cards" / "jwks_v1.json").read_text()))
    jwks_url = card_server.url("/jwks.json")
    status, out, err = await run(capsys, server, "keys", "add", "--jwks-url", jwks_url)
    assert status == 0 and out.startswith(f"trusted JWKS URL {jwks_url} (id jwks-"), err

    status, out, _ = await run(capsys, server, "keys", "list")
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(key_id) and "jwk kid=owner-1 EC/ES256  (api)" in lines[0]
    assert f"jwks_url {jwks_url}  (api)" in lines[1]
    status, out, _ = await run(capsys, server, "keys", "list", "--json")
    anchors = json.loads(out)["keys"]
    assert [a["kind"] for a in anchors] == ["jwk", "jwks_url"] and "d" not in anchors[0]["jwk"]

    # the same key again: the server's one-line error
    status, _, err = await run(capsys, server, "keys", "add", "--jwk", f"{key}.jwks.json")
    assert status == 1 and "duplicate_key" in err and err.count("\n") == 1

    status, out, _ = await run(capsys, server, "keys", "remove", key_id)
    assert (status, out) == (0, f"removed key {key_id}\n")
    status, out, _ = await run(capsys, server, "agents", "show", "own")
    assert "  verification: untrusted-key: " in out
    status, _, err = await run(capsys, server, "keys", "remove", key_id)
    assert status == 1 and "not_found" in err

    # a symmetric key never leaves the machine
    secret = tmp_path / "oct.jwk"
    secret.write_text(json.dumps({"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQ"}))
    status, _, err = await run(capsys, server, "keys", "add", "--jwk", str(secret))
    assert status == 2 and "symmetric (oct) key" in err and err.count("\n") == 1


async def test_history_and_refresh_all(
    capsys: pytest.CaptureFixture[str], server: TestServer, card_server: CardServer
) -> None:
    card = card_v1(card_server.url())
    card_server.set("/.well-known/agent-card.json", card)
    status, _, _ = await run(capsys, server, "agents", "add", card_server.url())
    assert status == 0
    changed = {**card, "description": "Now with tides.", "capabilities": {"streaming": False}}
    changed["skills"] = [*card["skills"], {"id": "tides", "name": "Tides", "description": "."}]
    card_server.set("/.well-known/agent-card.json", changed)

    status, out, _ = await run(capsys, server, "agents", "refresh-all")
    assert status == 0 and out.splitlines() == [
        "checked 1, changed 1, failed 0",
        "  changed: weather-agent",
    ]
    status, out, _ = await run(capsys, server, "agents", "history", "weather-agent")
    lines = out.splitlines()
    assert status == 0 and len(lines) == 6, out
    assert lines[0].endswith("  unsigned") and lines[4].endswith("  unsigned")
    assert lines[1:4] == [
        '  description: "Forecasts and current conditions for any city." -> "Now with tides."',
        "  skill added: tides",
        "  capability streaming: true -> false",
    ]
    assert lines[5] == "  registered"
    status, out, _ = await run(capsys, server, "agents", "show", "weather-agent")
    assert "  health: healthy" in out

    card_server.set("/.well-known/agent-card.json", {}, status=500)
    status, out, _ = await run(capsys, server, "agents", "refresh-all", "--due")
    assert status == 0 and out.startswith("checked 0,")  # nothing due yet
    status, out, _ = await run(capsys, server, "agents", "refresh-all")
    assert status == 1 and "failed: weather-agent: " in out
    status, out, _ = await run(capsys, server, "agents", "show", "weather-agent")
    assert "  health: healthy\n  card error: The server at " in out  # its endpoint answers
    card_server.set("/a2a", {}, status=503)
    status, out, _ = await run(capsys, server, "agents", "refresh-all")
    status, out, _ = await run(capsys, server, "agents", "show", "weather-agent")
    assert "  health: degraded (1 consecutive failures); last error: " in out
