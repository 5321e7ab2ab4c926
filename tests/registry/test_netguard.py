"""The SSRF guard: address policy, URL checks and the guarded resolver."""

from __future__ import annotations

import json
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from registry.errors import CrawlError
from registry.netguard import (
    ALLOW_ENV,
    AddressPolicy,
    AddressRefused,
    GuardedResolver,
    check_host,
    redact_url,
)

REFUSED = {
    "127.0.0.1": "loopback",
    "127.255.0.9": "loopback",
    "::1": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "172.31.255.255": "private",
    "192.168.1.1": "private",
    "fc00::1": "private",
    "fd12:3456::1": "private",
    "169.254.169.254": "link-local",
    "169.254.0.1": "link-local",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local",
    "100.64.0.1": "carrier-grade NAT",
    "0.0.0.0": "unspecified",
    "::": "unspecified",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "ff02::1": "multicast",
    "240.0.0.1": "reserved",
    "255.255.255.255": "reserved",
    "192.0.2.10": "documentation",
    "2001:db8::1": "documentation",
    "::ffff:127.0.0.1": "loopback",
    "::ffff:169.254.169.254": "link-local",
    "::ffff:10.0.0.1": "private",
    "64:ff9b::10.0.0.1": "private",
    "2002:7f00:1::1": "loopback",
    "2002:a9fe:a9fe::1": "link-local",
    "::127.0.0.1": "reserved",
}

ALLOWED = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "64:ff9b::8.8.8.8"]


@pytest.mark.parametrize("address", sorted(REFUSED))
def test_non_global_addresses_are_refused(address: str) -> None:
    assert AddressPolicy().is_allowed(address) is False


@pytest.mark.parametrize("address", ALLOWED)
def test_global_addresses_are_allowed(address: str) -> None:
    assert AddressPolicy().is_allowed(address) is True


def test_garbage_is_refused() -> None:
    assert AddressPolicy().is_allowed("not-an-ip") is False


def test_allow_networks_open_addresses() -> None:
    policy = AddressPolicy(["127.0.0.0/8", "10.0.0.0/8"])
    assert policy.is_allowed("127.0.0.1")
    assert policy.is_allowed("10.9.8.7")
    assert not policy.is_allowed("192.168.1.1")
    assert not policy.is_allowed("::1")
    assert not policy.is_allowed("169.254.169.254")


def test_mapped_ipv6_is_judged_as_its_ipv4() -> None:
    assert not AddressPolicy().is_allowed("::ffff:127.0.0.1")
    assert AddressPolicy(["127.0.0.0/8"]).is_allowed("::ffff:127.0.0.1")
    assert AddressPolicy().is_allowed("::ffff:8.8.8.8")


def test_refusal_message_names_kind_and_env_var() -> None:
    err = AddressRefused.build(
        "169.254.169.254", ["169.254.169.254"], url="http://169.254.169.254/"
    )
    assert err.code == "address_refused"
    assert err.message == (
        "Refusing to fetch http://169.254.169.254/: 169.254.169.254 (link-local) is not a "
        f"publicly routable address; add its network to {ALLOW_ENV} to allow it."
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/x",
        "https://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:80/",
        "http://[::ffff:127.0.0.1]:8080/",
        "http://[fe80::1%25eth0]/",
    ],
)
def test_check_url_refuses_ip_literals(url: str) -> None:
    with pytest.raises(AddressRefused) as info:
        AddressPolicy().check_url(url)
    assert info.value.code == "address_refused"
    assert url in info.value.message
    assert ALLOW_ENV in info.value.message


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/card.json",
        "file:///etc/passwd",
        "gopher://example.com/",
        "example.com/card.json",
        "http:///nohost",
        "http://2130706433/",
        "http://127.1/",
        "http://0x7f.1/",
        "http://127.0.0.1./",
        "http://a..b/",
        "http://.example/",
        "http://exa mple.com/",
        "http://host%00name/",
        f"http://{'a' * 64}.example/",
        f"http://{'abcdefgh.' * 30}example/",
        "http://xn--a.com/",
        "http://agent.example:99999/",
        "http://[::1/",
    ],
)
def test_check_url_bad_urls(url: str) -> None:
    with pytest.raises(CrawlError) as info:
        AddressPolicy().check_url(url)
    assert info.value.code == "bad_url"
    assert url in info.value.message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:s3cr3t@agent.example/card.json", "http://agent.example/card.json"),
        ("http://alice@agent.example/", "http://agent.example/"),
        ("http://:s3cr3t@agent.example/", "http://agent.example/"),
        ("https://alice:s3cr3t@agent.example:8443/x?q=1", "https://agent.example:8443/x?q=1"),
        # checked before the address, so an IP literal does not leak the secret either
        ("http://alice:s3cr3t@10.0.0.1/", "http://10.0.0.1/"),
        # a bad scheme is reported first, still without the credentials
        ("ftp://alice:s3cr3t@agent.example/", "ftp://agent.example/"),
        # unparseable: everything up to the last "@" is hidden
        ("http://alice:s3cr3t/x@agent.example/", "http://***@agent.example/"),
        ("http://alice:s3#cr3t@agent.example/", "http://***@agent.example/"),
    ],
)
def test_check_url_refuses_credentials_without_echoing_them(url: str, shown: str) -> None:
    with pytest.raises(CrawlError) as info:
        AddressPolicy(["10.0.0.0/8"]).check_url(url)
    err = info.value
    assert err.code == "bad_url"
    assert err.message.startswith(f"Cannot fetch {shown}: ")
    assert err.details["url"] == shown
    for secret in ("s3cr3t", "s3#cr3t", "alice"):
        assert secret not in err.message
        assert secret not in json.dumps(err.details)


