"""The server span of every HTTP request: A2A calls, the admin API, cards, health.

:func:`server_span` is the app's outermost middleware. It continues the client's W3C
``traceparent``/``tracestate`` (and ``baggage``), names the span ``<METHOD> <route>`` (the
route's pattern, such as ``/api/v1/agents/{agent_id}``, never the query string) until the
core names an A2A call after its method (:func:`router.tracing.spans.on_request`), and
records the response status (5xx: an error). A client that goes away ends the span without
an error (``switchboard.client_gone``). Without a tracer provider it only calls the handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from aiohttp import web
from aiohttp.typedefs import Handler
from opentelemetry import propagate
from opentelemetry.trace import SpanKind, Status, StatusCode

from router.protocol.restpaths import ROUTES
from router.tracing.spans import active, tracer

__all__ = ["API", "CLIENT_GONE", "HTTP_METHOD", "HTTP_ROUTE", "HTTP_STATUS", "server_span"]

HTTP_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_STATUS = "http.response.status_code"
API = "switchboard.api"
"""Which face of Switchboard was called: ``admin`` (the admin API, ``/api/...``), ``a2a`` (the A2A
endpoints), ``card``, or ``other``."""
CLIENT_GONE = "switchboard.client_gone"


_A2A_ROUTES = frozenset(
    path
    for route in ("/", "/agents/{agent_id}", *(r.path for r in ROUTES))
    for path in (route, route.rstrip("/") + "/", "/agents/{agent_id}" + route)
)


def _route(request: web.Request) -> str:
    info = request.match_info
    resource = info.route.resource if info.route is not None else None
    return resource.canonical if resource is not None else "unmatched"


def _api(route: str) -> str:
    if route.startswith("/api/"):
        return "admin"
    if "/.well-known/" in route:
        return "card"
    return "a2a" if route in _A2A_ROUTES else "other"


@web.middleware
def server_span(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
    """Run ``handler`` in a server span continuing the client's trace (without a tracer
    provider: just run it, the middleware holding no frame of its own while it runs)."""
    if not active():
        return handler(request)
    return _in_span(request, handler)


async def _in_span(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``handler`` in the request's server span."""
    parent = propagate.extract(request.headers)
    route = _route(request)
    with tracer().start_as_current_span(
        f"{request.method} {route}",
        context=parent,
        kind=SpanKind.SERVER,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        recording = span.is_recording()
        if recording:
            span.set_attributes({HTTP_METHOD: request.method, HTTP_ROUTE: route, API: _api(route)})
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if recording:
                span.set_attribute(HTTP_STATUS, exc.status)
                if exc.status >= 500:
                    span.set_status(Status(StatusCode.ERROR, exc.reason))
            raise
        except asyncio.CancelledError:
            if recording:
                span.set_attribute(CLIENT_GONE, True)
            raise
        except Exception as exc:
            if recording:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        if recording:
            span.set_attribute(HTTP_STATUS, response.status)
            if response.status >= 500:
                span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status}"))
        return response
