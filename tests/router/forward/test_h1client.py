"""router.forward.h1client: the lean keep-alive HTTP/1.1 client of unary calls, against real
servers on 127.0.0.1 (aiohttp's, and raw asyncio ones that answer byte for byte)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import ssl
import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from registry.egress import OutboundProxy
from registry.netguard import AddressPolicy, AddressRefused
from router.forward.h1client import H1Error, H1Pool, TooLarge
from tests.support.proxy import running_proxy
from tests.support.rawhttp import ANSWER, BODY, Raw, answer, pool
from tests.support.tls import self_signed


async def test_answers_over_one_kept_alive_connection(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(answer())

    server = await raw(script)
    client = pool()
    try:
        for _ in range(3):
            got = await client.post(server.url, [("A2A-Version", "1.0")], BODY)
            assert (got.status, got.reason, got.body) == (200, "OK", ANSWER)
            assert got.headers["Content-Type"] == "application/json"
    finally:
        await client.close()
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /rpc?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.url.port}\r\n".encode() in first
    assert b"A2A-Version: 1.0\r\n" in first and b"User-Agent: Switchboard\r\n" in first
    assert first.endswith(b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY))


async def test_a_chunked_answer_is_read_whole(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (ANSWER[:10], ANSWER[10:]):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await reader.read()  # keep the connection open

    server = await raw(script)
    client = pool()
    try:
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()


async def test_an_answer_framed_by_the_connection_ends_with_it(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + ANSWER)

    server = await raw(script)
    client = pool()
    try:
        assert (await client.post(server.url, [], BODY)).body == ANSWER
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()
    assert server.connections == 2  # "Connection: close": never reused


@pytest.mark.parametrize(
    "reply",
    [
        answer(b"x" * 101),  # announced too long
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"40\r\n" + b"x" * 64 + b"\r\n"
        b"40\r\n" + b"x" * 64 + b"\r\n0\r\n\r\n",  # grows too long
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"40\r\n" + b"x" * 64 + b"\r\n"
        b"40\r\n" + b"x" * 64 + b"\r\n",  # grows too long, and the rest never comes
    ],
)
async def test_a_body_beyond_the_limit_is_refused(raw: Any, reply: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(reply)
        await reader.read()

    server = await raw(script)
    client = pool(max_body_bytes=100)
    try:
        with pytest.raises(TooLarge):
            await client.post(server.url, [], BODY)
    finally:
        await client.close()


async def test_an_answer_cut_short_or_missing_fails(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        if server.connections == 1:
            writer.write(answer()[:-5])  # the body is cut short, then the connection closes

    server = await raw(script)
    client = pool()
    try:
        with pytest.raises(aiohttp.ClientPayloadError):
            await client.post(server.url, [], BODY)
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await client.post(server.url, [], BODY)  # closed without a byte
    finally:
        await client.close()


async def test_a_malformed_answer_fails_and_the_connection_is_dropped(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            if server.connections == 1:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}")
            else:
                writer.write(answer())

    server = await raw(script)
    client = pool()
    try:
        with pytest.raises(H1Error, match="malformed HTTP answer"):
            await client.post(server.url, [], BODY)
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()
    assert server.connections == 2


async def test_the_read_timeout_bounds_each_silence_not_the_call(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        if server.connections == 1:
            await reader.read()  # never answers
            return
        data = answer()
        head = data.index(b"\r\n\r\n") + 4
        writer.write(data[:head])  # the head at once, as it must be (within the timeout)
        for i in range(head, len(data), 8):  # 6 pieces, each within the timeout, 0.5 s in all
            writer.write(data[i : i + 8])
            await writer.drain()
            await asyncio.sleep(0.08)
        await reader.read()

    server = await raw(script)
    client = pool(read_timeout=0.3)
    try:
        with pytest.raises(TimeoutError):
            await client.post(server.url, [], BODY)
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()


async def test_the_head_is_due_whole_within_the_read_timeout(raw: Any) -> None:
    """A head dripped a byte at a time, each within the timeout, fails when the timeout is
    up; so does a run of interim answers with no final one, and more than 16 at once."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        if server.connections == 1:
            for byte in answer():
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.05)
        elif server.connections == 2:
            for _ in range(3):
                writer.write(b"HTTP/1.1 102 Processing\r\n\r\n")
                await asyncio.sleep(0.05)
        else:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" * 17 + answer())
        await reader.read()

    server = await raw(script)
    client = pool(read_timeout=0.3)
    try:
        slow_head = r"head of the agent's answer was not whole within 0\.3 s"
        with pytest.raises(H1Error, match=slow_head):
            await client.post(server.url, [], BODY)
        with pytest.raises(H1Error, match=r"3 interim answers but no final one within 0\.3 s"):
            await client.post(server.url, [], BODY)
        with pytest.raises(H1Error, match="more than 16 interim 1xx answers"):
            await client.post(server.url, [], BODY)
    finally:
        await client.close()


