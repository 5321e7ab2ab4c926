"""Hostile agents against the router's upstream clients: Switchboard's own HTTP/1.1 client
(``SWITCHBOARD_UPSTREAM_CLIENT=lean``, the default) and aiohttp's.

Every agent is a path of one raw asyncio server on 127.0.0.1 that answers the first request
of its case with hostile bytes and every later one well: response splitting (a second answer
in the same read, or late on the idle connection, a CR in a header), oversized, too many and
folded headers, duplicate or conflicting ``Content-Length``, chunked with ``Content-Length``,
a chunk size that overflows, trailers (fine, and a flood of them), early closes, slow drips,
an endless run of ``100 Continue``, a protocol switch, compressed answers and a compression
bomb, a NUL in a header, control characters in the extensions header; and streams cut short,
gone silent, with a broken chunk, or compressed.

A client calls each agent through the router (``POST /agents/{id}``, A2A 0.3): the hostile
answer must come back as a JSON-RPC error whose ``data`` says which agent, where and what
went wrong (``reason``), or as the right answer where the bytes were legal; then a good call
to the same agent, on the same pool (one origin for all the cases), must get its own answer,
never bytes left over from the hostile one. The router's memory (``VmRSS`` of this process,
which holds the router) may grow by at most 50 MiB over the suite.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import re
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from router.app import create_app
from tests.support.helpers import AUTH, card_v03, make_settings

Writer = asyncio.StreamWriter
Hostile = Callable[[dict[str, Any], Writer, "HostileServer"], Awaitable[None]]

SILENCE = 0.5  # SWITCHBOARD_UPSTREAM_TIMEOUT (and connect timeout) of the router under test
MIB = 1 << 20


@functools.cache
def bomb() -> bytes:
    """256 MiB of zeros, gzipped (about 250 KiB), made a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip format
    zeros = bytes(MIB)
    return b"".join([*(packer.compress(zeros) for _ in range(256)), packer.flush()])


def good(request: dict[str, Any]) -> bytes:
    """The right answer to a ``message/send``: its text names the request's message."""
    message_id = request["params"]["message"]["messageId"]
    result = {"kind": "message", "messageId": f"re-{message_id}", "role": "agent",
              "parts": [{"kind": "text", "text": f"good {message_id}"}]}  # fmt: skip
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()


def smuggled(request: dict[str, Any]) -> bytes:
    return good(request).replace(b"good ", b"SMUGGLED ")


def head(*lines: str, length: int | None = None, media: str = "application/json") -> bytes:
    """An answer's head: 200, ``media``, the ``lines``, and ``Content-Length`` when given."""
    fields = ["HTTP/1.1 200 OK", f"Content-Type: {media}", *lines]
    if length is not None:
        fields.append(f"Content-Length: {length}")
    return ("\r\n".join(fields) + "\r\n\r\n").encode()


def whole(body: bytes, *lines: str, media: str = "application/json") -> bytes:
    return head(*lines, length=len(body), media=media) + body


def chunked(body: bytes, *lines: str, trailer: bytes = b"") -> bytes:
    return head("Transfer-Encoding: chunked", *lines) + b"%x\r\n%s\r\n0\r\n%s\r\n" % (
        len(body),
        body,
        trailer,
    )


def sse(request: dict[str, Any]) -> bytes:
    return b"data: " + good(request) + b"\n\n"


def working(request: dict[str, Any]) -> bytes:
    """A stream's first event: its task, still working."""
    task = {"kind": "task", "id": "up-task", "contextId": "up-ctx", "status": {"state": "working"}}
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": task}
    return b"data: " + json.dumps(answer).encode() + b"\n\n"


STREAM = "text/event-stream"
CHUNKED_STREAM = head("Transfer-Encoding: chunked", media=STREAM)


def written(data: Callable[[dict[str, Any]], bytes]) -> Hostile:
    """Write ``data(request)`` at once."""

    async def answer(request: dict[str, Any], writer: Writer, at: HostileServer) -> None:
        writer.write(data(request))
        await writer.drain()

    return answer


def closing(data: Callable[[dict[str, Any]], bytes]) -> Hostile:
    """Write ``data(request)``, then close the connection."""

    async def answer(request: dict[str, Any], writer: Writer, at: HostileServer) -> None:
        writer.write(data(request))
        await writer.drain()
        writer.close()

    return answer


