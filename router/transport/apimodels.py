"""The bodies and answers of the router's admin routes (explain, feedback) as pydantic models.

Like :mod:`registry.apimodels`: the handlers read and write plain JSON; these models describe
it in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from registry.apimodels import ApiModel, LearnedExample


class ExplainRequest(ApiModel):
    """A message to route, as a client would send it, and how it would be sent."""

    message: dict[str, Any] = Field(
        description="An A2A message (in the shape of the method's version)."
    )
    method: str | None = Field(
        None,
        examples=["SendMessage", "SendStreamingMessage", "message/send", "message/stream"],
        description=(
            "The method the message would be sent with: SendMessage, SendStreamingMessage, "
            "message/send, message/stream, tasks/send, tasks/sendSubscribe, A2A.SendMessage, "
            "A2A.SendStreamingMessage. It implies the version and whether the call streams. "
            "Default: SendMessage (message/send with version 0.3, the header A2A-Version 0.3, "
            "or a message in the 0.3 shape)."
        ),
    )
    configuration: dict[str, Any] | None = Field(None, description="The send's configuration.")
    metadata: dict[str, Any] | None = None
    taskId: str | None = Field(
        None, description="The task the message continues (in the caller's ID space)."
    )
    contextId: str | None = Field(
        None, description="The conversation the message belongs to (in the caller's ID space)."
    )
    stream: bool | None = Field(
        None,
        deprecated=True,
        description="Deprecated: use method. Explain a streaming call; must agree with method.",
    )
    version: str | None = Field(
        None,
        examples=["0.3", "1.0"],
        description=(
            "Without method: the version (default: the A2A-Version header, else the message's "
            "shape); with method, it must agree with it."
        ),
    )


class Explain(BaseModel):
    """The send's decision: the ranked candidates, each kept or dropped with its reason, the
    threshold that decided, and the choice or the error."""

    model_config = ConfigDict(extra="allow")  # the matcher's view grows with its tiers

    method: str = Field(description="The method explained.")
    stream: bool = Field(description="Whether that method streams.")
    catalog_version: int
    threshold: float = Field(
        description=(
            "The threshold that decided: the fused score on [0, 1] by meaning, the BM25 "
            "score by words (see scale)."
        )
    )
    threshold_source: Literal["calibrated", "operator", "default"] = Field(
        description=(
            "calibrated (router/choose/calibration.json at the SWITCHBOARD_REFUSE point), "
            "operator (SWITCHBOARD_MATCH_THRESHOLD), default (words: 0.5)."
        )
    )
    margin_needed: float = Field(description="How far the best agent must lead the next.")
    refuse: Literal["calibrated", "strict", "never"] = Field(
        description="The operating point (SWITCHBOARD_REFUSE)."
    )
    scale: str = Field(description="What scores are: 'fused score, 0 to 1' or 'BM25 score'.")
    matcher: str = Field(description="semantic (the model) or lexical (and why).")
    context_agents: list[str] = Field(
        description="The agents already serving the message's conversation (the tie-break)."
    )
    uncertain: str | None = Field(description="Why the matcher was unsure, if it was.")
    candidates: list[dict[str, Any]] = Field(
        description=(
            "Each with agent_id, skill_id, score, kept, reason (a sentence), filter (what "
            "dropped it), url, version, binding; by meaning, features on [0, 1] (null: absent)."
        )
    )
    total_candidates: int
    choice: dict[str, Any] | None = Field(description="With its tier and margin.")
    error: dict[str, Any] | None = Field(description="The JSON-RPC error a client would get.")
    floor: float | None = Field(
        None, deprecated=True, description="Deprecated: the threshold of matching by meaning."
    )


class Feedback(ApiModel):
    """Exactly one of ``task_id``, ``message`` or ``text``, and the right ``agent``."""

    task_id: str | None = Field(None, description="A task the router gave out.")
    message: dict[str, Any] | None = Field(None, description="An A2A message (0.3 or 1.0).")
    text: str | None = None
    agent: str = Field(description="The agent that should have answered.")
    skill: str | None = Field(None, description="Default: the agent's skill closest to it.")
    version: str | None = Field(None, examples=["0.3", "1.0"])


class Decision(ApiModel):
    """Where routing sends the message: agent, skill and tier, or the refusal's code."""

    agent: str | None
    skill: str | None
    tier: str
    code: int | None = Field(None, description="Refused only: the JSON-RPC error code.")


class FeedbackResult(ApiModel):
    """The example stored, and the decision before and after."""

    example: LearnedExample
    learned: bool = Field(description="Whether routing uses it now (matching by meaning).")
    before: Decision
    after: Decision
    warning: str | None = None


class DeadLetter(BaseModel):
    """A push notification given up after its retry budget (no headers: they hold the
    client's credentials)."""

    id: int
    taskId: str
    configId: str
    url: str = Field(description="The client's webhook (without user:password@).")
    attempts: int
    lastError: str | None
    createdAt: str
    failedAt: str
    body: dict[str, Any] = Field(description="The notification as it would have been sent.")


class DeadLetters(BaseModel):
    """The dead letters, newest first."""

    deadLetters: list[DeadLetter]
