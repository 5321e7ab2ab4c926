"""The security a card served by the router declares, per client-auth mode and version, and
that both a2a-sdk versions read it."""

from __future__ import annotations

import pytest
from a2a.client.card_resolver import parse_agent_card

from router.cardsecurity import with_security
from tests.support.helpers import make_settings


def _card() -> dict[str, object]:
    return {
        "name": "Switchboard",
        "capabilities": {"streaming": True},
        "securitySchemes": {"agent": {"type": "http", "scheme": "basic"}},
        "security": [{"agent": []}],
    }


def test_no_client_auth_declares_nothing() -> None:
    card = _card()
    with_security(card, make_settings("sqlite://"), "1.0")
    assert card == _card()


@pytest.mark.parametrize("discovery", [True, False])
def test_each_version_gets_its_shape(discovery: bool) -> None:
    settings = make_settings(
        "sqlite://",
        client_auth="api-key,jwt",
        jwt_issuer="https://idp.example/realms/acme",
        jwt_jwks_url=None if discovery else "https://idp.example/jwks",
    )
    v1 = _card()
    with_security(v1, settings, "1.0")
    assert v1["securitySchemes"]["apiKey"] == {
        "apiKeySecurityScheme": {
            "location": "header",
            "name": "X-API-Key",
            "description": "A Switchboard API key (also accepted as Authorization: Bearer).",
        }
    }
    assert v1["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert ("oidc" in v1["securitySchemes"]) is discovery
    assert v1["securityRequirements"] == [
        {"schemes": {"apiKey": {"list": []}}},
        {"schemes": {"bearer": {"list": []}}},
    ]
    assert v1["capabilities"] == {"streaming": True, "extendedAgentCard": True}
    assert "security" not in v1 and "supportsAuthenticatedExtendedCard" not in v1

    v03 = _card()
    with_security(v03, settings, None)
    assert v03["securitySchemes"]["apiKey"]["in"] == "header"
    assert v03["security"] == [{"apiKey": []}, {"bearer": []}]
    assert v03["supportsAuthenticatedExtendedCard"] is True

    # the 1.x SDK reads the card served without a version header (the 0.3 shape) as 1.0
    parsed = parse_agent_card({**v03, "url": "http://x/", "version": "1"})
    assert parsed.security_schemes["apiKey"].api_key_security_scheme.name == "X-API-Key"
    assert parsed.capabilities.extended_agent_card
