"""``python -m bench.keepalive``: connection resets on reused keep-alive connections under a
fuzz of requests (issue 35: 3 resets per 20,000 before).

``switchboard serve`` (``SWITCHBOARD_KEEPALIVE_TIMEOUT`` set to ``--keepalive``, API keys on)
and the echo agent run in their own processes; this process runs ``--connections`` raw
HTTP/1.1 clients that share ``--requests`` fuzzed requests (seeded: the same run every time):
A2A calls of both versions and bindings (some streamed, some with NUL or odd ids), bad JSON,
bad or missing credentials, unsupported or broken encodings, bodies over the limit, bodies
the server does not read (``Expect: 100-continue``), malformed HTTP, HTTP/1.0, pipelined
pairs, cards, the admin API, unknown paths. Between requests a client sometimes pauses, up to
``--pause-max`` seconds; like any HTTP client it closes a connection idle for ``--client-idle``
seconds or more instead of reusing it, and closes one whose answer said ``Connection: close``.

A *reset* is a request on a reused connection that gets no answer at all: the connection
reset, or closed, before the first byte of a status line. Also counted: failures on new
connections, keep-alive answers without ``Keep-Alive: timeout=N`` (``--keepalive``'s N), and
closes the server announced. Exit status 1 when any reset (or other failure) was seen.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gzip
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.procs import TOKEN, client_key, echo_agent, register, switchboard

ERRORS = (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError)


@dataclass
class Request:
    """One fuzzed request: its ``kind``, its bytes, and how many answers it gets."""

    kind: str
    data: bytes
    answers: int = 1
    head_only: bool = False
    held: bytes | None = None  # a body sent only after a 100 Continue


@dataclass
class Tally:
    """What a run saw."""

    answered: int = 0
    resets: list[str] = field(default_factory=list)
    fresh_failures: list[str] = field(default_factory=list)
    timeouts: int = 0
    announced_closes: int = 0
    idle_closes: int = 0
    no_keep_alive_header: list[str] = field(default_factory=list)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def failures(self) -> int:
        return len(self.resets) + len(self.fresh_failures) + self.timeouts


class Fuzz:
    """The fuzzed requests, from a seed; ``key`` a valid API key."""

    def __init__(self, seed: int, key: str, max_bytes: int) -> None:
        self.random = random.Random(seed)
        self.key = key
        self.max_bytes = max_bytes
        self.kinds = [
            ("send", 28), ("send03", 8), ("stream", 8), ("get", 5), ("rest", 5), ("card", 4),
            ("health", 3), ("notfound", 3), ("badjson", 6), ("badauth", 6), ("gzip", 3),
            ("badgzip", 2), ("br", 1), ("big", 2), ("expect", 2), ("badhttp", 2), ("head", 1),
            ("pipelined", 1), ("admin", 3), ("http10", 1), ("waits", 2),
        ]  # fmt: skip

    def next(self) -> Request:
        kind = self.random.choices([k for k, _ in self.kinds], [w for _, w in self.kinds])[0]
        return getattr(self, f"_{kind}")()

    # -- pieces ------------------------------------------------------------------------------

    def _id(self) -> str:
        return self.random.choice(
            ['"a"', "7", "1.5", "1e+308", "-0.0", "1e-300", "123456789012345678901234567890",
             "null", "1e400", "NaN", "true", '{"x":1}', '"id\\u0000"']
        )  # fmt: skip

    def _text(self) -> str:
        words = ["hello", "echo", "weather", "\\u0000", "x" * self.random.randint(1, 300), "é"]
        return " ".join(self.random.choice(words) for _ in range(self.random.randint(1, 8)))

    def _message(self, version: str, **extra: str) -> str:
        text = self._text()
        if version == "1.0":
            parts = f'[{{"text":"{text}"}},{{"data":{{"k\\u0000":[1,"v"]}}}}]'
            return f'{{"role":"ROLE_USER","messageId":"m","parts":{parts}{_members(extra)}}}'
        parts = f'[{{"kind":"text","text":"{text}"}}]'
        return (
            f'{{"kind":"message","role":"user","messageId":"m","parts":{parts}{_members(extra)}}}'
        )

    def _rpc(self, method: str, params: str, rid: str | None = None) -> bytes:
        rid = rid or self._id()
        return f'{{"jsonrpc":"2.0","id":{rid},"method":"{method}","params":{params}}}'.encode()

    def _post(self, path: str, body: bytes, *headers: str, auth: bool = True) -> bytes:
        lines = [f"POST {path} HTTP/1.1", "Host: bench", "Content-Type: application/json"]
        if auth:
            lines.append(f"X-API-Key: {self.key}")
        lines += [*headers, f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    def _plain(self, path: str, *headers: str, method: str = "GET", auth: bool = True) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", "Host: bench", *headers]
        if auth:
            lines.append(f"X-API-Key: {self.key}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    # -- kinds -------------------------------------------------------------------------------

    def _send(self) -> Request:
        extra = {"contextId": '"c\\u0000"'} if self.random.random() < 0.05 else {}
        body = self._rpc("SendMessage", f'{{"message":{self._message("1.0", **extra)}}}')
        return Request("send", self._post("/agents/echo", body, "A2A-Version: 1.0"))

    def _send03(self) -> Request:
        body = self._rpc("message/send", f'{{"message":{self._message("0.3")}}}')
        return Request("send03", self._post("/agents/echo", body))

    def _stream(self) -> Request:
        events = self.random.randint(1, 20)
        message = self._message("1.0", metadata=f'{{"bench":{{"events":{events}}}}}')
        body = self._rpc("SendStreamingMessage", f'{{"message":{message}}}', '"s"')
        return Request("stream", self._post("/agents/echo", body, "A2A-Version: 1.0"))

    def _get(self) -> Request:
        task = self.random.choice(["nope", "t1.forged", "a\\u0000b", "x" * 600])
        body = self._rpc("GetTask", f'{{"id":"{task}"}}')
        return Request("get", self._post("/agents/echo", body, "A2A-Version: 1.0"))

    def _rest(self) -> Request:
        if self.random.random() < 0.5:
            return Request("rest", self._plain("/agents/echo/tasks/nope%00x", "A2A-Version: 1.0"))
        body = f'{{"message":{self._message("1.0")}}}'.encode()
        return Request("rest", self._post("/agents/echo/message:send", body, "A2A-Version: 1.0"))

    def _card(self) -> Request:
        path = self.random.choice(
            ["/.well-known/agent-card.json", "/agents/echo/.well-known/agent-card.json"]
        )
        return Request("card", self._plain(path))

    def _health(self) -> Request:
        return Request("health", self._plain("/healthz"))

    def _notfound(self) -> Request:
        if self.random.random() < 0.5:
            return Request("notfound", self._plain("/nope"))
        return Request("notfound", self._post("/nope", b'{"a": 1}'))

    def _badjson(self) -> Request:
        body = self.random.choice(
            [b'{"jsonrpc": "2.0", "id": 5, "method": ', b"\xff\xfe", b"[" * 200 + b"]" * 200,
             b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"n":NaN}}', b"", b"[]",
             b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}']
        )  # fmt: skip
        return Request("badjson", self._post("/agents/echo", body, "A2A-Version: 1.0"))

    def _badauth(self) -> Request:
        header = self.random.choice(
            ["X-API-Key: sbk_0123456789ab_" + "A" * 43, "Authorization: Bearer nope",
             "X-API-Key: garbage", ""]
        )  # fmt: skip
        body = self._rpc("SendMessage", f'{{"message":{self._message("1.0")}}}')
        headers = ["A2A-Version: 1.0", header] if header else ["A2A-Version: 1.0"]
        return Request("badauth", self._post("/agents/echo", body, *headers, auth=False))

    def _gzip(self) -> Request:
        body = self._rpc("SendMessage", f'{{"message":{self._message("1.0")}}}')
        data = gzip.compress(body, mtime=0)
        return Request(
            "gzip",
            self._post("/agents/echo", data, "A2A-Version: 1.0", "Content-Encoding: gzip"),
        )

    def _badgzip(self) -> Request:
        junk = b"\x1f\x8b\x08\x00garbage" + bytes(self.random.randrange(256) for _ in range(40))
        return Request(
            "badgzip",
            self._post("/agents/echo", junk, "A2A-Version: 1.0", "Content-Encoding: gzip"),
        )

    def _br(self) -> Request:
        return Request("br", self._post("/agents/echo", b"{}", "Content-Encoding: br"))

    def _big(self) -> Request:
        size = self.max_bytes + self.random.randint(1, 200_000)
        return Request("big", self._post("/agents/echo", b"x" * size, "A2A-Version: 1.0"))

    def _expect(self) -> Request:  # the body follows at once, as curl does after a pause
        body = self._rpc("SendMessage", f'{{"message":{self._message("1.0")}}}')
        bad = self.random.random() < 0.5  # refused before its body is read
        return Request(
            "expect",
            self._post(
                "/agents/echo", body, "A2A-Version: 1.0", "Expect: 100-continue", auth=not bad
            ),
        )

    def _badhttp(self) -> Request:
        data = self.random.choice(
            [b"GET / HTTP/1.1\r\nHost: bench\r\nBad Header\r\n\r\n",
             b"POST / HTTP/1.1\r\nHost: bench\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
             b"GET /\x00 HTTP/1.1\r\nHost: bench\r\n\r\n"]
        )  # fmt: skip
        return Request("badhttp", data)

    def _waits(self) -> Request:
        """``Expect: 100-continue``, the body sent only after ``100 Continue``: a request
        refused first (bad credentials) never sends it, as curl does not."""
        body = self._rpc("SendMessage", f'{{"message":{self._message("1.0")}}}')
        bad = self.random.random() < 0.5
        head = self._post("/agents/echo", b"", "A2A-Version: 1.0", "Expect: 100-continue",
                          auth=not bad)  # fmt: skip
        head = head.replace(b"Content-Length: 0", f"Content-Length: {len(body)}".encode())
        return Request("waits", head, held=body)

    def _head(self) -> Request:
        return Request("head", self._plain("/healthz", method="HEAD"), head_only=True)

    def _pipelined(self) -> Request:
        return Request("pipelined", self._plain("/healthz") + self._plain("/readyz"), answers=2)

    def _admin(self) -> Request:
        token = self.random.choice([TOKEN, "wrong-token"])
        return Request(
            "admin",
            self._plain("/api/v1/agents?limit=2", f"Authorization: Bearer {token}", auth=False),
        )

    def _http10(self) -> Request:
        return Request("http10", b"GET /healthz HTTP/1.0\r\nHost: bench\r\n\r\n")


def _members(extra: dict[str, str]) -> str:
    return "".join(f',"{k}":{v}' for k, v in extra.items())


@dataclass
class Answer:
    status: int
    close: bool  # the server said it closes (Connection: close, or HTTP/1.0 without keep-alive)
    keep_alive: str | None  # its Keep-Alive header


async def read_answer(
    reader: asyncio.StreamReader, head_only: bool, interim: bool = False
) -> Answer:
    """One answer (interim 1xx answers skipped, unless ``interim``), its body read whole."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        version, status = lines[0].split(" ")[0], int(lines[0].split(" ")[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:
            if interim:
                return Answer(status, False, None)
            continue
        break
    connection = headers.get("connection", "").lower()
    close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
    if head_only or status in (204, 304):
        pass
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    else:
        await reader.read()
        close = True
    return Answer(status, close, headers.get("keep-alive"))


