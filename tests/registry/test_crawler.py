"""The crawler against real aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from registry.crawler import USER_AGENT, Crawler, card_candidates, is_card_url
from registry.errors import CrawlError
from registry.netguard import ALLOW_ENV
from registry.settings import Settings
from tests.support.proxy import running_proxy

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


def status(code: int, body: str = "", content_type: str = "text/plain") -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=code, text=body, content_type=content_type)

    return handler


def counted(hits: Counter[str], handler: Handler) -> Handler:
    async def wrapper(request: web.Request) -> web.StreamResponse:
        hits[request.path] += 1
        return await handler(request)

    return wrapper


SPA_PAGE = status(200, "<!doctype html><div id=app></div>", "text/html")


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
    attempts = err.details["attempts"]
    assert [a["url"] for a in attempts] == card_candidates(base)
    assert len(attempts) == 4
    assert all(a["code"] == "remote_not_found" and a["status"] == 404 for a in attempts)
    assert err.details["url"] == base


async def test_discover_skips_spa_html_page(serve, crawler: Crawler) -> None:
    # single-page apps answer every path, including agent-card.json, with their HTML shell
    server = await serve(
        {"/.well-known/agent-card.json": SPA_PAGE, "/.well-known/agent.json": card()}
    )
    fetched = await crawler.discover(str(server.make_url("/")))
    assert fetched.data == CARD
    assert fetched.url == str(server.make_url("/.well-known/agent.json"))


@pytest.mark.parametrize(
    "first",
    [
        status(401, "login first"),
        status(403, "forbidden"),
        status(410, "gone"),
        status(200, "{not json", "application/json"),
        card(["not", "an", "object"]),
    ],
    ids=["401", "403", "410", "invalid-json", "array"],
)
async def test_discover_falls_back_after_recoverable_failures(
    serve, crawler: Crawler, first: Handler
) -> None:
    server = await serve({"/.well-known/agent-card.json": first, "/.well-known/agent.json": card()})
    fetched = await crawler.discover(str(server.make_url("/")))
    assert fetched.data == CARD
    assert fetched.url.endswith("/.well-known/agent.json")


@pytest.mark.parametrize("code", [500, 502, 503])
async def test_discover_stops_at_server_errors(serve, crawler: Crawler, code: int) -> None:
    hits: Counter[str] = Counter()
    server = await serve(
        {
            "/.well-known/agent-card.json": counted(hits, status(code, "boom")),
            "/.well-known/agent.json": counted(hits, card()),
        }
    )
    err = await crawl_error(crawler.discover(str(server.make_url("/"))))
    assert err.code == "remote_http_error"
    assert err.details["status"] == code
    assert err.details["url"] == str(server.make_url("/.well-known/agent-card.json"))
    assert str(code) in err.message
    assert hits == {"/.well-known/agent-card.json": 1}


async def test_discover_stops_at_other_failures(serve, crawler: Crawler) -> None:
    hits: Counter[str] = Counter()
    server = await serve(
        {
            "/.well-known/agent-card.json": counted(hits, card({"pad": "x" * LIMIT})),
            "/.well-known/agent.json": counted(hits, card()),
            "/loop/.well-known/agent-card.json": counted(hits, SPA_PAGE),
            "/loop/.well-known/agent.json": counted(hits, redirect("/loop/.well-known/agent.json")),
        }
    )
    err = await crawl_error(crawler.discover(str(server.make_url("/"))))
    assert err.code == "too_large"
    assert hits["/.well-known/agent.json"] == 0
    # a failure after a skipped URL stops discovery too
    err = await crawl_error(crawler.discover(str(server.make_url("/loop"))))
    assert err.code == "redirect_loop"
    assert hits["/loop/.well-known/agent-card.json"] == 1
    assert hits["/.well-known/agent.json"] == 0


async def test_discover_lists_every_failed_attempt(serve, crawler: Crawler) -> None:
    server = await serve(
        {
            "/a/.well-known/agent-card.json": SPA_PAGE,
            "/a/.well-known/agent.json": status(401, "who are you"),
            "/.well-known/agent-card.json": card([CARD]),
        }
    )
    base = str(server.make_url("/a"))
    err = await crawl_error(crawler.discover(base))
    assert err.code == "card_not_found"
    assert err.status == 422
    candidates = card_candidates(base)
    assert err.details == {
        "url": base,
        "attempts": [
            {
                "url": candidates[0],
                "code": "bad_content_type",
                "status": 200,
                "message": (
                    f"The document at {candidates[0]} (HTTP 200) has content type "
                    "'text/html; charset=utf-8', expected JSON."
                ),
            },
            {
                "url": candidates[1],
                "code": "remote_http_error",
                "status": 401,
                "message": f"The server at {candidates[1]} answered with HTTP 401 Unauthorized.",
            },
            {
                "url": candidates[2],
                "code": "not_an_object",
                "status": 200,
                "message": (
                    f"The document at {candidates[2]} is a JSON array, not an agent card object."
                ),
            },
            {
                "url": candidates[3],
                "code": "remote_not_found",
                "status": 404,
                "message": f"The server at {candidates[3]} answered HTTP 404 Not Found.",
            },
        ],
    }
    # the message names the first problem
    assert err.message == (
        f"No agent card was found at {base}: the document at {candidates[0]} (HTTP 200) has "
        "content type 'text/html; charset=utf-8', expected JSON, and the other 3 well-known "
        "URLs failed too."
    )


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
    # an encoded "/" stays inside its path segment
    assert card_candidates("https://a.example/team%2Fecho")[0] == (
        "https://a.example/team%2Fecho/.well-known/agent-card.json"
    )


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


async def test_remote_404_and_500_have_their_own_codes(serve, crawler: Crawler) -> None:
    # not "not_found" / "http_error": those are the admin API's own codes
    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    server = await serve({"/fail.json": fail, "/gone.json": status(410)})
    missing = await crawl_error(crawler.fetch_card(str(server.make_url("/missing.json"))))
    assert missing.code == "remote_not_found"
    assert missing.details["status"] == 404
    assert "404" in missing.message
    gone = await crawl_error(crawler.fetch_card(str(server.make_url("/gone.json"))))
    assert gone.code == "remote_not_found"
    assert gone.details["status"] == 410
    failed = await crawl_error(crawler.fetch_card(str(server.make_url("/fail.json"))))
    assert failed.code == "remote_http_error"
    assert failed.details["status"] == 500
    assert "500" in failed.message


async def test_huge_max_age_does_not_break_the_fetch(serve, crawler: Crawler) -> None:
    server = await serve(
        {
            "/huge.json": card(**{"Cache-Control": "max-age=" + "9" * 5000}),
            "/zeros.json": card(**{"Cache-Control": "max-age=" + "0" * 20 + "60"}),
        }
    )
    huge = await crawler.fetch_card(str(server.make_url("/huge.json")))
    assert huge.data == CARD
    assert huge.max_age == 2**31
    assert (await crawler.fetch_card(str(server.make_url("/zeros.json")))).max_age == 60


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


async def test_follow_is_asked_before_each_redirect(serve, crawler: Crawler) -> None:
    """``follow`` sees every hop's target first; one it refuses is never requested."""
    hits: Counter[str] = Counter()
    server = await serve(
        {
            "/a.json": counted(hits, redirect("/b.json")),
            "/b.json": counted(hits, redirect("/c.json")),
            "/c.json": counted(hits, card()),
        }
    )
    asked: list[str] = []

    def follow(target: URL) -> str | None:
        asked.append(target.path)
        return "not wanted here" if target.path == "/c.json" else None

    url = str(server.make_url("/a.json"))
    err = await crawl_error(crawler.fetch_json(url, follow=follow))
    b, c = str(server.make_url("/b.json")), str(server.make_url("/c.json"))
    assert err.code == "redirect_refused"
    assert err.message == f"The redirect from {b} to {c} was refused: not wanted here."
    assert err.details == {"url": b, "location": c, "reason": "not wanted here"}
    assert asked == ["/b.json", "/c.json"]
    assert hits == Counter({"/a.json": 1, "/b.json": 1})  # /c.json never requested
    # without a refusal the chain is followed
    assert (await crawler.fetch_json(url, follow=lambda target: None)).data == CARD


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
    url = str(server.make_url("/c.json"))
    err = await crawl_error(crawler.fetch_card(url))
    assert err.code == "bad_url"
    assert err.message == (
        f"The redirect from {url} to file:///etc/passwd was refused: the scheme is 'file', "
        "only http and https are allowed."
    )
    assert err.details["location"] == "file:///etc/passwd"


