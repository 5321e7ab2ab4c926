"""A client's webhook for push tests: a real aiohttp server on 127.0.0.1 that records every
notification it gets, to wait on (no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.support.streams import within

__all__ = ["Webhook", "completed_1_0", "serve_webhook"]


class Webhook:
    """The client's webhook: every notification it gets, and a queue to wait on them."""

    def __init__(self) -> None:
        self.got: asyncio.Queue[tuple[dict[str, str], Any]] = asyncio.Queue()

    async def handle(self, request: web.Request) -> web.Response:
        """Keep the notification's headers and body; answer 204."""
        await self.got.put((dict(request.headers), await request.json()))
        return web.Response(status=204)

    async def until(self, done: Callable[[Any], bool]) -> list[tuple[dict[str, str], Any]]:
        """Notifications up to the first for which ``done(body)`` holds."""
        seen = []
        while True:
            headers, body = await within(self.got.get())
            seen.append((headers, body))
            if done(body):
                return seen


def completed_1_0(body: Any) -> bool:
    """Whether a 1.0 notification (a ``StreamResponse``) says its task completed."""
    update = body.get("statusUpdate") or body.get("task") or {}
    return update.get("status", {}).get("state") == "TASK_STATE_COMPLETED"


async def serve_webhook(aiohttp_server: Any) -> tuple[Webhook, str]:
    """A webhook at ``/hook`` of a new server; the hook and its URL."""
    hook = Webhook()
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    server = await aiohttp_server(app)
    return hook, str(server.make_url("/hook"))