class Client:
    """One keep-alive client: a connection reused until it closes, it is idle too long, or
    an answer says the server closes it."""

    def __init__(self, port: int, tally: Tally, args: argparse.Namespace, rng: random.Random):
        self.port = port
        self.tally = tally
        self.args = args
        self.random = rng
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = 0  # answers on this connection
        self.last = 0.0  # when the last answer ended
        self.previous = ""

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
        self.used = 0

    async def send(self, request: Request) -> None:
        args = self.args
        if self.random.random() < args.pause_rate:
            await asyncio.sleep(self.random.uniform(0, args.pause_max))
        if self.writer is not None and time.monotonic() - self.last >= args.client_idle:
            self.tally.idle_closes += 1
            self.close()
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                "127.0.0.1", self.port, limit=1 << 20
            )
        reused, idle = self.used > 0, time.monotonic() - self.last
        assert self.reader is not None
        got = 0
        try:
            self.writer.write(request.data)
            for _ in range(request.answers):
                answer = await asyncio.wait_for(
                    read_answer(self.reader, request.head_only, request.held is not None),
                    args.timeout,
                )
                if answer.status == 100 and request.held is not None:
                    self.writer.write(request.held)
                    answer = await asyncio.wait_for(read_answer(self.reader, False), args.timeout)
                got += 1
                self.tally.answered += 1
                self.tally.statuses[answer.status] += 1
                if not answer.close and answer.keep_alive != f"timeout={args.keepalive}":
                    what = f"{request.kind} {answer.status} {answer.keep_alive!r}"
                    self.tally.no_keep_alive_header.append(what)
                if answer.close:
                    self.tally.announced_closes += 1
                    self.close()
                    break
                self.used += 1
        except TimeoutError:
            self.tally.timeouts += 1
            self.close()
        except ERRORS as exc:
            what = f"{request.kind} after {self.previous} idle {idle:.3f}s: {exc!r}"
            if got:
                pass  # answered, then closed: the next request will see it
            elif reused:
                self.tally.resets.append(what)
            else:
                self.tally.fresh_failures.append(what)
            self.close()
        self.tally.kinds[request.kind] += 1
        self.previous = request.kind
        self.last = time.monotonic()


