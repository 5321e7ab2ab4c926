"""The cards the router serves: its own, and each agent's as reached through the router.

Both are plain JSON built for a2a-sdk 1.x clients (``supportedInterfaces``) and 0.3 clients
(``url``/``preferredTransport``/``protocolVersion``) alike, as an a2a-sdk 1.x agent serving
0.3 too builds its card; :func:`card_for` gives a 1.0 client (one that sends
``A2A-Version: 1.0``) the 1.0 card alone, which admits no other member. They carry no
signatures: the caller re-signs them with the router's key (:class:`router.signing.CardSigner`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from importlib import metadata
from typing import Any

from registry.cards import Skill
from registry.errors import NotFound
from registry.records import AgentRecord
from registry.service import Registry
from router.choose.choice import ROUTING_EXTENSION
from router.choose.fits import BINDINGS, reachable_interface
from router.choose.grants import EVERYTHING, Grant
from router.protocol.versions import Version, version_of
from router.transport.grpctenant import agent_tenant

ROUTER_PROTOCOL_VERSIONS = ("1.0", "0.3")
"""The A2A versions the router's endpoint speaks (the ``A2A-Version`` header picks one)."""

_EXTENSION_DESCRIPTION = (
    'Routing hint: put {"skill": <skill id>} and/or {"agent": <agent id>} in the message '
    "(or request) metadata under this URI to choose the agent yourself. An unknown or "
    "unroutable skill or agent is error -32051; nothing else is tried."
)


def _router_version() -> str:
    try:
        return metadata.version("a2a-switchboard")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def relayable(record: AgentRecord) -> bool:
    """Whether the router can relay to this agent at all: a JSON-RPC or HTTP+JSON interface
    of 0.3 or 1.0, or a gRPC one of 1.0 (see :data:`router.choose.fits.BINDINGS`)."""
    return any(reachable_interface(record, version) for version in ROUTER_PROTOCOL_VERSIONS)


def router_card(
    registry: Registry,
    base_url: str,
    *,
    name: str,
    description: str,
    grant: Grant = EVERYTHING,
    grpc_target: str | None = None,
) -> dict[str, Any]:
    """The router's own card at ``base_url``: its JSON-RPC interfaces at ``base_url/``, its
    HTTP+JSON ones at ``base_url`` (for 1.0 and 0.3; 0.3 clients read
    ``additionalInterfaces``), with ``grpc_target`` (``host:port``) its A2A 1.0 gRPC one
    there; its skills the union of the skills of the routable agents that ``grant`` allows
    (deduplicated by id: the first agent's name and description, every agent's tags,
    examples and modes)."""
    endpoint = f"{base_url.rstrip('/')}/"
    rest_url = base_url.rstrip("/")  # the HTTP+JSON paths (/message:send, /v1/...) are below
    skills: dict[str, dict[str, Any]] = {}
    inputs: dict[str, None] = {}
    outputs: dict[str, None] = {}
    for agent in sorted(registry.routable_agents(), key=lambda r: r.id):
        if not relayable(agent) or not grant.allows(agent.id, None):
            continue
        card = agent.card
        for skill in card.skills:
            if grant.allows(agent.id, skill.id):
                _merge_skill(skills, skill)
        inputs.update(dict.fromkeys(card.default_input_modes))
        outputs.update(dict.fromkeys(card.default_output_modes))
        for skill in card.skills:  # skills without card defaults still tell what is accepted
            if not card.default_input_modes:
                inputs.update(dict.fromkeys(skill.input_modes))
            if not card.default_output_modes:
                outputs.update(dict.fromkeys(skill.output_modes))
    return {
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": version}
            for version in ROUTER_PROTOCOL_VERSIONS
        ]
        + [
            {"url": rest_url, "protocolBinding": "HTTP+JSON", "protocolVersion": version}
            for version in ROUTER_PROTOCOL_VERSIONS
        ]
        + (
            [{"url": grpc_target, "protocolBinding": "GRPC", "protocolVersion": "1.0"}]
            if grpc_target
            else []
        ),
        "version": _router_version(),
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,  # relayed (docs/push.md)
            "extensions": [
                {
                    "uri": ROUTING_EXTENSION,
                    "description": _EXTENSION_DESCRIPTION,
                    "required": False,
                }
            ],
        },
        "defaultInputModes": list(inputs),
        "defaultOutputModes": list(outputs),
        "skills": list(skills.values()),
        # A2A 0.3 clients read these (1.x clients ignore them when supportedInterfaces is set)
        "url": endpoint,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": endpoint, "transport": "JSONRPC"},
            {"url": rest_url, "transport": "HTTP+JSON"},
        ],
        "protocolVersion": "0.3.0",
    }


