"""The admin API's page for people: Swagger UI at ``/api/v1/docs``, served by Switchboard.

Its script and stylesheet come from the pinned ``swagger-ui-bundle-v2`` package and are
served under ``/api/v1/docs/static/``: the page loads nothing from elsewhere (it works
air-gapped) and reads the document at ``/api/v1/openapi.json``. Like the document, the page
needs no token (it holds no data; "Authorize" takes a token for the calls made from it).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from swagger_ui_bundle import swagger_ui_path

from registry.errors import NotFound
from registry.openapi import PREFIX, documented

DOCS = f"{PREFIX}/docs"
STATIC = f"{DOCS}/static"
#: The files the page uses (only these are served), with their media types.
ASSETS = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
    "favicon-32x32.png": "image/png",
}
_CACHE = "public, max-age=86400"

PAGE = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Switchboard admin API</title>
  <link rel="stylesheet" href="{STATIC}/swagger-ui.css">
  <link rel="icon" type="image/png" href="{STATIC}/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{STATIC}/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{
      url: "{PREFIX}/openapi.json",
      dom_id: "#swagger-ui",
      presets: [SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
      validatorUrl: null,
      deepLinking: true
    }});
  </script>
</body>
</html>
"""


def add_docs_routes(app: web.Application) -> None:
    """Register the page and its assets on ``app``."""
    app.router.add_get(DOCS, docs_page)
    app.router.add_get(f"{STATIC}/{{name}}", docs_asset)


@documented("This API's page (Swagger UI)", "docs", answer="text/html")
async def docs_page(request: web.Request) -> web.Response:
    """An HTML page that shows the OpenAPI document; its assets are served here too."""
    return web.Response(text=PAGE, content_type="text/html", headers={"Cache-Control": "no-cache"})


@documented(
    "A script, stylesheet or icon of the page",
    "docs",
    answer="application/octet-stream",
    errors=(404,),
    params={"name": ", ".join(ASSETS)},
)
async def docs_asset(request: web.Request) -> web.FileResponse:
    """One file of the Swagger UI distribution."""
    name = request.match_info["name"]
    if name not in ASSETS:
        raise NotFound(f"no docs asset {name!r}", details={"assets": sorted(ASSETS)})
    path = Path(str(swagger_ui_path)) / name
    return web.FileResponse(path, headers={"Content-Type": ASSETS[name], "Cache-Control": _CACHE})
