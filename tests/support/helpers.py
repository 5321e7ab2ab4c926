"""Helpers shared by the tests: settings, sample cards, a programmable card server."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.cards import parse_card
from registry.records import AgentRecord, utcnow
from registry.settings import Settings

ADMIN = "test-admin-token"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
FIXTURES = Path(__file__).parents[1] / "fixtures"
SCHEMA_03 = json.loads(Path("/work/shared/protocol/v0.3/a2a.schema.json").read_text())


def make_record(
    agent_id: str, card: dict[str, Any], source_url: str | None = None
) -> tuple[AgentRecord, bytes]:
    """A record of ``card`` as the registry makes it (crawled from ``source_url`` if given,
    else pushed), fetched now, and the card's bytes."""
    raw = json.dumps(card, ensure_ascii=False).encode()
    now = utcnow()
    record = AgentRecord(
        id=agent_id,
        card=parse_card(card),
        source="url" if source_url else "push",
        source_url=source_url,
        card_sha256=hashlib.sha256(raw).hexdigest(),
        created_at=now,
        updated_at=now,
        fetched_at=now,
    )
    return record, raw


def make_settings(database_url: str, **overrides: Any) -> Settings:
    """Test settings: loopback allowed, an admin token, no seeds, small limits."""
    return Settings(**settings_values(database_url, **overrides))


def settings_values(database_url: str, **overrides: Any) -> dict[str, Any]:
    """The values :func:`make_settings` gives (e.g. to pass on as ``SWITCHBOARD_*``)."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_token": ADMIN,
        "allow_networks": ["127.0.0.0/8", "::1/128"],
        "seeds": [],
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
        "refresh": False,  # tests run the checks themselves (see tests/registry/test_refresh.py)
        "matcher": "lexical",  # tests of matching by meaning ask for it (tests/conftest.py)
    }
    values.update(overrides)
    return values


@dataclass
class CardServer:
    """An aiohttp server whose responses tests set per path; it records every request."""

    server: TestServer
    routes: dict[str, tuple[int, Any, dict[str, str]]] = field(default_factory=dict)
    requests: list[web.Request] = field(default_factory=list)

    def url(self, path: str = "") -> str:
        """The absolute URL of ``path`` on this server."""
        return str(self.server.make_url(path))

    def set(self, path: str, body: Any, status: int = 200, **headers: str) -> None:
        """Serve ``body`` (JSON-encoded unless bytes/str) at ``path``."""
        headers = {k.replace("_", "-"): v for k, v in headers.items()}
        self.routes[path] = (status, body, headers)

    def hits(self, path: str) -> int:
        """How many requests reached ``path``."""
        return sum(1 for r in self.requests if r.path == path)


def base(server: TestServer) -> str:
    """The root URL of a test server, without the trailing slash."""
    return str(server.make_url("")).rstrip("/")


def card_v1(base_url: str, name: str = "Weather Agent", **extra: Any) -> dict[str, Any]:
    """A 1.0-shaped card whose interface is at ``base_url``/a2a."""
    card: dict[str, Any] = {
        "name": name,
        "description": "Forecasts and current conditions for any city.",
        "version": "2.1.0",
        "supportedInterfaces": [
            {"url": f"{base_url}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": "forecast",
                "name": "Weather forecast",
                "description": "Seven-day forecast for a city.",
                "tags": ["weather", "forecast"],
                "examples": ["will it rain in Paris tomorrow?"],
            },
            {
                "id": "radar-image",
                "name": "Radar map",
                "description": "Renders a precipitation radar map.",
                "tags": ["weather", "maps"],
                "outputModes": ["image/png"],
            },
        ],
    }
    card.update(extra)
    return card


def card_v03(base_url: str, name: str = "Invoice Reader", **extra: Any) -> dict[str, Any]:
    """A 0.3-shaped card whose JSON-RPC endpoint is ``base_url``/rpc."""
    card: dict[str, Any] = {
        "name": name,
        "description": "Extracts totals and line items from invoices.",
        "version": "0.9.1",
        "protocolVersion": "0.3.0",
        "url": f"{base_url}/rpc",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": False, "pushNotifications": True},
        "defaultInputModes": ["application/pdf", "image/*"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {
                "id": "extract-invoice",
                "name": "Extract invoice data",
                "description": "Reads an invoice scan and returns structured totals.",
                "tags": ["finance", "documents", "ocr"],
                "examples": ["what is the total of this invoice?"],
            }
        ],
    }
    card.update(extra)
    return card


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def schema_problems(
    value: Any, schema: dict[str, Any], where: str = "", *, closed: bool = False
) -> list[str]:
    """The subset of JSON Schema the A2A 0.3 schema uses: $ref, type, required, properties,
    items, anyOf, enum, const, additionalProperties (``jsonschema`` is not a dependency).
    ``closed``: an object schema with ``properties`` and no ``additionalProperties`` admits
    no other member (stricter than JSON Schema: catches members 0.3 does not have)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return schema_problems(value, SCHEMA_03["definitions"][name], where, closed=closed)
    problems: list[str] = []
    if "anyOf" in schema:
        options = schema["anyOf"]
        if all(schema_problems(value, option, where, closed=closed) for option in options):
            problems.append(f"{where}: matches none of anyOf")
        return problems
    kind = schema.get("type")
    if kind is not None:
        expected = _TYPES[kind]
        if not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool)):
            return [f"{where}: expected {kind}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: {value!r} is not {schema['const']!r}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{where}.{name}: required")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in properties:
                problems += schema_problems(
                    item, properties[name], f"{where}.{name}", closed=closed
                )
            elif isinstance(extra, dict):
                problems += schema_problems(item, extra, f"{where}.{name}", closed=closed)
            elif closed and properties and extra is None:
                problems.append(f"{where}.{name}: not a member in A2A 0.3")
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            problems += schema_problems(item, schema["items"], f"{where}[{n}]", closed=closed)
    return problems


def said(error: Mapping[str, Any]) -> str:
    """What a JSON-RPC error answer explains: a standard code carries the specification's
    message and the router's explanation in ``data.detail`` (0.3) or the ErrorInfo metadata
    ``detail`` (1.0); otherwise the message itself."""
    data = error.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("detail"), str):
        return data["detail"]
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        detail = data[0].get("metadata", {}).get("detail")
        if isinstance(detail, str):
            return detail
    return str(error.get("message", ""))


def facts(data: Any) -> Any:
    """An error's ``data`` (0.3 object) or ErrorInfo ``metadata`` (1.0) without the router's
    ``detail`` (see :func:`said`), to compare the structured facts alone."""
    if isinstance(data, Mapping):
        return {k: v for k, v in data.items() if k != "detail"}
    return data
