"""Agent card signatures: real SDK signers, our signer against the real SDK verifier, refusals."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jwt
import pytest
import rfc8785
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
)
from a2a.utils.signing import (
    InvalidSignaturesError,
    create_agent_card_signer,
    create_signature_verifier,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS

from registry import payloads
from registry.errors import CardError, RegistryError
from registry.signatures import (
    ALLOWED_ALGS,
    KeyLookup,
    StaticKeys,
    Verification,
    clean_for_signing,
    generate_key,
    key_problem,
    payload_forms,
    public_jwks,
    sign_card,
    verify_card,
)

CARDS = Path(__file__).parents[1] / "fixtures" / "cards"
NOW = 1_800_000_000.0
ALGS = ["ES256", "RS256", "EdDSA"]


def load(name: str) -> Any:
    return json.loads((CARDS / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def keys() -> dict[str, JWK]:
    """One private key per algorithm (RSA 3072 keygen is slow: once per module)."""
    return {alg: generate_key(alg, kid=f"key-{alg.lower()}") for alg in ALGS}


def public(key: JWK, **extra: Any) -> dict[str, Any]:
    return {**json.loads(key.export_public()), **extra}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws_sign(payload: bytes, key: JWK, header: dict[str, Any]) -> dict[str, str]:
    """A card signature made by jwcrypto directly."""
    jws = JWS(payload)
    jws.add_signature(key, header["alg"], protected=json.dumps(header))
    protected, _, signature = jws.serialize(compact=True).split(".")
    return {"protected": protected, "signature": signature}


def strict_sign(card: dict[str, Any], key: JWK, **header: Any) -> dict[str, str]:
    """A signature over the strict RFC 8785 form of ``card`` minus signatures."""
    body = {k: v for k, v in card.items() if k != "signatures"}
    return jws_sign(rfc8785.dumps(body), key, {"typ": "JOSE", **header})


def card_v1(name: str = "Übersetzer — 翻訳") -> dict[str, Any]:
    """A 1.0 card using only fields the a2a-sdk 1.x model knows."""
    return {
        "name": name,
        "description": "Übersetzt Texte: Deutsch ⇄ 日本語.",
        "supportedInterfaces": [
            {"url": "https://a.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "version": "1.2.0",
        "provider": {"organization": "Beispiel — 例", "url": "https://example.com"},
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
            "extensions": [
                {
                    "uri": "https://example.com/ext/glossar",
                    "required": False,
                    "params": {"strict": False, "limit": 3, "ratio": 0.25, "empty": ""},
                }
            ],
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "securitySchemes": {
            "oauth": {
                "openIdConnectSecurityScheme": {
                    "openIdConnectUrl": "https://id.example/.well-known/openid-configuration"
                }
            }
        },
        "securityRequirements": [{"schemes": {"oauth": {"list": ["translate"]}}}],
        "skills": [
            {
                "id": "übersetzen",
                "name": "Übersetzen",
                "description": "Deutsch ⇄ 日本語 (翻訳)",
                "tags": ["übersetzung", "翻訳"],
                "examples": ["「おはよう」"],
            }
        ],
        "iconUrl": "",
    }


def sdk_card(*, with_v03_interface: bool) -> AgentCard:
    """A rich a2a-sdk 1.x card with non-ASCII text and values its canonicalization drops."""
    interfaces = [
        AgentInterface(
            url="https://a.example/a2a", protocol_binding="JSONRPC", protocol_version="1.0"
        )
    ]
    if with_v03_interface:
        interfaces.append(
            AgentInterface(
                url="https://a.example/v03", protocol_binding="JSONRPC", protocol_version="0.3"
            )
        )
    return AgentCard(
        name="Übersetzer — 翻訳",
        description="Übersetzt Texte: Deutsch ⇄ 日本語.",
        version="1.0.0",
        supported_interfaces=interfaces,
        provider=AgentProvider(organization="Beispiel — 例", url="https://example.com"),
        capabilities=AgentCapabilities(
            streaming=False,  # optional: an explicit false stays in the 1.x payload
            extensions=[
                AgentExtension(
                    uri="https://example.com/ext", required=False, params={"flag": False, "n": 2}
                )
            ],
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        security_schemes={
            "key": SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(name="X-Schlüssel", location="header")
            ),
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer")
            ),
        },
        security_requirements=[SecurityRequirement(schemes={"key": {"list": []}})],
        skills=[
            AgentSkill(
                id="übersetzen",
                name="Übersetzen",
                description="翻訳",
                tags=["übersetzung", "翻訳"],
                security_requirements=[SecurityRequirement(schemes={"bearer": {"list": ["t"]}})],
            )
        ],
    )


def sdk_sign(card: AgentCard, key: JWK, alg: str) -> AgentCard:
    signer = create_agent_card_signer(
        signing_key=jwt.PyJWK(json.loads(key.export_private())),
        protected_header={
            "alg": alg,
            "kid": key["kid"],
            "jku": "https://a.example/jwks.json",
            "typ": "JOSE",
        },
    )
    return signer(card)


def sdk_verify(card_json: dict[str, Any], key: JWK, alg: str) -> None:
    """a2a-sdk 1.3's verifier on a card parsed the way the ticket asks (ParseDict)."""
    proto = ParseDict(card_json, AgentCard(), ignore_unknown_fields=True)
    verifier = create_signature_verifier(
        key_provider=lambda kid, jku: jwt.PyJWK(public(key)), algorithms=[alg]
    )
    verifier(proto)


