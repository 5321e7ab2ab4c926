"""The normalized agent card, and readers for every card shape seen in the wild.

Shapes (detected from the fields present, see :func:`detect_format`):

- ``1.0``: ``supportedInterfaces[{url, protocolBinding, protocolVersion, tenant}]``. Cards made
  by a2a-sdk 1.x may also carry 0.3 compatibility fields (``url``, ``preferredTransport``,
  ``protocolVersion``) that their signature does not cover: they are ignored and the
  interfaces come from ``supportedInterfaces`` only. The 2026 draft (``protocolVersions``,
  interfaces without a version) reads as 1.0 too.
- ``0.3``: ``url`` + ``preferredTransport`` + ``additionalInterfaces[{url, transport}]``.
- ``0.2``: ``url`` with ``securitySchemes`` and no transport fields.
- ``0.1``: ``url`` with the old ``authentication`` object.

Every reader validates types and required fields and raises :class:`CardError` whose details
name each bad field (``skills[0].id``). Unknown fields are ignored here; they stay in the raw
card the registry keeps. Fields are read by their published camelCase names only: a snake_case
spelling (``supported_interfaces``, ``input_modes``) is an unknown field, never an alias.

Empty values read as absent, the way protobuf (A2A 1.0) and the SDKs' signing forms read them,
so that a card means the same whichever payload form its signature covers:

- a skill's ``inputModes``/``outputModes`` that is ``[]`` inherits the card's
  ``defaultInputModes``/``defaultOutputModes``, exactly like a missing list (a proto3 repeated
  field cannot tell the two apart, and neither can the a2a-sdk signatures, which drop empty
  values; an explicit ``[]`` therefore cannot take a skill's modes away);
- ``""`` for an optional text (``documentationUrl``, ``iconUrl``, the provider's members, an
  interface's ``protocolBinding``/``protocolVersion``/``tenant``, ``preferredTransport``, a
  0.3 ``protocolVersion``, an additional interface's ``transport``) is its default, and an empty
  ``provider`` object is no provider.

A verified card must be read from :attr:`registry.signatures.Verification.signed_content`, the
content its signature covers, not from the card as received.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    StringConstraints,
    ValidationError,
)

from registry.errors import CardError

CardFormat = Literal["1.0", "0.3", "0.2", "0.1"]

_BINDINGS = {"JSONRPC": "JSONRPC", "HTTP+JSON": "HTTP+JSON", "GRPC": "GRPC", "REST": "HTTP+JSON"}


# --- the normalized model -------------------------------------------------------------------


class Interface(BaseModel):
    """One endpoint of an agent: where to send which binding of which protocol version."""

    model_config = ConfigDict(frozen=True)

    url: str
    binding: str = "JSONRPC"
    protocol_version: str
    tenant: str | None = None


_NUMERIC_VERSION = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})*")


def canonical_version(version: str) -> str:
    """A protocol version as ``MAJOR.MINOR``, the form of the ``A2A-Version`` header and of
    1.0 cards' interfaces: ``0.3.0`` and ``0.3`` are ``0.3``, ``1`` is ``1.0``, ``0.2.5`` is
    ``0.2`` (a patch version does not change the protocol). Anything not made of numbers and
    dots is returned as written (stripped). For counting and showing: cards keep their own
    spelling."""
    text = version.strip()
    if not _NUMERIC_VERSION.fullmatch(text):
        return text
    major, minor, *_ = [*map(int, text.split(".")), 0]
    return f"{major}.{minor}"


def canonical_versions(versions: Iterable[str]) -> list[str]:
    """The distinct :func:`canonical_version` of ``versions``, in their order."""
    return list(dict.fromkeys(canonical_version(v) for v in versions))


class Skill(BaseModel):
    """A skill with its media types resolved (the card's defaults fill in missing modes)."""

    id: str
    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    input_modes: list[str] = Field(default_factory=list)
    output_modes: list[str] = Field(default_factory=list)


class Provider(BaseModel):
    """The organization behind an agent."""

    organization: str | None = None
    url: str | None = None


class Capabilities(BaseModel):
    """Optional protocol features an agent declares."""

    streaming: bool = False
    push_notifications: bool = False
    state_transition_history: bool = False
    extended_card: bool = False
    extensions: list[dict[str, Any]] = Field(default_factory=list)


class AgentCard(BaseModel):
    """One agent card, whatever shape it was published in."""

    card_format: CardFormat
    name: str
    description: str = ""
    version: str = ""
    provider: Provider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    interfaces: list[Interface]
    capabilities: Capabilities = Field(default_factory=Capabilities)
    default_input_modes: list[str] = Field(default_factory=list)
    default_output_modes: list[str] = Field(default_factory=list)
    skills: list[Skill] = Field(default_factory=list)
    signatures: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def protocol_versions(self) -> list[str]:
        """Distinct protocol versions of the interfaces, in card order."""
        return list(dict.fromkeys(i.protocol_version for i in self.interfaces))

    @property
    def canonical_protocol_versions(self) -> list[str]:
        """Distinct protocol versions of the interfaces as ``MAJOR.MINOR``, in card order
        (:func:`canonical_version`): what counts and lists show."""
        return canonical_versions(self.protocol_versions)


# --- wire shapes (camelCase, as published) --------------------------------------------------
# Lengths are bounded so that no card can exceed what the index columns hold (PostgreSQL
# refuses index entries over ~2.7 kB); the limits are far above what real cards use.

_Name = Annotated[StrictStr, StringConstraints(min_length=1, max_length=256)]
_Id = Annotated[StrictStr, StringConstraints(min_length=1, max_length=256)]
_Text = Annotated[StrictStr, StringConstraints(max_length=16384)]
_Word = Annotated[StrictStr, StringConstraints(max_length=128)]  # tags, versions, bindings
_Mode = Annotated[StrictStr, StringConstraints(min_length=1, max_length=255)]
_Url = Annotated[StrictStr, StringConstraints(min_length=1, max_length=2048)]
_Example = Annotated[StrictStr, StringConstraints(max_length=4096)]
_Modes = Annotated[list[_Mode], Field(max_length=64)]


def _blank_is_absent(value: Any) -> Any:
    return None if value == "" else value


# Optional texts where "" means "not given" (the SDK forms drop empty strings before signing).
_OptUrl = Annotated[_Url | None, BeforeValidator(_blank_is_absent)]
_OptName = Annotated[_Name | None, BeforeValidator(_blank_is_absent)]


class _Wire(BaseModel):
    # Aliases only: no snake_case spelling of a field is read (it would be a second name for
    # the same field, one the signature forms do not know and so do not cover).
    model_config = ConfigDict(extra="ignore", populate_by_name=False)


class _WireSkill(_Wire):
    id: _Id
    name: _Name
    description: _Text = ""
    tags: list[_Word] = Field(default_factory=list, max_length=64)
    examples: list[_Example] = Field(default_factory=list, max_length=64)
    input_modes: _Modes | None = Field(None, alias="inputModes")
    output_modes: _Modes | None = Field(None, alias="outputModes")


class _WireProvider(_Wire):
    organization: _OptName = None
    url: _OptUrl = None


class _WireCapabilities(_Wire):
    streaming: StrictBool | None = None
    push_notifications: StrictBool | None = Field(None, alias="pushNotifications")
    state_transition_history: StrictBool | None = Field(None, alias="stateTransitionHistory")
    extended_agent_card: StrictBool | None = Field(None, alias="extendedAgentCard")
    extensions: list[dict[str, Any]] | None = None


class _WireSignature(_Wire):
    model_config = ConfigDict(extra="allow")
    protected: StrictStr
    signature: StrictStr


class _WireCommon(_Wire):
    name: _Name
    description: _Text = ""
    version: _Word = ""
    provider: _WireProvider | None = None
    documentation_url: _OptUrl = Field(None, alias="documentationUrl")
    icon_url: _OptUrl = Field(None, alias="iconUrl")
    capabilities: _WireCapabilities = Field(default_factory=_WireCapabilities)
    default_input_modes: _Modes = Field(default_factory=list, alias="defaultInputModes")
    default_output_modes: _Modes = Field(default_factory=list, alias="defaultOutputModes")
    skills: list[_WireSkill] = Field(default_factory=list, max_length=1000)
    signatures: list[_WireSignature] = Field(default_factory=list)
    supports_extended: StrictBool | None = Field(None, alias="supportsAuthenticatedExtendedCard")


class _WireInterface10(_Wire):
    url: _Url
    protocol_binding: _Word = Field("JSONRPC", alias="protocolBinding")
    protocol_version: _Word | None = Field(None, alias="protocolVersion")
    tenant: _OptName = None


class _WireCard10(_WireCommon):
    supported_interfaces: list[_WireInterface10] = Field(
        alias="supportedInterfaces", min_length=1, max_length=32
    )
    protocol_versions: list[_Word] | None = Field(None, alias="protocolVersions")


class _WireInterface03(_Wire):
    url: _Url
    transport: _Word = "JSONRPC"


class _WireCard03(_WireCommon):
    url: _Url
    protocol_version: _Word = Field("0.3.0", alias="protocolVersion")
    preferred_transport: _Word = Field("JSONRPC", alias="preferredTransport")
    additional_interfaces: list[_WireInterface03] = Field(
        default_factory=list, alias="additionalInterfaces", max_length=32
    )


class _WireCardLegacy(_WireCommon):
    url: _Url
    protocol_version: _Word | None = Field(None, alias="protocolVersion")


# --- reading ---------------------------------------------------------------------------------


def detect_format(data: dict[str, Any]) -> CardFormat:
    """Which card shape ``data`` is, from the fields it carries."""
    if "supportedInterfaces" in data or "protocolVersions" in data:
        return "1.0"
    version = data.get("protocolVersion")
    if isinstance(version, str) and version.startswith("1."):
        return "1.0"  # a 1.0 card missing its interfaces: read as 1.0 to name the field
    if "preferredTransport" in data or "additionalInterfaces" in data:
        return "0.3"
    if isinstance(version, str) and version.startswith("0.3"):
        return "0.3"
    if "authentication" in data and "securitySchemes" not in data:
        return "0.1"
    return "0.2"


def parse_card(data: Any) -> AgentCard:
    """Validate and normalize a card of any supported shape; raise :class:`CardError`."""
    if not isinstance(data, dict):
        raise CardError(
            "an agent card must be a JSON object",
            details=[{"field": "", "problem": f"got {type(data).__name__}"}],
        )
    card_format = detect_format(data)
    wire_type = {"1.0": _WireCard10, "0.3": _WireCard03}.get(card_format, _WireCardLegacy)
    try:
        wire = wire_type.model_validate(data)
    except ValidationError as exc:
        raise _card_error(exc, card_format) from None
    located = _interfaces(wire, card_format)
    _check_urls(located)
    interfaces = list(dict.fromkeys(interface for _, interface in located))
    return _normalize(wire, card_format, interfaces)


def _interfaces(wire: _WireCommon, card_format: CardFormat) -> list[tuple[str, Interface]]:
    """The card's interfaces, each with the card field it was read from."""
    if isinstance(wire, _WireCard10):
        fallback = next((v for v in wire.protocol_versions or [] if v), "1.0")
        return [
            (
                f"supportedInterfaces[{n}].url",
                Interface(
                    url=i.url,
                    binding=_binding(i.protocol_binding or "JSONRPC"),
                    protocol_version=i.protocol_version or fallback,
                    tenant=i.tenant or None,
                ),
            )
            for n, i in enumerate(wire.supported_interfaces)
        ]
    if isinstance(wire, _WireCard03):
        version = wire.protocol_version or "0.3.0"
        first = Interface(
            url=wire.url,
            binding=_binding(wire.preferred_transport or "JSONRPC"),
            protocol_version=version,
        )
        more = [
            (
                f"additionalInterfaces[{n}].url",
                Interface(
                    url=i.url, binding=_binding(i.transport or "JSONRPC"), protocol_version=version
                ),
            )
            for n, i in enumerate(wire.additional_interfaces)
        ]
        return [("url", first), *more]
    assert isinstance(wire, _WireCardLegacy)
    version = wire.protocol_version or card_format
    return [("url", Interface(url=wire.url, protocol_version=version))]


def _binding(value: str) -> str:
    return _BINDINGS.get(value.strip().upper(), value.strip())


def _check_urls(located: list[tuple[str, Interface]]) -> None:
    problems = []
    for field, interface in located:
        if interface.binding == "GRPC":
            continue  # gRPC targets may be host:port
        parts = urlsplit(interface.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(
                {"field": field, "problem": f"not an absolute http(s) URL: {interface.url!r}"}
            )
    if problems:
        raise CardError("the agent card has an unusable interface URL", details=problems)


def _normalize(
    wire: _WireCommon, card_format: CardFormat, interfaces: list[Interface]
) -> AgentCard:
    caps = wire.capabilities
    skills = [
        Skill(
            id=s.id,
            name=s.name,
            description=s.description,
            tags=list(s.tags),
            examples=list(s.examples),
            # [] inherits the defaults like a missing list (see the module documentation)
            input_modes=list(s.input_modes or wire.default_input_modes),
            output_modes=list(s.output_modes or wire.default_output_modes),
        )
        for s in wire.skills
    ]
    duplicates = sorted({s.id for s in skills if [t.id for t in skills].count(s.id) > 1})
    if duplicates:
        raise CardError(
            "the agent card declares a skill id twice",
            details=[
                {"field": "skills[].id", "problem": f"duplicate id {d!r}"} for d in duplicates
            ],
        )
    return AgentCard(
        card_format=card_format,
        name=wire.name,
        description=wire.description,
        version=wire.version,
        provider=(
            Provider(**wire.provider.model_dump())
            if wire.provider and (wire.provider.organization or wire.provider.url)
            else None
        ),
        documentation_url=wire.documentation_url,
        icon_url=wire.icon_url,
        interfaces=interfaces,
        capabilities=Capabilities(
            streaming=bool(caps.streaming),
            push_notifications=bool(caps.push_notifications),
            state_transition_history=bool(caps.state_transition_history),
            extended_card=bool(caps.extended_agent_card or wire.supports_extended),
            extensions=list(caps.extensions or []),
        ),
        default_input_modes=list(wire.default_input_modes),
        default_output_modes=list(wire.default_output_modes),
        skills=skills,
        signatures=[s.model_dump(exclude_none=True) for s in wire.signatures],
    )


def _card_error(exc: ValidationError, card_format: CardFormat) -> CardError:
    details = []
    for error in exc.errors(include_url=False):
        field = _format_loc(error["loc"])
        details.append({"field": field, "problem": error["msg"]})
    fields = ", ".join(d["field"] for d in details[:5])
    return CardError(
        f"the agent card (read as a {card_format} card) is not valid: {fields}",
        details=details,
    )


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