async def fuzz(base: str, key: str, args: argparse.Namespace) -> Tally:
    """Send the requests over ``args.connections`` clients."""
    port = int(base.rsplit(":", 1)[1])
    tally = Tally()
    source = Fuzz(args.seed, key, args.max_bytes)
    requests = iter([source.next() for _ in range(args.requests)])
    started = time.monotonic()

    async def run(n: int) -> None:
        client = Client(port, tally, args, random.Random(args.seed * 1000 + n))
        for request in requests:
            await client.send(request)
            if n == 0 and tally.answered and tally.answered % 20_000 < 2 and args.progress:
                rate = tally.answered / (time.monotonic() - started)
                print(f"  {tally.answered} answers ({rate:.0f}/s)", file=sys.stderr)
        client.close()

    await asyncio.gather(*(run(n) for n in range(args.connections)))
    return tally


async def main_async(args: argparse.Namespace) -> Tally:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            echo_agent(Path(tmp), "task") as (agent, _),
            switchboard(
                Path(tmp),
                keepalive_timeout=str(args.keepalive),
                client_auth="api-key",
                matcher="lexical",
                max_request_bytes=str(args.max_bytes),
                workers=str(args.workers),
            ) as (base, _proc),
        ):
            await register(base, {"url": agent, "id": "echo"})
            key = await client_key(base)
            started = time.monotonic()
            tally = await fuzz(base, key, args)
            seconds = time.monotonic() - started
            print(f"{args.requests} requests in {seconds:.1f} s ({args.requests / seconds:.0f}/s)")
        errors = _errors(Path(tmp))  # once the server stopped: its log complete
        print(f"server log: {len(errors)} ERROR lines")
        for line in errors[:5]:
            print("  " + line[:200])
    return tally


