"""The request id on the HTTP side: the middleware that gives each request its
:class:`~router.observe.requestid.Observed`, and the ``X-Request-ID`` response header (set on
every response, errors and streams included, as it is prepared)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from router.observe.requestid import (
    REQUEST_ID_HEADER,
    Observed,
    new_request_id,
    observing,
    sane_request_id,
)

__all__ = ["OBSERVED", "add_request_id_header", "request_id_middleware"]

OBSERVED = web.RequestKey("observed", Observed)
"""Where a request keeps its :class:`~router.observe.requestid.Observed`."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Give the request its :class:`Observed` (see the module docstring) for its handling."""
    given = sane_request_id(request.headers.get(REQUEST_ID_HEADER))
    observed = Observed(given or new_request_id())
    request[OBSERVED] = observed
    restore = observing(observed)
    try:
        return await handler(request)
    finally:
        restore()


async def add_request_id_header(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the request's id in the response's ``X-Request-ID``."""
    observed = request.get(OBSERVED)
    if isinstance(observed, Observed):
        response.headers[REQUEST_ID_HEADER] = observed.request_id
