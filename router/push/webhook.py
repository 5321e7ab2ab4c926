"""The check of a client's webhook URL: the SSRF guard (:class:`registry.netguard.AddressPolicy`)
with its own allow-list, ``SWITCHBOARD_PUSH_ALLOW_NETWORKS``.

A URL is refused unless it is http(s), has no credentials, a well-formed host, and every
address its host has (an IP literal, or what DNS answers now) is globally routable or in an
allowed network. Delivery checks again as it connects (a guarded resolver), so a name that
later resolves elsewhere is refused then too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

from registry.errors import CrawlError
from registry.netguard import AddressPolicy, redact_url

__all__ = ["PUSH_ALLOW_ENV", "Resolve", "WebhookRefused", "check_webhook"]

PUSH_ALLOW_ENV = "SWITCHBOARD_PUSH_ALLOW_NETWORKS"

Resolve = Callable[[str], Awaitable[list[str]]]
"""Host name -> its addresses (the default asks the system resolver)."""


class WebhookRefused(ValueError):
    """A webhook URL the router will not deliver to; the message says why and what to do."""


async def _system_resolve(host: str) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def check_webhook(url: str, policy: AddressPolicy, resolve: Resolve = _system_resolve) -> str:
    """``url`` if the router may deliver notifications to it; :class:`WebhookRefused`
    otherwise."""
    try:
        parsed = policy.check_url(url)
    except CrawlError as exc:
        raise WebhookRefused(_push_phrasing(exc.message)) from None
    host = parsed.host or ""
    try:
        ipaddress.ip_address(host)
        return url  # an IP literal: check_url checked it
    except ValueError:
        pass
    try:
        addresses = await resolve(host)
    except OSError:
        raise WebhookRefused(
            f"the webhook URL {redact_url(url)} cannot be used: its host {host!r} does not resolve"
        ) from None
    refused = [a for a in addresses if not policy.is_allowed(a.split("%", 1)[0])]
    if not addresses or refused:
        shown = ", ".join(refused) or "no address"
        raise WebhookRefused(
            f"the webhook URL {redact_url(url)} cannot be used: {host} resolves to {shown}, "
            f"which is not publicly routable; an operator may allow its network in "
            f"{PUSH_ALLOW_ENV}"
        )
    return url


def _push_phrasing(message: str) -> str:
    """The SSRF guard's message, naming the push allow-list instead of the crawler's."""
    message = message.replace("SWITCHBOARD_ALLOW_NETWORKS", PUSH_ALLOW_ENV)
    return "webhook URL refused: " + message.replace("Refusing to fetch", "Refusing to deliver to")
