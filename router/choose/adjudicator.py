"""The optional LLM adjudicator of close routing decisions: an OpenAI-compatible
chat-completions endpoint picks one of the best candidate skills, or none.

The model gets the numbered candidates (agent, skill name, description) and the message,
answers strict JSON ``{"choice": <number> | "none", "reason": "..."}`` at temperature 0, within
a time budget for the whole call. Every failure is a :class:`Verdict` (never an exception):
``timeout``, ``error`` (HTTP, connection, a body that is no chat completion) or ``invalid``
(content that is not that JSON, or a number that is no candidate; code fences are allowed).
The API key is sent as ``Authorization: Bearer`` and never appears in a verdict.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from registry.egress import OutboundProxy
from registry.embedding.remote import LazySession, endpoint

Outcome = Literal["picked", "none", "timeout", "error", "invalid"]
SYSTEM = (
    "You route a user's message to the one software agent skill that can serve it. You get "
    "numbered candidate skills and the message. Answer only with strict JSON: "
    '{"choice": <the number of the skill>, "reason": "<a few words>"}, or '
    '{"choice": "none", "reason": "<a few words>"} when none of the skills can serve it.'
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


@dataclass(frozen=True)
class Option:
    """A candidate skill shown to the model."""

    agent_id: str
    skill_id: str
    name: str
    description: str
    score: float


@dataclass(frozen=True)
class Verdict:
    """What the adjudicator decided (``option`` None: none fits, or no usable answer)."""

    option: Option | None
    outcome: Outcome
    detail: str
    elapsed_ms: float


class Adjudicator(LazySession):
    """Asks a chat model to settle a close routing decision."""

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 2.0,
        session: aiohttp.ClientSession | None = None,
        proxy: OutboundProxy | None = None,
    ) -> None:
        self.url = endpoint(url, "chat/completions")
        self.model = model
        self._key = api_key
        self.timeout = timeout
        super().__init__(session, proxy)  # through SWITCHBOARD_OUTBOUND_PROXY when set

    def request_body(self, text: str, options: Sequence[Option]) -> dict[str, Any]:
        """The chat-completions request for one decision."""
        listed = "\n".join(
            f"{n}. {o.name} (agent {o.agent_id}, skill {o.skill_id}): {o.description[:300]}"
            for n, o in enumerate(options, 1)
        )
        user = f"Candidate skills:\n{listed}\n\nMessage:\n{text[:2000]}"
        return {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": user},
            ],
        }

    async def adjudicate(self, text: str, options: Sequence[Option]) -> Verdict:
        """The model's pick among ``options`` (see the module docs)."""
        start = time.perf_counter()

        def verdict(outcome: Outcome, detail: str, option: Option | None = None) -> Verdict:
            return Verdict(option, outcome, detail, (time.perf_counter() - start) * 1000)

        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            async with asyncio.timeout(self.timeout):
                session = await self._open()
                async with session.post(
                    self.url, json=self.request_body(text, options), headers=headers
                ) as resp:
                    if resp.status != 200:
                        return verdict("error", f"{self.url} answered HTTP {resp.status}")
                    data = await resp.json(content_type=None)
        except TimeoutError:
            return verdict("timeout", f"no answer within {self.timeout:g} s")
        except aiohttp.ClientError as exc:
            return verdict("error", f"{self.url} cannot be reached: {type(exc).__name__}")
        except ValueError:
            return verdict("error", f"{self.url} answered something that is not JSON")
        try:
            content = data["choices"][0]["message"]["content"]
            assert isinstance(content, str)
        except (KeyError, IndexError, TypeError, AssertionError):
            return verdict("error", "the answer is not a chat completion")
        return _read(content, options, verdict)


def _read(content: str, options: Sequence[Option], verdict: Any) -> Verdict:
    """The verdict in a model's answer text."""
    stripped = content.strip()
    fenced = _FENCE.match(stripped)
    try:
        answer = json.loads(fenced.group(1) if fenced else stripped)
        choice = answer["choice"]
    except (ValueError, KeyError, TypeError):
        return verdict("invalid", f"not the JSON asked for: {stripped[:80]!r}")
    reason = str(answer.get("reason", ""))[:200]
    if isinstance(choice, str) and choice.strip().lower() == "none":
        return verdict("none", reason or "none of the candidates fits")
    if isinstance(choice, str) and choice.strip().isdigit():
        choice = int(choice.strip())
    if isinstance(choice, int) and not isinstance(choice, bool) and 1 <= choice <= len(options):
        option = options[choice - 1]
        return verdict("picked", reason or f"candidate {choice}", option)
    return verdict("invalid", f"choice {choice!r} is not one of the {len(options)} candidates")