# --- real signers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("card_file", "jwks_file", "kid", "form", "uncovered"),
    [
        # a2a-sdk 1.3 served with 0.3 compat: url/preferredTransport/protocolVersion injected.
        (
            "signed_card_v1.json",
            "jwks_v1.json",
            "echo-key-1",
            "a2a-sdk-1.x",
            ("preferredTransport", "protocolVersion", "url"),
        ),
        # a2a-sdk 1.3 without compat: its payload is exactly the strict form.
        ("signed_card_v1_nocompat.json", "jwks_v1_nocompat.json", "echo-key-1", "rfc8785", ()),
        # a2a-sdk 0.3.26: defaults (preferredTransport, protocolVersion) left out, ASCII escapes.
        ("signed_card_v03.json", "jwks_v03.json", "echo-key-1", "a2a-sdk-0.3", ()),
        # a2a-sdk 0.3.26, non-ASCII everywhere; `security: [{"schlüssel": []}]` is erased by the
        # SDK's empty-value cleaning, and each scheme's `type` dropped as a default, so its
        # signature covers neither.
        (
            "signed_card_v03_nonascii.json",
            "jwks_v03_nonascii.json",
            "übersetzer-key-1",
            "a2a-sdk-0.3",
            ("security", "securitySchemes.bearer.type", "securitySchemes.schlüssel.type"),
        ),
    ],
)
async def test_sdk_fixtures_verify(
    card_file: str, jwks_file: str, kid: str, form: str, uncovered: tuple[str, ...]
) -> None:
    result = await verify_card(load(card_file), StaticKeys(load(jwks_file), "fixture"), now=NOW)
    assert result == Verification(
        "verified", kid=kid, key_source="fixture", payload_form=form, uncovered_fields=uncovered
    )


@pytest.mark.parametrize("alg", ALGS)
async def test_card_signed_by_sdk_1_3_verifies(keys: dict[str, JWK], alg: str) -> None:
    key = keys[alg]
    card = MessageToDict(sdk_sign(sdk_card(with_v03_interface=False), key, alg))
    assert card["name"] == "Übersetzer — 翻訳"
    result = await verify_card(card, StaticKeys([public(key)]), now=NOW)
    assert result.status == "verified", result.reason
    assert result.kid == key["kid"]
    # The SDK's cleaning erases the scope-less requirement `{"key": {}}`: not covered.
    assert result.payload_form == "a2a-sdk-1.x"
    assert result.uncovered_fields == ("securityRequirements",)


async def test_card_served_by_sdk_1_3_with_compat_fields_verifies(keys: dict[str, JWK]) -> None:
    """The 1.3 server merges a whole 0.3 rendering into the card, nested fields too."""
    key = keys["ES256"]
    served = agent_card_to_dict(sdk_sign(sdk_card(with_v03_interface=True), key, "ES256"))
    assert served["url"] == "https://a.example/v03"
    assert served["capabilities"]["extensions"][0]["required"] is False  # injected
    assert served["securitySchemes"]["key"]["type"] == "apiKey"  # injected
    result = await verify_card(served, StaticKeys([public(key)]), now=NOW)
    assert result.status == "verified", result.reason
    assert result.payload_form == "a2a-sdk-1.x"
    assert result.uncovered_fields == (
        "preferredTransport",
        "protocolVersion",
        "security",
        "securityRequirements",
        "securitySchemes.bearer.scheme",
        "securitySchemes.bearer.type",
        "securitySchemes.key.in",
        "securitySchemes.key.name",
        "securitySchemes.key.type",
        "skills[0].security",
        "url",
    )
    tampered = copy.deepcopy(served)
    tampered["securitySchemes"]["key"]["apiKeySecurityScheme"]["name"] = "X-Other"
    assert (await verify_card(tampered, StaticKeys([public(key)]), now=NOW)).status == "invalid"