def dripped(data: Callable[[dict[str, Any]], bytes], pause: float) -> Hostile:
    """Write ``data(request)`` a byte at a time, ``pause`` seconds apart (each within the
    silence the router allows)."""

    async def answer(request: dict[str, Any], writer: Writer, at: HostileServer) -> None:
        for byte in data(request):
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(pause)

    return answer


def then_silent(data: Callable[[dict[str, Any]], bytes]) -> Hostile:
    """Write ``data(request)``, then nothing more until the router gives up."""

    async def answer(request: dict[str, Any], writer: Writer, at: HostileServer) -> None:
        writer.write(data(request))
        await writer.drain()
        await asyncio.sleep(10 * SILENCE)

    return answer


async def interim_flood(request: dict[str, Any], writer: Writer, at: HostileServer) -> None:
    """``100 Continue`` for ever (until the router closes the connection)."""
    while not writer.is_closing():
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" * 8)
        await writer.drain()
        await asyncio.sleep(0.01)


async def late_second_answer(request: dict[str, Any], writer: Writer, at: HostileServer) -> None:
    """The answer, then another one once the router holds the connection idle in its pool
    (when the test says so: ``at.idle``)."""
    writer.write(whole(good(request)))
    await writer.drain()
    await at.idle.wait()
    writer.write(whole(smuggled(request)))
    await writer.drain()
    at.late.set()


@dataclass(frozen=True)
class Case:
    """A hostile answer and what each client makes of it: ``answered`` (the right answer
    reaches the client), or the JSON-RPC error code and a pattern its reason matches."""

    name: str
    hostile: Hostile
    lean: tuple[int, str] | str
    aiohttp: tuple[int, str] | str
    stream: bool = False


MALFORMED = (-32052, "malformed HTTP answer")
CUT = (-32052, "the connection closed before the answer was complete")
UNASKED = (-32052, r"compressed answer \(Content-Encoding: .*\), not asked for")

