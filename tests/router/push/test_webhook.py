"""The check of clients' webhook URLs: the SSRF guard with SWITCHBOARD_PUSH_ALLOW_NETWORKS."""

from __future__ import annotations

import pytest

from registry.netguard import AddressPolicy
from router.push.webhook import WebhookRefused, check_webhook


def _dns(answers: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    async def resolve(host: str) -> list[str]:
        if host not in answers:
            raise OSError("no such host")
        return answers[host]

    return resolve


async def test_every_address_of_a_host_name_must_be_allowed() -> None:
    dns = _dns({
        "hooks.example": ["93.184.216.34"],
        "mixed.example": ["93.184.216.34", "10.1.2.3"],
        "inside.example": ["10.1.2.3"],
    })  # fmt: skip
    policy = AddressPolicy()
    assert await check_webhook("https://hooks.example/h", policy, dns) == "https://hooks.example/h"
    for url in ("https://mixed.example/h", "https://inside.example/h"):
        with pytest.raises(WebhookRefused, match="SWITCHBOARD_PUSH_ALLOW_NETWORKS"):
            await check_webhook(url, policy, dns)
    opened = AddressPolicy(["10.0.0.0/8"])
    assert await check_webhook("https://inside.example/h", opened, dns)
    with pytest.raises(WebhookRefused, match="does not resolve"):
        await check_webhook("https://nowhere.example/h", policy, dns)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1/h", "loopback"),
        ("http://[::ffff:169.254.169.254]/h", "link-local"),
        ("file:///etc/passwd", "scheme"),
        ("http://user:secret@hooks.example/h", "credentials"),
        ("http://2130706433/h", "canonical"),
    ],
)
async def test_refused_urls_say_why_without_their_credentials(url: str, said: str) -> None:
    with pytest.raises(WebhookRefused) as info:
        await check_webhook(url, AddressPolicy(), _dns({}))
    assert said in str(info.value) and "secret" not in str(info.value)
