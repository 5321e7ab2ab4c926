"""The crawler against real aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.crawler import USER_AGENT, Crawler, card_candidates, is_card_url
from registry.errors import CrawlError
from registry.netguard import ALLOW_ENV
from registry.settings import Settings

CARD = {"name": "Echo", "url": "http://agent.example/a2a", "version": "1.0"}
LIMIT = 4096

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ServerFactory = Callable[..., Awaitable[TestServer]]


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "allow_networks": ["127.0.0.0/8"],
        "max_card_bytes": LIMIT,
        "max_json_depth": 8,
        "max_redirects": 3,
        "connect_timeout": 2.0,
        "read_timeout": 0.2,
    }
    values.update(overrides)
    return Settings(**values)


def card(body: Any = CARD, **headers: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(body, headers=headers)

    return handler


def redirect(location: str, status: int = 302) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=status, headers={"Location": location})

    return handler


@pytest.fixture
async def serve(aiohttp_server: ServerFactory) -> Callable[..., Awaitable[TestServer]]:
    """Start a server answering GET on each path of ``routes`` with its handler."""

    async def start(routes: dict[str, Handler]) -> TestServer:
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        return await aiohttp_server(app)

    return start


@pytest.fixture
async def crawler() -> AsyncIterator[Crawler]:
    async with Crawler(settings()) as c:
        yield c


@pytest.fixture
async def never(aiohttp_server: ServerFactory) -> AsyncIterator[asyncio.Event]:
    """An event no handler will see set during the test (set at teardown, before servers close)."""
    event = asyncio.Event()
    yield event
    event.set()


async def crawl_error(awaitable: Awaitable[Any]) -> CrawlError:
    with pytest.raises(CrawlError) as info:
        await awaitable
    return info.value


# -- discovery ---------------------------------------------------------------------------


async def test_discover_uses_agent_card_json(serve, crawler: Crawler) -> None:
    server = await serve(
        {
            "/.well-known/agent-card.json": card(),
            "/.well-known/agent.json": card({"name": "legacy"}),
        }
    )
    fetched = await crawler.discover(str(server.make_url("/")))
    assert fetched.data == CARD
    assert fetched.url == str(server.make_url("/.well-known/agent-card.json"))
    assert fetched.status == 200
    assert json.loads(fetched.raw) == CARD


async def test_discover_falls_back_to_legacy_agent_json(serve, crawler: Crawler) -> None:
    server = await serve({"/.well-known/agent.json": card({"name": "legacy"})})
    fetched = await crawler.discover(str(server.make_url("")))
    assert fetched.data == {"name": "legacy"}
    assert fetched.url.endswith("/.well-known/agent.json")


async def test_discover_relative_to_sub_path(serve, crawler: Crawler) -> None:
    server = await serve(
        {
            "/agents/echo/.well-known/agent-card.json": card(),
            "/.well-known/agent-card.json": card({"name": "root"}),
        }
    )
    fetched = await crawler.discover(str(server.make_url("/agents/echo/")))
    assert fetched.data == CARD


async def test_discover_sub_path_falls_back_to_origin_root(serve, crawler: Crawler) -> None:
    server = await serve({"/.well-known/agent.json": card({"name": "root"})})
    fetched = await crawler.discover(str(server.make_url("/agents/echo")))
    assert fetched.data == {"name": "root"}
    assert fetched.url == str(server.make_url("/.well-known/agent.json"))


async def test_discover_reports_every_url_tried(serve, crawler: Crawler) -> None:
    server = await serve({})
    base = str(server.make_url("/agents/echo"))
    err = await crawl_error(crawler.discover(base))
    assert err.code == "card_not_found"
    assert base in err.message
    assert err.details["tried"] == card_candidates(base)
    assert len(err.details["tried"]) == 4


async def test_discover_stops_at_other_failures(serve, crawler: Crawler) -> None:
    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500)

    server = await serve(
        {"/.well-known/agent-card.json": broken, "/.well-known/agent.json": card()}
    )
    err = await crawl_error(crawler.discover(str(server.make_url("/"))))
    assert err.code == "http_error"
    assert err.details["status"] == 500


def test_card_candidates_and_is_card_url() -> None:
    assert card_candidates("https://a.example") == [
        "https://a.example/.well-known/agent-card.json",
        "https://a.example/.well-known/agent.json",
    ]
    assert card_candidates("https://a.example/x/y/?q=1") == [
        "https://a.example/x/y/.well-known/agent-card.json",
        "https://a.example/x/y/.well-known/agent.json",
        "https://a.example/.well-known/agent-card.json",
        "https://a.example/.well-known/agent.json",
    ]
    assert is_card_url("https://a.example/.well-known/agent-card.json")
    assert is_card_url("https://a.example/cards/echo.JSON")
    assert not is_card_url("https://a.example/agents/echo")
    assert not is_card_url("https://a.example/")


# -- exact card URLs ---------------------------------------------------------------------


async def test_fetch_card_exact_url_sends_user_agent(serve, crawler: Crawler) -> None:
    seen: dict[str, str] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(request.headers)
        return web.json_response(
            CARD,
            headers={
                "ETag": '"v1"',
                "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT",
                "Cache-Control": "public, max-age=300",
            },
        )

    server = await serve({"/cards/echo.json": handler})
    fetched = await crawler.fetch_card(str(server.make_url("/cards/echo.json")))
    assert fetched.data == CARD
    assert fetched.etag == '"v1"'
    assert fetched.last_modified == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert fetched.max_age == 300
    assert fetched.not_modified is False
    assert seen["User-Agent"] == USER_AGENT
    assert USER_AGENT.startswith("switchboard/")
    assert seen["Accept"] == "application/json"
    assert "If-None-Match" not in seen


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "text/json", "application/a2a+json"]
)
async def test_json_content_types_are_accepted(serve, crawler: Crawler, content_type: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=b'{"ok": true}', headers={"Content-Type": content_type})

    server = await serve({"/c.json": handler})
    assert (await crawler.fetch_card(str(server.make_url("/c.json")))).data == {"ok": True}


async def test_not_modified_with_if_none_match(serve, crawler: Crawler) -> None:
    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.json_response(CARD, headers={"ETag": '"v1"'})

    server = await serve({"/c.json": handler})
    url = str(server.make_url("/c.json"))
    first = await crawler.fetch_card(url)
    again = await crawler.fetch_card(url, etag=first.etag)
    assert again.not_modified is True
    assert again.status == 304
    assert again.data is None
    assert again.raw == b""
    assert again.etag == '"v1"'
    assert (await crawler.fetch_card(url, etag='"v0"')).data == CARD


async def test_not_modified_with_if_modified_since(serve, crawler: Crawler) -> None:
    stamp = "Wed, 21 Oct 2015 07:28:00 GMT"

    async def handler(request: web.Request) -> web.Response:
        assert request.headers.get("If-Modified-Since") == stamp
        return web.Response(status=304)

    server = await serve({"/c.json": handler})
    fetched = await crawler.fetch_card(str(server.make_url("/c.json")), last_modified=stamp)
    assert fetched.not_modified
    assert fetched.last_modified == stamp


# -- refused documents -------------------------------------------------------------------


async def test_oversized_card_with_content_length(serve, crawler: Crawler) -> None:
    body = json.dumps({"pad": "x" * LIMIT})
    server = await serve({"/big.json": card({"pad": "x" * LIMIT})})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/big.json"))))
    assert err.code == "too_large"
    assert err.details["content_length"] == len(body)
    assert err.details["limit"] == LIMIT
    assert str(server.make_url("/big.json")) in err.message


async def test_oversized_card_streamed_without_content_length(serve, crawler: Crawler) -> None:
    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"pad": "')
        for _ in range(8):
            await response.write(b"x" * 1024)
        await response.write(b'"}')
        return response

    server = await serve({"/big.json": chunked})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/big.json"))))
    assert err.code == "too_large"
    assert err.details["content_length"] is None


async def test_max_bytes_overrides_the_limit(serve, crawler: Crawler) -> None:
    server = await serve({"/c.json": card()})
    url = str(server.make_url("/c.json"))
    err = await crawl_error(crawler.fetch_json(url, max_bytes=10))
    assert err.code == "too_large"
    assert (await crawler.fetch_json(url, max_bytes=len(json.dumps(CARD)))).data == CARD


async def test_invalid_json(serve, crawler: Crawler) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text='{"name": "Echo",\n  nope}', content_type="application/json")

    server = await serve({"/c.json": handler})
    url = str(server.make_url("/c.json"))
    err = await crawl_error(crawler.fetch_card(url))
    assert err.code == "invalid_json"
    assert (err.details["line"], err.details["column"]) == (2, 3)
    assert url in err.message


async def test_too_deep_json(serve, crawler: Crawler) -> None:
    deep: Any = "bottom"
    for _ in range(20):
        deep = {"d": deep}
    server = await serve({"/c.json": card(deep)})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/c.json"))))
    assert err.code == "json_too_deep"
    assert err.details["max_depth"] == 8


async def test_non_object_json(serve, crawler: Crawler) -> None:
    server = await serve({"/c.json": card([CARD])})
    url = str(server.make_url("/c.json"))
    err = await crawl_error(crawler.fetch_card(url))
    assert err.code == "not_an_object"
    assert err.details["type"] == "array"
    assert (await crawler.fetch_json(url)).data == [CARD]


async def test_wrong_content_type(serve, crawler: Crawler) -> None:
    async def html(request: web.Request) -> web.Response:
        return web.Response(text="<html></html>", content_type="text/html")

    server = await serve({"/c.json": html})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/c.json"))))
    assert err.code == "bad_content_type"
    assert "text/html" in err.message


async def test_404_is_not_found_and_500_is_http_error(serve, crawler: Crawler) -> None:
    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    server = await serve({"/fail.json": fail})
    missing = await crawl_error(crawler.fetch_card(str(server.make_url("/missing.json"))))
    assert missing.code == "not_found"
    assert missing.details["status"] == 404
    failed = await crawl_error(crawler.fetch_card(str(server.make_url("/fail.json"))))
    assert failed.code == "http_error"
    assert failed.details["status"] == 500
    assert "500" in failed.message


# -- redirects ---------------------------------------------------------------------------


async def test_one_relative_redirect_is_followed(serve, crawler: Crawler) -> None:
    server = await serve(
        {"/old/card.json": redirect("../new/card.json", 301), "/new/card.json": card()}
    )
    fetched = await crawler.fetch_card(str(server.make_url("/old/card.json")))
    assert fetched.data == CARD
    assert fetched.url == str(server.make_url("/new/card.json"))


async def test_redirect_loop(serve, crawler: Crawler) -> None:
    server = await serve({"/a.json": redirect("/b.json"), "/b.json": redirect("/a.json")})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/a.json"))))
    assert err.code == "redirect_loop"
    assert [u.rsplit("/", 1)[1] for u in err.details["chain"]] == ["a.json", "b.json", "a.json"]


async def test_too_many_redirects(serve, crawler: Crawler) -> None:
    routes = {f"/{i}.json": redirect(f"/{i + 1}.json") for i in range(4)}
    server = await serve({**routes, "/4.json": card()})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/0.json"))))
    assert err.code == "too_many_redirects"
    assert len(err.details["chain"]) == 5
    # exactly max_redirects hops is fine
    assert (await crawler.fetch_card(str(server.make_url("/1.json")))).data == CARD


@pytest.mark.parametrize(
    "target", ["http://10.0.0.1/card.json", "http://169.254.169.254/latest/meta-data/"]
)
async def test_redirect_to_refused_address(serve, crawler: Crawler, target: str) -> None:
    server = await serve({"/c.json": redirect(target)})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/c.json"))))
    assert err.code == "address_refused"
    assert target in err.message
    assert ALLOW_ENV in err.message


async def test_redirect_to_bad_scheme(serve, crawler: Crawler) -> None:
    server = await serve({"/c.json": redirect("file:///etc/passwd")})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/c.json"))))
    assert err.code == "bad_url"


# -- the address guard and the network ---------------------------------------------------


async def test_loopback_refused_without_allow_networks(serve) -> None:
    server = await serve({"/c.json": card()})
    port = server.port
    async with Crawler(settings(allow_networks=[])) as strict:
        for url in (
            f"http://127.0.0.1:{port}/c.json",
            f"http://localhost:{port}/c.json",
            f"http://[::ffff:127.0.0.1]:{port}/c.json",
        ):
            err = await crawl_error(strict.fetch_card(url))
            assert err.code == "address_refused", url
            assert url in err.message
            assert ALLOW_ENV in err.message
        err = await crawl_error(strict.discover(f"http://localhost:{port}/"))
        assert err.code == "address_refused"


async def test_localhost_name_allowed_by_allow_networks(serve, crawler: Crawler) -> None:
    server = await serve({"/c.json": card()})
    fetched = await crawler.fetch_card(f"http://localhost:{server.port}/c.json")
    assert fetched.data == CARD


async def test_timeout(serve, never: asyncio.Event) -> None:
    async def stall(request: web.Request) -> web.Response:
        await never.wait()
        return web.json_response(CARD)

    server = await serve({"/c.json": stall})
    url = str(server.make_url("/c.json"))
    async with Crawler(settings(read_timeout=0.2)) as c:
        err = await crawl_error(c.fetch_card(url))
    assert err.code == "timeout"
    assert url in err.message


async def test_connection_refused(crawler: Crawler) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = await crawl_error(crawler.fetch_card(f"http://127.0.0.1:{port}/c.json"))
    assert err.code == "connect_failed"
    assert err.details["reason"]
    assert f"127.0.0.1:{port}" in err.message


async def test_unresolvable_host(crawler: Crawler) -> None:
    err = await crawl_error(crawler.fetch_card("http://no-such-host.invalid/c.json"))
    assert err.code == "connect_failed"


@pytest.mark.parametrize("url", ["ftp://example.com/card.json", "not a url"])
async def test_bad_scheme(crawler: Crawler, url: str) -> None:
    err = await crawl_error(crawler.fetch_card(url))
    assert err.code == "bad_url"
    assert url in err.message
    err = await crawl_error(crawler.discover(url))
    assert err.code == "bad_url"