CASES = [
    Case("split-in-one-read", written(lambda r: whole(good(r)) + whole(smuggled(r))),
         (-32052, r"more than one answer"), "answered"),
    Case("split-late", late_second_answer, "answered", "answered"),
    Case("split-cr-in-header",
         written(lambda r: head("X-A: a\rContent-Length: 0", length=len(good(r))) + good(r)),
         (-32052, "Missing expected LF after header value"),
         (-32052, "Missing expected LF after header value")),
    Case("oversized-header", written(lambda r: whole(good(r), "X-Big: " + "a" * 70_000)),
         (-32052, "a header too large"), (-32052, "Got more than 8190 bytes")),
    Case("too-many-headers",
         written(lambda r: whole(good(r), *(f"X-{n}: a" for n in range(500)))),
         (-32052, "a header too large or too many"), (-32052, "Too many headers")),
    Case("folded-header", written(lambda r: whole(good(r), "X-Fold: a\r\n b")),
         "answered", "answered"),
    Case("folded-content-length",
         written(lambda r: head(f"Content-Length: 2\r\n {len(good(r))}") + good(r)),
         (-32052, "Duplicate Content-Length"), (-32052, "Duplicate Content-Length")),
    Case("duplicate-content-length",
         written(lambda r: whole(good(r), f"Content-Length: {len(good(r))}")),
         (-32052, "Duplicate Content-Length"), (-32052, "Duplicate Content-Length")),
    Case("conflicting-content-length", written(lambda r: whole(good(r), "Content-Length: 5")),
         (-32052, "Duplicate Content-Length"), (-32052, "Duplicate Content-Length")),
    Case("chunked-and-content-length",
         written(lambda r: chunked(good(r), "Content-Length: 5")),
         (-32052, "Content-Length"), (-32052, "Content-Length")),
    Case("chunk-size-overflow",
         written(lambda r: head("Transfer-Encoding: chunked") + b"F" * 20 + b"\r\n" + good(r)),
         (-32052, "Chunk size overflow"), (-32052, "Chunk size overflow")),
    Case("trailers", written(lambda r: chunked(good(r), trailer=b"X-Checksum: 1\r\n")),
         "answered", "answered"),
    Case("trailer-flood",
         written(lambda r: chunked(good(r), trailer=(b"X-T: " + b"v" * 100 + b"\r\n") * 3000)),
         MALFORMED, MALFORMED),
    Case("early-close-in-head", closing(lambda r: head()[:20]),
         (-32052, "the agent closed the connection"),
         (-32052, "the agent closed the connection")),
    Case("early-close-in-body", closing(lambda r: head(length=100) + good(r)[:10]), CUT, CUT),
    Case("slow-drip-head", dripped(lambda r: head(length=len(good(r))), SILENCE / 4),
         (-32052, r"head of the agent's answer was not whole within 0\.5 s"),
         (-32052, r"head of the agent's answer was not whole within 1\.5 s")),
    Case("slow-drip-then-silence", then_silent(lambda r: head(length=100) + good(r)[:10]),
         (-32052, r"no data from the agent for 0\.5 s"),
         (-32052, r"no data from the agent for 0\.5 s")),
    Case("interim-flood", interim_flood,
         (-32052, r"more than 16 interim 1xx answers"),
         (-32052, r"head of the agent's answer was not whole within 1\.5 s")),
    Case("upgrade",
         written(lambda r: b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           b"Connection: Upgrade\r\n\r\n" + whole(smuggled(r))),
         (-32052, "a protocol switch"), (-32052, "a protocol switch")),
    Case("gzip",
         written(lambda r: whole(gzip.compress(good(r), mtime=0), "Content-Encoding: gzip")),
         UNASKED, "answered"),
    Case("gzip-bomb", written(lambda r: whole(bomb(), "Content-Encoding: gzip")),
         UNASKED, (-32006, r"the answer exceeds 16777216 bytes")),
    Case("deflate-garbage", written(lambda r: whole(b"\x00garbage", "Content-Encoding: deflate")),
         UNASKED, (-32052, r"compressed answer cannot be decoded \(deflate\)")),
    Case("gzip-twice",
         written(lambda r: whole(gzip.compress(gzip.compress(good(r), mtime=0), mtime=0),
                                 "Content-Encoding: gzip, gzip")),
         UNASKED, (-32052, r"not asked for \(Content-Encoding: gzip, gzip\)")),
    Case("nul-in-header", written(lambda r: whole(good(r), "X-A: a\x00b")),
         (-32052, "a NUL in a header value"), (-32052, "Invalid HTTP header")),
    Case("extensions-with-controls",
         written(lambda r: whole(good(r), "X-A2A-Extensions: urn:ok, urn:a\x01b, urn:c\x7fd")),
         "answered", "answered"),
    Case("stream-cut-short",
         closing(lambda r: CHUNKED_STREAM + b"400\r\n" + working(r)),
         (-32053, CUT[1]), (-32053, CUT[1]), stream=True),
    Case("stream-silent", then_silent(lambda r: head(length=1000, media=STREAM) + sse(r)[:10]),
         (-32052, r"no data from the agent for 0\.5 s"),
         (-32052, r"no data from the agent for 0\.5 s"), stream=True),
    Case("stream-broken-chunk",
         written(lambda r: CHUNKED_STREAM + b"zz\r\n" + sse(r)),
         (-32052, "Invalid character in chunk size"),
         (-32052, "Invalid character in chunk size"), stream=True),
    Case("stream-deflated",
         written(lambda r: whole(zlib.compress(sse(r)), "Content-Encoding: deflate", media=STREAM)),
         UNASKED, "answered", stream=True),
]  # fmt: skip