@pytest.mark.parametrize("alg", ALGS)
async def test_sign_card_verifies_strictly_and_with_sdk_1_3(keys: dict[str, JWK], alg: str) -> None:
    key = keys[alg]
    signed = sign_card(card_v1(), key, jku="https://a.example/jwks.json")
    # cleaned: empty strings and false outside extension params are gone
    assert "iconUrl" not in signed
    assert "pushNotifications" not in signed["capabilities"]
    assert signed["capabilities"]["extensions"][0] == {
        "uri": "https://example.com/ext/glossar",
        "params": {"strict": False, "limit": 3, "ratio": 0.25},
    }
    header = json.loads(base64.urlsafe_b64decode(signed["signatures"][0]["protected"] + "=="))
    assert header == {
        "alg": alg,
        "jku": "https://a.example/jwks.json",
        "kid": key["kid"],
        "typ": "JOSE",
    }

    result = await verify_card(signed, StaticKeys(public_jwks([key])), now=NOW)
    assert result == Verification(
        "verified", kid=key["kid"], key_source="jwks", payload_form="rfc8785"
    )
    sdk_verify(signed, key, alg)  # raises if a2a-sdk 1.3 does not accept it


async def test_sign_card_keeps_scopeless_security_requirements(keys: dict[str, JWK]) -> None:
    """Cleaning must not erase `{"key": {"list": []}}`: it says the API key is required.

    The strict form covers it; a2a-sdk 1.3's verifier cannot, since its own canonicalization
    erases the requirement: that card does not verify there (a limit of the SDK, not ours).
    """
    key = keys["ES256"]
    card = card_v1()
    card["securityRequirements"] = [{"schemes": {"oauth": {"list": []}}}]
    signed = sign_card(card, key)
    assert signed["securityRequirements"] == [{"schemes": {"oauth": {"list": []}}}]
    result = await verify_card(signed, StaticKeys([public(key)]), now=NOW)
    assert (result.status, result.payload_form, result.uncovered_fields) == (
        "verified",
        "rfc8785",
        (),
    )
    with pytest.raises(InvalidSignaturesError):
        sdk_verify(signed, key, "ES256")
    stripped = {k: v for k, v in signed.items() if k != "securityRequirements"}
    assert (await verify_card(stripped, StaticKeys([public(key)]), now=NOW)).status == "invalid"


@pytest.mark.parametrize("alg", ALGS)
async def test_jwcrypto_strict_rfc8785_signatures_verify(keys: dict[str, JWK], alg: str) -> None:
    key = keys[alg]
    card = card_v1()
    card["signatures"] = [strict_sign(card, key, alg=alg, kid="k1")]
    result = await verify_card(card, StaticKeys([public(key, kid="k1")]), now=NOW)
    assert (result.status, result.kid, result.payload_form) == ("verified", "k1", "rfc8785")


async def test_sign_card_appends_to_existing_signatures(keys: dict[str, JWK]) -> None:
    once = sign_card(card_v1(), keys["ES256"])
    twice = sign_card(once, keys["EdDSA"], kid="second")
    assert twice["signatures"][0] == once["signatures"][0]
    assert len(twice["signatures"]) == 2
    for key, kid in ((keys["ES256"], "key-es256"), (keys["EdDSA"], "second")):
        result = await verify_card(twice, StaticKeys([public(key, kid=kid)]), now=NOW)
        assert (result.status, result.kid) == ("verified", kid)


# --- rotation, tampering, unsigned extras ---------------------------------------------------


async def test_rotated_keys_verify_with_the_trusted_kid(keys: dict[str, JWK]) -> None:
    old, new = generate_key("ES256", kid="old"), keys["ES256"]
    card = sign_card(sign_card(card_v1(), old), new)
    assert [
        json.loads(base64.urlsafe_b64decode(s["protected"] + "=="))["kid"]
        for s in card["signatures"]
    ] == ["old", "key-es256"]
    result = await verify_card(card, StaticKeys([public(new)]), now=NOW)
    assert (result.status, result.kid) == ("verified", "key-es256")
    # the old key still listed but expired: the new signature still carries the card
    resolver = StaticKeys([public(old, exp=NOW - 1), public(new)])
    assert (await verify_card(card, resolver, now=NOW)).kid == "key-es256"
    # only the old key, expired: invalid, and the reason says why
    result = await verify_card(card, StaticKeys([public(old, exp=NOW - 1)]), now=NOW)
    assert result.status == "invalid"
    assert result.kid == "old"
    assert "kid 'old'" in result.reason and "expired" in result.reason
    assert "kid 'key-es256'" in result.reason and "no key with kid" in result.reason


