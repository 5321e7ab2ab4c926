"""Fixtures of the tests of router.choose (see tests/README.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer


class ChatServer:
    """A chat-completions endpoint whose next answer the test sets: ``content`` (the model's
    reply), ``status`` (an error status instead), ``stall`` (never answer); ``requests`` keeps
    each request body."""

    def __init__(self) -> None:
        self.content = '{"choice": 1}'
        self.status = 200
        self.requests: list[dict[str, Any]] = []
        self.hang = asyncio.Event()  # never set: a request waits on it when ``stall``
        self.stall = False

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        if self.stall:
            await self.hang.wait()
        if self.status != 200:
            return web.json_response({"error": "x"}, status=self.status)
        body = {
            "id": "c1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.content}}],
        }
        return web.json_response(body)


@pytest.fixture
async def chat(aiohttp_server: Any) -> tuple[ChatServer, TestServer]:
    """A :class:`ChatServer` on a real port, and its test server."""
    chat = ChatServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat.handle)
    return chat, await aiohttp_server(app)
