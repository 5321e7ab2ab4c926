"""The Swagger UI page at /api/v1/docs: local assets only, served here, no token needed."""

from __future__ import annotations

import re
from typing import Any

from router.app import create_app
from tests.support.helpers import make_settings

_REFERENCES = re.compile(r'(?:src|href|url)\s*[:=]\s*"([^"]*)"')


async def test_the_page_uses_only_local_assets(aiohttp_client: Any, sqlite_url: str) -> None:
    # a read token is set: the page, its assets and the document still need none
    client = await aiohttp_client(create_app(make_settings(sqlite_url, read_token="reader")))
    resp = await client.get("/api/v1/docs")
    assert resp.status == 200
    assert resp.content_type == "text/html"
    html = await resp.text()
    references = _REFERENCES.findall(html)
    assert "/api/v1/openapi.json" in references
    assets = [ref for ref in references if ref != "/api/v1/openapi.json"]
    assert len(assets) == 3
    assert all(ref.startswith("/api/v1/docs/static/") for ref in assets), assets
    assert "//" not in html.replace("<!--", "")  # no scheme or host anywhere: no CDN
    types = {}
    for ref in assets:
        asset = await client.get(ref)
        assert asset.status == 200, ref
        assert len(await asset.read()) > 0
        types[ref.rsplit("/", 1)[1]] = asset.content_type
    assert types == {
        "swagger-ui.css": "text/css",
        "swagger-ui-bundle.js": "text/javascript",
        "favicon-32x32.png": "image/png",
    }
    assert (await client.get("/api/v1/openapi.json")).status == 200
    assert (await client.get("/api/v1/agents")).status == 401  # the data still needs it


async def test_only_the_page_assets_are_served(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    for name in ("index.html", "swagger-initializer.js", "..%2F__init__.py"):
        resp = await client.get(f"/api/v1/docs/static/{name}")
        assert resp.status == 404, name
        assert (await resp.json())["error"]["code"] == "not_found"
