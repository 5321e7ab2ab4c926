"""The HTTP side of read your writes (:mod:`router.coherence.sync`).

:func:`fresh_state` is a middleware in front of every route:

- a request to a worker that lags behind a write another worker acknowledged waits until this
  worker has caught up (one read of shared memory otherwise);
- an admin write (what the audit log records: :func:`registry.access.audit.is_audited`) that
  answers 2xx is counted, announced and acknowledged by every worker before it answers. When a
  worker did not apply it within ``SWITCHBOARD_WRITE_ACK_TIMEOUT``, the answer says how many
  lagged: ``"stale_workers": n`` in a JSON object body and the ``Switchboard-Stale-Workers``
  header (also on a ``204``, which has no body); those workers catch up before their next
  request all the same.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from registry.access.audit import is_audited
from router.coherence.appkey import COHERENCE
from router.coherence.sync import Coherence

__all__ = ["COHERENCE", "STALE_HEADER", "fresh_state"]

STALE_HEADER = "Switchboard-Stale-Workers"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


def fresh_state(coherence: Coherence) -> Middleware:
    """The middleware for ``coherence`` (see the module docs)."""

    @web.middleware
    def middleware(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        if is_audited(request.method, request.path):
            return _written(coherence, request, handler)
        if coherence.behind:
            return _caught_up(coherence, request, handler)
        return handler(request)  # no frame of this middleware held while it runs

    return middleware


async def _caught_up(
    coherence: Coherence, request: web.Request, handler: Handler
) -> web.StreamResponse:
    await coherence.fresh()
    return await handler(request)


async def _written(
    coherence: Coherence, request: web.Request, handler: Handler
) -> web.StreamResponse:
    if coherence.behind:
        await coherence.fresh()
    response = await handler(request)
    if not 200 <= response.status < 300:
        return response
    stale = await coherence.published()
    if stale:
        response.headers[STALE_HEADER] = str(stale)
        _add_to_body(response, stale)
    return response


def _add_to_body(response: web.StreamResponse, stale: int) -> None:
    """``"stale_workers": stale`` in a JSON object body."""
    if not isinstance(response, web.Response) or response.content_type != "application/json":
        return
    body = response.body
    if not isinstance(body, bytes | bytearray) or not body:
        return
    try:
        data = json.loads(body)
    except ValueError:
        return
    if isinstance(data, dict):
        data["stale_workers"] = stale
        response.body = json.dumps(data).encode()
