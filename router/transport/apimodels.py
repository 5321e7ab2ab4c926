"""The bodies and answers of the router's admin routes (explain, feedback) as pydantic models.

Like :mod:`registry.apimodels`: the handlers read and write plain JSON; these models describe
it in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from registry.apimodels import ApiModel, LearnedExample


class ExplainRequest(ApiModel):
    """A message to route, as a client would send it."""

    message: dict[str, Any] = Field(description="An A2A message (0.3 or 1.0 shape).")
    configuration: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream: bool = Field(False, description="Explain a streaming call.")
    version: str | None = Field(
        None, examples=["0.3", "1.0"], description="Default: the A2A-Version header."
    )


class Explain(BaseModel):
    """The ranked candidates, each kept or dropped with its reason, and the choice."""

    model_config = ConfigDict(extra="allow")  # the matcher's view grows with its tiers

    catalog_version: int
    threshold: float
    matcher: str = Field(description="semantic (the model) or lexical (and why).")
    uncertain: str | None = Field(description="Why the matcher was unsure, if it was.")
    candidates: list[dict[str, Any]]
    total_candidates: int
    choice: dict[str, Any] | None = Field(description="With its tier and margin.")
    error: dict[str, Any] | None = Field(description="The JSON-RPC error a client would get.")


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