async def test_no_trusted_key_for_any_signature_is_untrusted(keys: dict[str, JWK]) -> None:
    card = sign_card(card_v1(), keys["ES256"])
    result = await verify_card(card, StaticKeys([public(keys["EdDSA"])]), now=NOW)
    assert result == Verification(
        "untrusted-key", kid="key-es256", reason="no key with kid 'key-es256' in jwks"
    )


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: c.__setitem__("name", "Echo Agent v2"),
        lambda c: c["skills"][0]["tags"].__setitem__(1, "tset"),
        lambda c: c["supportedInterfaces"][0].__setitem__("url", "https://evil.example/a2a"),
        lambda c: c["capabilities"].__setitem__("streaming", False),
        lambda c: c.__setitem__("supportedInterfaces", c["supportedInterfaces"][:1]),
    ],
    ids=["name", "skill-tag", "interface-url", "capability", "interface-removed"],
)
async def test_tampered_signed_field_is_invalid(tamper: Any) -> None:
    card = load("signed_card_v1.json")
    tamper(card)
    result = await verify_card(card, StaticKeys(load("jwks_v1.json")), now=NOW)
    assert result.status == "invalid"
    assert result.reason == (
        "the signature does not match the card's content (tried: rfc8785, a2a-sdk-1.x, a2a-sdk-0.3)"
    )


async def test_tampered_v03_card_is_invalid() -> None:
    for field, value in (("url", "https://evil.example/"), ("name", "Übersetzer!")):
        card = load("signed_card_v03_nonascii.json")
        card[field] = value
        result = await verify_card(card, StaticKeys(load("jwks_v03_nonascii.json")), now=NOW)
        assert result.status == "invalid", field


async def test_changing_an_uncovered_compat_field_still_verifies_but_is_flagged() -> None:
    """The truth about a2a-sdk 1.3's compat fields: anyone can change them undetected."""
    card = load("signed_card_v1.json")
    card["url"] = "https://evil.example/a2a"
    result = await verify_card(card, StaticKeys(load("jwks_v1.json")), now=NOW)
    assert result.status == "verified"
    assert "url" in result.uncovered_fields


async def test_extra_unsigned_top_level_field(keys: dict[str, JWK]) -> None:
    """The strict form covers every field, so an added one breaks it; the SDK forms model the
    SDKs' parsers, which ignore fields they do not know, so they still match and the result
    names the field as uncovered. A field an SDK knows is not ignored: still invalid.
    """
    key = keys["ES256"]
    resolver = StaticKeys([public(key)])
    signed = sign_card(card_v1(), key)

    extra = {**signed, "x-routing-hint": "prefer me"}
    result = await verify_card(extra, resolver, now=NOW)
    assert (result.status, result.payload_form, result.uncovered_fields) == (
        "verified",
        "a2a-sdk-1.x",
        ("x-routing-hint",),
    )
    known = {**signed, "documentationUrl": "https://evil.example/docs"}
    assert (await verify_card(known, resolver, now=NOW)).status == "invalid"

    v03 = {**load("signed_card_v03_nonascii.json"), "x-routing-hint": "prefer me"}
    result = await verify_card(v03, StaticKeys(load("jwks_v03_nonascii.json")), now=NOW)
    assert (result.status, result.payload_form, result.uncovered_fields) == (
        "verified",
        "a2a-sdk-0.3",
        (
            "security",
            "securitySchemes.bearer.type",
            "securitySchemes.schlüssel.type",
            "x-routing-hint",
        ),
    )

    # A strictly signed non-ASCII 0.3-shaped card: no SDK form reproduces its payload (0.3
    # escapes non-ASCII, 1.x drops `url`), so an extra field leaves nothing that matches.
    card_03 = {k: v for k, v in load("signed_card_v03_nonascii.json").items() if k != "signatures"}
    card_03["signatures"] = [strict_sign(card_03, key, alg="ES256", kid=key["kid"])]
    assert (await verify_card(card_03, resolver, now=NOW)).payload_form == "rfc8785"
    card_03["x-routing-hint"] = "prefer me"
    assert (await verify_card(card_03, resolver, now=NOW)).status == "invalid"


# --- refused headers and signatures ----------------------------------------------------------


def with_signature(card: dict[str, Any], protected: str, signature: str) -> dict[str, Any]:
    return {**card, "signatures": [{"protected": protected, "signature": signature}]}


def header_b64(header: dict[str, Any]) -> str:
    return b64(json.dumps(header).encode())


