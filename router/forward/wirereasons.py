"""What went wrong on the wire to an agent, in one line: the ``reason`` of -32052 and -32053
errors (no traceback, no exception repr). Raised by aiohttp's client, the lean client
(:mod:`router.forward.h1client`), the outbound proxy (:mod:`registry.egress`) or the address
guard."""

from __future__ import annotations

import errno as errno_mod
import os

import aiohttp
from aiohttp.http_exceptions import ContentEncodingError

from registry.egress import ProxyError
from registry.errors import RegistryError
from router.forward.h1conn import H1Error

__all__ = ["os_reason", "wire_reason"]


def wire_reason(
    exc: BaseException, *, connect_timeout: float, pool_timeout: float, read_timeout: float
) -> str:
    """The reason line for ``exc`` (the timeouts: the client's, for the timeout reasons)."""
    if isinstance(exc, RegistryError):
        return exc.message
    if isinstance(exc, H1Error | ProxyError):
        return exc.reason
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return f"cannot connect to the outbound proxy: {os_reason(exc.os_error)}"
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"the outbound proxy refused the tunnel: HTTP {exc.status} {_line(exc.message)}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return (
            f"timed out connecting (connect timeout {connect_timeout:g} s, plus up to"
            f" {pool_timeout:g} s waiting for a free connection to the agent)"
        )
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return f"no data from the agent for {read_timeout:g} s"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "TLS certificate verification failed"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve {exc.host}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {exc.host}:{exc.port}: {os_reason(exc.os_error)}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the agent closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError):
        if isinstance(exc.__cause__, ContentEncodingError):
            return f"the agent's compressed answer cannot be decoded ({_coding(exc.__cause__)})"
        return "the connection closed before the answer was complete"
    if isinstance(exc, aiohttp.ClientResponseError):
        message = _line(exc.message)
        if message.lower().startswith(_UNDECODED):
            coding = message[len(_UNDECODED) :].split(". ", 1)[0].strip()
            return f"the agent sent a compressed answer it was not asked for ({coding})"
        return f"malformed HTTP answer ({message})"
    if isinstance(exc, ConnectionResetError):
        return "the connection was reset"
    if isinstance(exc, OSError):
        return os_reason(exc)
    return f"connection failed ({type(exc).__name__})"


_UNDECODED = "can not decode content-encoding:"


def _line(text: object) -> str:
    """aiohttp's message in one line (its parser's show the bytes on more), at most 200
    characters."""
    return " ".join(str(text).split())[:200]


def _coding(exc: ContentEncodingError) -> str:
    return _line(exc.message).removeprefix("Can not decode content-encoding: ") or "unknown"


def os_reason(exc: OSError | None) -> str:
    """An OS error's text, lowercased ("connection refused")."""
    if exc is None:
        return "connection failed"
    if exc.errno in (errno_mod.ECONNREFUSED,):
        return "connection refused"
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return "connection failed"
