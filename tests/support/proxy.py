"""A forward HTTP proxy that logs every request: the outbound proxy of the egress tests.

Run as a process: ``python -m tests.support.proxy --log FILE [--host H] [--port P]
[--user U --password P] [--source ADDR] [--cert PEM --key PEM]``; it prints ``listening on
HOST:PORT`` once ready. It serves

* requests in absolute form (``POST http://host:port/path``): sent on to the target in origin
  form with ``Connection: close``, its answer relayed; the client's connection is kept for
  its next request when the answer has a ``Content-Length``, else closed after it (``Connection:
  close``);
* ``CONNECT host:port``: a tunnel, bytes piped both ways until either side closes.

With ``--user``/``--password`` a request without those credentials (``Proxy-Authorization:
Basic``) is answered ``407``. Its own connections to targets leave from ``--source`` (an
address of 127/8): a target can tell a proxied request from a direct one by its peer address.
``--cert``/``--key`` make it an https:// proxy (TLS from the client to the proxy).

Each request is one JSON line in ``--log``: ``{"method", "target", "auth", "status",
"connection"}`` where ``auth`` is ``ok``, ``missing``, ``wrong`` or ``none`` (no credentials
asked; the credentials themselves are never written) and ``connection`` numbers the client
connection it came on. The tests read the log: what went through the proxy, and how.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import contextvars
import json
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

from yarl import URL

_HEAD_LIMIT = 1 << 16
_CONNECTION: contextvars.ContextVar[int] = contextvars.ContextVar("connection", default=0)
_ROOT = Path(__file__).resolve().parents[2]


class Proxy:
    """The proxy's state: where it logs, the credentials it asks for, its source address."""

    def __init__(self, log: TextIO, credentials: str | None, source: str | None) -> None:
        self.log = log
        self.expected = (
            "Basic " + base64.b64encode(credentials.encode()).decode() if credentials else None
        )
        self.source = source
        self.connections = 0

    def record(self, method: str, target: str, auth: str, status: int) -> None:
        line = {"method": method, "target": target, "auth": auth, "status": status}
        line["connection"] = _CONNECTION.get()
        self.log.write(json.dumps(line) + "\n")
        self.log.flush()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        _CONNECTION.set(self.connections)  # this connection's task: its requests say which
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One request; whether the connection serves another."""
        if reader.at_eof():
            return False
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
        given = next((v.strip() for n, v in headers if n.lower() == "proxy-authorization"), None)
        auth = "none"
        if self.expected is not None:
            auth = "missing" if given is None else ("ok" if given == self.expected else "wrong")
        if auth in ("missing", "wrong"):
            self.record(method, target, auth, 407)
            writer.write(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n'
                b"Connection: close\r\n\r\n"
            )
            await writer.drain()
            return False
        if method == "CONNECT":
            await self._tunnel(target, auth, reader, writer)
            return False
        return await self._forward(method, target, auth, headers, reader, writer)

    async def _open(self, host: str, port: int) -> tuple[asyncio.StreamReader, Any]:
        local = (self.source, 0) if self.source else None
        return await asyncio.open_connection(host.strip("[]"), port, local_addr=local)

    async def _tunnel(
        self, target: str, auth: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port = target.rpartition(":")
        try:
            up_reader, up_writer = await self._open(host, int(port))
        except OSError:
            self.record("CONNECT", target, auth, 502)
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        self.record("CONNECT", target, auth, 200)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await _pipe_both(reader, writer, up_reader, up_writer)

    async def _forward(
        self,
        method: str,
        target: str,
        auth: str,
        headers: list[list[str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        url = URL(target)
        if not url.is_absolute():
            self.record(method, target, auth, 400)
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return False
        length = next((int(v) for n, v in headers if n.lower() == "content-length"), 0)
        body = await reader.readexactly(length) if length else b""
        dropped = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}
        kept = [f"{n}:{v}" for n, v in headers if n.lower() not in dropped]
        request = "\r\n".join(
            [f"{method} {url.raw_path_qs or '/'} HTTP/1.1", *kept, "Connection: close", "", ""]
        ).encode("latin-1")
        try:
            up_reader, up_writer = await self._open(url.raw_host or "", url.port or 80)
        except OSError:
            self.record(method, target, auth, 502)
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return False
        up_writer.write(request + body)
        await up_writer.drain()
        answer = await up_reader.readuntil(b"\r\n\r\n")
        status = int(answer.split(b" ", 2)[1])
        self.record(method, target, auth, status)
        answer_lines = answer[:-4].split(b"\r\n")
        framing = [line.split(b":", 1)[0].strip().lower() for line in answer_lines[1:]]
        kept_alive = b"content-length" in framing and b"transfer-encoding" not in framing
        answer_lines = [
            line
            for line in answer_lines
            if not line.lower().startswith((b"connection:", b"keep-alive:"))
        ]
        if kept_alive:
            length = next(
                int(line.split(b":", 1)[1])
                for line in answer_lines[1:]
                if line.lower().startswith(b"content-length:")
            )
            writer.write(b"\r\n".join([*answer_lines, b"", b""]))
            writer.write(await up_reader.readexactly(length))
            await writer.drain()
        else:
            writer.write(b"\r\n".join([*answer_lines, b"Connection: close", b"", b""]))
            await _pipe(up_reader, writer)
        up_writer.close()
        return kept_alive


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    up_writer.close()


class Running:
    """A proxy process started by :func:`running_proxy`: its URL and its log."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def entries(self) -> list[dict[str, Any]]:
        """Every request logged so far (each is written before its answer is relayed)."""
        text = self.log.read_text(encoding="utf-8") if self.log.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def targets(self) -> list[str]:
        """What each logged request asked for: ``host:port`` (CONNECT) or an absolute URL."""
        return [entry["target"] for entry in self.entries()]


@contextlib.asynccontextmanager
async def running_proxy(
    where: Path,
    *,
    user: str | None = None,
    password: str = "",
    source: str | None = None,
    cert: Path | None = None,
    key: Path | None = None,
    host: str = "127.0.0.1",
) -> AsyncIterator[Running]:
    """Start this proxy as a process on ``host`` (a free port), logging into ``where``; it
    is stopped (by its pid) at the end."""
    log = where / "proxy.log"
    command = [sys.executable, "-m", "tests.support.proxy", "--log", str(log), "--host", host]
    if user is not None:
        command += ["--user", user, "--password", password]
    if source is not None:
        command += ["--source", source]
    if cert is not None and key is not None:
        command += ["--cert", str(cert), "--key", str(key)]
    process = await asyncio.create_subprocess_exec(
        *command, cwd=str(_ROOT), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the proxy did not start: {line!r}")
        address = line.removeprefix("listening on ").strip()
        yield Running(f"{'https' if cert else 'http'}://{address}", log)
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--user")
    parser.add_argument("--password", default="")
    parser.add_argument("--source", help="the address connections to targets leave from")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args(argv)
    credentials = f"{args.user}:{args.password}" if args.user else None
    tls = None
    if args.cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.cert, args.key)
    with open(args.log, "a", encoding="utf-8") as log:  # noqa: ASYNC230  (before serving)
        proxy = Proxy(log, credentials, args.source)
        server = await asyncio.start_server(
            proxy.serve, args.host, args.port, ssl=tls, limit=_HEAD_LIMIT
        )
        host, port = server.sockets[0].getsockname()[:2]
        print(f"listening on {host}:{port}", flush=True)
        async with server:
            await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(sys.argv[1:]))
