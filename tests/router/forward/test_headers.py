"""Which client headers reach an agent: the allowlist, the extensions headers, and the client's
Authorization, which is never a forwarded header (kept apart for forward_client_auth only)."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from router.forward.headers import (
    CLIENT_HEADERS,
    ForwardedHeaders,
    forward_headers,
    reply_extensions,
)
from router.forward.upstream import forward_headers as reexported


@pytest.mark.parametrize(
    ("incoming", "version", "expected"),
    [
        ({}, "0.3", {}),
        ({}, "1.0", {"A2A-Version": "1.0"}),
        ({"A2A-Version": "1.0"}, "0.3", {}),
        ({"A2A-Version": "0.3"}, "1.0", {"A2A-Version": "1.0"}),
        (
            {"X-A2A-Extensions": "urn:a, urn:b"},
            "1.0",
            {"A2A-Version": "1.0", "A2A-Extensions": "urn:a, urn:b"},
        ),
        ({"A2A-Extensions": "urn:a"}, "0.3", {"X-A2A-Extensions": "urn:a"}),
        (
            {"a2a-extensions": "urn:a,urn:b", "x-a2a-extensions": "urn:b, urn:c"},
            "0.3",
            {"X-A2A-Extensions": "urn:a, urn:b, urn:c"},
        ),
        ({"A2A-Extensions": " , "}, "0.3", {}),
        (
            {
                "Authorization": "Bearer secret",
                "Proxy-Authorization": "Basic x",
                "Cookie": "session=1",
                "Host": "router.example",
                "Content-Length": "12",
                "Content-Type": "application/json",
                "Connection": "keep-alive",
                "Keep-Alive": "timeout=5",
                "Transfer-Encoding": "chunked",
                "TE": "trailers",
                "Upgrade": "h2c",
                "X-Api-Key": "k",
                "traceparent": "00-abc-def-01",
                "Accept-Language": "de",
            },
            "0.3",
            {"traceparent": "00-abc-def-01", "Accept-Language": "de"},
        ),
        ({"Connection": "close, traceparent", "traceparent": "00-abc-def-01"}, "0.3", {}),
    ],
)
def test_forward_headers(incoming: dict[str, str], version: str, expected: dict[str, str]) -> None:
    assert forward_headers(incoming, version) == expected  # type: ignore[arg-type]


def test_forward_headers_repeated_headers() -> None:
    incoming = CIMultiDict(
        [("A2A-Extensions", "urn:a"), ("A2A-Extensions", "urn:b"), ("Cookie", "x")]
    )
    assert forward_headers(incoming, "1.0") == {
        "A2A-Extensions": "urn:a, urn:b",
        "A2A-Version": "1.0",
    }


# --- the client's Authorization ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["Authorization", "authorization", "AUTHORIZATION"])
def test_authorization_is_never_a_forwarded_header(name: str) -> None:
    out = forward_headers({name: "Bearer client-token", "traceparent": "00-a-b-01"}, "1.0")
    assert out == {"traceparent": "00-a-b-01", "A2A-Version": "1.0"}
    assert "Bearer client-token" not in repr(out)
    assert out.client_authorization == "Bearer client-token"  # kept apart, not a header


def test_authorization_kept_apart_is_lost_in_a_copy() -> None:
    out = forward_headers({"Authorization": "Bearer client-token"}, "0.3")
    assert isinstance(out, ForwardedHeaders) and out == {}
    assert getattr(dict(out), "client_authorization", None) is None
    assert forward_headers({}, "0.3").client_authorization is None


def test_the_first_authorization_of_several_and_hop_by_hop() -> None:
    incoming = CIMultiDict([("Authorization", "Bearer one"), ("Authorization", "Bearer two")])
    assert forward_headers(incoming, "0.3").client_authorization == "Bearer one"
    hop = {"Connection": "authorization", "Authorization": "Bearer one"}
    assert forward_headers(hop, "0.3").client_authorization is None


def test_a_transport_hands_on_authorization_and_upstream_reexports() -> None:
    assert "authorization" in CLIENT_HEADERS
    assert reexported is forward_headers


def test_reply_extensions() -> None:
    headers = CIMultiDict(
        [("A2A-Extensions", "urn:a, urn:b"), ("X-A2A-Extensions", "urn:b,urn:c"), ("X", "y")]
    )
    assert reply_extensions(headers) == ["urn:a", "urn:b", "urn:c"]
