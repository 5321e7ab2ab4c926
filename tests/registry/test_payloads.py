"""A verified card is read from the content its signature covers, and from nothing else.

``Verification.signed_content`` is what the registry parses for a verified card. Whatever a
presenter adds to, changes in or removes from a card's uncovered parts must either break the
signature or leave ``parse_card(signed_content)`` exactly as it was.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS

import registry.signatures as signatures_module
from registry.cards import parse_card
from registry.errors import CardError
from registry.payloads import card_forms, covered_content
from registry.signatures import StaticKeys, Verification, generate_key, sign_card, verify_card
from tests.support.helpers import FIXTURES, card_v03, card_v1

NOW = 1_800_000_000.0
EVIL_URL = "https://evil.example/a2a"
EVIL_INTERFACE = {"url": EVIL_URL, "protocolBinding": "GRPC", "protocolVersion": "1.0"}

FIXTURES_SIGNED = [
    ("signed_card_v1.json", "jwks_v1.json"),
    ("signed_card_v1_nocompat.json", "jwks_v1_nocompat.json"),
    ("signed_card_v03.json", "jwks_v03.json"),
    ("signed_card_v03_nonascii.json", "jwks_v03_nonascii.json"),
]

#: Values every path of a card is replaced with, one at a time.
REPLACEMENTS: list[Any] = [
    EVIL_URL,
    "",
    [],
    {},
    True,
    7,
    ["image/evil"],
    [EVIL_INTERFACE],
    None,
]

#: Members added to every object of a card, one at a time: names the card readers, the SDKs
#: or a snake_case-tolerant parser could read.
ADDED_MEMBERS: dict[str, Any] = {
    "supportedInterfaces": [EVIL_INTERFACE],
    "supported_interfaces": [EVIL_INTERFACE],
    "additionalInterfaces": [{"url": EVIL_URL, "transport": "HTTP+JSON"}],
    "additional_interfaces": [{"url": EVIL_URL, "transport": "HTTP+JSON"}],
    "protocolVersions": ["0.2"],
    "protocol_versions": ["0.2"],
    "protocolVersion": "1.0",
    "protocol_version": "0.2",
    "preferredTransport": "GRPC",
    "preferred_transport": "GRPC",
    "url": EVIL_URL,
    "authentication": {"schemes": ["none"]},
    "supportsAuthenticatedExtendedCard": True,
    "stateTransitionHistory": True,
    "state_transition_history": True,
    "extendedAgentCard": True,
    "extended_agent_card": True,
    "pushNotifications": False,
    "protocolBinding": "GRPC",
    "protocol_binding": "GRPC",
    "tenant": "evil",
    "transport": "GRPC",
    "inputModes": [],
    "input_modes": ["image/evil"],
    "outputModes": [],
    "output_modes": ["image/evil"],
    "defaultInputModes": ["image/evil"],
    "default_input_modes": ["image/evil"],
    "type": "openIdConnect",
    "documentation_url": EVIL_URL,
    "provider": {"organization": "Evil"},
}


# --- cards ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def key() -> JWK:
    return generate_key("ES256", kid="content-key")


def load(name: str) -> Any:
    return json.loads((FIXTURES / "cards" / name).read_text(encoding="utf-8"))


def form_signed(card: dict[str, Any], form_name: str, key: JWK) -> dict[str, Any]:
    """``card`` with a signature over its ``form_name`` payload, as that producer signs."""
    payloads = {form.name: form.payload for form in card_forms(card)}
    assert form_name in payloads, f"{form_name} duplicates a stricter form for this card"
    jws = JWS(payloads[form_name])
    jws.add_signature(key, "ES256", protected=json.dumps({"alg": "ES256", "kid": key["kid"]}))
    protected, _, signature = jws.serialize(compact=True).split(".")
    return {**card, "signatures": [{"protected": protected, "signature": signature}]}


def rich_v03_card() -> dict[str, Any]:
    """A 0.3 card as a2a-sdk 0.3 serves it: defaults present, scheme types, erased values."""
    return card_v03(
        "https://i.example",
        additionalInterfaces=[{"url": "https://i.example/rest", "transport": "HTTP+JSON"}],
        supportsAuthenticatedExtendedCard=True,
        provider={"organization": "Example", "url": "https://example.com"},
        capabilities={
            "streaming": True,
            "stateTransitionHistory": True,
            "extensions": [{"uri": "https://x.example/e", "required": False, "params": {"n": 2}}],
        },
        securitySchemes={
            "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
            "mtls": {"type": "mutualTLS", "description": "client certificate"},
            "oauth": {
                "type": "oauth2",
                "flows": {"clientCredentials": {"tokenUrl": "https://id.example/t", "scopes": {}}},
            },
        },
        security=[{"key": []}],
        skills=[
            {
                "id": "extract",
                "name": "Extract",
                "description": "d",
                "tags": ["t"],
                "inputModes": ["application/pdf"],
                "security": [{"mtls": []}],
            }
        ],
    )


def rich_v1_card() -> dict[str, Any]:
    """A 1.0 card as a2a-sdk 1.x serves it, 0.3 compat fields included."""
    return card_v1(
        "https://w.example",
        url="https://w.example/a2a",
        preferredTransport="JSONRPC",
        protocolVersion="0.3",
        provider={"organization": "Example", "url": "https://example.com"},
        capabilities={
            "streaming": True,
            "extendedAgentCard": True,
            "extensions": [
                {"uri": "https://x.example/e", "required": False, "params": {"n": 2, "r": 0.5}}
            ],
        },
        securitySchemes={
            "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
        },
        securityRequirements=[{"schemes": {"key": {"list": []}}}],
    )


def signed_cases(key: JWK) -> list[tuple[str, dict[str, Any], StaticKeys]]:
    """Cards by every producer: the real SDK fixtures, ``sign_card``, and the SDK forms."""
    own = StaticKeys([json.loads(key.export_public())], "test")
    bare = {"name": "Bare", "url": "https://b.example/rpc", "skills": [{"id": "s", "name": "S"}]}
    v01 = {
        "name": "Old",
        "url": "https://o.example/",
        "authentication": {"schemes": ["bearer"]},
        "defaultInputModes": ["text"],
        "skills": [{"id": "s", "name": "S", "inputModes": ["file"]}],
    }
    draft = card_v1("https://d.example", protocolVersions=["1.0"])
    draft["supportedInterfaces"] = [
        {"url": "https://d.example/a2a"},
        {"url": "d.example:50051", "protocolBinding": "gRPC", "tenant": "t1"},
    ]
    cases = [
        (name, load(name), StaticKeys(load(jwks), "fixture")) for name, jwks in FIXTURES_SIGNED
    ]
    cases += [
        ("sign_card 1.0", sign_card(card_v1("https://w.example"), key), own),
        ("sign_card 1.0 draft", sign_card(draft, key), own),
        ("sign_card rich 1.0", sign_card(rich_v1_card(), key), own),
        ("sign_card 0.3", sign_card(rich_v03_card(), key), own),
        ("sign_card bare url", sign_card(bare, key), own),
        ("sign_card 0.1", sign_card(v01, key), own),
        ("a2a-sdk-0.3 form", form_signed(rich_v03_card(), "a2a-sdk-0.3", key), own),
        ("a2a-sdk-1.x form", form_signed(rich_v1_card(), "a2a-sdk-1.x", key), own),
    ]
    return cases


CASE_NAMES = [name for name, _ in FIXTURES_SIGNED] + [
    "sign_card 1.0",
    "sign_card 1.0 draft",
    "sign_card rich 1.0",
    "sign_card 0.3",
    "sign_card bare url",
    "sign_card 0.1",
    "a2a-sdk-0.3 form",
    "a2a-sdk-1.x form",
]


def case(key: JWK, name: str) -> tuple[dict[str, Any], StaticKeys]:
    for label, card, resolver in signed_cases(key):
        if label == name:
            return card, resolver
    raise KeyError(name)


# --- helpers -----------------------------------------------------------------------------------


def reading(content: Any) -> Any:
    """What the registry makes of ``content``: the normalized card, or the refusal."""
    try:
        return parse_card(content).model_dump()
    except CardError as exc:
        return ("refused", str(exc), exc.details)


Path = tuple[str | int, ...]


def all_paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every path in ``value`` (``signatures`` excepted), containers before their contents."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for member, item in value.items():
            if prefix or member != "signatures":
                yield from all_paths(item, (*prefix, member))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from all_paths(item, (*prefix, index))


def objects(value: Any) -> Iterator[Path]:
    """Paths of every object in ``value`` (the card itself is ``()``), ``signatures`` excepted."""
    yield ()
    for path in all_paths(value):
        if isinstance(get(value, path), dict):
            yield path


def get(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


def replaced(card: dict[str, Any], path: Path, new: Any) -> dict[str, Any]:
    out = copy.deepcopy(card)
    get(out, path[:-1])[path[-1]] = new
    return out


def deleted(card: dict[str, Any], path: Path) -> dict[str, Any]:
    out = copy.deepcopy(card)
    del get(out, path[:-1])[path[-1]]
    return out


def parse_path(text: str) -> Path:
    """``skills[0].inputModes`` → ``("skills", 0, "inputModes")``."""
    return tuple(
        int(index) if index else member
        for index, member in re.findall(r"\[(\d+)\]|([^.\[\]]+)", text)
    )


def has_path(value: Any, path: Path) -> bool:
    try:
        get(value, path)
    except (KeyError, IndexError, TypeError):
        return False
    return True


async def check_unchanged(
    mutated: dict[str, Any], resolver: StaticKeys, base: Verification, label: str
) -> bool:
    """The mutated card is ``invalid``, or verified with the same content; True if verified."""
    result = await verify_card(mutated, resolver, now=NOW)
    assert result.status in ("verified", "invalid"), (label, result)
    if result.status == "invalid":
        return False
    assert result.signed_content == base.signed_content, label
    assert reading(result.signed_content) == reading(base.signed_content), label
    return True


# --- the property ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASE_NAMES)
async def test_base_cards_verify_and_read(key: JWK, name: str) -> None:
    card, resolver = case(key, name)
    result = await verify_card(card, resolver, now=NOW)
    assert result.status == "verified", result.reason
    content = result.signed_content
    assert isinstance(content, dict)
    assert "signatures" not in content
    for uncovered in result.uncovered_fields:
        assert not has_path(content, parse_path(uncovered)), uncovered
    parsed = reading(content)
    assert not isinstance(parsed, tuple), parsed  # every base card reads
    assert parse_card(content).interfaces  # and has somewhere to route to


@pytest.mark.parametrize("name", CASE_NAMES)
async def test_changing_uncovered_fields_never_changes_the_reading(key: JWK, name: str) -> None:
    """Each uncovered path: deleting it keeps the card verified and reading the same; any other
    value either breaks the signature or reads the same too."""
    card, resolver = case(key, name)
    base = await verify_card(card, resolver, now=NOW)
    for uncovered in base.uncovered_fields:
        path = parse_path(uncovered)
        assert has_path(card, path), uncovered
        assert await check_unchanged(deleted(card, path), resolver, base, f"del {uncovered}")
        for value in REPLACEMENTS:
            await check_unchanged(
                replaced(card, path, value), resolver, base, f"{uncovered}={value!r}"
            )


@pytest.mark.parametrize("name", CASE_NAMES)
async def test_no_edit_of_a_signed_card_changes_its_reading(key: JWK, name: str) -> None:
    """Every path replaced or deleted, every object given each extra member: the card is
    ``invalid`` or reads exactly as before. Counts show the SDK forms really were exercised."""
    card, resolver = case(key, name)
    base = await verify_card(card, resolver, now=NOW)
    still_verified = 0
    for path in list(all_paths(card)):
        for value in REPLACEMENTS:
            mutated = replaced(card, path, value)
            still_verified += await check_unchanged(mutated, resolver, base, f"{path}={value!r}")
        still_verified += await check_unchanged(deleted(card, path), resolver, base, f"del {path}")
    for path in list(objects(card)):
        for member, value in ADDED_MEMBERS.items():
            target = get(card, path)
            if member in target:
                continue
            mutated = copy.deepcopy(card)
            get(mutated, path)[member] = value
            still_verified += await check_unchanged(mutated, resolver, base, f"{path}+{member}")
    # Unknown members are ignored by the SDK forms, so some edits keep the signature (the
    # property was exercised), unless no SDK form reproduces the payload (a 0.1 card's
    # `authentication` is unknown to both SDKs).
    assert still_verified > 0 or name == "sign_card 0.1"


# --- the reviewer's attacks, by name -------------------------------------------------------------


def _v03_attacks() -> list[tuple[str, Any]]:
    def add(**members: Any) -> Any:
        return lambda c: c.update(copy.deepcopy(members))

    def drop_defaults(extra: dict[str, Any]) -> Any:
        def edit(c: dict[str, Any]) -> None:
            del c["preferredTransport"], c["protocolVersion"]
            c.update(extra)

        return edit

    return [
        ("supportedInterfaces", add(supportedInterfaces=[EVIL_INTERFACE])),
        ("protocolVersions", add(protocolVersions=["1.0"])),
        ("supported_interfaces", add(supported_interfaces=[EVIL_INTERFACE])),
        ("additional_interfaces", add(additional_interfaces=[{"url": EVIL_URL}])),
        ("defaults removed", drop_defaults({})),
        ("defaults removed + authentication", drop_defaults({"authentication": {"schemes": []}})),
        ("skill input_modes", lambda c: c["skills"][0].update(input_modes=["x/evil"])),
        ("extendedAgentCard", lambda c: c["capabilities"].update(extendedAgentCard=True)),
    ]


def _v1_attacks() -> list[tuple[str, Any]]:
    return [
        (
            "supportsAuthenticatedExtendedCard",
            lambda c: c.update(supportsAuthenticatedExtendedCard=True),
        ),
        (
            "stateTransitionHistory",
            lambda c: c["capabilities"].update(stateTransitionHistory=True),
        ),
        ("skill input_modes", lambda c: c["skills"][0].update(input_modes=["image/*"])),
        ("skill inputModes []", lambda c: c["skills"][0].update(inputModes=[], outputModes=[])),
        ("protocolVersions", lambda c: c.update(protocolVersions=["0.3"])),
        (
            "interface snake_case",
            lambda c: c["supportedInterfaces"][0].update(
                protocol_binding="GRPC", protocol_version="0.2"
            ),
        ),
        ("top-level snake_case", lambda c: c.update(supported_interfaces=[EVIL_INTERFACE])),
        ("compat url", lambda c: c.update(url=EVIL_URL, preferredTransport="GRPC")),
    ]


@pytest.mark.parametrize(
    ("fixture", "jwks", "attack"),
    [
        *[("signed_card_v03.json", "jwks_v03.json", a) for a in _v03_attacks()],
        *[("signed_card_v1.json", "jwks_v1.json", a) for a in _v1_attacks()],
        *[("signed_card_v1_nocompat.json", "jwks_v1_nocompat.json", a) for a in _v1_attacks()],
    ],
    ids=lambda value: value[0] if isinstance(value, tuple) else str(value),
)
async def test_reviewer_attacks_do_not_change_the_reading(
    fixture: str, jwks: str, attack: tuple[str, Any]
) -> None:
    name, edit = attack
    card, resolver = load(fixture), StaticKeys(load(jwks), "fixture")
    base = await verify_card(card, resolver, now=NOW)
    edit(card)
    result = await verify_card(card, resolver, now=NOW)
    assert result.status == "verified", name  # these all keep a signature: the danger
    assert reading(result.signed_content) == reading(base.signed_content), name
    assert EVIL_URL not in json.dumps(result.signed_content)


async def test_sign_card_bare_url_card_plus_interfaces(key: JWK) -> None:
    """A strictly signed bare-url card reads the same whether the strict or the a2a-sdk 0.3
    form matches (an extra field switches the one to the other): as a 0.3 card."""
    bare = {"name": "A", "url": "https://agent.example/rpc", "skills": [{"id": "s", "name": "S"}]}
    signed = sign_card(bare, key)
    resolver = StaticKeys([json.loads(key.export_public())])
    base = await verify_card(signed, resolver, now=NOW)
    assert base.payload_form == "rfc8785"
    evil = {**signed, "supportedInterfaces": [EVIL_INTERFACE]}
    result = await verify_card(evil, resolver, now=NOW)
    assert (result.status, result.payload_form) == ("verified", "a2a-sdk-0.3")
    assert result.signed_content == base.signed_content
    parsed = parse_card(result.signed_content)
    assert parsed.card_format == "0.3"
    assert [(i.url, i.binding, i.protocol_version) for i in parsed.interfaces] == [
        ("https://agent.example/rpc", "JSONRPC", "0.3.0")
    ]


# --- what signed_content holds ------------------------------------------------------------------


async def test_signed_content_of_the_sdk_forms() -> None:
    v03 = load("signed_card_v03_nonascii.json")
    result = await verify_card(v03, StaticKeys(load("jwks_v03_nonascii.json")), now=NOW)
    content = result.signed_content
    assert content is not None
    # the 0.3 defaults put back, so it reads as a2a-sdk 0.3 read it
    assert (content["preferredTransport"], content["protocolVersion"]) == ("JSONRPC", "0.3.0")
    # the scheme types are not covered: left out, not guessed
    assert content["securitySchemes"] == {
        "schlüssel": {"in": "header", "name": "X-API-Schlüssel"},
        "bearer": {"bearerFormat": "JWT", "scheme": "bearer"},
    }
    assert "security" not in content  # erased by the SDK: not covered
    assert content["name"] == v03["name"]

    v1 = load("signed_card_v1.json")
    result = await verify_card(v1, StaticKeys(load("jwks_v1.json")), now=NOW)
    content = result.signed_content
    assert content is not None
    assert not {"url", "preferredTransport", "protocolVersion", "signatures"} & set(content)
    assert content["supportedInterfaces"] == v1["supportedInterfaces"]


async def test_signed_content_only_when_verified_and_fresh(key: JWK) -> None:
    signed = sign_card(card_v1("https://w.example"), key)
    resolver = StaticKeys([json.loads(key.export_public())])
    first = await verify_card(signed, resolver, now=NOW)
    assert first.signed_content == {k: v for k, v in signed.items() if k != "signatures"}
    assert first.signed_content is not None
    first.signed_content["skills"].clear()  # the caller owns it
    second = await verify_card(signed, resolver, now=NOW)
    assert second.signed_content is not None and second.signed_content["skills"]
    assert signed["skills"]
    # not part of equality, hashing or the API view
    assert first == second and hash(first) == hash(second)
    assert "signed_content" not in first.to_api()
    assert (await verify_card(card_v1("https://w.example"), resolver)).signed_content is None
    other = StaticKeys([json.loads(generate_key("ES256", kid=key["kid"]).export_public())])
    assert (await verify_card(signed, other, now=NOW)).signed_content is None


def test_covered_content_depends_on_the_payload_only() -> None:
    assert covered_content(b'{"name":"x","url":"https://a.example/"}') == {
        "name": "x",
        "url": "https://a.example/",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
    }
    # not something a2a-sdk 0.3 signs (it drops defaults, unknown fields, empty values)
    for payload in (
        b'{"name":"x","preferredTransport":"JSONRPC","url":"https://a.example/"}',
        b'{"name":"x","supportedInterfaces":[{"url":"https://a.example/"}]}',
        b'{"description":"","name":"x","url":"https://a.example/"}',
        '{"name":"é","url":"https://a.example/"}'.encode(),  # 0.3 escapes non-ASCII
    ):
        assert covered_content(payload) == json.loads(payload)


# --- never raises -----------------------------------------------------------------------------


@pytest.mark.parametrize("scheme_type", [[], {"a": 1}, 5, None, "apiKey", "nonsense"])
async def test_odd_security_scheme_types_do_not_raise(key: JWK, scheme_type: Any) -> None:
    resolver = StaticKeys([json.loads(key.export_public())])
    for base in (card_v1("https://w.example"), card_v03("https://i.example")):
        signed = sign_card(base, key)
        signed["securitySchemes"] = {"x": {"type": scheme_type, "in": "header"}}
        result = await verify_card(signed, resolver, now=NOW)
        assert result.status in ("verified", "invalid")
        if result.status == "verified":
            assert reading(result.signed_content) == reading(
                (await verify_card(sign_card(base, key), resolver, now=NOW)).signed_content
            )
        # signed with it in place, it verifies strictly
        body = {**base, "securitySchemes": {"x": {"type": scheme_type, "name": "k"}}}
        assert (await verify_card(sign_card(body, key), resolver, now=NOW)).status == "verified"


async def test_unexpected_failures_become_invalid(
    key: JWK, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    signed = sign_card(card_v1("https://w.example"), key)
    resolver = StaticKeys([json.loads(key.export_public())])

    def broken(card: Any) -> Any:
        raise RuntimeError("boom")

    caplog.set_level(logging.ERROR)
    monkeypatch.setattr(signatures_module, "iter_card_forms", broken)
    result = await verify_card(signed, resolver, now=NOW)
    assert result.status == "invalid"
    assert result.reason == (
        "the signatures could not be checked: the verifier failed internally (RuntimeError); "
        "the card is treated as not verified"
    )
    assert "failed unexpectedly" in caplog.text
    monkeypatch.undo()

    monkeypatch.setattr(signatures_module, "_combine", broken)
    other = StaticKeys([json.loads(generate_key("ES256", kid="other").export_public())])
    result = await verify_card(signed, other, now=NOW)
    assert result.status == "invalid"
    assert "failed internally (RuntimeError)" in (result.reason or "")


async def test_a_form_that_fails_is_skipped(
    key: JWK, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import registry.payloads as payloads_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("unhashable")

    signed = sign_card(card_v1("https://w.example"), key)
    monkeypatch.setattr(payloads_module, "_project", broken)
    caplog.set_level(logging.ERROR)
    assert [form.name for form in card_forms(signed)] == ["rfc8785"]
    assert "a2a-sdk-1.x payload form" in caplog.text
    resolver = StaticKeys([json.loads(key.export_public())])
    assert (await verify_card(signed, resolver, now=NOW)).status == "verified"


async def test_huge_integer_in_params_skips_the_sdk_form(key: JWK) -> None:
    card = card_v1("https://w.example")
    card["capabilities"]["extensions"] = [{"uri": "u", "params": {"n": 10**400}}]
    assert [form.name for form in card_forms(card)] == ["a2a-sdk-0.3"]
    card["signatures"] = sign_card(card_v1("https://w.example"), key)["signatures"]
    resolver = StaticKeys([json.loads(key.export_public())])
    assert (await verify_card(card, resolver, now=NOW)).status == "invalid"