# -- credentials in URLs -----------------------------------------------------------------


def assert_secret_hidden(err: CrawlError, *secrets: str) -> None:
    shown = err.message + json.dumps(err.details) + str(err)
    for secret in secrets:
        assert secret not in shown


@pytest.mark.parametrize(
    "userinfo", ["alice:s3cr3t-pw@", "alice@", ":s3cr3t-pw@", "alice:s3cr3t%2Fpw@"]
)
async def test_url_with_credentials_is_refused(serve, crawler: Crawler, userinfo: str) -> None:
    hits: Counter[str] = Counter()
    server = await serve(
        {
            "/c.json": counted(hits, card()),
            "/.well-known/agent-card.json": counted(hits, card()),
        }
    )
    for method, path in ((crawler.fetch_card, "/c.json"), (crawler.discover, "/")):
        url = f"http://{userinfo}127.0.0.1:{server.port}{path}"
        err = await crawl_error(method(url))
        assert err.code == "bad_url"
        assert "credentials" in err.message
        assert f"http://127.0.0.1:{server.port}{path}" in err.message
        assert err.details["url"] == f"http://127.0.0.1:{server.port}{path}"
        assert_secret_hidden(err, "s3cr3t", "alice")
    assert not hits  # nothing was sent, so no Authorization header either