async def test_the_per_origin_limit_makes_calls_wait_then_time_out(raw: Any) -> None:
    release = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            await release.wait()
            writer.write(answer())

    server = await raw(script)
    client = pool(per_origin_limit=1, pool_timeout=0.1)
    try:
        first = asyncio.create_task(client.post(server.url, [], BODY))
        await server.arrived.wait()  # the first call holds the one connection
        busy = r"no free connection to the agent within 0.1 s \(1 open to it, 1 in all\)"
        with pytest.raises(H1Error, match=busy):
            await client.post(server.url, [], BODY)  # the one connection stays busy
        waiting = asyncio.create_task(pool_call(client, server.url))
        release.set()
        assert (await first).body == ANSWER
        assert (await waiting).body == ANSWER
    finally:
        await client.close()
    assert server.connections == 1


async def pool_call(client: H1Pool, url: URL) -> Any:
    client.pool_timeout = 5.0
    return await client.post(url, [], BODY)


async def test_refused_connections_and_addresses(raw: Any) -> None:
    server = await raw(lambda reader, writer: asyncio.sleep(0))
    url = server.url
    assert server.server is not None
    server.server.close()
    await server.server.wait_closed()
    client = pool()
    try:
        with pytest.raises(H1Error, match=f"cannot connect to 127.0.0.1:{url.port}: "):
            await client.post(url, [], BODY)
    finally:
        await client.close()
    guarded = pool(policy=AddressPolicy())  # loopback is not allowed: never dialled
    try:
        with pytest.raises(AddressRefused):
            await guarded.post(url.with_host("localhost"), [], BODY)
    finally:
        await guarded.close()


async def test_a_header_with_a_line_break_is_never_sent(raw: Any) -> None:
    server = await raw(lambda reader, writer: reader.read())
    client = pool()
    try:
        with pytest.raises(ValueError, match="line break"):
            await client.post(server.url, [("X-Evil", "a\r\nHost: other")], BODY)
    finally:
        await client.close()
    assert server.requests == []


async def test_against_an_aiohttp_server(aiohttp_server: Any) -> None:
    seen: list[dict[str, Any]] = []

    async def rpc(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {"n": len(seen)}})

    app = web.Application()
    app.router.add_post("/", rpc)
    server = await aiohttp_server(app)
    client = pool()
    try:
        answers = await asyncio.gather(
            *(client.post(server.make_url("/"), [], BODY) for _ in range(20))
        )
    finally:
        await client.close()
    assert sorted(json.loads(a.body)["result"]["n"] for a in answers) == list(range(1, 21))
    assert seen == [json.loads(BODY)] * 20


