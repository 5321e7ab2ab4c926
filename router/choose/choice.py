"""What a routing decision is made of: the candidates, the choice, the decision before it is
final (:class:`Decision`), and how candidates are ordered for the explain view."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

from registry.records import AgentRecord
from registry.service import Registry
from router.choose.skillindex import SkillIndex
from router.protocol.errors import RpcError
from router.protocol.versions import Op, Version

Via = Literal["hint", "task", "match", "pinned"]
Tier = Literal[
    "task", "pinned", "hint", "lexical", "lexical-fallback", "semantic", "llm", "default", "guess"
]
"""Which tier of the choice decided: a task's owner, a pinned endpoint, a routing hint, words
(BM25 alone: ``lexical`` by configuration, ``lexical-fallback`` while the model or the chosen
skill's vectors are missing), meaning (embeddings fused with words), the LLM adjudicator, the
default route (``SWITCHBOARD_DEFAULT_AGENT``) when no other tier was confident, or the best
candidate below the threshold with ``SWITCHBOARD_REFUSE=never`` and no default route."""
Filter = Literal["policy", "health", "interface", "streaming", "skills", "input", "output", "score"]
"""What dropped a candidate: the signed-card policy, its agent's health, no interface the
router can call, no streaming, no skills, the input modes, the output modes, or its score
(below the threshold)."""
CLOSEST = 5
"""How many of the closest skills a ``-32050`` error lists."""
JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
GRPC = "GRPC"
"""The bindings the router calls agents in (``protocolBinding`` of an interface)."""
ROUTING_EXTENSION = "urn:a2a-switchboard:routing:v1"
"""The routing extension's URI: the metadata key of a routing hint (declared in the router card)."""


@dataclass(frozen=True)
class Target:
    """Where a call goes: the agent and the interface chosen for it (its ``binding``:
    :data:`JSONRPC`, :data:`HTTP_JSON` or :data:`GRPC`)."""

    agent_id: str
    url: str
    version: Version
    tenant: str | None = None  # the interface's tenant (1.0 cards), set into 1.0 params
    binding: str = JSONRPC


@dataclass(frozen=True)
class Candidate:
    """One skill (``skill_id`` None: an agent as a whole) considered for a call."""

    agent_id: str
    skill_id: str | None
    score: float
    kept: bool
    reason: str
    url: str | None = None
    version: Version | None = None
    features: dict[str, float | None] | None = None
    """What the semantic tier's score is made of, each on [0, 1] (None: absent; see
    :func:`router.choose.semantic.fuse`)."""
    binding: str = JSONRPC
    """The binding of the agent's interface at ``url``."""
    filter: Filter | None = None
    """What dropped it (None: kept)."""
    features_raw: dict[str, float] | None = None
    """Deprecated: the features as explain showed them before (cosines, -1 for none, the
    BM25 score)."""

    def but(self, **changes: Any) -> Candidate:
        """This candidate with ``changes`` (field names): :func:`dataclasses.replace` without
        its per-call field walk (a decision makes a dozen of these)."""
        unknown = changes.keys() - _CANDIDATE_FIELDS
        if unknown:
            raise TypeError(f"Candidate has no field {sorted(unknown)}")
        new = object.__new__(Candidate)
        new.__dict__.update(self.__dict__, **changes)  # frozen: set as __init__ would
        return new

    def to_json(self) -> dict[str, Any]:
        """The explain view of this candidate."""
        out = {
            "agent_id": self.agent_id,
            "skill_id": self.skill_id,
            "score": self.score,
            "kept": self.kept,
            "reason": self.reason,
            "url": self.url,
            "version": self.version,
            "binding": self.binding if self.url is not None else None,
        }
        if self.filter is not None:
            out["filter"] = self.filter
        if self.features is not None:
            out["features"] = self.features
        if self.features_raw is not None:
            out["features_raw"] = self.features_raw
        return out


_CANDIDATE_FIELDS = frozenset(f.name for f in fields(Candidate))


@dataclass(frozen=True)
class Choice:
    """The agent a call goes to, the interface to use, and how it was chosen."""

    agent: AgentRecord
    target: Target
    skill_id: str | None
    via: Via
    candidates: list[Candidate] = field(default_factory=list)
    score: float | None = None
    reason: str = ""
    tier: Tier | None = None
    margin: float | None = None
    """How far the chosen agent's score leads the next agent's that could take the call
    (None: no other could)."""

    def to_json(self) -> dict[str, Any]:
        """The explain view of this choice."""
        return {
            "agent_id": self.agent.id,
            "skill_id": self.skill_id,
            "via": self.via,
            "tier": self.tier,
            "score": self.score,
            "margin": self.margin,
            "reason": self.reason,
            "url": self.target.url,
            "version": self.target.version,
            "binding": self.target.binding,
        }


@dataclass
class Decision:
    """A decision before it is final: the choice, or the error to answer; ``uncertain`` says
    why an adjudicator should be asked (a small margin, or a score near the floor), and
    ``options`` are the candidates it may pick from (best first, one per skill)."""

    choice: Choice | None
    error: RpcError | None
    candidates: list[Candidate]
    context: dict[str, Any] = field(default_factory=dict)
    uncertain: str | None = None
    options: list[Candidate] = field(default_factory=list)


def ranked(candidates: list[Candidate]) -> list[Candidate]:
    """Best score first, kept before dropped, then by agent and skill id."""
    return sorted(candidates, key=lambda c: (-c.score, not c.kept, c.agent_id, c.skill_id or ""))


AGENT_FILTERS = frozenset({"policy", "health", "interface", "streaming", "skills"})
"""The filters that drop an agent as a whole (every skill of it)."""


def label(c: Candidate) -> str:
    """Who a reason is about: the agent alone for agent-wide reasons."""
    if c.skill_id is None or c.filter in AGENT_FILTERS:
        return f"agent {c.agent_id!r}"
    return f"agent {c.agent_id!r} skill {c.skill_id!r}"


def sentence(text: str) -> str:
    """``text`` as a sentence: its first letter upper-case, a full stop at the end."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def phrase(text: str) -> str:
    """A sentence (:func:`sentence`) as part of another: lower-case first letter, no full
    stop."""
    text = text.strip().removesuffix(".")
    return text[:1].lower() + text[1:]


def options(fitting: list[Candidate], k: int = CLOSEST) -> list[Candidate]:
    """The best fitting candidates, one per skill of an agent, for an adjudicator."""
    seen: set[tuple[str, str | None]] = set()
    out = []
    for c in fitting:
        if (c.agent_id, c.skill_id) not in seen:
            seen.add((c.agent_id, c.skill_id))
            out.append(c)
    return out[:k]


def rank_key(
    item: tuple[int, Candidate], index: SkillIndex, context_agents: frozenset[str]
) -> tuple[float, bool, str, int]:
    """Best score first; ties: an agent already serving the conversation, then by id."""
    n, c = item
    return (-c.score, c.agent_id not in context_agents, c.agent_id, index.rows[n].position)


def closest(
    candidates: list[Candidate], registry: Registry, index: SkillIndex
) -> list[dict[str, Any]]:
    """The best-scoring skills of routable agents, with why each was not taken."""
    routable = [
        c
        for c in candidates
        if c.skill_id is not None and registry.routable(index.snapshot.agents[c.agent_id])
    ]
    return [
        {"agent": c.agent_id, "skill": c.skill_id, "score": c.score, "reason": c.reason}
        for c in ranked(routable)[:CLOSEST]
    ]


class Evaluator(Protocol):
    """What matching by meaning and by words, and the refusals (:mod:`router.choose.refusals`)
    need of the matcher: its candidate checks, thresholds and answers."""

    registry: Registry
    threshold: float
    """The lowest score by words a skill is chosen with."""

    def cutoff(self) -> Any:
        """The threshold in force for matching by meaning (a
        :class:`router.choose.semantic.Cutoff`)."""
        ...

    def evaluate(
        self,
        index: SkillIndex,
        rows: Iterable[int],
        version: Version,
        op: Op,
        media: list[str],
        accepted: list[str],
        scores: dict[int, float],
        threshold: float | None,
        *,
        skill_less: bool,
    ) -> list[tuple[int, Candidate]]: ...

    def finish(
        self,
        index: SkillIndex,
        row: int,
        best: Candidate,
        candidates: list[Candidate],
        via: Via,
        why: str,
        version: Version,
        *,
        tier: Tier | None = None,
        margin: float | None = None,
    ) -> Decision: ...

    def no_match(
        self,
        index: SkillIndex,
        candidates: list[Candidate],
        has_words: bool,
        *,
        media: list[str],
        accepted: list[str],
        threshold: float | None = None,
        score: float | None = None,
        hidden: bool = False,
        semantic: bool = False,
    ) -> RpcError: ...


def error_view(error: RpcError) -> dict[str, Any]:
    """The explain view of a refusal: its code, message and data."""
    return {"code": error.code, "message": error.message, "data": error.data}
