"""Log lines: one JSON object per line with ``SWITCHBOARD_LOG_FORMAT=json`` (the request's
id and A2A facts in it), readable text by default; the access log carries the id too. No
secret, token or message text is ever logged, at any level."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

from router.app import create_app
from router.observe.logformat import TEXT_FORMAT, LogFormat, RequestAccessLogger, log_handler
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
    # the access log line of the call names where it went and why, never what it said
    access = [x for x in captured.getvalue().splitlines() if "aiohttp.access" in x]
    [routed] = [x for x in access if '"POST / ' in x]
    assert "aiohttp.access [log-me-1]: " in routed
    assert routed.endswith(" agent=echo tier=lexical outcome=ok"), routed
    assert "say hello back" not in captured.getvalue()


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


ADMIN_SECRET = "adm-SECRET-7f3a91c2"
READ_SECRET = "rd-SECRET-5c2e04aa"
WRONG_BEARER = "bad-SECRET-0d9e7b11"
WRONG_KEY = "sb_wrong-SECRET-66a1"
MARKER = "MARKER-hush-4417"
_AGENT_LOGGERS = ("a2a.", "sse_starlette")


def _leaks(text: str, secrets: list[str]) -> list[str]:
    return [secret for secret in secrets if secret in text]


async def test_no_secret_token_or_message_text_is_ever_logged(
    aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    stream = io.StringIO()
    handler = log_handler(stream, "json")
    handler.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    settings = make_settings(
        sqlite_url, client_auth="api-key", admin_token=ADMIN_SECRET, read_token=READ_SECRET
    )
    try:
        server = await aiohttp_server(create_app(settings), access_log_class=RequestAccessLogger)
        client = await aiohttp_client(server)
        admin = {"Authorization": f"Bearer {ADMIN_SECRET}"}
        async with recording_agent() as echo:
            made = await client.post("/api/v1/agents", json={"url": echo.url, "id": "echo"},
                                     headers=admin)  # fmt: skip
            assert made.status == 201, await made.text()
            key_made = await client.post(
                "/api/v1/clients", json={"subject": "alice"}, headers=admin
            )
            assert key_made.status == 201, await key_made.text()
            key = (await key_made.json())["key"]

            text = f"say hello back {MARKER}"
            send = {**SEND, "params": {"message": {**SEND["params"]["message"],
                    "parts": [{"kind": "text", "text": text}]}}}  # fmt: skip
            sent = await client.post("/", json=send, headers={"X-API-Key": key})
            assert MARKER in json.dumps(await sent.json())  # routed to the agent and back
            stream_call = {**send, "method": "message/stream"}
            streamed = await client.post(
                "/", json=stream_call, headers={"Authorization": f"Bearer {key}"}
            )
            assert MARKER in await streamed.text()
            refused = {**send, "params": {"message": {**send["params"]["message"],
                       "parts": [{"kind": "text", "text": f"qqq zzzq {MARKER}"}]}}}  # fmt: skip
            answer = await (await client.post("/", json=refused, headers={"X-API-Key": key})).json()
            assert answer["error"]["code"] == -32050
            for bad in ({"Authorization": f"Bearer {WRONG_BEARER}"}, {"X-API-Key": WRONG_KEY}):
                assert (await client.post("/", json=send, headers=bad)).status == 401
                assert (await client.get("/api/v1/agents", headers=bad)).status == 401
                assert (await client.get("/metrics", headers=bad)).status == 401
            reader = {"Authorization": f"Bearer {READ_SECRET}"}
            for path in ("/api/v1/agents", "/api/v1/status", "/metrics"):
                assert (await client.get(path, headers=reader)).status == 200, path
            explain = await client.post(
                "/api/v1/route/explain", json={"message": send["params"]["message"]}, headers=reader
            )
            assert explain.status == 200, await explain.text()
        await client.close()  # the access log lines are written
    finally:
        logging.getLogger().removeHandler(handler)

    secrets = [ADMIN_SECRET, READ_SECRET, WRONG_BEARER, WRONG_KEY, key, MARKER]
    # the test agent (the a2a-sdk's server, sse-starlette) runs in this process and logs
    # requests whole at DEBUG: its records are not Switchboard's
    records = [r for r in caplog.records if not r.name.startswith(_AGENT_LOGGERS)]
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    lines = [line for line in lines if not line["logger"].startswith(_AGENT_LOGGERS)]
    assert len(records) > 10 and len(lines) == len(records)
    for record in records:
        seen = [record.getMessage(), repr(record.args), record.exc_text or ""]
        seen += [repr(value) for value in vars(record).values()]
        assert _leaks(" ".join(seen), secrets) == [], (record.name, record.getMessage())
    assert _leaks(json.dumps(lines), secrets) == []
    names = {r.name for r in records}
    assert {"switchboard.a2a", "aiohttp.access"} <= names, names


def test_an_access_line_outside_a_request_is_left_as_it_is() -> None:
    """A bad HTTP request is logged before any request context exists: no facts, no error."""
    stream = io.StringIO()
    handler = log_handler(stream, "text")
    record = logging.LogRecord("switchboard.access", logging.INFO, __file__, 1, "bad", (), None)
    handler.handle(record)
    assert stream.getvalue().rstrip().endswith("switchboard.access: bad")


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_fast_access_line_is_aiohttps() -> None:
    """The shorter path gives the line and the ``extra`` fields aiohttp's logger gives, for
    the default format and another one, over requests of different start seconds."""
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request
    from aiohttp.web_log import AccessLogger

    logger = logging.getLogger("test.fast.access")
    logger.propagate, keep = False, _Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    request = make_mocked_request("POST", "/a?b=1", headers={"User-Agent": "wrk", "X-A": "z"})
    response = web.Response(body=b"x" * 321, status=201)
    for fmt in (AccessLogger.LOG_FORMAT, '%t %a "%r" %s %b %Tf %{X-A}i %{Content-Type}o'):
        for elapsed in (0.0, 0.4, 1.7, 3600.2):
            keep.records.clear()
            AccessLogger(logger, fmt).log(request, response, elapsed)
            RequestAccessLogger(logger, fmt).log(request, response, elapsed)
            theirs, ours = keep.records
            assert ours.getMessage() == theirs.getMessage()
            fields = ("remote_address", "request_start_time", "first_request_line")
            fields += ("response_status", "response_size", "request_header", "response_header")
            for name in fields:
                assert getattr(ours, name, None) == getattr(theirs, name, None), name
    logger.removeHandler(keep)


def test_the_text_time_is_loggings() -> None:
    """The per-second cache of the text format's time gives ``logging``'s own text."""
    ours, plain = log_handler(io.StringIO(), "text").formatter, logging.Formatter(TEXT_FORMAT)
    assert ours is not None
    for created in (1_700_000_000.0, 1_700_000_000.999, 1_700_000_001.5, 1_600_000_000.25):
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
        record.created, record.msecs = created, int((created % 1) * 1000)
        assert ours.formatTime(record) == plain.formatTime(record)
        assert ours.formatTime(record, "%H") == plain.formatTime(record, "%H")


async def test_the_access_line_shows_the_client_a_trusted_proxy_names(
    aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str
) -> None:
    """The address the failed-authentication throttle counts (X-Forwarded-For from a proxy
    in SWITCHBOARD_TRUSTED_PROXIES), not the proxy's."""
    app = create_app(make_settings(sqlite_url, trusted_proxies=["127.0.0.0/8"]))
    server = await aiohttp_server(app, access_log_class=RequestAccessLogger)
    client = await aiohttp_client(server)
    with capturing("text") as captured:
        forwarded = {"X-Forwarded-For": "198.51.100.1, 203.0.113.9, 127.0.0.5"}
        assert (await client.get("/healthz", headers=forwarded)).status == 200
        await client.close()
    [line] = [x for x in captured.getvalue().splitlines() if '"GET /healthz ' in x]
    assert "]: 203.0.113.9 [" in line, line
