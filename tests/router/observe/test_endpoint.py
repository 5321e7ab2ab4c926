"""Where ``GET /metrics`` is served: the main port (guarded by the read token when there is
one), nowhere with ``SWITCHBOARD_METRICS=off``, or its own port; and that the Grafana
dashboard and the documented queries and alerts name only metrics it really exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from registry.settings import Settings
from router.observe.endpoint import METRICS_ENDPOINT
from tests.router.observe.conftest import routed
from tests.support.helpers import AUTH


def names(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


async def test_served_on_the_main_port(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=")
    assert {"switchboard_a2a_requests", "switchboard_catalog_agents"} <= names(await resp.text())


async def test_off_answers_404(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url, metrics=False)
    assert (await client.get("/metrics")).status == 404


def test_the_setting_reads_off(monkeypatch: Any) -> None:
    monkeypatch.setenv("SWITCHBOARD_METRICS", "off")
    monkeypatch.setenv("SWITCHBOARD_METRICS_PORT", "9464")
    settings = Settings()
    assert settings.metrics is False and settings.metrics_port == 9464


async def test_own_port_and_not_the_main_one(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url, metrics_port=0, read_token="reader")
    assert (await client.get("/metrics")).status == 404
    port = client.app[METRICS_ENDPOINT].port
    assert port is not None and port != client.port
    url = f"http://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:  # no token: internal
        assert resp.status == 200
        assert "switchboard_streams_open" in names(await resp.text())


async def test_the_read_token_guards_the_main_port(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url, read_token="reader")
    refused = await client.get("/metrics")
    assert refused.status == 401
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await client.get("/metrics", headers={"Authorization": "Bearer wrong"})).status == 401
    for token in ("reader", AUTH["Authorization"].removeprefix("Bearer ")):
        resp = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert resp.status == 200, await resp.text()


async def test_client_auth_guards_the_main_port(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url, client_auth="api-key")
    assert (await client.get("/metrics")).status == 401
    assert (await client.get("/metrics", headers=AUTH)).status == 200  # the admin token


DOCS = Path(__file__).parents[3] / "docs"
_NAME = re.compile(r"\b(?:switchboard|process|python)_[a-z0-9_]+\b")
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}


def exported(text: str) -> tuple[set[str], set[str]]:
    """The names a query can use (each family's samples' names by its type), and the
    families' own names."""
    out: set[str] = set()
    families = list(text_string_to_metric_families(text))
    for family in families:
        out.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
        out.update(sample.name for sample in family.samples)
    return out, {family.name for family in families}


def dashboard_queries() -> list[str]:
    """Every query of docs/grafana-switchboard.json."""
    dashboard = json.loads((DOCS / "grafana-switchboard.json").read_text(encoding="utf-8"))
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


def unknown(texts: list[str], known: set[str]) -> set[str]:
    return {name for text in texts for name in _NAME.findall(text)} - known


async def test_the_dashboard_and_the_docs_name_only_exported_metrics(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    known, families = exported(await (await client.get("/metrics")).text())
    queries = dashboard_queries()
    assert len(queries) >= 15
    assert unknown(queries, known) == set()
    operations = (DOCS / "operations.md").read_text(encoding="utf-8")  # scrape config, alerts
    assert unknown([operations], known) == set()
    observability = (DOCS / "observability.md").read_text(encoding="utf-8")  # the tables
    named = unknown([observability], known | families)
    assert {name for name in named if not name.endswith("_")} == set()
    needed = ("a2a_requests_total", "a2a_request_seconds_bucket", "streams_open")
    needed += ("routing_decisions_total", "crawls_total", "upstream_requests_total")
    for name in needed:
        assert any(f"switchboard_{name}" in q for q in queries), name
    assert unknown(["rate(switchboard_a2a_request_total[5m])"], known) == {
        "switchboard_a2a_request_total"
    }  # a misspelt name is caught
