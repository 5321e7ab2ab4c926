"""The push notification routes (docs/push.md).

- ``POST /push/{receiver_key}``: the receiver agents post notifications to (the URL and the
  ``X-A2A-Notification-Token`` the router gave them in its config; no client
  authentication). 200 when queued for the client's webhook; 404 for an unknown receiver, 401
  for a wrong token, 403 for a task the config is not for, 413 for a body over
  ``SWITCHBOARD_MAX_REQUEST_BYTES``, 400 for one that is not a notification: nothing is
  stored. Errors are ``{"error": {"code", "message"}}``.
- ``GET /api/v1/push/dead``: the dead letters (admin only).
"""

from __future__ import annotations

from aiohttp import web

from registry.api import SETTINGS
from registry.bodies import BodyError, read_body
from registry.openapi import documented
from router.forward.push import ReceiverRefused
from router.push.outbox import TOKEN_HEADER
from router.transport.apimodels import DeadLetters
from router.transport.routes import ROUTER

__all__ = ["add_push_routes"]


def add_push_routes(app: web.Application) -> None:
    """Register the receiver and the dead-letter route on ``app`` (which holds ROUTER)."""
    app.router.add_post("/push/{receiver_key}", receive)
    app.router.add_get("/api/v1/push/dead", dead_letters)


def _refused(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


async def receive(request: web.Request) -> web.Response:
    """One notification from an agent, for the config behind ``receiver_key``."""
    router = request.app[ROUTER]
    key = request.match_info["receiver_key"]
    try:
        body = await read_body(request, request.app[SETTINGS].max_request_bytes)
    except BodyError as exc:
        status = 413 if exc.problem == "too_large" else 400
        return _refused(status, exc.problem, exc.message)
    try:
        await router.push.receive(key, request.headers.get(TOKEN_HEADER), body, router.push_target)
    except ReceiverRefused as exc:
        return _refused(exc.status, "refused", exc.message)
    return web.json_response({"queued": True})


@documented(
    "Push notifications given up after their retries, newest first", "push",
    answer=DeadLetters, errors=(401, 403),
)  # fmt: skip
async def dead_letters(request: web.Request) -> web.Response:
    """The dead letters of the push outbox (admin only)."""
    rows = await request.app[ROUTER].outbox.dead()
    return web.json_response({"deadLetters": rows})
