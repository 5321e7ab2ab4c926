"""Helpers shared by the tests: settings, sample cards, a programmable card server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.settings import Settings

ADMIN = "test-admin-token"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
FIXTURES = Path(__file__).parent / "fixtures"


def make_settings(database_url: str, **overrides: Any) -> Settings:
    """Test settings: loopback allowed, an admin token, no seeds, small limits."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_token": ADMIN,
        "allow_networks": ["127.0.0.0/8", "::1/128"],
        "seeds": [],
        "connect_timeout": 2.0,
        "read_timeout": 5.0,
        "refresh": False,  # tests run the checks themselves (see tests/test_refresh.py)
    }
    values.update(overrides)
    return Settings(**values)


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
