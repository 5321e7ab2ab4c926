"""Raw HTTP servers on 127.0.0.1 that answer byte for byte, for the lean client's tests
(router.forward.h1client, router.forward.h1conn)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from yarl import URL

from router.forward.h1client import H1Pool

BODY = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}'

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def pool(**overrides: Any) -> H1Pool:
    settings: dict[str, Any] = {
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
        "pool_timeout": 5.0,
        "max_body_bytes": 1 << 20,
    }
    return H1Pool(**{**settings, **overrides})


class Raw:
    """A raw TCP server answering each connection with ``script``; counts connections."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.arrived = asyncio.Event()  # set by each request read
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        request = head + await reader.readexactly(length)
        self.requests.append(request)
        self.arrived.set()
        return request

    @property
    def url(self) -> URL:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return URL(f"http://127.0.0.1:{port}/rpc?x=1")


@contextlib.asynccontextmanager
async def raw_servers() -> AsyncIterator[Callable[[Script], Awaitable[Raw]]]:
    """Start raw servers with a script each (``await start(script)``); closed at the end."""
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> Raw:
        made = Raw(script)
        made.server = await asyncio.start_server(made._serve, "127.0.0.1", 0)
        servers.append(made.server)
        return made

    try:
        yield start
    finally:
        for server in servers:
            server.close()


def answer(body: bytes = ANSWER, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join([*head, *extra]) + "\r\n\r\n").encode() + body