async def test_tls_is_verified(tmp_path: Path) -> None:
    cert_file, key_file = self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert_file, key_file)

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r")[0]))
                writer.write(answer())
        writer.close()

    server = await asyncio.start_server(script, "127.0.0.1", 0, ssl=served)
    url = URL(f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/")
    trusting = pool(ssl_context=ssl.create_default_context(cafile=str(cert_file)))
    default = pool()
    try:
        assert (await trusting.post(url, [], BODY)).body == ANSWER
        assert (await trusting.post(url, [], BODY)).body == ANSWER
        with pytest.raises(H1Error, match="TLS certificate verification failed"):
            await default.post(url, [], BODY)
    finally:
        await trusting.close()
        await default.close()
        server.close()


def test_on_uvloop() -> None:
    """The server's loop: uvloop's transports are not asyncio.Transport subclasses."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> int:
        made = Raw(lambda reader, writer: _answer_all(made, reader, writer))
        made.server = await asyncio.start_server(made._serve, "127.0.0.1", 0)
        client = pool()
        try:
            for _ in range(3):
                assert (await client.post(made.url, [], BODY)).body == ANSWER
        finally:
            await client.close()
            made.server.close()
        return made.connections

    assert uvloop.run(scenario()) == 1


async def _answer_all(
    made: Raw, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    while True:
        await made.read_request(reader)
        writer.write(answer())


async def test_an_answer_too_many_is_refused_and_interim_answers_skipped(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            if server.connections == 1:
                writer.write(answer() + answer(b'{"jsonrpc":"2.0","id":1,"result":"forged"}'))
            else:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + answer())

    server = await raw(script)
    client = pool()
    try:
        with pytest.raises(H1Error, match="more than one answer"):
            await client.post(server.url, [], BODY)
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()


async def test_the_total_limit_closes_another_origins_idle_connection(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server_a.read_request(reader)  # (any Raw reads a request)
            writer.write(answer())

    server_a = await raw(script)
    server_b = await raw(script)
    client = pool(total_limit=1, pool_timeout=0.2)
    try:
        assert (await client.post(server_a.url, [], BODY)).body == ANSWER  # idle after this
        assert (await client.post(server_b.url, [], BODY)).body == ANSWER  # room made
        assert (await client.post(server_a.url, [], BODY)).body == ANSWER
    finally:
        await client.close()
    assert (server_a.connections, server_b.connections) == (2, 1)


async def test_a_compressed_answer_is_refused_never_inflated(raw: Any) -> None:
    inflated = b"x" * 50_000  # deflates to ~100 bytes; the limit is 10,000
    packed = gzip.compress(inflated)

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            if server.connections == 1:
                writer.write(answer(packed, "Content-Encoding: gzip"))
            else:
                writer.write(answer(ANSWER, "Content-Encoding: identity"))

    server = await raw(script)
    client = pool(max_body_bytes=10_000)
    try:
        with pytest.raises(H1Error, match=r"compressed answer \(Content-Encoding: gzip\)"):
            await client.post(server.url, [], BODY)
        assert (await client.post(server.url, [], BODY)).body == ANSWER  # identity is no coding
    finally:
        await client.close()
    assert b"\r\nAccept-Encoding: identity\r\n" in server.requests[0]  # asked for none


async def test_a_chunked_body_is_held_as_one_buffer_while_it_arrives(raw: Any) -> None:
    """256 KiB in 1-byte chunks: held as they came (a bytes object and a chunk boundary each),
    it peaked at ~20 MB; drained into one buffer on every read, at a few MB."""
    size = 256 * 1024
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * size
    wire += b"0\r\n\r\n"

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(wire)
        await reader.read()

    server = await raw(script)
    client = pool()
    tracemalloc.start()
    try:
        got = await client.post(server.url, [], BODY)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await client.close()
    assert got.body == b"x" * size
    assert peak < 10_000_000, peak  # (4.5 MB with the server's 1.5 MB buffer; 23.6 MB before)


async def test_bytes_beyond_the_answer_in_its_read_close_the_connection(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            if server.connections == 1:  # an answer and the start of another, in one write
                writer.write(answer(b"{}") + b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n")
            else:
                writer.write(answer())

    server = await raw(script)
    client = pool()
    try:
        assert (await client.post(server.url, [], BODY)).body == b"{}"
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()
    assert server.connections == 2


async def test_a_call_blocked_by_the_total_limit_gets_another_origins_idle_connection(
    raw: Any,
) -> None:
    release = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server_a.read_request(reader)  # (any Raw reads a request)
            await release.wait()
            writer.write(answer())

    server_a = await raw(script)
    server_b = await raw(script)
    client = pool(total_limit=1, pool_timeout=2.0)
    try:
        first = asyncio.create_task(client.post(server_a.url, [], BODY))
        await server_a.arrived.wait()  # A's call holds the one connection the total allows
        waiting = asyncio.create_task(client.post(server_b.url, [], BODY))
        release.set()
        assert (await first).body == ANSWER  # A's connection goes idle: B must get the room
        assert (await waiting).body == ANSWER
    finally:
        await client.close()
    assert (server_a.connections, server_b.connections) == (1, 1)


async def test_a_woken_call_that_is_cancelled_passes_the_connection_on(raw: Any) -> None:
    release = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            await release.wait()
            writer.write(answer())

    server = await raw(script)
    client = pool(per_origin_limit=1, pool_timeout=2.0)
    woken: asyncio.Task[Any] | None = None

    async def first_call() -> Any:
        try:
            return await client.post(server.url, [], BODY)
        finally:  # in the very step that released the connection and woke `woken`'s wait
            assert woken is not None
            woken.cancel()

    try:
        first = asyncio.create_task(first_call())
        await server.arrived.wait()  # the first call holds the one connection
        woken = asyncio.create_task(client.post(server.url, [], BODY))  # waits first
        later = asyncio.create_task(client.post(server.url, [], BODY))  # waits second
        release.set()
        assert (await first).body == ANSWER
        with pytest.raises(asyncio.CancelledError):
            await woken
        assert (await later).body == ANSWER  # the idle connection, not a timeout
    finally:
        await client.close()
    assert server.connections == 1


async def test_a_call_woken_for_nothing_keeps_its_place_in_the_queue(raw: Any) -> None:
    release = asyncio.Event()

    async def a_script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server_a.read_request(reader)
            writer.write(answer())

    async def b_script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server_b.read_request(reader)
            await release.wait()
            writer.write(answer())

    server_a = await raw(a_script)
    server_b = await raw(b_script)
    client = pool(per_origin_limit=1, total_limit=2, pool_timeout=2.0)
    try:
        first = asyncio.create_task(client.post(server_b.url, [], BODY))
        await server_b.arrived.wait()  # B's one connection is busy
        one = asyncio.create_task(client.post(server_b.url, [], b'"one"'))
        two = asyncio.create_task(client.post(server_b.url, [], b'"two"'))
        # A's connection goes idle: under the total limit that wakes B's first waiter, which
        # finds B still at its own limit and waits again, at the front
        assert (await client.post(server_a.url, [], BODY)).body == ANSWER
        release.set()
        await asyncio.gather(first, one, two)
    finally:
        await client.close()
    assert [r.rsplit(b"\r\n\r\n", 1)[1] for r in server_b.requests] == [BODY, b'"one"', b'"two"']


async def test_an_ip_literal_is_dialled_without_the_resolver_thread(raw: Any) -> None:
    """The default executor (where getaddrinfo runs) busy with other work, as while a model
    embeds, must not hold up a call to an agent on an IP address."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(answer())

    server = await raw(script)
    loop = asyncio.get_running_loop()
    release = threading.Event()
    busy = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(busy)
    blocker = loop.run_in_executor(None, release.wait)
    client = pool(connect_timeout=1.0)
    try:
        got = await client.post(server.url, [], BODY)
        assert got.body == ANSWER
        ipv6 = pool(policy=AddressPolicy())  # a guarded pool refuses a literal, undialled
        with pytest.raises(AddressRefused):
            await ipv6.post(URL("http://[::1]:9/"), [], BODY)
        await ipv6.close()
    finally:
        release.set()
        await blocker
        await client.close()
        busy.shutdown()


async def test_through_the_outbound_proxy(raw: Any, tmp_path: Path) -> None:
    """http in absolute form on a kept-alive connection to the proxy, https through a CONNECT
    tunnel (the agent's certificate checked through it), the credentials sent; an origin the
    no-proxy list names is dialled directly; a target the guard refuses is never asked of the
    proxy, whose own address (127.0.0.3) the guard does not judge."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(answer())

    server = await raw(script)
    cert_file, key_file = self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert_file, key_file)
    tls_server = await asyncio.start_server(
        lambda r, w: Raw(script)._serve(r, w), "127.0.0.1", 0, ssl=served
    )
    secure = URL(f"https://127.0.0.1:{tls_server.sockets[0].getsockname()[1]}/rpc")
    async with running_proxy(tmp_path, user="sb", password="p:ss", host="127.0.0.3") as proxy:
        via = OutboundProxy.parse(proxy.url.replace("://", "://sb:p%3Ass@"), ["localhost"])
        client = pool(
            policy=AddressPolicy(["127.0.0.1/32"]),
            proxy=via,
            ssl_context=ssl.create_default_context(cafile=str(cert_file)),
        )
        try:
            for _ in range(2):
                assert (await client.post(server.url, [], BODY)).body == ANSWER
            assert (await client.post(secure, [], BODY)).body == ANSWER
            with pytest.raises(AddressRefused):
                await client.post(server.url.with_host("127.0.0.4"), [], BODY)
            direct = server.url.with_host("localhost")
            assert (await client.post(direct, [], BODY)).body == ANSWER
        finally:
            await client.close()
            tls_server.close()
        logged = proxy.entries()
    assert [(e["method"], e["target"], e["auth"]) for e in logged] == [
        ("POST", str(server.url), "ok"),
        ("POST", str(server.url), "ok"),
        ("CONNECT", f"127.0.0.1:{secure.port}", "ok"),
    ]
    assert logged[0]["connection"] == logged[1]["connection"]  # kept alive
    first = server.requests[0]
    assert first.startswith(b"POST /rpc?x=1 HTTP/1.1\r\n")  # the proxy asked in origin form
    assert b"proxy-authorization" not in b"".join(server.requests).lower()
    assert "p:ss" not in repr(via) and "p%3Ass" not in via.shown
