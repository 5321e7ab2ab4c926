"""registry.egress: the outbound proxy's settings, the no-proxy list, and CONNECT tunnels
through a real proxy process on 127.0.0.1 (tests/support/proxy.py)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from pydantic import ValidationError
from yarl import URL

from registry.egress import NoProxy, OutboundProxy, ProxyError, open_tunnel
from registry.settings import Settings
from tests.support.proxy import running_proxy
from tests.support.tls import self_signed


@pytest.mark.parametrize(
    ("entry", "host", "port", "direct"),
    [
        ("*", "anything.example", 443, True),
        ("example.com", "example.com", 443, True),
        ("example.com", "api.example.com", 80, True),
        ("example.com", "badexample.com", 80, False),
        (".example.com", "example.com", 80, True),
        ("*.example.com", "a.b.example.com", 80, True),
        ("Example.COM.", "EXAMPLE.com", 80, True),
        ("example.com:8443", "example.com", 8443, True),
        ("example.com:8443", "example.com", 443, False),
        ("10.0.0.0/8", "10.20.30.40", 80, True),
        ("10.0.0.0/8", "11.0.0.1", 80, False),
        ("10.0.0.0/8", "ten.example", 80, False),  # a name is never resolved for this
        ("192.0.2.7", "192.0.2.7", 80, True),
        ("192.0.2.7:81", "192.0.2.7", 80, False),
        ("::1", "[::1]", 80, True),
        ("[::1]", "::1", 80, True),
        ("[fd00::]:8080", "[fd00::]", 8080, True),
        ("fd00::/8", "[fd12::1]", 443, True),
        ("localhost", "127.0.0.1", 80, False),  # no implicit loopback bypass
    ],
)
def test_the_no_proxy_list(entry: str, host: str, port: int, direct: bool) -> None:
    assert NoProxy([entry]).matches(host, port) is direct


@pytest.mark.parametrize("entry", ["exa mple.com", "a..b", "host:99999", "[::1", "x:y", "*:0"])
def test_a_bad_no_proxy_entry_names_itself(entry: str) -> None:
    with pytest.raises(ValueError, match=r"is not a host|has no valid port"):
        NoProxy([entry])


def test_the_proxy_and_its_credentials() -> None:
    proxy = OutboundProxy.parse("http://sb%40corp:p%3Ass%2Fw@proxy.corp:3128/", ["internal"])
    assert proxy.shown == "http://proxy.corp:3128" and str(proxy.url) == proxy.shown
    assert (proxy.host, proxy.port, proxy.tls) == ("proxy.corp", 3128, False)
    assert proxy.authorization == "Basic c2JAY29ycDpwOnNzL3c="  # sb@corp:p:ss/w
    assert "p%3Ass" not in repr(proxy) and "p:ss" not in repr(proxy)
    assert proxy.with_credentials() == "http://sb%40corp:p%3Ass%2Fw@proxy.corp:3128"
    assert proxy.scrub("ProxyError: sb%40corp:p%3Ass%2Fw@ and sb@corp:p:ss/w") == (
        "ProxyError: ***@ and ***"
    )
    assert proxy.via(URL("https://agent.example/a")) == proxy.url
    assert proxy.via(URL("http://api.internal/a")) is None
    assert proxy.is_proxy("PROXY.corp", 3128) and not proxy.is_proxy("proxy.corp", 80)
    environment = proxy.environment()
    assert environment["HTTPS_PROXY"] == environment["http_proxy"] == proxy.with_credentials()
    assert environment["NO_PROXY"] == environment["no_proxy"] == "internal"
    https = OutboundProxy.parse("https://[fd00::1]")
    assert (https.host, https.port, https.tls, https.authorization) == ("fd00::1", 443, True, None)


def test_the_settings_read_no_proxy_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_OUTBOUND_PROXY", "http://u:secret@proxy:3128")
    monkeypatch.setenv("SWITCHBOARD_OUTBOUND_NO_PROXY", " .corp , 10.0.0.0/8 ,")
    monkeypatch.setenv("HTTPS_PROXY", "http://elsewhere:1")  # never read
    settings = Settings()
    assert settings.outbound_no_proxy == [".corp", "10.0.0.0/8"]
    proxy = OutboundProxy.from_settings(settings)
    assert proxy is not None and proxy.shown == "http://proxy:3128"
    monkeypatch.delenv("SWITCHBOARD_OUTBOUND_PROXY")
    assert OutboundProxy.from_settings(Settings()) is None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("socks5://u:secret@proxy:1080", "must be an http:// or https:// URL"),
        ("http://u:secret@", "not a URL"),
        ("http:///path", "no host"),
        ("http://u:secret@proxy:3128/path", "scheme://[user:password@]host[:port]"),
        ("http://u:secret@proxy:0", "no valid port"),
    ],
)
def test_a_bad_proxy_setting_never_shows_the_credentials(value: str, said: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(outbound_proxy=value)
    messages = " ".join(error["msg"] for error in raised.value.errors())
    assert said in messages and "secret" not in messages


async def test_a_tunnel_through_the_proxy(tmp_path: Path) -> None:
    """CONNECT opens a tunnel the bytes go through (with the credentials); a wrong password
    is the proxy's 407, a target it cannot reach its 502, a proxy not there a ProxyError."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(5))
        await writer.drain()
        writer.close()

    target = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = target.sockets[0].getsockname()[1]
    async with running_proxy(tmp_path, user="sb", password="secret") as proxy:
        good = OutboundProxy.parse(proxy.url.replace("://", "://sb:secret@"))
        tunnel = await open_tunnel(good, "127.0.0.1", port)
        got: asyncio.Queue[bytes] = asyncio.Queue()
        tunnel.set_protocol(_Collect(got))
        tunnel.write(b"hello")
        assert await got.get() == b"hello"
        tunnel.close()
        wrong = OutboundProxy.parse(proxy.url.replace("://", "://sb:nope@"))
        with pytest.raises(ProxyError, match="HTTP 407 Proxy Authentication Required"):
            await open_tunnel(wrong, "127.0.0.1", port)
        target.close()
        await target.wait_closed()
        with pytest.raises(ProxyError, match=r"refused the tunnel to 127\.0\.0\.1:\d+: HTTP 502"):
            await open_tunnel(good, "127.0.0.1", port)
        entries = proxy.entries()
    assert [(e["method"], e["auth"], e["status"]) for e in entries] == [
        ("CONNECT", "ok", 200),
        ("CONNECT", "wrong", 407),
        ("CONNECT", "ok", 502),
    ]
    with pytest.raises(ProxyError, match="cannot connect to the outbound proxy http://127"):
        await open_tunnel(good, "127.0.0.1", port)
    assert "secret" not in proxy.log.read_text()


async def test_an_https_proxy_is_spoken_to_over_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    target = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = target.sockets[0].getsockname()[1]
    async with running_proxy(tmp_path, cert=cert, key=key) as proxy:
        assert proxy.url.startswith("https://")
        https = OutboundProxy.parse(proxy.url)
        trusted = ssl.create_default_context(cafile=str(cert))
        tunnel = await open_tunnel(https, "127.0.0.1", port, proxy_ssl=trusted)
        tunnel.close()
        with pytest.raises(ProxyError, match="TLS certificate verification failed"):
            await open_tunnel(https, "127.0.0.1", port)  # the system's roots do not know it
    target.close()


class _Collect(asyncio.Protocol):
    def __init__(self, into: asyncio.Queue[bytes]) -> None:
        self.into = into

    def data_received(self, data: bytes) -> None:
        self.into.put_nowait(data)
