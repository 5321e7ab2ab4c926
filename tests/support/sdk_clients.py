"""The official a2a-sdk 1.x client as tests use it: connect through a card, send, read."""

from __future__ import annotations

import uuid

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.auth.credentials import CredentialService
from a2a.client.client import ClientCallContext
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, Task


async def connect(http: httpx.AsyncClient, url: str, *, streaming: bool = False) -> Client:
    """An SDK client made from the card at ``url`` (it sends to the URL inside the card)."""
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def ask(
    text: str = "",
    *,
    parts: list[Part] | None = None,
    task_id: str = "",
    context_id: str = "",
    return_immediately: bool = False,
) -> SendMessageRequest:
    """A user message (text, or ``parts``), optionally continuing a task or context."""
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=parts if parts is not None else [Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    config = SendMessageConfiguration(return_immediately=return_immediately)
    return SendMessageRequest(message=message, configuration=config)


async def send(client: Client, request: SendMessageRequest) -> Task:
    """Send without streaming; the one answer must be a task."""
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


def answer(task: Task) -> str:
    """The text of a task's artifacts."""
    return "".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text"))


class Keys(CredentialService):
    """The credentials of one caller, by security scheme name (as the router's card names
    them)."""

    def __init__(self, **credentials: str) -> None:
        self.credentials = credentials

    async def get_credentials(
        self, security_scheme_name: str, context: ClientCallContext | None
    ) -> str | None:
        return self.credentials.get(security_scheme_name)