async def test_alg_none_is_invalid(keys: dict[str, JWK]) -> None:
    card = card_v1()
    for signature in ("", "AAAA"):
        forged = with_signature(card, header_b64({"alg": "none", "kid": "key-es256"}), signature)
        result = await verify_card(forged, StaticKeys([public(keys["ES256"])]), now=NOW)
        assert (result.status, result.reason) == ("invalid", "alg 'none' is not allowed")


async def test_hs256_with_the_public_key_as_secret_is_invalid(keys: dict[str, JWK]) -> None:
    rsa = keys["RS256"]
    secret = rsa.export_to_pem(private_key=False)
    card = card_v1()
    forged = strict_sign(card, JWK(kty="oct", k=b64(secret)), alg="HS256", kid=rsa["kid"])
    result = await verify_card({**card, "signatures": [forged]}, StaticKeys([public(rsa)]), now=NOW)
    assert result.status == "invalid"
    assert result.reason.startswith("alg 'HS256' is HMAC")
    assert result.kid == rsa["kid"]


async def test_symmetric_key_from_resolver_is_refused(keys: dict[str, JWK]) -> None:
    card = sign_card(card_v1(), keys["ES256"])
    oct_key = {"kty": "oct", "k": b64(b"0" * 32), "kid": "key-es256"}
    result = await verify_card(card, StaticKeys([oct_key], "seeds"), now=NOW)
    assert result.status == "invalid"
    assert result.reason == (
        "the key from seeds is refused: it is a symmetric (oct) key, "
        "and card signatures need a public key"
    )


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"alg": "ES256"}, "the protected header has no 'kid' string"),
        ({"kid": "k"}, "the protected header has no 'alg' string"),
        ({"alg": "ES999", "kid": "k"}, "alg 'ES999' is not supported"),
        (
            {"alg": "ES256", "kid": "k", "crit": ["exp"], "exp": 1},
            "the protected header marks ['exp'] critical, which this verifier does not understand",
        ),
        ({"alg": "ES256", "kid": "k", "jku": 7}, "the protected header's 'jku' is not a string"),
    ],
)
async def test_bad_protected_header_is_invalid(header: dict[str, Any], reason: str) -> None:
    card = with_signature(card_v1(), header_b64(header), "AAAA")
    result = await verify_card(card, StaticKeys([]), now=NOW)
    assert (result.status, result.reason) == ("invalid", reason)


@pytest.mark.parametrize(
    ("protected", "signature", "reason"),
    [
        ("eyJ!bGciOiJFUzI1NiJ9", "AAAA", "the protected header is not valid base64url"),
        (
            header_b64({"alg": "ES256", "kid": "k"}) + "=",
            "AAAA",
            "the protected header is not valid base64url",
        ),
        (b64(b'{"alg":"ES256",'), "AAAA", "the protected header is not a UTF-8 JSON object"),
        (b64(b'["alg"]'), "AAAA", "the protected header is not a JSON object"),
        (
            b64(b'{"alg":"ES256","kid":"a","kid":"b"}'),
            "AAAA",
            "the protected header is not a UTF-8 JSON object",
        ),
        (header_b64({"alg": "ES256", "kid": "k"}), "AA+/", "the signature is not valid base64url"),
        (header_b64({"alg": "ES256", "kid": "k"}), "AAA=", "the signature is not valid base64url"),
        (header_b64({"alg": "ES256", "kid": "k"}), "AB", "the signature is not valid base64url"),
    ],
    ids=[
        "protected-alphabet",
        "protected-padding",
        "protected-json",
        "protected-array",
        "protected-duplicate",
        "signature-alphabet",
        "signature-padding",
        "signature-bits",
    ],
)
async def test_malformed_base64url_is_invalid(protected: str, signature: str, reason: str) -> None:
    result = await verify_card(with_signature(card_v1(), protected, signature), StaticKeys([]))
    assert (result.status, result.reason) == ("invalid", reason)


@pytest.mark.parametrize(
    ("signatures", "reason"),
    [
        ("abc", "'signatures' is not a list"),
        (["abc"], "signatures[0] is not an object"),
        ([{"signature": "AAAA"}], "signatures[0] has no 'protected' string"),
        ([{"protected": "eyJ9"}], "signatures[0] has no 'signature' string"),
        (
            [{"protected": "eyJ9", "signature": "AAAA", "header": []}],
            "signatures[0].header is not an object",
        ),
        (
            [{"protected": "eyJ9", "signature": "AAAA"}] * 17,
            "the card has 17 signatures, more than the 16 checked",
        ),
    ],
)
async def test_malformed_signatures_are_invalid(signatures: Any, reason: str) -> None:
    result = await verify_card({**card_v1(), "signatures": signatures}, StaticKeys([]))
    assert (result.status, result.reason) == ("invalid", reason)


