"""Log lines: one JSON object per line with ``SWITCHBOARD_LOG_FORMAT=json`` (the request's
id and A2A facts in it), readable text by default; the access log carries the id too."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

from router.app import create_app
from router.observe.logformat import LogFormat, RequestAccessLogger, log_handler
from tests.router.observe.conftest import recording_agent, register
from tests.router.observe.test_requestid import SEND
from tests.support.helpers import make_settings


@contextlib.contextmanager
def capturing(log_format: LogFormat) -> Iterator[io.StringIO]:
    """What the root logger writes at INFO meanwhile through :func:`log_handler`."""
    stream = io.StringIO()
    handler = log_handler(stream, log_format)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def traffic(aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str) -> None:
    """A send routed to a real agent, and an access log line for it."""
    app = create_app(make_settings(sqlite_url))
    server = await aiohttp_server(app, access_log_class=RequestAccessLogger)
    client = await aiohttp_client(server)
    async with recording_agent() as echo:
        await register(client, echo.url, "echo")
        resp = await client.post("/", json=SEND, headers={"X-Request-ID": "log-me-1"})
        assert "result" in await resp.json()
    await client.close()  # the access log line is written once the response is


async def test_json_lines_carry_the_request(
    aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str
) -> None:
    with capturing("json") as captured:
        await traffic(aiohttp_server, aiohttp_client, sqlite_url)
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert lines and all({"timestamp", "level", "logger", "message"} <= set(x) for x in lines)
    call = [x for x in lines if x["logger"] == "switchboard.a2a"]
    assert len(call) == 1
    assert call[0]["request_id"] == "log-me-1"
    assert call[0]["method"] == "message/send" and call[0]["version"] == "0.3"
    assert call[0]["agent_id"] == "echo" and call[0]["tier"] == "lexical"
    assert call[0]["outcome"] == "ok" and call[0]["duration_ms"] >= call[0]["upstream_ms"] > 0
    access = [x for x in lines if x["logger"] == "aiohttp.access"]
    assert [x["request_id"] for x in access if "POST / " in x["message"]] == ["log-me-1"]
    assert "say hello back" not in captured.getvalue()  # no message text is logged


async def test_text_stays_readable(
    aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str
) -> None:
    with capturing("text") as captured:
        await traffic(aiohttp_server, aiohttp_client, sqlite_url)
    lines = [x for x in captured.getvalue().splitlines() if "switchboard.a2a" in x]
    assert len(lines) == 1
    assert (
        "switchboard.a2a [log-me-1]: message/send (A2A 0.3) -> echo (tier lexical): ok in "
        in (lines[0])
    )


def test_an_exception_is_one_json_line() -> None:
    stream = io.StringIO()
    handler = log_handler(stream, "json")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", ("it",), None)
        record.exc_info = __import__("sys").exc_info()
    handler.handle(record)
    (line,) = stream.getvalue().splitlines()
    out = json.loads(line)
    assert out["message"] == "failed it" and "ValueError: boom" in out["exception"]


def test_formats() -> None:
    formats: tuple[LogFormat, ...] = ("text", "json")
    assert all(isinstance(log_handler(io.StringIO(), f), logging.Handler) for f in formats)
