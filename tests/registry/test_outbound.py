"""registry.outbound: aiohttp sessions with the SSRF guard and the outbound proxy (a real proxy
process on loopback, tests/support/proxy.py), and kept-alive connections that never hand
late bytes to the next request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from registry.egress import OutboundProxy
from registry.netguard import AddressPolicy, AddressRefused
from registry.outbound import outbound_connector, outbound_middlewares
from tests.support.proxy import running_proxy
from tests.support.rawhttp import raw_servers

SOURCE = "127.0.0.9"  # the proxy's connections to targets leave from here


def _session(policy: AddressPolicy | None, proxy: OutboundProxy | None) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=outbound_connector(policy, proxy),
        middlewares=outbound_middlewares(proxy, policy),
        trust_env=False,
    )


async def _peers(aiohttp_server: Any, host: str = "127.0.0.1") -> tuple[Any, list[str]]:
    """A server answering every GET with 200 that records each request's peer address."""
    peers: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        peers.append(request.remote or "")
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return await aiohttp_server(app, host=host), peers


async def test_requests_go_through_the_proxy_unless_the_list_names_them(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    """Each request through the proxy (its peer is the proxy's address, the credentials sent),
    an https one through CONNECT; a host of the no-proxy list directly; a target the guard
    refuses never reaches the proxy."""
    server, peers = await _peers(aiohttp_server)
    port = server.port
    async with running_proxy(tmp_path, user="sb", password="s3cr3t", source=SOURCE) as proxy:
        via = OutboundProxy.parse(proxy.url.replace("://", "://sb:s3cr3t@"), ["direct.test"])
        policy = AddressPolicy(["127.0.0.1/32"])
        async with _session(policy, via) as session:
            for _ in range(2):
                async with session.get(f"http://127.0.0.1:{port}/a") as resp:
                    assert resp.status == 200
            with pytest.raises(AddressRefused, match=r"127\.0\.0\.6 \(loopback\)"):
                await session.get(f"http://127.0.0.6:{port}/refused")
            with pytest.raises(aiohttp.ClientHttpProxyError, match="502"):
                await session.get("https://127.0.0.1:1/tunnel")  # CONNECT: the proxy's 502
            with pytest.raises(aiohttp.ClientConnectorError):
                await session.get(f"http://direct.test:{port}/direct")  # not resolved: direct
        entries = proxy.entries()
    assert peers == [SOURCE, SOURCE]
    assert [(e["method"], e["target"], e["auth"]) for e in entries] == [
        ("GET", f"http://127.0.0.1:{port}/a", "ok"),
        ("GET", f"http://127.0.0.1:{port}/a", "ok"),
        ("CONNECT", "127.0.0.1:1", "ok"),
    ]


async def test_the_proxys_own_address_is_not_judged(aiohttp_server: Any, tmp_path: Path) -> None:
    """The proxy named ``localhost`` (127.0.0.1), outside the allowed networks: the guard lets
    its address through, and judges only the target (127.0.0.2)."""
    server, peers = await _peers(aiohttp_server, host="127.0.0.2")
    async with running_proxy(tmp_path, source=SOURCE) as proxy:
        port = int(proxy.url.rsplit(":", 1)[1])
        via = OutboundProxy.parse(f"http://localhost:{port}")
        target = f"http://127.0.0.2:{server.port}/"
        policy = AddressPolicy(["127.0.0.2/32"])
        async with _session(policy, via) as session, session.get(target) as resp:
            assert resp.status == 200
        assert len(proxy.entries()) == 1
    assert peers == [SOURCE]


async def test_late_bytes_on_a_kept_alive_connection_answer_nothing() -> None:
    """An answer, then a second one sent while the connection waits in the pool: the next
    request gets a new connection and its own answer, not the smuggled one."""
    good = b'{"answer": "good"}'
    smuggled = b'{"answer": "SMUGGLED"}'
    sent_late = asyncio.Event()

    def answer(body: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(good))
        await writer.drain()
        if server.connections == 1:
            await asyncio.sleep(0)  # the answer is read and its connection back in the pool
            writer.write(answer(smuggled))
            await writer.drain()
            sent_late.set()
        await reader.read()

    async with raw_servers() as start:
        server = await start(script)
        async with _session(None, None) as session:
            async with session.get(server.url) as resp:
                assert await resp.read() == good
            await sent_late.wait()
            await asyncio.sleep(0.05)  # the late bytes reach the idle connection
            async with session.get(server.url) as resp:
                assert await resp.read() == good
    assert server.connections == 2
