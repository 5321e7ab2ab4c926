"""aiohttp's client as :class:`~router.forward.upstream.Upstream` uses it (HTTP+JSON agents
always, JSON-RPC ones with ``SWITCHBOARD_UPSTREAM_CLIENT=aiohttp``), held to what the lean
client (:mod:`router.forward.h1client`) holds an agent to:

* :func:`agent_session`: the connection limits and timeouts, the SSRF guard and the outbound
  proxy (:mod:`registry.outbound`: a kept-alive connection that receives bytes while no
  answer is due is closed, never reused), no cookies, no proxy variables of the environment;
* :func:`answer_head`: the whole head of an answer within the read timeout after the
  connection (aiohttp bounds each silence only: a head dripped a byte at a time, or an
  endless run of interim 1xx answers, would hold the call for ever);
* :func:`coding_problem`: an answer in a content coding aiohttp does not decode is refused,
  as the lean client refuses any.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

from registry.egress import OutboundProxy
from registry.netguard import AddressPolicy
from registry.outbound import outbound_connector, outbound_middlewares
from router.forward.h1conn import H1Error

__all__ = ["agent_session", "answer_head", "coding_problem", "releasing"]

_DECODED = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd"})  # what aiohttp may inflate


def agent_session(
    limit: int,
    per_host: int,
    *,
    connect_timeout: float,
    pool_timeout: float,
    read_timeout: float,
    policy: AddressPolicy | None,
    proxy: OutboundProxy | None,
    user_agent: str,
) -> aiohttp.ClientSession:
    """A session for calls to agents (``limit`` connections in all, ``per_host`` per agent;
    0: no bound)."""
    timeout = aiohttp.ClientTimeout(
        total=None,
        connect=connect_timeout + pool_timeout,
        sock_connect=connect_timeout,
        sock_read=read_timeout,
    )
    return aiohttp.ClientSession(
        connector=outbound_connector(policy, proxy, limit=limit, limit_per_host=per_host),
        middlewares=outbound_middlewares(proxy, policy),
        timeout=timeout,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        headers={"User-Agent": user_agent},
    )


async def answer_head(
    session: aiohttp.ClientSession,
    verb: str,
    url: URL,
    body: bytes | None,
    headers: Mapping[str, str],
    *,
    waits: float,
    read_timeout: float,
) -> aiohttp.ClientResponse:
    """Send a request; its answer once the head is in, within ``waits`` (the pool wait and
    the connection) plus ``read_timeout`` seconds, else H1Error saying the head was slow."""
    scope = asyncio.timeout(waits + read_timeout)
    try:
        async with scope:
            return await session.request(
                verb, url, data=body, headers=headers, allow_redirects=False
            )
    except TimeoutError:
        if scope.expired():
            limit = waits + read_timeout
            reason = f"the head of the agent's answer was not whole within {limit:g} s"
            raise H1Error(reason) from None
        raise


def coding_problem(headers: CIMultiDictProxy[str]) -> str | None:
    """Why an answer's ``Content-Encoding`` was not decoded, if so: aiohttp inflates one
    coding it knows (gzip, deflate; br and zstd when their packages are installed)."""
    values = headers.getall("Content-Encoding", ())
    codings = [c.strip().lower() for value in values for c in value.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if len(codings) <= 1 and all(c in _DECODED for c in codings):
        return None
    shown = ", ".join(values)[:100]
    return f"the agent sent a compressed answer it was not asked for (Content-Encoding: {shown})"


def releasing(resp: aiohttp.ClientResponse) -> Callable[[bool], None]:
    """Release an aiohttp answer: its connection back to the pool once read to the end,
    else closed at once."""

    def done(finished: bool) -> None:
        if finished:
            resp.release()
        else:
            resp.close()

    return done