def _errors(tmp: Path) -> list[str]:
    log = next(tmp.glob("switchboard-*/switchboard.log"))
    return [line for line in log.read_text().splitlines() if " ERROR " in line]


def report(tally: Tally, args: argparse.Namespace) -> None:
    print(
        f"server keep-alive {args.keepalive} s, client idle {args.client_idle} s, "
        f"{args.connections} connections, pauses up to {args.pause_max} s"
    )
    print(f"answers: {tally.answered}; statuses: {dict(sorted(tally.statuses.items()))}")
    print(f"closes announced by the server: {tally.announced_closes}; "
          f"by the client's idle timeout: {tally.idle_closes}")  # fmt: skip
    print(f"resets on reused connections: {len(tally.resets)}")
    for line in tally.resets[:10]:
        print("  " + line)
    print(f"failures on new connections: {len(tally.fresh_failures)}; timeouts: {tally.timeouts}")
    for line in tally.fresh_failures[:5]:
        print("  " + line)
    print(f"keep-alive answers without Keep-Alive: timeout={args.keepalive}: "
          f"{len(tally.no_keep_alive_header)}")  # fmt: skip
    for line in tally.no_keep_alive_header[:5]:
        print("  " + line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--keepalive", type=int, default=3, help="the server's, in seconds")
    parser.add_argument("--client-idle", type=float, default=2.5)
    parser.add_argument("--pause-rate", type=float, default=0.002)
    parser.add_argument("--pause-max", type=float, default=2.9)
    parser.add_argument("--max-bytes", type=int, default=65536)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    tally = asyncio.run(main_async(args))
    report(tally, args)
    return 1 if tally.failures or tally.no_keep_alive_header else 0


if __name__ == "__main__":
    raise SystemExit(main())
