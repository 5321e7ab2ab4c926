"""Which client headers reach an agent, and the extensions an agent's answer names.

Forwarding is an allowlist (:data:`FORWARDED_HEADERS`, the extensions headers); everything
else, notably ``Authorization``, ``Cookie``, ``Proxy-Authorization``, ``Host``,
``Content-Length`` and the hop-by-hop headers, stays with the router. The request's id
(``X-Request-ID``, :mod:`router.observe.requestid`) is sent along. The client's
``Authorization`` is kept apart on the result (:attr:`ForwardedHeaders.client_authorization`,
not a header) for the one case that may use it: an agent whose outbound credential has
``forward_client_auth`` (see :mod:`router.forward.credentials`).
"""

from __future__ import annotations

from collections.abc import Mapping

from router.observe.requestid import REQUEST_ID_HEADER, current_request_id
from router.protocol.versions import Version

__all__ = [
    "CLIENT_HEADERS",
    "EXTENSIONS_HEADER",
    "FORWARDED_HEADERS",
    "FRAMING_HEADERS",
    "ForwardedHeaders",
    "forward_headers",
    "reply_extensions",
]

#: The extensions header as each protocol version spells it.
EXTENSIONS_HEADER: dict[Version, str] = {"1.0": "A2A-Extensions", "0.3": "X-A2A-Extensions"}
_EXTENSION_NAMES = frozenset({"a2a-extensions", "x-a2a-extensions"})

#: Client headers passed to agents besides the extensions header (an allowlist: everything
#: else, notably Authorization, Cookie, Proxy-Authorization, Host, Content-Length and the
#: hop-by-hop headers, stays with the router).
FORWARDED_HEADERS: dict[str, str] = {
    "traceparent": "traceparent",
    "tracestate": "tracestate",
    "accept-language": "Accept-Language",
}

#: Every client header :func:`forward_headers` reads (lower case): what a transport hands on.
CLIENT_HEADERS = frozenset({*FORWARDED_HEADERS, *_EXTENSION_NAMES, "connection", "authorization"})


class ForwardedHeaders(dict[str, str]):
    """The headers to send to an agent. The client's ``Authorization`` is not one of them: it
    is kept in :attr:`client_authorization`, which only :class:`~router.forward.upstream.
    Upstream` reads, and sends only to an agent configured with ``forward_client_auth``. A
    copy (``dict(headers)``) drops it: what is not passed on as this type is never forwarded.
    """

    client_authorization: str | None = None


# Headers Upstream always decides itself, whatever the caller passes (Authorization and
# Proxy-Authorization too: only an agent's outbound credential sets them).
FRAMING_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "host",
        "content-length",
        "content-type",
        "accept",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "a2a-version",
    }
)


def forward_headers(incoming: Mapping[str, str], target_version: Version) -> ForwardedHeaders:
    """The client's headers to send to an agent of ``target_version``.

    ``A2A-Version: 1.0`` for 1.0 agents, none for 0.3 agents. ``A2A-Extensions`` and
    ``X-A2A-Extensions`` (several headers, comma lists) are merged, deduplicated and sent under
    the target's spelling. Of the rest only :data:`FORWARDED_HEADERS` pass (and not when the
    client's ``Connection`` header names them as hop-by-hop). ``Authorization`` is never one of
    the headers: the first one is kept apart in ``client_authorization``.
    """
    hop_by_hop: set[str] = set()
    for name, value in incoming.items():
        if name.lower() == "connection":
            hop_by_hop.update(t.strip().lower() for t in value.split(",") if t.strip())
    out = ForwardedHeaders()
    extensions: list[str] = []
    for name, value in incoming.items():
        lname = name.lower()
        if lname in _EXTENSION_NAMES:
            for token in value.split(","):
                uri = token.strip()
                if uri and uri not in extensions:
                    extensions.append(uri)
        elif lname == "authorization":
            if out.client_authorization is None and "authorization" not in hop_by_hop:
                out.client_authorization = value
        elif lname in FORWARDED_HEADERS and lname not in hop_by_hop:
            key = FORWARDED_HEADERS[lname]
            out[key] = f"{out[key]}, {value}" if key in out else value
    if extensions:
        out[EXTENSIONS_HEADER[target_version]] = ", ".join(extensions)
    if target_version == "1.0":
        out["A2A-Version"] = "1.0"
    if (request_id := current_request_id()) is not None:  # the client's request, to the agent
        out[REQUEST_ID_HEADER] = request_id
    return out


def reply_extensions(headers: Mapping[str, str]) -> list[str]:
    """The extension URIs of an agent's ``A2A-Extensions``/``X-A2A-Extensions`` response
    headers (several headers, comma lists), deduplicated in order. A token that is not a URI's
    visible ASCII (a control character, a space, non-ASCII) is dropped: the router would
    write it into its own answer's headers."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() in _EXTENSION_NAMES:
            for token in value.split(","):
                uri = token.strip()
                if uri and uri not in found and _visible(uri):
                    found.append(uri)
    return found


def _visible(token: str) -> bool:
    return token.isascii() and token.isprintable() and " " not in token
