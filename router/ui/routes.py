"""The web console's routes: ``/ui/`` and every path under it answer the one HTML page (the
URL is the state the page reads), ``/ui/static/{name}`` its stylesheet and scripts (only the
files of :data:`ASSETS`), and ``GET /`` from a browser (``Accept: text/html``) a redirect to
``/ui/``. ``SWITCHBOARD_UI=off`` registers none of them.

Every ``/ui`` answer carries a strict Content-Security-Policy (scripts and styles only from
Switchboard, no inline ones, no frames) and the other security headers of :data:`HEADERS`.
The page holds no data: it fetches ``/api/v1/...`` with the viewer's credential in a header.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from registry.errors import NotFound

PREFIX = "/ui"
STATIC = f"{PREFIX}/static"

_JS = "text/javascript; charset=utf-8"
#: The files served under ``/ui/static/`` (nothing else is), with their media types.
ASSETS: dict[str, str] = {
    "style.css": "text/css; charset=utf-8",
    "app.js": _JS,
    "api.js": _JS,
    "dom.js": _JS,
    "overview.js": _JS,
    "catalog.js": _JS,
    "agent.js": _JS,
    "skills.js": _JS,
    "playground.js": _JS,
    "explainview.js": _JS,
    "admin.js": _JS,
}

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: The headers of every ``/ui`` answer (errors included).
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# the files change only with Switchboard's version and are small: revalidate (ETag) each time
_CACHE = "no-cache"


def add_ui_routes(app: web.Application) -> None:
    """Register the console's routes and headers on ``app`` (before the router's ``POST /``
    so that ``GET /`` from a browser is redirected)."""
    app.router.add_get("/", root)
    app.router.add_get(PREFIX, to_console)
    app.router.add_get(f"{STATIC}/{{name}}", asset)
    app.router.add_get(PREFIX + "/{path:.*}", page)
    app.on_response_prepare.append(_security_headers)


def wants_html(request: web.Request) -> bool:
    """A browser's navigation: ``Accept`` names ``text/html`` (A2A clients and card fetches
    ask for JSON or event streams, or anything)."""
    accept = request.headers.get("Accept", "")
    for item in accept.split(","):
        media, *params = (part.strip().lower() for part in item.split(";"))
        refused = any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
        if media == "text/html" and not refused:
            return True
    return False


async def root(request: web.Request) -> web.Response:
    """``GET /``: a browser goes to the console; anyone else gets what ``GET /`` always
    answered (405: the A2A endpoint takes ``POST``)."""
    if wants_html(request):
        raise web.HTTPFound(f"{PREFIX}/")
    raise web.HTTPMethodNotAllowed(request.method, ["POST"])


async def to_console(request: web.Request) -> web.Response:
    """``/ui`` → ``/ui/`` (keeping the query)."""
    query = f"?{request.query_string}" if request.query_string else ""
    raise web.HTTPFound(f"{PREFIX}/{query}")


async def page(request: web.Request) -> web.Response:
    """The console's page, whatever the path under ``/ui/`` (the script reads the URL)."""
    body = (resources.files(__package__) / "static" / "index.html").read_bytes()
    return web.Response(
        body=body, content_type="text/html", charset="utf-8", headers={"Cache-Control": _CACHE}
    )


async def asset(request: web.Request) -> web.Response:
    """One file of the console (a name of :data:`ASSETS`, nothing else)."""
    name = request.match_info["name"]
    if name not in ASSETS:
        raise NotFound(f"no console asset {name!r}", details={"assets": sorted(ASSETS)})
    body = (resources.files(__package__) / "static" / name).read_bytes()
    return web.Response(body=body, headers={"Content-Type": ASSETS[name], "Cache-Control": _CACHE})


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    if request.path == PREFIX or request.path.startswith(PREFIX + "/"):
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
