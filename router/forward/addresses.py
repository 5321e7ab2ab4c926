"""Agents' addresses kept from the callers who may not see them (docs/security.md, "Agents'
addresses").

With client authentication on, a caller with neither the admin nor the reader role never
receives an agent's URL, interface address or resolved address. Of what the router answers,
only its own errors about reaching an agent hold them: ``data.url`` and a ``reason`` such as
``cannot connect to 10.0.0.5:8080`` (-32052, -32053, -32006; in 1.0, the ErrorInfo's metadata
and the Struct detail). For such a caller :func:`hides_addresses` (on
:meth:`router.forward.handler.Router.handle`) drops ``url`` from them and writes
:data:`HIDDEN` for every address in their texts (the agent's interface and card URLs, their
hosts and ports, and any URL or IP address), in plain answers and in every event of a stream,
whatever the binding. An agent's own answers and errors are its content and pass as they
came. Explain (:func:`hide_in_explain`) drops the candidates' and the choice's ``url``.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from registry.access.principal import Principal
from registry.service import Registry
from registry.settings import Settings
from router.forward.call import Call, Event, EventStream, Reply

__all__ = [
    "HIDDEN",
    "hide_in_error",
    "hide_in_explain",
    "hides_addresses",
    "shows_addresses",
]

HIDDEN = "[address hidden]"
"""What stands where an address was."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>;,.)]")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b")
_IPV6 = re.compile(
    r"\[[0-9A-Fa-f:.%]+\](?::\d{1,5})?|(?<![\w:])[0-9A-Fa-f]*:[0-9A-Fa-f:.]*:[\w.%]*"
)
_HOST_PORT = re.compile(r"(?<![\w.-])(?=[\w-]*[A-Za-z.])[A-Za-z0-9][\w.-]*:\d{1,5}\b")


def shows_addresses(settings: Settings, principal: Principal) -> bool:
    """Whether ``principal`` may see agents' addresses: always with client authentication
    off, else with the admin or reader role."""
    return settings.client_auth == "none" or principal.is_reader


class _Router(Protocol):
    settings: Settings
    registry: Registry


R = TypeVar("R", bound=_Router)
Handle = Callable[[R, Call], Awaitable[Reply | EventStream]]


def hides_addresses(handle: Handle[R]) -> Handle[R]:
    """Decorate ``Router.handle(self, call)``: for a caller that may not see agents'
    addresses, the router's errors in its answer (or in each event of its stream) without
    them."""

    @functools.wraps(handle)
    async def hiding(router: R, call: Call) -> Reply | EventStream:
        answer = await handle(router, call)
        if shows_addresses(router.settings, call.caller):
            return answer
        agents = router.registry.catalog.snapshot.agents

        def known(agent_id: str) -> list[str]:
            record = agents.get(agent_id)
            if record is None:
                return []
            urls = [i.url for i in record.card.interfaces]
            return [*urls, record.source_url or "", record.card_url or ""]

        if isinstance(answer, Reply):
            body = _hide_in_body(answer.body, known)
            return answer if body is answer.body else Reply(body, answer.headers)
        answer.events = _hidden_events(answer.events, known)
        return answer

    return hiding


async def _hidden_events(
    events: AsyncGenerator[Event, None], known: Callable[[str], list[str]]
) -> AsyncGenerator[Event, None]:
    try:
        async for body, kind in events:
            yield (_hide_in_body(body, known) if isinstance(body, dict) else body), kind
    finally:
        await events.aclose()


def _hide_in_body(body: dict[str, Any], known: Callable[[str], list[str]]) -> dict[str, Any]:
    """A JSON-RPC answer with the addresses in its error hidden (the same object when it
    has none)."""
    error = body.get("error")
    if not isinstance(error, dict):
        return body
    hidden = hide_in_error(error, known)
    return body if hidden is error else {**body, "error": hidden}


def hide_in_error(
    error: dict[str, Any], known: Callable[[str], Iterable[str]] = lambda _agent: ()
) -> dict[str, Any]:
    """A JSON-RPC error object (either version's shape) whose router-made facts about an
    agent (an object with ``agent`` and ``url`` or ``reason``, at any depth of ``data``) lose
    ``url`` and have every address in their texts hidden; ``known(agent_id)`` names that
    agent's URLs (their hosts are hidden too). The same object when nothing changes."""
    data = error.get("data")
    hidden = _hide_in(data, known)
    return error if hidden is data else {**error, "data": hidden}


def _hide_in(value: Any, known: Callable[[str], Iterable[str]]) -> Any:
    if isinstance(value, list):
        items = [_hide_in(item, known) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, dict):
        return value
    agent = value.get("agent")
    if isinstance(agent, str) and ("url" in value or "reason" in value):
        urls = [value["url"]] if isinstance(value.get("url"), str) else []
        names = _names([*urls, *known(agent)])
        return {
            key: _hide_text(item, names) if isinstance(item, str) and key != "agent" else item
            for key, item in value.items()
            if key != "url"
        }
    items = {key: _hide_in(item, known) for key, item in value.items()}
    return value if all(items[k] is value[k] for k in value) else items


def _names(urls: Iterable[str]) -> list[str]:
    """The strings that name the agent at ``urls``: each URL, its ``host:port`` and its
    host, longest first."""
    names: set[str] = set()
    for url in urls:
        if not url:
            continue
        names.add(url)
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            continue
        if host:
            names.add(host)
            names.add(parts.netloc.rpartition("@")[2])
            if port is None:
                port = 443 if parts.scheme == "https" else 80
            names.add(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return sorted(names, key=len, reverse=True)


def _hide_text(text: str, names: list[str]) -> str:
    """``text`` with ``names`` and every URL and IP address (with a port) in it hidden."""
    for name in names:
        text = text.replace(name, HIDDEN)
    text = _URL.sub(HIDDEN, text)
    text = _IPV6.sub(_v6, text)
    text = _IPV4.sub(HIDDEN, text)
    return _HOST_PORT.sub(HIDDEN, text)


def _v6(match: re.Match[str]) -> str:
    """An IPv6 address (bracketed, or bare and valid) hidden; anything else kept."""
    found = match.group(0)
    if found.startswith("["):
        return HIDDEN
    try:
        ipaddress.IPv6Address(found.split("%")[0])
    except ValueError:
        return found
    return HIDDEN


def hide_in_explain(view: dict[str, Any]) -> dict[str, Any]:
    """Explain's answer without the agents' URLs (``candidates[].url``, ``choice.url``) and
    with the addresses in its ``error`` hidden."""
    out = dict(view)
    if isinstance(out.get("candidates"), list):
        out["candidates"] = [_without_url(c) for c in out["candidates"]]
    if isinstance(out.get("choice"), dict):
        out["choice"] = _without_url(out["choice"])
    if isinstance(out.get("error"), dict):
        out["error"] = hide_in_error(out["error"])
    return out


def _without_url(item: Any) -> Any:
    return {k: v for k, v in item.items() if k != "url"} if isinstance(item, dict) else item