async def test_unsigned_cards() -> None:
    assert await verify_card(card_v1(), StaticKeys([])) == Verification("unsigned")
    assert (await verify_card({**card_v1(), "signatures": []}, StaticKeys([]))).status == "unsigned"
    assert (await verify_card([], StaticKeys([]))).status == "invalid"  # type: ignore[arg-type]


# --- key refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"use": "enc"}, "its use is 'enc', not 'sig'"),
        ({"use": None, "key_ops": ["encrypt"]}, "its key_ops ['encrypt'] do not include 'verify'"),
        ({"exp": NOW - 60}, "it expired at 2027-01-15T07:59:00+00:00"),
        (
            {"exp": "tomorrow"},
            "its exp 'tomorrow' is not a NumericDate (a number of seconds since 1970)",
        ),
        ({"nbf": NOW + 60}, "it is not valid before 2027-01-15T08:01:00+00:00 (nbf)"),
        ({"nbf": "now"}, "its nbf 'now' is not a NumericDate (a number of seconds since 1970)"),
        ({"iat": True}, "its iat True is not a NumericDate (a number of seconds since 1970)"),
        (
            {"exp": [NOW + 60]},
            "its exp [1800000060.0] is not a NumericDate (a number of seconds since 1970)",
        ),
        ({"alg": "ES384"}, "it is for 'ES384', not 'ES256'"),
    ],
)
async def test_refused_verification_keys(keys: dict[str, JWK], extra: dict, reason: str) -> None:
    key = keys["ES256"]
    card = sign_card(card_v1(), key)
    jwk = {k: v for k, v in {**public(key), **extra}.items() if v is not None}
    result = await verify_card(card, StaticKeys([jwk], "api"), now=NOW)
    assert result == Verification(
        "invalid", kid="key-es256", reason=f"the key from api is refused: {reason}"
    )
    assert key_problem(jwk, "ES256", now=NOW) == reason


async def test_key_exp_in_the_future_is_fine(keys: dict[str, JWK]) -> None:
    key = keys["ES256"]
    card = sign_card(card_v1(), key)
    resolver = StaticKeys([public(key, exp=NOW + 60, key_ops=["verify"])])
    assert (await verify_card(card, resolver, now=NOW)).status == "verified"
    assert (await verify_card(card, resolver, now=NOW + 61)).status == "invalid"


async def test_key_nbf_and_iat_bound_the_lifetime(keys: dict[str, JWK]) -> None:
    """A key is usable from its nbf (inclusive) until its exp (exclusive)."""
    key = keys["ES256"]
    card = sign_card(card_v1(), key)
    resolver = StaticKeys([public(key, nbf=NOW, exp=NOW + 60, iat=NOW - 10)])
    assert (await verify_card(card, resolver, now=NOW - 1)).status == "invalid"
    assert (await verify_card(card, resolver, now=NOW)).status == "verified"
    assert (await verify_card(card, resolver, now=NOW + 59.5)).status == "verified"
    assert (await verify_card(card, resolver, now=NOW + 60)).status == "invalid"
    assert key_problem(public(key, nbf=float("inf")), "ES256", now=NOW) == (
        "its nbf inf is not a NumericDate (a number of seconds since 1970)"
    )
    assert key_problem(public(key, nbf=10**30), "ES256", now=NOW) == (
        f"it is not valid before nbf {10**30} (nbf)"
    )


async def test_wrong_curve_is_refused(keys: dict[str, JWK]) -> None:
    card = sign_card(card_v1(), keys["ES256"])
    p384 = generate_key("ES384", kid="key-es256")
    jwk = {k: v for k, v in public(p384).items() if k != "alg"}
    result = await verify_card(card, StaticKeys([jwk]), now=NOW)
    assert result.status == "invalid"
    assert result.reason == (
        "the key from jwks is refused: ES256 needs an EC P-256 key, not an EC P-384 key"
    )


async def test_rsa_1024_is_refused() -> None:
    small = JWK.generate(kty="RSA", size=1024, kid="small")
    card = card_v1()
    card["signatures"] = [strict_sign(card, small, alg="RS256", kid="small")]
    result = await verify_card(card, StaticKeys([public(small)]), now=NOW)
    assert result.status == "invalid"
    assert result.reason == (
        "the key from jwks is refused: its RSA modulus has 1024 bits, fewer than the 2048 required"
    )
    with pytest.raises(RegistryError) as err:
        sign_card(card_v1(), small)
    assert err.value.code == "bad_key"