V03_CARD_FIELDS = (
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "supportsAuthenticatedExtendedCard",
)
"""Members of a 0.3 card that a 1.0 card (which lists ``supportedInterfaces``) does not have."""
V1_CARD_FIELDS = ("supportedInterfaces", "securityRequirements")
"""Members of a 1.0 card that a 0.3 card does not have."""


def card_for(card: dict[str, Any], version: Version | None) -> dict[str, Any]:
    """``card`` in the shape a client of ``version`` reads. A card built for both (1.0
    members and the 0.3 ``url``): for a 1.0 client without the 0.3 members
    (:data:`V03_CARD_FIELDS`), for a client that names 0.3 without the 1.0 ones
    (:data:`V1_CARD_FIELDS`), so that each is valid in its version's schema; without a
    version (0.3 is assumed, as the specification says, but a 1.x client reads it too) as
    built, which clients of both versions read. A card of an older shape stays as it is."""
    if "supportedInterfaces" not in card or "url" not in card or version is None:
        return card
    drop = V03_CARD_FIELDS if version == "1.0" else V1_CARD_FIELDS
    return {key: value for key, value in card.items() if key not in drop}


def _merge_skill(skills: dict[str, dict[str, Any]], skill: Skill) -> None:
    known = skills.get(skill.id)
    if known is None:
        skills[skill.id] = {
            "id": skill.id,
            "name": skill.name,
            "description": skill.description,
            "tags": list(skill.tags),
            "examples": list(skill.examples),
            "inputModes": list(skill.input_modes),
            "outputModes": list(skill.output_modes),
        }
        return
    for key, more in (
        ("tags", skill.tags),
        ("examples", skill.examples),
        ("inputModes", skill.input_modes),
        ("outputModes", skill.output_modes),
    ):
        known[key] = list(dict.fromkeys([*known[key], *more]))


def agent_card_via_router(
    record: AgentRecord, raw_card: dict[str, Any], base_url: str, grpc_target: str | None = None
) -> dict[str, Any]:
    """The agent's card (any shape: 1.0, 0.3, 0.2, 0.1) as reached through the router.

    Every interface URL becomes ``base_url/agents/{id}``, the router's per-agent endpoint;
    each interface keeps its protocol version and is offered as JSON-RPC (an agent reached
    over HTTP+JSON too: the router serves JSON-RPC for it), and each one without a tenant gets
    an HTTP+JSON sibling (0.3 clients: in ``additionalInterfaces``), which the router serves.
    Interfaces the router cannot relay (other bindings, unknown versions) are left out. A 1.0
    card of an agent without a 0.3 interface gets one at the router (which translates, see
    docs/translation.md); every 1.0 card gets the 0.3 fields (``url``,
    ``preferredTransport``, ``protocolVersion``, ``additionalInterfaces``) for 0.3 clients.
    With ``grpc_target`` (the router's gRPC binding, ``host:port``) a 1.0-shaped card also
    lists it for A2A 1.0 with the tenant that pins the agent (``agents/<id>``, then the agent's
    own tenant: :mod:`router.transport.grpctenant`), once per tenant of its 1.0 interfaces.
    ``capabilities.streaming`` is true: the router relays streams, or makes them from the
    unary answers of an agent that does not stream (docs/routing.md);
    ``capabilities.pushNotifications`` is true: the router relays push, or provides it for an
    agent without (docs/push.md). Signatures are removed; everything else is the agent's own.
    :class:`NotFound` when the
    agent has no interface the router can relay (a gRPC-only agent's card is served as an
    HTTP+JSON-only one's: the router's JSON-RPC and HTTP+JSON endpoints for it).
    """
    if not relayable(record):
        raise NotFound(
            f"agent {record.id!r} has no JSON-RPC or HTTP+JSON interface for A2A 0.3 or 1.0 that "
            "Switchboard can relay",
            code="not_relayable",
            details={"id": record.id},
        )
    endpoint = f"{base_url.rstrip('/')}/agents/{record.id}"
    card = copy.deepcopy(raw_card)
    card.pop("signatures", None)
    if "supportedInterfaces" in card or "protocolVersions" in card:
        _rewrite_v1(card, record, endpoint, grpc_target)
    else:
        _rewrite_legacy(card, endpoint)
    capabilities = card.get("capabilities")
    if isinstance(capabilities, dict):  # relayed, or synthesized for an agent without them
        capabilities["streaming"] = True
        capabilities["pushNotifications"] = True
    return card


def _relayable_interface(binding: Any, version: Any) -> bool:
    reachable = _is_jsonrpc(binding) or _is_rest(binding)
    if isinstance(version, str) and version_of(version) == "1.0" and "GRPC" in BINDINGS:
        reachable = reachable or (isinstance(binding, str) and binding.strip().upper() == "GRPC")
    return reachable and isinstance(version, str) and version_of(version) is not None