class HostileServer:
    """One raw server for every case: the first request to ``/<case>/rpc`` gets the case's
    hostile answer, every later one (on any connection) the right answer."""

    def __init__(self) -> None:
        self.cases = {case.name: case for case in CASES}
        self.answered: set[str] = set()
        self.server: asyncio.Server | None = None
        self.idle = asyncio.Event()  # the router holds split-late's connection in its pool
        self.late = asyncio.Event()  # split-late's second answer is written

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        try:
            while True:
                head_bytes = await reader.readuntil(b"\r\n\r\n")
                fields = head_bytes.decode("latin-1").split("\r\n")
                path = fields[0].split(" ")[1]
                length = next(
                    int(f.split(":", 1)[1])
                    for f in fields
                    if f.lower().startswith("content-length")
                )
                request = json.loads(await reader.readexactly(length))
                name = path.strip("/").split("/")[0]
                case = self.cases[name]
                if name not in self.answered:
                    self.answered.add(name)
                    await case.hostile(request, writer, self)
                    if writer.is_closing():
                        return
                elif case.stream:
                    writer.write(whole(sse(request), media=STREAM))
                else:
                    writer.write(whole(good(request)))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def vm_rss() -> int:
    """This process's resident memory, in bytes (``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def ask(client: TestClient, name: str, n: int, stream: bool) -> tuple[Any, str, str]:
    """Send a message to the case's agent through the router; the last answer (or the error),
    the message id sent and the answer's head as text."""
    message_id = f"{name}-{n}"
    message = {"kind": "message", "messageId": message_id, "role": "user",
               "parts": [{"kind": "text", "text": "hello"}]}  # fmt: skip
    method = "message/stream" if stream else "message/send"
    body = {"jsonrpc": "2.0", "id": n, "method": method, "params": {"message": message}}
    resp = await client.post(f"/agents/{name}", json=body)
    shown = "".join(f"{k}: {v}\n" for k, v in resp.raw_headers and resp.headers.items())
    if not stream:
        return await resp.json(), message_id, shown
    text = await resp.text()
    events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    assert events, text
    return events[-1], message_id, shown


def problem(case: Case, expected: tuple[int, str] | str, got: Any, message_id: str) -> str | None:
    """What is wrong with ``got`` for ``expected``, or None."""
    if expected == "answered":
        text = (got.get("result") or {}).get("parts", [{}])[0].get("text")
        return None if text == f"good {message_id}" else f"expected the answer, got {got}"
    code, pattern = expected
    error = got.get("error") or {}
    data = error.get("data") or {}
    if error.get("code") != code or not re.search(pattern, str(data.get("reason", ""))):
        return f"expected {code} /{pattern}/, got {got}"
    if data.get("agent") != case.name or not str(data.get("url", "")).endswith(f"/{case.name}/rpc"):
        return f"the error's data does not name the agent and its URL: {data}"
    if "\n" in data["reason"] or len(data["reason"]) > 300:
        return f"the reason is not one short line: {data['reason']!r}"
    return None


@pytest.mark.parametrize("upstream_client", ["lean", "aiohttp"])
async def test_hostile_agents(upstream_client: str, aiohttp_client: Any, sqlite_url: str) -> None:
    await asyncio.to_thread(bomb)  # made before any case: the agent answers it at once
    hostile = HostileServer()
    hostile.server = await asyncio.start_server(hostile.serve, "127.0.0.1", 0)
    settings = make_settings(
        sqlite_url,
        upstream_client=upstream_client,
        upstream_timeout=SILENCE,
        upstream_connect_timeout=SILENCE,
    )
    client: TestClient = await aiohttp_client(create_app(settings))
    try:
        for case in CASES:
            base = f"http://127.0.0.1:{hostile.port}/{case.name}"
            modes = {"defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]}
            card = card_v03(base, name=case.name, capabilities={"streaming": True}, **modes)
            made = await client.post("/api/v1/agents", json={"card": card, "id": case.name},
                                     headers=AUTH)  # fmt: skip
            assert made.status == 201, await made.text()
        before = vm_rss()
        problems = []
        for n, case in enumerate(CASES):
            expected = case.lean if upstream_client == "lean" else case.aiohttp
            got, message_id, shown = await ask(client, case.name, 2 * n, case.stream)
            if case.hostile is late_second_answer:
                hostile.idle.set()
                await hostile.late.wait()
                for _ in range(3):
                    await asyncio.sleep(0)  # turns of the loop: the router reads what came
            if (found := problem(case, expected, got, message_id)) is not None:
                problems.append(f"{case.name}: {found}")
            if any((c < " " and c != "\n") or c == "\x7f" for c in shown):
                problems.append(f"{case.name}: a control character in the answer's head {shown!r}")
            after, message_id, _ = await ask(client, case.name, 2 * n + 1, case.stream)
            if problem(case, "answered", after, message_id) is not None:
                problems.append(f"{case.name}: the next call on the pool got {after}")
        grown = vm_rss() - before
    finally:
        hostile.server.close()
    assert not problems, "\n".join(problems)
    assert grown <= 50 * MIB, f"the router's RSS grew by {grown / MIB:.1f} MiB"
