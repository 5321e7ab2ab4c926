"""Whether an agent or a skill can take a call at all: its interfaces (JSON-RPC or HTTP+JSON
of A2A 0.3 or 1.0, gRPC of 1.0 when the ``grpc`` extra is installed: the client's version
first, JSON-RPC before HTTP+JSON before gRPC) and its media types
(input modes against the message's parts, output modes against ``acceptedOutputModes``).
These are the hard filters applied before any score."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from importlib.util import find_spec
from typing import Literal

from registry import mediatypes
from registry.cards import Interface, canonical_version
from registry.records import AgentRecord
from router.protocol.versions import VERSIONS, Version, version_of

_TEXT = "text/plain"


GRPC_CALLABLE = find_spec("grpc") is not None and find_spec("a2a") is not None
"""Whether gRPC agents can be called: grpcio and the a2a-sdk's stubs (the ``grpc`` extra)."""

BINDINGS = ("JSONRPC", "HTTP+JSON", *(("GRPC",) if GRPC_CALLABLE else ()))
"""The bindings the router calls agents in, the preferred first (gRPC for A2A 1.0 only: the
router has no client for 0.3's ``a2a.v1.A2AService``)."""


def interface_of(agent: AgentRecord, version: Version, binding: str) -> Interface | None:
    """The agent's first interface of ``binding`` and A2A ``version`` (0.x counts as 0.3)."""
    if binding == "GRPC" and version != "1.0":
        return None
    for interface in agent.card.interfaces:
        if interface.binding == binding and version_of(interface.protocol_version) == version:
            return interface
    return None


def jsonrpc_interface(agent: AgentRecord, version: Version) -> Interface | None:
    """The agent's first JSON-RPC interface of A2A ``version`` (0.x counts as 0.3), if any."""
    return interface_of(agent, version, "JSONRPC")


def reachable_interface(agent: AgentRecord, version: Version) -> Interface | None:
    """The interface of A2A ``version`` the router calls: the first of :data:`BINDINGS`."""
    for binding in BINDINGS:
        interface = interface_of(agent, version, binding)
        if interface is not None:
            return interface
    return None


def route_interface(agent: AgentRecord, version: Version) -> tuple[Interface, Version] | None:
    """The interface a call of A2A ``version`` goes to, and the agent's version there: one of
    the client's version when the agent has one (pass-through; in the order of
    :data:`BINDINGS`), else one of the other version (the router translates); None if the
    agent has no interface the router can call. The version comes first: translating between
    versions loses more than calling in the other binding."""
    for wanted in (version, *(v for v in VERSIONS if v != version)):
        interface = reachable_interface(agent, wanted)
        if interface is not None:
            return interface, wanted
    return None


NOT_REACHABLE = "agent has no JSON-RPC or HTTP+JSON interface for A2A 0.3 or 1.0" + (
    ", nor gRPC for 1.0" if GRPC_CALLABLE else " (gRPC needs a2a-switchboard[grpc])"
)
"""Why an agent cannot be called (followed by what it offers, see :func:`offers`)."""


def via_note(client: Version, agent: Version, binding: str = "JSONRPC") -> str:
    """How a call reaches an agent interface: as it is, or translated; in the agent's
    binding when that is not JSON-RPC."""
    over = (
        f" (over {binding}: the agent's only binding for A2A {agent})"
        if binding != "JSONRPC"
        else ""
    )
    if client == agent:
        return over
    return f" (translated: the client speaks A2A {client}, the agent A2A {agent})" + over


def offers(agent: AgentRecord) -> str:
    """The bindings and versions (``MAJOR.MINOR``) an agent's interfaces offer, for error
    messages."""
    found = [f"{i.binding} {canonical_version(i.protocol_version)}" for i in agent.card.interfaces]
    return ", ".join(dict.fromkeys(found)) or "nothing"


@lru_cache(maxsize=4096)
def _accepts(media_type: str, modes: tuple[str, ...]) -> bool:
    return not modes or mediatypes.any_match(media_type, modes)


def mode_problem(
    modes_in: Iterable[str], modes_out: Iterable[str], media: list[str], accepted: list[str]
) -> tuple[Literal["input", "output"], str] | None:
    """Why a skill (or agent) with these modes cannot take the message (which modes, and a
    phrase to follow its subject), or None."""
    inputs, outputs = tuple(modes_in), tuple(modes_out)
    others = [m for m in media if mediatypes.normalize(m) != _TEXT]
    for media_type in dict.fromkeys(media):
        if media_type not in others and others:
            continue  # text next to other parts: the instruction for them
        if not _accepts(media_type, inputs):
            return "input", f"does not accept {media_type} (it takes {', '.join(inputs)})"
    if accepted and outputs and not any(_accepts(a, outputs) for a in accepted):
        return "output", (
            f"outputs {', '.join(outputs)}, none of the accepted output modes "
            f"({', '.join(accepted)})"
        )
    return None