def _is_jsonrpc(binding: Any) -> bool:
    return binding is None or (isinstance(binding, str) and binding.strip().upper() == "JSONRPC")


def _is_rest(binding: Any) -> bool:
    return isinstance(binding, str) and binding.strip().upper() == "HTTP+JSON"


def _rewrite_v1(
    card: dict[str, Any], record: AgentRecord, endpoint: str, grpc_target: str | None
) -> None:
    interfaces = card.get("supportedInterfaces")
    fallback = (card.get("protocolVersions") or ["1.0"])[0]
    kept: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    owns: list[str | None] = []  # the tenants of its 1.0 interfaces
    for interface in interfaces if isinstance(interfaces, list) else []:
        if not isinstance(interface, dict):
            continue
        version = interface.get("protocolVersion") or fallback
        if not _relayable_interface(interface.get("protocolBinding"), version):
            continue
        key = (version_of(version), interface.get("tenant") or None)
        if key in seen:
            continue
        seen.add(key)  # an HTTP+JSON agent's interface: the router serves it JSON-RPC too
        kept.append({**interface, "url": endpoint, "protocolBinding": "JSONRPC"})
        if key[0] == "1.0":
            owns.append(key[1])
    legacy = reachable_interface(record, "0.3")
    if legacy is None and kept:  # the router translates: its endpoint serves 0.3 clients too
        kept.append({"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"})
    rest = [  # the router serves HTTP+JSON for every version it relays (not under a tenant)
        {**interface, "protocolBinding": "HTTP+JSON"}
        for interface in kept
        if not interface.get("tenant")
    ]
    card["supportedInterfaces"] = kept + rest
    if grpc_target and kept:  # the router translates 1.0 for a 0.3 agent
        card["supportedInterfaces"] += _grpc_interfaces(record.id, owns or [None], grpc_target)
    for name in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces"):
        card.pop(name, None)
    if kept:  # for a2a-sdk 0.3 clients, which read only these
        card["url"] = endpoint
        card["preferredTransport"] = "JSONRPC"
        card["protocolVersion"] = legacy.protocol_version if legacy else "0.3.0"
        card["additionalInterfaces"] = [
            {"url": endpoint, "transport": "JSONRPC"},
            {"url": endpoint, "transport": "HTTP+JSON"},
        ]


def _grpc_interfaces(
    agent_id: str, owns: list[str | None], grpc_target: str
) -> list[dict[str, Any]]:
    """The router's gRPC interface (A2A 1.0) with the tenant that pins ``agent_id``, once per
    own tenant (``owns``) of the agent."""
    return [
        {
            "url": grpc_target,
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0",
            "tenant": agent_tenant(agent_id, own),
        }
        for own in dict.fromkeys(owns)
    ]


def _rewrite_legacy(card: dict[str, Any], endpoint: str) -> None:
    card["url"] = endpoint
    if "preferredTransport" in card:
        card["preferredTransport"] = "JSONRPC"
    additional = card.get("additionalInterfaces")
    if additional is None and str(card.get("protocolVersion", "")).startswith("0.3"):
        additional = []  # a 0.3 card without the list: the a2a-sdk 0.3 client reads it for REST
    if isinstance(additional, list):
        rewritten = [
            {**i, "url": endpoint}
            for i in additional
            if isinstance(i, dict) and _is_jsonrpc(i.get("transport"))
        ]
        jsonrpc = rewritten[:1] or [{"url": endpoint, "transport": "JSONRPC"}]
        card["additionalInterfaces"] = [*jsonrpc, {"url": endpoint, "transport": "HTTP+JSON"}]


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_GONE = object()


def without_paths(card: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """A copy of ``card`` without the members at ``paths`` (``a.b``, ``skills[0].security``),
    e.g. the fields a verified signature did not cover, so the router never re-signs them."""
    out = copy.deepcopy(card)
    for path in paths:
        steps: list[str | int] = [
            int(index) if index else name for name, index in _SEGMENT.findall(path)
        ]
        if steps:
            _mark(out, steps)
    return _sweep(out)


def _mark(node: Any, steps: list[str | int]) -> None:
    for step in steps[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return
    last = steps[-1]
    if (isinstance(node, dict) and isinstance(last, str) and last in node) or (
        isinstance(node, list) and isinstance(last, int) and 0 <= last < len(node)
    ):
        node[last] = _GONE


def _sweep(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _sweep(v) for k, v in node.items() if v is not _GONE}
    if isinstance(node, list):
        return [_sweep(v) for v in node if v is not _GONE]
    return node