async def test_one_refused_candidate_does_not_hide_a_good_one(keys: dict[str, JWK]) -> None:
    key = keys["ES256"]
    card = sign_card(card_v1(), key)
    resolver = StaticKeys([public(key, use="enc"), public(key)])
    assert (await verify_card(card, resolver, now=NOW)).status == "verified"


def test_key_problem_fits_alg_and_key_type(keys: dict[str, JWK]) -> None:
    assert key_problem(keys["EdDSA"], "EdDSA") is None
    assert key_problem(keys["RS256"], "PS256") == "it is for 'RS256', not 'PS256'"
    rsa = {k: v for k, v in public(keys["RS256"]).items() if k != "alg"}
    assert key_problem(rsa, "PS256") is None
    assert key_problem(rsa, "ES256") == "ES256 needs an EC P-256 key, not a 3072-bit RSA key"
    x25519 = json.loads(JWK.generate(kty="OKP", crv="X25519").export_public())
    assert (
        key_problem(x25519, "EdDSA")
        == "EdDSA needs an OKP Ed25519 or Ed448 key, not an OKP X25519 key"
    )
    assert key_problem({"kty": "EC"}, "ES256").startswith("it is not a valid JWK")
    assert "HS256" not in ALLOWED_ALGS and "none" not in ALLOWED_ALGS


# --- resolvers -------------------------------------------------------------------------------


class Resolver:
    def __init__(self, lookup: KeyLookup | None = None, error: Exception | None = None) -> None:
        self.lookup, self.error = lookup, error
        self.calls: list[tuple[str, str | None]] = []

    async def keys_for(self, kid: str, jku: str | None) -> KeyLookup:
        self.calls.append((kid, jku))
        if self.error:
            raise self.error
        assert self.lookup is not None
        return self.lookup


async def test_resolver_problem_and_failure(keys: dict[str, JWK]) -> None:
    card = sign_card(card_v1(), keys["ES256"], jku="https://x.example/jwks.json")
    problem = "jku https://x.example/jwks.json is not on SWITCHBOARD_TRUSTED_JKU"
    resolver = Resolver(KeyLookup(keys=[], problem=problem))
    assert await verify_card(card, resolver) == Verification(
        "untrusted-key", kid="key-es256", reason=problem
    )
    assert resolver.calls == [("key-es256", "https://x.example/jwks.json")]

    failing = Resolver(error=RuntimeError("connection reset"))
    result = await verify_card(card, failing)
    assert (result.status, result.reason) == (
        "untrusted-key",
        "looking up the key failed (connection reset)",
    )

    found = Resolver(KeyLookup(keys=[(keys["ES256"], "trust store: seeds")]))
    assert (await verify_card(card, found)).key_source == "trust store: seeds"


async def test_static_keys_match_by_thumbprint_and_refuse_garbage(keys: dict[str, JWK]) -> None:
    bare = {k: v for k, v in public(keys["ES256"]).items() if k != "kid"}
    card = sign_card(card_v1(), keys["ES256"], kid=keys["ES256"].thumbprint())
    result = await verify_card(card, StaticKeys({"keys": [bare]}))
    assert result.status == "verified"
    with pytest.raises(RegistryError) as err:
        StaticKeys({"keys": [{"kty": "EC", "crv": "P-256"}]}, "card.jwks")
    assert err.value.code == "bad_key"
    assert err.value.message.startswith("card.jwks: key 0 is not a valid JWK")


# --- payload forms ---------------------------------------------------------------------------


def test_payload_forms_order_and_duplicates() -> None:
    v1 = load("signed_card_v1.json")
    assert [name for name, _ in payload_forms(v1)] == ["rfc8785", "a2a-sdk-1.x", "a2a-sdk-0.3"]
    nocompat = load("signed_card_v1_nocompat.json")  # 1.x form == strict form: skipped
    assert [name for name, _ in payload_forms(nocompat)] == ["rfc8785", "a2a-sdk-0.3"]
    v03 = dict(payload_forms(load("signed_card_v03_nonascii.json")))
    assert b"\\u00dc" in v03["a2a-sdk-0.3"]  # ASCII escapes, like json.dumps
    assert "Ü".encode() in v03["rfc8785"]
    assert b'"type"' not in v03["a2a-sdk-0.3"] and b"preferredTransport" not in v03["a2a-sdk-0.3"]


