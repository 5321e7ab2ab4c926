"""Payload forms: the bytes an agent card signature may have been made over.

A card signature (A2A v1.0 section 8.4) is a JWS over a canonical form of the card without
``signatures``. The spec says RFC 8785 (JCS); the official SDKs sign something slightly
different, so :func:`card_forms` gives every form, strictest first, each named:

``rfc8785``
    JCS of the card as received, minus ``signatures``. What ``sign_card`` produces.
``a2a-sdk-1.x``
    What a2a-sdk 1.x signs: the card parsed into its protobuf ``AgentCard`` (unknown fields
    dropped, such as the 0.3-compat ``url``/``preferredTransport``/``protocolVersion`` its server
    injects, and ``false`` for the two bools without presence), empty values dropped
    (``_clean_empty``), then JCS. Numbers inside extension ``params`` are doubles there.
``a2a-sdk-0.3``
    What a2a-sdk 0.3 signs: the card parsed into its pydantic ``AgentCard`` (unknown fields
    dropped), dumped without default values (``preferredTransport: "JSONRPC"``,
    ``protocolVersion: "0.3.0"``, each security scheme's ``type``), empty values dropped, then
    ``json.dumps(sort_keys=True)`` with compact separators and ASCII escapes (non-finite
    numbers refused).

Whatever a form leaves out is not covered by the signature: :attr:`Form.uncovered` names it
(fields unknown to the producer's schema, non-empty values the SDKs' empty-value cleaning
erases, such as ``security: [{"apiKey": []}]``, and in the 0.3 form each security scheme's
``type``, which a2a-sdk 0.3 drops as a default although it is what selects the scheme). Values
dropped because they equal a default or are empty are covered: changing them breaks the
signature.

:func:`covered_content` turns a verified payload back into the card it covers, the thing to
read a verified card from. :func:`clean_for_signing` gives the card content on which the strict
and the a2a-sdk 1.x forms agree.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import rfc8785

from registry.errors import CardError

__all__ = [
    "Form",
    "FormError",
    "card_forms",
    "clean_for_signing",
    "covered_content",
    "jcs",
    "payload_forms",
    "unsigned_part",
]

log = logging.getLogger(__name__)

_MAX_DEPTH = 200  # containers; deeper cards have no payload form (the SDKs stop at 128)


@dataclass(frozen=True)
class Form:
    """One payload form of a card: its name, its bytes, and the fields it does not cover."""

    name: str
    payload: bytes
    uncovered: tuple[str, ...]


class FormError(ValueError):
    """A card has no payload in this form (e.g. a number JCS cannot represent)."""


# A tiny schema language describing what each SDK's card model keeps.
_VALUE = "value"  # kept as it is
_STRUCT = "struct"  # google.protobuf.Struct: kept, numbers become doubles


@dataclass(frozen=True)
class _List:
    item: Any


@dataclass(frozen=True)
class _Map:
    value: Any


@dataclass(frozen=True)
class _Default:
    value: Any  # dropped when equal to this (and of the same type)


@dataclass(frozen=True)
class _Union:
    tag: str
    variants: dict[str, dict[str, Any]]  # the tag member itself is a default, always dropped


def _obj(*names: str, **fields: Any) -> dict[str, Any]:
    return {**dict.fromkeys(names, _VALUE), **fields}


_V1_REQUIREMENTS = _List(_obj(schemes=_Map(_obj("list"))))
_V1_SCHEMA = _obj(
    "name",
    "description",
    "version",
    "documentationUrl",
    "iconUrl",
    "defaultInputModes",
    "defaultOutputModes",
    supportedInterfaces=_List(_obj("url", "protocolBinding", "tenant", "protocolVersion")),
    provider=_obj("url", "organization"),
    capabilities=_obj(
        "streaming",  # optional bools: an explicit false is kept
        "pushNotifications",
        "extendedAgentCard",
        extensions=_List(
            _obj("uri", "description", required=_Default(False), params=_STRUCT),
        ),
    ),
    securitySchemes=_Map(
        _obj(
            apiKeySecurityScheme=_obj("description", "location", "name"),
            httpAuthSecurityScheme=_obj("description", "scheme", "bearerFormat"),
            oauth2SecurityScheme=_obj(
                "description",
                "oauth2MetadataUrl",
                flows=_obj(
                    authorizationCode=_obj(
                        "authorizationUrl",
                        "tokenUrl",
                        "refreshUrl",
                        "scopes",
                        pkceRequired=_Default(False),
                    ),
                    clientCredentials=_obj("tokenUrl", "refreshUrl", "scopes"),
                    implicit=_obj("authorizationUrl", "refreshUrl", "scopes"),
                    password=_obj("tokenUrl", "refreshUrl", "scopes"),
                    deviceCode=_obj("deviceAuthorizationUrl", "tokenUrl", "refreshUrl", "scopes"),
                ),
            ),
            openIdConnectSecurityScheme=_obj("description", "openIdConnectUrl"),
            mtlsSecurityScheme=_obj("description"),
        )
    ),
    securityRequirements=_V1_REQUIREMENTS,
    skills=_List(
        _obj(
            "id",
            "name",
            "description",
            "tags",
            "examples",
            "inputModes",
            "outputModes",
            securityRequirements=_V1_REQUIREMENTS,
        )
    ),
)

_V03_SCHEMA = _obj(
    "name",
    "description",
    "url",
    "version",
    "documentationUrl",
    "iconUrl",
    "supportsAuthenticatedExtendedCard",
    "security",
    "defaultInputModes",
    "defaultOutputModes",
    preferredTransport=_Default("JSONRPC"),
    protocolVersion=_Default("0.3.0"),
    additionalInterfaces=_List(_obj("transport", "url")),
    provider=_obj("organization", "url"),
    capabilities=_obj(
        "pushNotifications",
        "stateTransitionHistory",
        "streaming",
        extensions=_List(_obj("description", "params", "required", "uri")),
    ),
    securitySchemes=_Map(
        _Union(
            "type",
            {
                "apiKey": _obj("description", "in", "name"),
                "http": _obj("bearerFormat", "description", "scheme"),
                "oauth2": _obj(
                    "description",
                    "oauth2MetadataUrl",
                    flows=_obj(
                        authorizationCode=_obj(
                            "authorizationUrl", "refreshUrl", "scopes", "tokenUrl"
                        ),
                        clientCredentials=_obj("refreshUrl", "scopes", "tokenUrl"),
                        implicit=_obj("authorizationUrl", "refreshUrl", "scopes"),
                        password=_obj("refreshUrl", "scopes", "tokenUrl"),
                    ),
                ),
                "openIdConnect": _obj("description", "openIdConnectUrl"),
                "mutualTLS": _obj("description"),
            },
        )
    ),
    skills=_List(
        _obj(
            "description", "examples", "id", "inputModes", "name", "outputModes", "security", "tags"
        )
    ),
)

_DROP = object()


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_depth(depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise FormError(f"nested deeper than {_MAX_DEPTH} levels")


def _project(value: Any, schema: Any, path: str, dropped: list[str], depth: int = 0) -> Any:
    """``value`` as the SDK model ``schema`` keeps it; paths of unknown members go to ``dropped``.

    Values whose shape does not fit the schema are kept unchanged: the SDK could not have
    parsed (nor signed) them, so they only make the form not match.
    """
    _check_depth(depth)
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key not in schema:
                dropped.append(_join(path, key))
                continue
            sub = schema[key]
            if isinstance(sub, _Default):
                if type(item) is type(sub.value) and item == sub.value:
                    continue
                out[key] = item
            else:
                out[key] = _project(item, sub, _join(path, key), dropped, depth + 1)
        return out
    if isinstance(schema, _List):
        if not isinstance(value, list):
            return value
        return [
            _project(item, schema.item, f"{path}[{i}]", dropped, depth + 1)
            for i, item in enumerate(value)
        ]
    if isinstance(schema, _Map):
        if not isinstance(value, dict):
            return value
        return {
            key: _project(item, schema.value, _join(path, key), dropped, depth + 1)
            for key, item in value.items()
        }
    if isinstance(schema, _Union):
        if not isinstance(value, dict):
            return value
        tag = value.get(schema.tag)
        if not isinstance(tag, str) or tag not in schema.variants:
            return value  # the SDK could not have parsed it: kept whole, so covered whole
        # The SDK drops the tag as a default: the signature does not say which variant it is.
        dropped.append(_join(path, schema.tag))
        variant = {schema.tag: _Default(tag), **schema.variants[tag]}
        return _project(value, variant, path, dropped, depth)
    if schema == _STRUCT:
        return _doubles(value, depth)
    return value


def _doubles(value: Any, depth: int) -> Any:
    """Numbers as a protobuf ``Struct`` holds them: doubles."""
    _check_depth(depth)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise FormError("an integer in params exceeds the range of a double") from None
    if isinstance(value, dict):
        return {key: _doubles(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_doubles(item, depth + 1) for item in value]
    return value


def _trivial(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def _clean(value: Any, path: str, lost: list[str], depth: int = 0) -> Any:
    """The SDKs' ``_clean_empty``: drop ``None``, ``""``, ``[]`` and ``{}``, recursively.

    Returns ``_DROP`` for a dropped value. Paths of dropped values that were not empty to begin
    with (a container emptied by the cleaning, a list item) go to ``lost``: the signature does
    not cover them.
    """
    _check_depth(depth)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        pending: list[str] = []
        for key, item in value.items():
            sub_path = _join(path, key)
            cleaned = _clean(item, sub_path, lost, depth + 1)
            if cleaned is _DROP:
                if not _trivial(item):
                    pending.append(sub_path)
            else:
                out[key] = cleaned
        if not out:
            return _DROP
        lost.extend(pending)
        return out
    if isinstance(value, list):
        items: list[Any] = []
        pending = []
        for i, item in enumerate(value):
            cleaned = _clean(item, f"{path}[{i}]", lost, depth + 1)
            if cleaned is _DROP:
                pending.append(f"{path}[{i}]")
            else:
                items.append(cleaned)
        if not items:
            return _DROP
        lost.extend(pending)
        return items
    if _trivial(value):
        return _DROP
    return value


def jcs(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of ``value``; :class:`FormError` if it has none."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeError, RecursionError) as exc:
        raise FormError(str(exc)) from None


def unsigned_part(card: dict[str, Any]) -> dict[str, Any]:
    """``card`` without its ``signatures`` member (a shallow copy)."""
    return {key: value for key, value in card.items() if key != "signatures"}


def _strict_form(card: dict[str, Any]) -> Form:
    return Form("rfc8785", jcs(unsigned_part(card)), ())


def _sdk_form(
    name: str, card: dict[str, Any], schema: dict[str, Any], dump: Callable[[Any], bytes]
) -> Form:
    dropped: list[str] = []
    projected = _project(unsigned_part(card), schema, "", dropped)
    cleaned = _clean(projected, "", dropped)
    return Form(name, dump({} if cleaned is _DROP else cleaned), _outermost(dropped))


def _v03_form(card: dict[str, Any]) -> Form:
    return _sdk_form("a2a-sdk-0.3", card, _V03_SCHEMA, _sorted_json)


_V03_DEFAULTS = {"preferredTransport": "JSONRPC", "protocolVersion": "0.3.0"}


def covered_content(payload: bytes) -> dict[str, Any]:
    """The card a verified ``payload`` covers: what a verified card must be read from.

    The payload parsed, with the defaults a2a-sdk 0.3 drops put back
    (``preferredTransport: "JSONRPC"``, ``protocolVersion: "0.3.0"``, when absent) if the
    payload is one a2a-sdk 0.3 could have signed (its 0.3 form is the payload itself), so that
    it reads as that SDK reads it. Nothing else is added: whatever a form leaves uncovered
    (unknown fields, erased values, the 0.3 security schemes' ``type``) is not in it.

    It depends on the payload bytes alone, never on which form matched nor on the card as
    received: a form is chosen by whoever presents the card (adding an unknown field turns a
    strict match into an SDK match, removing the 0.3 defaults can turn an SDK match into a
    strict one), and the same signed bytes must always read the same. (A strictly signed card
    of only 0.3 fields, e.g. a bare ``url`` card, so reads as 0.3: signatures arrived with 0.3.)
    Raises :class:`FormError` if ``payload`` is not a JSON object.
    """
    try:
        content = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormError(f"the payload is not JSON: {exc}") from None
    if not isinstance(content, dict):
        raise FormError("the payload is not a JSON object")
    missing = [key for key in _V03_DEFAULTS if key not in content]
    # a member a2a-sdk 0.3 does not know (a 1.0 card's ``supportedInterfaces``) is dropped by
    # its form, which then cannot be these bytes: no need to build it
    if missing and all(key in _V03_SCHEMA for key in content):
        try:
            signable_by_v03 = _v03_form(content).payload == payload
        except (FormError, RecursionError):
            signable_by_v03 = False
        except Exception:  # as in card_forms: no such form (still a function of the payload)
            log.exception("building the a2a-sdk-0.3 form of a signed payload failed")
            signable_by_v03 = False
        if signable_by_v03:
            content.update({key: _V03_DEFAULTS[key] for key in missing})
    return content


def _outermost(paths: list[str]) -> tuple[str, ...]:
    """``paths`` sorted, without those inside another listed path."""
    listed = set(paths)

    def inside(path: str) -> bool:
        return any(
            path.startswith(other) and path[len(other)] in ".[" for other in listed if other != path
        )

    return tuple(sorted(path for path in listed if not inside(path)))


def _sorted_json(value: Any) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False).encode(
            "ascii"
        )
    except (ValueError, TypeError, RecursionError) as exc:
        raise FormError(str(exc)) from None


def card_forms(card: dict[str, Any]) -> list[Form]:
    """The card's payload forms, strictest first, skipping impossible ones and duplicates.

    A form that cannot be built is skipped: a card it cannot represent (:class:`FormError`), and
    also any unexpected failure (logged), so that no card shape can make verification raise.
    """
    return list(iter_card_forms(card))


def iter_card_forms(card: dict[str, Any]) -> Iterator[Form]:
    """:func:`card_forms` one at a time, each built only when asked for (a signature over the
    strict form, the usual case, is checked without building the others)."""
    builders: list[tuple[str, Callable[[], Form]]] = [
        ("rfc8785", lambda: _strict_form(card)),
        ("a2a-sdk-1.x", lambda: _sdk_form("a2a-sdk-1.x", card, _V1_SCHEMA, jcs)),
        ("a2a-sdk-0.3", lambda: _v03_form(card)),
    ]
    forms: list[Form] = []
    for name, build in builders:
        try:
            form = build()
        except (FormError, RecursionError):
            continue
        except Exception:  # a card shape the projection did not foresee: no such form
            log.exception("building the %s payload form of a card failed; form skipped", name)
            continue
        if all(form.payload != seen.payload for seen in forms):
            forms.append(form)
            yield form


def payload_forms(card: dict[str, Any]) -> list[tuple[str, bytes]]:
    """``(form name, payload bytes)`` for each form the card has: strict RFC 8785 first."""
    return [(form.name, form.payload) for form in card_forms(card)]


# ---------------------------------------------------------------------------------------------
# Cleaning for signing

_SECURITY_LISTS = {
    ("security",),
    ("securityRequirements",),
    ("skills", "[]", "security"),
    ("skills", "[]", "securityRequirements"),
}
_EXTENSION = ("capabilities", "extensions", "[]")


def clean_for_signing(card: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``card`` the strict and the a2a-sdk 1.x payload forms agree on.

    Drops ``null``, ``""``, ``[]`` and ``{}`` everywhere (containers emptied by that too) and
    ``false`` everywhere except inside extension ``params``, as a2a-sdk 1.x's canonicalization
    would. Non-empty security requirement lists (``security``, ``securityRequirements``, also
    per skill) are kept verbatim: cleaning would erase requirements without scopes, such as
    ``[{"apiKey": []}]``, which changes what the card asks of clients.
    """
    cleaned = _clean_for_signing(card, (), in_params=False)
    return {} if cleaned is _DROP else cleaned


def _clean_for_signing(value: Any, path: tuple[str, ...], *, in_params: bool) -> Any:
    if len(path) > _MAX_DEPTH:
        raise CardError(f"the card is nested deeper than {_MAX_DEPTH} levels", details=[])
    if path in _SECURITY_LISTS and isinstance(value, list) and value:
        return copy.deepcopy(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            params = in_params or (path == _EXTENSION and key == "params")
            cleaned = _clean_for_signing(item, (*path, key), in_params=params)
            if cleaned is not _DROP:
                out[key] = cleaned
        return out or _DROP
    if isinstance(value, list):
        items = [
            cleaned
            for item in value
            if (cleaned := _clean_for_signing(item, (*path, "[]"), in_params=in_params))
            is not _DROP
        ]
        return items or _DROP
    if _trivial(value) or (value is False and not in_params):
        return _DROP
    return value