async def test_redirect_to_url_with_credentials_is_refused(serve, crawler: Crawler) -> None:
    hits: Counter[str] = Counter()
    server = await serve({"/secret.json": counted(hits, card())})
    location = f"http://alice:s3cr3t@127.0.0.1:{server.port}/secret.json"
    origin = await serve(
        {"/c.json": redirect(location), "/.well-known/agent-card.json": redirect(location)}
    )
    url = str(origin.make_url("/c.json"))
    err = await crawl_error(crawler.fetch_card(url))
    assert err.code == "bad_url"
    assert err.message.startswith(f"The redirect from {url} to http://127.0.0.1:{server.port}/")
    assert "credentials" in err.message
    assert err.details["location"] == f"http://127.0.0.1:{server.port}/secret.json"
    assert_secret_hidden(err, "s3cr3t", "alice")
    # discovery stops there too (a refused redirect is not a missing card)
    err = await crawl_error(crawler.discover(str(origin.make_url("/"))))
    assert err.code == "bad_url"
    assert_secret_hidden(err, "s3cr3t", "alice")
    assert not hits


async def test_unparseable_redirect_with_credentials_is_redacted(serve, crawler: Crawler) -> None:
    server = await serve({"/c.json": redirect("http://alice:s3cr3t/pw@agent.example/")})
    err = await crawl_error(crawler.fetch_card(str(server.make_url("/c.json"))))
    assert err.code == "bad_url"
    assert err.details["location"] == "http://***@agent.example/"
    assert_secret_hidden(err, "s3cr3t", "alice")


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


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/card.json",
        "not a url",
        "http://a..b/",
        "http://xn--a.com/",
        "http://exa mple.com/",
        f"http://{'a' * 64}.example/",
        "http://agent.example:99999/",
    ],
)
async def test_bad_url(crawler: Crawler, url: str) -> None:
    err = await crawl_error(crawler.fetch_card(url))
    assert err.code == "bad_url"
    assert url in err.message
    err = await crawl_error(crawler.discover(url))
    assert err.code == "bad_url"


async def test_through_the_outbound_proxy(serve, tmp_path: Path) -> None:
    """Every fetch through ``SWITCHBOARD_OUTBOUND_PROXY`` (each redirect hop judged by the
    guard before the proxy is asked: a hop to a refused address never reaches it), health
    probes too (a gRPC one as a CONNECT tunnel); the proxy's refusal is a ``connect_failed``
    that names it without its credentials."""
    server = await serve(
        {
            "/.well-known/agent-card.json": redirect("/card.json"),
            "/card.json": card(),
            "/away": redirect("http://127.0.0.6/card.json"),
        }
    )
    base = str(server.make_url("")).rstrip("/")
    async with running_proxy(tmp_path, user="sb", password="s3cret", source="127.0.0.9") as proxy:
        proxied = proxy.url.replace("://", "://sb:s3cret@")
        allowed = ["127.0.0.1/32"]
        async with Crawler(settings(allow_networks=allowed, outbound_proxy=proxied)) as crawler:
            assert (await crawler.discover(base)).data == CARD
            refused = await crawl_error(crawler.fetch_card(f"{base}/away"))
            assert refused.code == "address_refused" and "127.0.0.6" in refused.message
            assert await crawler.probe(f"{base}/card.json") == 200
            await crawler.probe_connect(f"127.0.0.1:{server.port}")
        wrong = proxy.url.replace("://", "://sb:wrong@")
        async with Crawler(settings(allow_networks=allowed, outbound_proxy=wrong)) as crawler:
            failed = await crawl_error(crawler.probe_connect(f"grpcs://127.0.0.1:{server.port}"))
        assert failed.code == "connect_failed" and "HTTP 407" in failed.message
        assert "wrong" not in failed.message
        logged = [(e["method"], e["target"], e["status"]) for e in proxy.entries()]
    assert logged == [
        ("GET", f"{base}/.well-known/agent-card.json", 302),
        ("GET", f"{base}/card.json", 200),
        ("GET", f"{base}/away", 302),
        ("GET", f"{base}/card.json", 200),
        ("CONNECT", f"127.0.0.1:{server.port}", 200),
        ("CONNECT", f"127.0.0.1:{server.port}", 407),
    ]
