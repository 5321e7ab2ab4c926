"""router.ui.routes: the console's page and assets, their headers, the allow-list, the
redirect of a browser's ``GET /``, and ``SWITCHBOARD_UI=off``; A2A clients at ``/`` and card
fetches keep their answers."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from router.app import create_app
from router.ui.routes import ASSETS, CSP, HEADERS
from tests.support.helpers import make_settings

HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # Chromium's


@pytest.fixture
async def sb(aiohttp_client: Any, sqlite_url: str) -> TestClient:
    return await aiohttp_client(create_app(make_settings(sqlite_url)))


@pytest.fixture
async def sb_off(aiohttp_client: Any, sqlite_url: str) -> TestClient:
    return await aiohttp_client(create_app(make_settings(sqlite_url, ui=False)))


def _secured(headers: Any) -> None:
    for name, value in HEADERS.items():
        assert headers[name] == value, name
    assert "'unsafe-inline'" not in CSP and "frame-ancestors 'none'" in CSP


@pytest.mark.parametrize("path", ["/ui/", "/ui/overview", "/ui/agents/currency", "/ui/x/y?q=a"])
async def test_every_console_path_answers_the_page(sb: TestClient, path: str) -> None:
    resp = await sb.get(path)
    assert resp.status == 200
    assert resp.content_type == "text/html"
    assert resp.headers["Cache-Control"] == "no-cache"
    _secured(resp.headers)
    page = await resp.text()
    assert '<script type="module" src="/ui/static/app.js"></script>' in page
    assert "<script>" not in page and "style=" not in page  # nothing inline: the CSP allows none
    assert "set-cookie" not in {k.lower() for k in resp.headers}


async def test_ui_without_slash_goes_to_the_page_with_its_query(sb: TestClient) -> None:
    resp = await sb.get("/ui?q=money&tag=finance", allow_redirects=False)
    assert resp.status == 302
    assert resp.headers["Location"] == "/ui/?q=money&tag=finance"


@pytest.mark.parametrize("name", sorted(ASSETS))
async def test_each_asset_is_served_with_its_type(sb: TestClient, name: str) -> None:
    resp = await sb.get(f"/ui/static/{name}")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == ASSETS[name]
    assert await resp.read() == (resources.files("router.ui") / "static" / name).read_bytes()
    _secured(resp.headers)


def test_the_allow_list_is_exactly_the_static_files() -> None:
    static = resources.files("router.ui") / "static"
    files = {p.name for p in static.iterdir() if p.is_file()}
    assert files == set(ASSETS) | {"index.html"}


@pytest.mark.parametrize(
    "path",
    [
        "/ui/static/index.html",
        "/ui/static/nope.js",
        "/ui/static/..%2Froutes.py",
        "/ui/static/%2e%2e%2f__init__.py",
        "/ui/static/APP.JS",
    ],
)
async def test_anything_else_under_static_is_not_found(sb: TestClient, path: str) -> None:
    resp = await sb.get(path)
    assert resp.status == 404
    body = await resp.text()
    assert "import" not in body and "def " not in body  # no file content leaks
    _secured(resp.headers)


@pytest.mark.parametrize("path", ["/ui/static/../routes.py", "/ui/static/./../__init__.py"])
async def test_dot_segments_never_reach_a_file(sb: TestClient, path: str) -> None:
    resp = await sb.get(path)  # resolved to /ui/routes.py: the page, not the module
    body = await resp.text()
    assert resp.status in (200, 404)
    assert "from aiohttp" not in body and "__future__" not in body
    _secured(resp.headers)


async def test_a_browser_at_the_root_goes_to_the_console(sb: TestClient) -> None:
    resp = await sb.get("/", headers={"Accept": HTML}, allow_redirects=False)
    assert resp.status == 302
    assert resp.headers["Location"] == "/ui/"


@pytest.mark.parametrize(
    "accept", [None, "*/*", "application/json", "text/event-stream", "text/html;q=0"]
)
async def test_other_gets_at_the_root_answer_as_before(sb: TestClient, accept: str | None) -> None:
    headers = {"Accept": accept} if accept else {}
    resp = await sb.get("/", headers=headers, allow_redirects=False)
    assert resp.status == 405
    assert resp.headers["Allow"] == "POST"
    assert (await resp.json())["error"]["code"] == "method_not_allowed"


async def test_a2a_clients_and_card_fetches_are_not_redirected(sb: TestClient) -> None:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "nope"}}
    for accept in ("application/json", HTML):  # even a JSON-RPC POST that accepts HTML
        resp = await sb.post("/", json=rpc, headers={"Accept": accept}, allow_redirects=False)
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["error"]["code"] == -32001  # task not found: routed as A2A
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        resp = await sb.get(path, headers={"Accept": HTML}, allow_redirects=False)
        assert resp.status == 200
        assert resp.content_type == "application/json"
        assert "Content-Security-Policy" not in resp.headers  # only /ui answers carry them


async def test_ui_off_serves_nothing_and_does_not_redirect(sb_off: TestClient) -> None:
    for path in ("/ui/", "/ui/agents/x", "/ui/static/app.js", "/ui"):
        resp = await sb_off.get(path, allow_redirects=False)
        assert resp.status == 404, path
    resp = await sb_off.get("/", headers={"Accept": HTML}, allow_redirects=False)
    assert resp.status == 405
    assert resp.headers["Allow"] == "POST"