def test_payload_forms_without_a_canonical_form() -> None:
    card = card_v1()
    card["capabilities"]["extensions"][0]["params"]["big"] = 2**60  # beyond JCS integers
    names = [name for name, _ in payload_forms(card)]
    assert names == ["a2a-sdk-1.x", "a2a-sdk-0.3"]  # a Struct holds it as a double
    card["name"] = "lone \ud800 surrogate"
    assert [name for name, _ in payload_forms(card)] == ["a2a-sdk-0.3"]


async def test_card_without_any_payload_form_is_invalid(keys: dict[str, JWK]) -> None:
    card = sign_card(card_v1(), keys["ES256"])
    card["name"] = "lone \ud800 surrogate"  # no JCS form (strict, 1.x)
    deep: Any = "x"
    for _ in range(250):
        deep = [deep]
    card["capabilities"]["extensions"][0]["params"]["deep"] = deep  # too deep for the SDK forms
    assert payload_forms(card) == []
    result = await verify_card(card, StaticKeys([public(keys["ES256"])]), now=NOW)
    assert (result.status, result.reason) == ("invalid", "the card has no canonical form to verify")


# --- signing ---------------------------------------------------------------------------------


def test_clean_for_signing() -> None:
    card = {
        "name": "n",
        "description": "",
        "iconUrl": None,
        "capabilities": {
            "streaming": False,
            "extensions": [
                {"uri": "u", "required": False, "params": {"a": False, "b": "", "c": {"d": []}}}
            ],
        },
        "skills": [{"id": "s", "tags": [], "securityRequirements": [{"schemes": {"k": {}}}]}],
        "security": [{"k": []}],
        "securityRequirements": [],
        "provider": {"url": ""},
    }
    assert clean_for_signing(card) == {
        "name": "n",
        "capabilities": {"extensions": [{"uri": "u", "params": {"a": False}}]},
        "skills": [{"id": "s", "securityRequirements": [{"schemes": {"k": {}}}]}],
        "security": [{"k": []}],
    }


def test_sign_card_refuses_unusable_keys(keys: dict[str, JWK]) -> None:
    cases = [
        JWK(**public(keys["ES256"])),  # no private part
        JWK.generate(kty="oct", size=256),
        JWK.generate(kty="EC", crv="P-256", use="enc"),
        JWK.generate(kty="OKP", crv="X25519"),
    ]
    for key in cases:
        with pytest.raises(RegistryError) as err:
            sign_card(card_v1(), key)
        assert err.value.code == "bad_key", key
    with pytest.raises(RegistryError):
        sign_card(card_v1(), keys["ES256"], alg="RS256")
    with pytest.raises(CardError):
        sign_card({**card_v1(), "name": "\ud800"}, keys["ES256"])


def test_generate_key_and_public_jwks(keys: dict[str, JWK]) -> None:
    key = generate_key()
    assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig")
    assert key["kid"] == key.thumbprint()
    assert keys["RS256"]["kty"] == "RSA" and key_problem(keys["RS256"], "RS256") is None
    assert len(base64.urlsafe_b64decode(keys["RS256"]["n"] + "==")) * 8 == 3072
    assert keys["EdDSA"]["crv"] == "Ed25519"
    jwks = public_jwks(keys.values())
    assert [k["kid"] for k in jwks["keys"]] == ["key-es256", "key-rs256", "key-eddsa"]
    assert all("d" not in k and "p" not in k for k in jwks["keys"])
    with pytest.raises(RegistryError):
        generate_key("HS256")


def test_verification_to_api() -> None:
    result = Verification(
        "verified", kid="k", key_source="s", payload_form="rfc8785", uncovered_fields=("url",)
    )
    assert result.to_api() == {
        "status": "verified",
        "kid": "k",
        "reason": None,
        "key_source": "s",
        "payload_form": "rfc8785",
        "uncovered_fields": ["url"],
    }


async def test_the_other_payload_forms_are_built_only_when_the_strict_one_fails(
    keys: dict[str, JWK], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    for name in ("_sdk_form", "_v03_form"):
        original = getattr(payloads, name)

        def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
            built.append(_name)
            return _original(*args)

        monkeypatch.setattr(payloads, name, counted)
    key = keys["ES256"]
    card = card_v1()
    resolver = StaticKeys([public(key)])
    signed, tampered = sign_card(card, key), sign_card(card, key)
    tampered["description"] = "changed after signing"
    built.clear()  # signing builds them (it checks its own signature)
    result = await verify_card(signed, resolver, now=NOW)
    assert result.status == "verified" and result.payload_form == "rfc8785"
    assert built == []  # verified by the strict form: the others never built

    result = await verify_card(tampered, resolver, now=NOW)
    assert result.status == "invalid" and "tried: rfc8785" in (result.reason or "")
    assert built  # a mismatch tries (so builds) the other forms