def test_credentials_message() -> None:
    with pytest.raises(CrawlError) as info:
        AddressPolicy().check_url("http://alice:s3cr3t@agent.example/")
    assert info.value.message == (
        "Cannot fetch http://agent.example/: credentials (user:password@) in URLs are not "
        "accepted; remove them from the URL."
    )


def test_redact_url() -> None:
    assert redact_url("http://u:p@h.example/a?b#c") == "http://h.example/a?b#c"
    assert redact_url("https://h.example/a@b") == "https://h.example/a@b"
    assert redact_url("http://u:p/q@h.example/") == "http://***@h.example/"
    assert redact_url("not a url") == "not a url"


def test_check_url_accepts_names_and_allowed_literals() -> None:
    assert str(AddressPolicy().check_url("HTTPS://Example.com/a#frag")) == "https://example.com/a"
    assert str(AddressPolicy().check_url("http://例え.jp/")) == "http://xn--r8jz45g.jp/"
    assert str(AddressPolicy().check_url("http://_srv.agent.example./")) == (
        "http://_srv.agent.example./"
    )
    assert str(AddressPolicy().check_url("http://@agent.example/")) == "http://agent.example/"
    policy = AddressPolicy(["127.0.0.0/8"])
    assert str(policy.check_url("http://127.0.0.1:9/x?y=1")) == "http://127.0.0.1:9/x?y=1"


class StaticResolver(AbstractResolver):
    """Answers every lookup with fixed addresses (a stand-in for DNS, not for HTTP)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host,
                host=a,
                port=port,
                family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for a in self.addresses
        ]

    async def close(self) -> None:
        pass


async def test_resolver_drops_refused_addresses() -> None:
    inner = StaticResolver("10.0.0.1", "93.184.216.34", "::1", "2606:4700::1")
    results = await GuardedResolver(AddressPolicy(), inner).resolve("agent.example", 443)
    assert [r["host"] for r in results] == ["93.184.216.34", "2606:4700::1"]


async def test_resolver_refuses_when_nothing_is_left() -> None:
    inner = StaticResolver("10.0.0.1", "169.254.169.254")
    with pytest.raises(AddressRefused) as info:
        await GuardedResolver(AddressPolicy(), inner).resolve("rebind.example", 80)
    err = info.value
    assert err.code == "address_refused"
    assert err.details["host"] == "rebind.example"
    assert err.details["addresses"] == ["10.0.0.1", "169.254.169.254"]
    assert "rebind.example" in err.message
    assert "169.254.169.254 (link-local)" in err.message
    assert ALLOW_ENV in err.message
    assert "http://rebind.example/" in err.with_url("http://rebind.example/").message


async def test_real_resolution_of_localhost() -> None:
    with pytest.raises(AddressRefused):
        await GuardedResolver(AddressPolicy()).resolve("localhost", 80, socket.AF_UNSPEC)
    results = await GuardedResolver(AddressPolicy(["127.0.0.0/8"])).resolve(
        "localhost", 80, socket.AF_UNSPEC
    )
    assert results
    assert all(r["host"].startswith("127.") for r in results)


async def test_the_outbound_proxys_own_address_is_not_judged() -> None:
    inner = StaticResolver("10.0.0.3")
    guarded = GuardedResolver(AddressPolicy(), inner, exempt=[("Proxy.corp", 3128)])
    assert [r["host"] for r in await guarded.resolve("proxy.corp", 3128)] == ["10.0.0.3"]
    with pytest.raises(AddressRefused):  # the same host on another port is an agent's
        await guarded.resolve("proxy.corp", 8080)


async def test_check_host_wants_every_address_allowed() -> None:
    """A target the outbound proxy resolves again: every address the name has now must be
    allowed (the proxy may pick any), an IP literal must be; a name that does not resolve
    here is refused too."""
    policy = AddressPolicy(["10.0.0.0/8"])
    await check_host(policy, "agent.example", 443, StaticResolver("10.1.1.1", "93.184.216.34"))
    await check_host(policy, "10.2.2.2", 80)
    with pytest.raises(AddressRefused) as info:
        await check_host(policy, "rebind.example", 80, StaticResolver("10.1.1.1", "127.0.0.1"))
    assert info.value.details == {
        "host": "rebind.example",
        "addresses": ["127.0.0.1"],
        "allow_env": ALLOW_ENV,
        "also": True,
    }
    assert "also resolves to 127.0.0.1 (loopback)" in info.value.message
    shown = info.value.with_url("http://rebind.example/").message
    assert shown.startswith("Refusing to fetch http://rebind.example/ through the outbound proxy")
    with pytest.raises(AddressRefused, match=r"192\.168\.1\.1 \(private\)"):
        await check_host(policy, "192.168.1.1", 80)
    with pytest.raises(CrawlError, match=r"Cannot resolve nowhere\.invalid") as failed:
        await check_host(policy, "nowhere.invalid", 80)
    assert failed.value.code == "connect_failed"
