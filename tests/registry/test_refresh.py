"""Scheduled refresh, health and card history (issue 5), on SQLite and PostgreSQL.

Time is a fake clock injected into the registry's refresh policy; the tests run the due checks
themselves (``Refresher.run_due``) instead of waiting for real intervals. The card server is a
real aiohttp server whose content, ETag and status each test changes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from sqlalchemy import text

from registry.api import REFRESHER, REGISTRY
from registry.health import RefreshPolicy
from registry.refresh import Refresher
from registry.store import Store
from router.app import create_app
from tests.support.clock import FakeClock
from tests.support.helpers import AUTH, CardServer, card_v1, make_settings

CARD = "/.well-known/agent-card.json"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def _app(aiohttp_client: Any, db_url: str, clock: FakeClock, **overrides: Any) -> TestClient:
    settings = make_settings(db_url, refresh_jitter=0, **overrides)
    app = create_app(settings)
    app[REGISTRY].policy.clock = clock
    return await aiohttp_client(app)


@pytest.fixture
async def sb(aiohttp_client: Any, db_url: str, clock: FakeClock) -> TestClient:
    """Switchboard with a fake clock and no jitter (interval 300 s, retries 5 s doubling)."""
    return await _app(aiohttp_client, db_url, clock)


async def _register(sb: TestClient, url: str, **extra: Any) -> dict[str, Any]:
    resp = await sb.post("/api/v1/agents", json={"url": url, **extra}, headers=AUTH)
    assert resp.status == 201, await resp.text()
    return await resp.json()


async def _agent(sb: TestClient, agent_id: str) -> dict[str, Any]:
    resp = await sb.get(f"/api/v1/agents/{agent_id}")
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def _lease(sb: TestClient) -> Refresher:
    refresher = sb.app[REFRESHER]
    assert await refresher.renew_lease()
    return refresher


async def _run(refresher: Refresher, clock: FakeClock, seconds: float) -> Any:
    """Let ``seconds`` pass (the lease renewed meanwhile, as its job would), then run the due
    checks."""
    clock.advance(seconds)
    assert await refresher.renew_lease()
    return await refresher.run_due()


def _message(text: str) -> dict[str, Any]:
    return {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}


def _card_requests(card_server: CardServer) -> list[Any]:
    return [r for r in card_server.requests if r.path.endswith(CARD)]


def _ts(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


# --- a changed card ------------------------------------------------------------------------


async def test_a_changed_card_is_reindexed_with_a_revision_and_diff(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card = card_v1(card_server.url())
    card_server.set(CARD, card, ETag='"v1"')
    agent = await _register(sb, card_server.url())
    refresher = await _lease(sb)

    changed = card_v1(card_server.url(), description="Forecasts, tides and storm warnings.")
    changed["capabilities"] = {"streaming": False}
    changed["skills"] = [
        {**changed["skills"][0], "description": "Ten-day forecast for a city."},
        {"id": "tides", "name": "Tide tables", "description": "High and low tides for a port."},
    ]
    card_server.set(CARD, changed, ETag='"v2"')

    assert (await refresher.run_due()).checked == []  # not due yet: nothing fetched
    assert card_server.hits(CARD) == 1
    report = await _run(refresher, clock, 300)
    assert report.checked == [agent["id"]] and report.changed == [agent["id"]]
    assert _card_requests(card_server)[-1].headers["If-None-Match"] == '"v1"'

    # search and routing see the new card
    skills = await (await sb.get("/api/v1/skills", params={"skill": "tides"})).json()
    assert [s["agent"]["id"] for s in skills["skills"]] == [agent["id"]]
    explain = await sb.post(
        "/api/v1/route/explain",
        json={"version": "1.0", "message": _message("tide tables")},
    )
    assert (await explain.json())["choice"]["skill_id"] == "tides"
    # the router's own card follows
    router_card = await (await sb.get("/.well-known/agent-card.json")).json()
    assert "tides" in {s["id"] for s in router_card["skills"]}

    revisions = (await (await sb.get(f"/api/v1/agents/{agent['id']}/revisions")).json())[
        "revisions"
    ]
    assert [r["initial"] for r in revisions] == [False, True]
    assert revisions[0]["diff"] == {
        "fields": {
            "description": {
                "from": "Forecasts and current conditions for any city.",
                "to": "Forecasts, tides and storm warnings.",
            }
        },
        "skills": {
            "added": ["tides"],
            "removed": ["radar-image"],
            "changed": [{"id": "forecast", "fields": ["description"]}],
        },
        "capabilities": {"streaming": {"from": True, "to": False}},
    }
    assert revisions[0]["verification_status"] == "unsigned"
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["status"] == "healthy" and health["last_success"] == _ts(clock.now)
    assert health["next_card_at"] == _ts(clock.now + timedelta(seconds=300))
    assert health["next_check_at"] == _ts(clock.now + timedelta(seconds=60))  # the probe


async def test_an_unchanged_card_costs_no_write(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card_server.set(CARD, card_v1(card_server.url()), ETag='"v1"')
    agent = await _register(sb, card_server.url())
    refresher = await _lease(sb)
    registry = sb.app[REGISTRY]
    version = registry.catalog.snapshot.version
    for _ in range(2):
        report = await _run(refresher, clock, 300)
        assert report.checked == [agent["id"]] and report.changed == []
    assert _card_requests(card_server)[-1].headers["If-None-Match"] == '"v1"'
    assert registry.catalog.snapshot.version == version  # 304: no card write, no reload
    revisions = await (await sb.get(f"/api/v1/agents/{agent['id']}/revisions")).json()
    assert len(revisions["revisions"]) == 1
    assert (await _agent(sb, agent["id"]))["health"]["last_checked"] == _ts(clock.now)


@pytest.mark.parametrize(
    ("cache_control", "interval"),
    [("max-age=100", 100), ("public, max-age=5", 30), ("max-age=999999999", 86400), (None, 300)],
)
async def test_cache_control_max_age_sets_the_interval_within_bounds(
    sb: TestClient,
    card_server: CardServer,
    clock: FakeClock,
    cache_control: str | None,
    interval: int,
) -> None:
    headers = {"Cache-Control": cache_control} if cache_control else {}
    card_server.set(CARD, card_v1(card_server.url()), **headers)
    agent = await _register(sb, card_server.url())
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["next_card_at"] == _ts(clock.now + timedelta(seconds=interval))


async def test_a_per_agent_interval_overrides_the_default(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card_server.set(CARD, card_v1(card_server.url()), Cache_Control="max-age=1000")
    agent = await _register(sb, card_server.url(), refresh_interval=60)
    assert (await _agent(sb, agent["id"]))["health"]["refresh_interval"] == 60
    url = f"/api/v1/agents/{agent['id']}"
    resp = await sb.patch(url, json={"refresh_interval": 45}, headers=AUTH)
    assert resp.status == 200, await resp.text()
    health = (await resp.json())["health"]
    assert health["next_card_at"] == _ts(clock.now + timedelta(seconds=45))
    assert health["next_check_at"] == _ts(clock.now + timedelta(seconds=45))
    resp = await sb.patch(url, json={"refresh_interval": None}, headers=AUTH)
    health = (await resp.json())["health"]  # back to the card's max-age
    assert health["refresh_interval"] is None
    assert health["next_card_at"] == _ts(clock.now + timedelta(seconds=1000))
    assert health["next_check_at"] == _ts(clock.now + timedelta(seconds=60))
    for body in ({"refresh_interval": 0}, {"refresh_interval": "60"}, {"other": 1}, {}):
        resp = await sb.patch(url, json=body, headers=AUTH)
        assert resp.status == 400 and (await resp.json())["error"]["code"] == "invalid_body"
    assert (await sb.patch(url, json={"refresh_interval": 60})).status == 401
    resp = await sb.patch("/api/v1/agents/nope", json={"refresh_interval": 60}, headers=AUTH)
    assert resp.status == 404


async def test_an_interval_out_of_range_names_the_range_in_whole_seconds(
    sb: TestClient, card_server: CardServer
) -> None:
    card_server.set(CARD, card_v1(card_server.url()))
    agent = await _register(sb, card_server.url())
    expected = (
        '"refresh_interval" must be a number of seconds from 1 to 2592000, or null for the '
        "default (SWITCHBOARD_REFRESH_INTERVAL)"
    )
    for value in (0, 0.5, 2592000.5, 1e9, True):
        resp = await sb.patch(
            f"/api/v1/agents/{agent['id']}", json={"refresh_interval": value}, headers=AUTH
        )
        error = (await resp.json())["error"]
        assert resp.status == 400 and error["code"] == "invalid_body"
        assert error["message"] == expected
        assert error["details"] == {"refresh_interval": value}
    resp = await sb.post(
        "/api/v1/agents", json={"url": card_server.url(), "refresh_interval": -1}, headers=AUTH
    )
    assert resp.status == 400 and (await resp.json())["error"]["message"] == expected


# --- health ----------------------------------------------------------------------------------


async def test_failures_back_off_then_leave_routing_until_the_first_success(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card = card_v1(card_server.url())
    card_server.set(CARD, card)
    agent = await _register(sb, card_server.url())
    refresher = await _lease(sb)
    registry = sb.app[REGISTRY]
    card_server.set(CARD, {"error": "boom"}, status=503)
    card_server.set("/a2a", {"error": "boom"}, status=503)  # the agent's endpoint too

    await _run(refresher, clock, 300)
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["status"] == "degraded" and health["consecutive_failures"] == 1
    assert "503" in health["last_error"]
    assert health["next_check_at"] == _ts(clock.now + timedelta(seconds=5))
    assert registry.routable(registry.get(agent["id"]))

    fetches = card_server.hits(CARD)
    await _run(refresher, clock, 4)  # backing off: not yet
    assert card_server.hits(CARD) == fetches
    await _run(refresher, clock, 1)
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["consecutive_failures"] == 2
    assert health["next_check_at"] == _ts(clock.now + timedelta(seconds=10))  # doubled

    await _run(refresher, clock, 10)
    view = await _agent(sb, agent["id"])
    assert view["health"]["status"] == "unreachable" and view["routable"] is False
    explain = await sb.post(
        "/api/v1/route/explain",
        json={"version": "1.0", "message": _message("weather forecast")},
    )
    result = await explain.json()
    assert result["choice"] is None
    assert "unreachable" in result["candidates"][0]["reason"]
    stats = await (await sb.get("/api/v1/stats")).json()
    assert stats["by_health"] == {"unreachable": 1}
    for status, ids in (("unreachable", [agent["id"]]), ("healthy", [])):
        listed = await (await sb.get("/api/v1/agents", params={"health": status})).json()
        assert [a["id"] for a in listed["agents"]] == ids
        skills = await (await sb.get("/api/v1/skills", params={"health": status})).json()
        assert {s["agent"]["id"] for s in skills["skills"]} == set(ids)
    resp = await sb.get("/api/v1/agents", params={"health": "sick"})
    assert resp.status == 400 and (await resp.json())["error"]["code"] == "invalid_parameter"

    card_server.set(CARD, card)
    del card_server.routes["/a2a"]  # answers 404 again: the endpoint is up
    await _run(refresher, clock, 20)
    view = await _agent(sb, agent["id"])
    assert view["health"]["status"] == "healthy" and view["routable"] is True
    assert view["health"]["consecutive_failures"] == 0
    assert "503" in view["health"]["last_error"]  # kept for the record


async def test_backoff_is_capped(clock: FakeClock) -> None:
    policy = RefreshPolicy(retry_base=5, retry_max=60, jitter=0, clock=clock)
    waits = [(policy.after_failure(clock.now, n) - clock.now).total_seconds() for n in range(1, 9)]
    assert waits == [5, 10, 20, 40, 60, 60, 60, 60]
    assert policy.after_failure(clock.now, 10_000) - clock.now == timedelta(seconds=60)


async def test_a_card_that_newly_fails_verification_leaves_routing_at_once(
    aiohttp_client: Any, db_url: str, clock: FakeClock, card_server: CardServer
) -> None:
    from jwcrypto.jwk import JWK

    from registry.signatures import sign_card

    sb = await _app(aiohttp_client, db_url, clock, require_signed_cards=True)
    key = JWK.generate(kty="EC", crv="P-256", kid="k1")
    resp = await sb.post(
        "/api/v1/keys", json={"jwk": key.export_public(as_dict=True)}, headers=AUTH
    )
    assert resp.status == 201, await resp.text()
    signed = sign_card(card_v1(card_server.url()), key)
    card_server.set(CARD, signed)
    agent = await _register(sb, card_server.url())
    assert agent["routable"] is True
    refresher = await _lease(sb)

    tampered = {**signed, "description": "Changed after signing."}
    card_server.set(CARD, tampered)
    await _run(refresher, clock, 300)
    view = await _agent(sb, agent["id"])
    assert view["verification"]["status"] == "invalid"
    assert view["routable"] is False
    assert view["health"]["status"] == "healthy"  # it answers; its card is what fails
    revisions = (await (await sb.get(f"/api/v1/agents/{agent['id']}/revisions")).json())[
        "revisions"
    ]
    assert revisions[0]["diff"]["verification"] == {"from": "verified", "to": "invalid"}


async def test_a_pushed_agent_is_probed(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card = card_v1(card_server.url())
    resp = await sb.post("/api/v1/agents", json={"card": card}, headers=AUTH)
    agent = await resp.json()
    assert agent["health"]["status"] == "unknown"
    refresher = await _lease(sb)
    await _run(refresher, clock, 300)  # the card server answers 404 at /a2a: it is up
    assert card_server.requests[-1].path == "/a2a"
    assert (await _agent(sb, agent["id"]))["health"]["status"] == "healthy"
    await card_server.server.close()
    await _run(refresher, clock, 300)
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["status"] == "degraded" and "connect" in health["last_error"]


# --- operators -------------------------------------------------------------------------------


async def test_refresh_all_now(sb: TestClient, card_server: CardServer, clock: FakeClock) -> None:
    for name in ("a", "b"):
        card_server.set(
            f"/{name}{CARD}", card_v1(card_server.url(f"/{name}"), name=f"Agent {name}")
        )
        await _register(sb, card_server.url(f"/{name}"))
    card_server.set(f"/b{CARD}", {}, status=500)
    resp = await sb.post("/api/v1/refresh", json={"all": True}, headers=AUTH)
    assert resp.status == 200, await resp.text()
    report = await resp.json()
    assert report["checked"] == 2 and report["changed"] == []
    assert [f["id"] for f in report["failed"]] == ["agent-b"]  # its card; its endpoint is up
    health = (await _agent(sb, "agent-b"))["health"]
    assert health["status"] == "healthy" and "500" in health["card_error"]

    resp = await sb.post("/api/v1/refresh", headers=AUTH)  # no body: what is due now
    assert (await resp.json())["checked"] == 0
    clock.advance(60)  # the probes are due
    resp = await sb.post("/api/v1/refresh", headers=AUTH)
    assert (await resp.json())["checked"] == 2
    resp = await sb.post("/api/v1/refresh", json={"ids": ["agent-a"]}, headers=AUTH)
    assert (await resp.json())["checked"] == 1
    for body, status in (
        ({"ids": ["nope"]}, 404),
        ({"ids": "agent-a"}, 400),
        ({"all": "yes"}, 400),
        ({"all": True, "ids": ["agent-a"]}, 400),
        ({"due_only": True}, 400),
    ):
        resp = await sb.post("/api/v1/refresh", json=body, headers=AUTH)
        assert resp.status == status, await resp.text()
    assert (await sb.post("/api/v1/refresh")).status == 401


async def test_the_card_and_the_endpoint_are_checked_separately(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    """Health follows the agent's endpoint: a card on a CDN says nothing about the agent,
    and a card that moved does not take a live agent out of routing."""
    card_server.set(CARD, card_v1(card_server.url()))
    agent = await _register(sb, card_server.url())
    refresher = await _lease(sb)
    card_server.set("/a2a", {}, status=502)  # the agent is down, its card still served
    await _run(refresher, clock, 60)
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["status"] == "degraded" and "502" in health["last_error"]
    assert len(_card_requests(card_server)) == 1  # only the probe: the card is not due

    del card_server.routes["/a2a"]
    card_server.set(CARD, {"error": "moved"}, status=404)
    await _run(refresher, clock, 300)
    view = await _agent(sb, agent["id"])
    assert view["health"]["status"] == "healthy" and view["routable"] is True
    assert "404" in view["health"]["card_error"]


async def test_a_check_in_flight_is_not_run_twice(
    aiohttp_client: Any, aiohttp_server: Any, db_url: str, clock: FakeClock
) -> None:
    """A check is claimed in the database: while one is in flight, a second manual refresh,
    an operator's refresh of every agent and the schedule leave that agent alone."""
    sb = await _app(aiohttp_client, db_url, clock)
    fetching, release = asyncio.Event(), asyncio.Event()
    fetches = 0

    async def card(request: web.Request) -> web.Response:
        nonlocal fetches
        fetches += 1
        if fetches == 2:  # the first refresh: held until the others have tried
            fetching.set()
            await release.wait()
        origin = str(request.url.origin())
        return web.json_response(card_v1(origin, description=f"Version {fetches}."))

    agent_app = web.Application()
    agent_app.router.add_get(CARD, card)
    server = await aiohttp_server(agent_app)
    agent = await _register(sb, str(server.make_url("")).rstrip("/"))
    url = f"/api/v1/agents/{agent['id']}/refresh"
    first = asyncio.ensure_future(sb.post(url, headers=AUTH))
    await fetching.wait()

    resp = await sb.post(url, headers=AUTH)
    assert resp.status == 409 and (await resp.json())["error"]["code"] == "refresh_in_progress"
    resp = await sb.post("/api/v1/refresh", json={"all": True}, headers=AUTH)
    assert (await resp.json())["skipped"] == [agent["id"]]
    refresher = await _lease(sb)
    assert (await _run(refresher, clock, 60)).checked == []  # its probe is due, but claimed

    release.set()
    resp = await first
    assert resp.status == 200 and (await resp.json())["changed"] is True
    assert fetches == 2
    revisions = await (await sb.get(f"/api/v1/agents/{agent['id']}/revisions")).json()
    assert len(revisions["revisions"]) == 2


async def test_a_burst_of_failed_calls_is_one_failure(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card_server.set(CARD, card_v1(card_server.url()))
    agent = await _register(sb, card_server.url())
    registry = sb.app[REGISTRY]
    await asyncio.gather(*(registry.report_failure(agent["id"], "refused") for _ in range(50)))
    assert registry.health_of(agent["id"]).consecutive_failures == 1
    clock.advance(5)  # SWITCHBOARD_HEALTH_RETRY_BASE later: a new failure
    await registry.report_failure(agent["id"], "refused")
    assert registry.health_of(agent["id"]).consecutive_failures == 2


async def test_a_304_without_cache_control_keeps_the_max_age(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card_server.set(CARD, card_v1(card_server.url()), ETag='"v1"', Cache_Control="max-age=600")
    agent = await _register(sb, card_server.url())
    card_server.set(CARD, card_v1(card_server.url()), ETag='"v1"')  # 304s without the header
    refresher = await _lease(sb)
    await _run(refresher, clock, 600)
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["next_card_at"] == _ts(clock.now + timedelta(seconds=600))


async def test_new_bytes_that_mean_the_same_are_a_revision_without_a_reindex(
    sb: TestClient, card_server: CardServer, clock: FakeClock
) -> None:
    card = card_v1(card_server.url())
    card_server.set(CARD, card)
    agent = await _register(sb, card_server.url())
    registry = sb.app[REGISTRY]
    version = registry.catalog.snapshot.version
    card_server.set(CARD, dict(reversed(list(card.items()))))  # re-ordered: new bytes
    refresher = await _lease(sb)
    assert (await _run(refresher, clock, 300)).changed == [agent["id"]]
    assert registry.catalog.snapshot.version == version  # nothing to re-index
    view = await _agent(sb, agent["id"])
    revisions = (await (await sb.get(f"/api/v1/agents/{agent['id']}/revisions")).json())[
        "revisions"
    ]
    assert [r["diff"] for r in revisions] == [{}, {}]
    assert revisions[0]["sha256"] == view["card_sha256"] != revisions[1]["sha256"]
    assert (await _run(refresher, clock, 300)).changed == []  # the new bytes are known now


# --- replicas --------------------------------------------------------------------------------


async def test_one_replica_holds_the_lease_and_another_takes_over(
    aiohttp_client: Any, db_url: str, clock: FakeClock
) -> None:
    one = await _app(aiohttp_client, db_url, clock)
    two = await _app(aiohttp_client, db_url, clock)
    a, b = one.app[REFRESHER], two.app[REFRESHER]
    assert await a.renew_lease() is True
    assert await b.renew_lease() is False
    clock.advance(20)
    assert await a.renew_lease() is True  # renewed: good for another 30 s
    clock.advance(29)
    assert await b.renew_lease() is False
    assert a.holds_lease() is False  # within the safety margin, a stops crawling first
    clock.advance(2)  # a died without renewing: the lease expired
    assert await b.renew_lease() is True
    assert await a.renew_lease() is False
    await b.release_lease()  # a clean shutdown hands over at once
    assert await a.renew_lease() is True


async def test_two_replicas_never_fetch_the_same_card_twice(
    aiohttp_client: Any, db_url: str, clock: FakeClock, card_server: CardServer
) -> None:
    one = await _app(aiohttp_client, db_url, clock)
    two = await _app(aiohttp_client, db_url, clock)
    names = [f"agent-{n}" for n in range(6)]
    for name in names:
        card_server.set(f"/{name}{CARD}", card_v1(card_server.url(f"/{name}"), name=name))
        await _register(one, card_server.url(f"/{name}"))
    await two.app[REGISTRY].sync()
    a, b = one.app[REFRESHER], two.app[REFRESHER]
    before = len(_card_requests(card_server))
    clock.advance(300)
    assert await a.renew_lease() and not await b.renew_lease()
    reports = await asyncio.gather(a.run_due(), b.run_due())
    assert sorted(reports[0].checked) == names and reports[1].checked == []
    assert len(_card_requests(card_server)[before:]) == len(names)

    # even two replicas that both believe they hold the lease share the work, never repeat it
    clock.advance(300)
    assert await a.renew_lease()
    b._lease_until = clock.now + timedelta(seconds=30)
    reports = await asyncio.gather(a.run_due(), b.run_due())
    assert sorted(reports[0].checked + reports[1].checked) == names
    assert len(_card_requests(card_server)[before:]) == 2 * len(names)
    paths = Counter(r.path for r in _card_requests(card_server)[before:])
    assert sorted(paths.values()) == [2] * len(names)  # once per agent per interval


async def test_a_replica_sees_health_changed_by_another(
    aiohttp_client: Any, db_url: str, clock: FakeClock, card_server: CardServer
) -> None:
    one = await _app(aiohttp_client, db_url, clock, health_unreachable_after=1)
    two = await _app(aiohttp_client, db_url, clock)
    card_server.set(CARD, card_v1(card_server.url()))
    agent = await _register(one, card_server.url())
    registry_two = two.app[REGISTRY]
    await registry_two.sync()
    assert registry_two.health_of(agent["id"]).status == "healthy"
    await one.app[REGISTRY].report_failure(agent["id"], "connection refused")
    assert await registry_two.sync() is False  # no catalog change, only health
    assert registry_two.health_of(agent["id"]).status == "unreachable"
    assert not registry_two.routable(registry_two.get(agent["id"]))


async def test_the_scheduler_refreshes_on_its_own(
    aiohttp_client: Any, db_url: str, card_server: CardServer
) -> None:
    """The APScheduler jobs in a running server: a second fetch happens without any call."""
    settings = make_settings(
        db_url, refresh=True, refresh_tick=0.05, refresh_lease_ttl=3, refresh_jitter=0
    )
    sb = await aiohttp_client(create_app(settings))
    fetched_again = asyncio.Event()
    card_server.set(CARD, card_v1(card_server.url()))
    await _register(sb, card_server.url(), refresh_interval=1)

    class Requests(list[Any]):
        def append(self, request: Any) -> None:
            super().append(request)
            fetched_again.set()

    card_server.requests = Requests(card_server.requests)
    await asyncio.wait_for(fetched_again.wait(), timeout=30)
    health = (await _agent(sb, "weather-agent"))["health"]
    assert health["status"] == "healthy"


# --- storage ---------------------------------------------------------------------------------


async def test_a_nullable_column_added_by_a_newer_version_is_created(db_url: str) -> None:
    """A database of a version before ``diff`` (and before schema migrations: no revision)
    gets the column from the baseline revision (registry/migrations/legacy.py)."""
    store = Store(db_url)
    try:
        await store.create_schema()
        async with store.engine.begin() as conn:
            await conn.execute(text("ALTER TABLE card_revisions DROP COLUMN diff"))
            await conn.execute(text("DROP TABLE alembic_version"))
        await store.create_schema()
        async with store.engine.connect() as conn:
            await conn.execute(text("SELECT diff FROM card_revisions"))
    finally:
        await store.close()


def test_diff_of_interfaces_and_modes_and_a_reformatted_card() -> None:
    from registry.cards import parse_card
    from registry.diff import card_diff

    old = card_v1("http://a.example")
    new = card_v1("http://b.example", defaultInputModes=["text/plain", "image/png"])
    diff = card_diff(parse_card(old), parse_card(new))
    assert diff["interfaces"] == {
        "added": [
            {
                "url": "http://b.example/a2a",
                "binding": "JSONRPC",
                "protocol_version": "1.0",
                "tenant": None,
            }
        ],
        "removed": [
            {
                "url": "http://a.example/a2a",
                "binding": "JSONRPC",
                "protocol_version": "1.0",
                "tenant": None,
            }
        ],
    }
    assert diff["default_input_modes"] == {"added": ["image/png"], "removed": []}
    assert set(diff) == {"interfaces", "default_input_modes", "skills"}  # skills inherit modes
    reordered = dict(reversed(list(old.items())))
    assert card_diff(parse_card(old), parse_card(reordered)) == {}


async def test_a_replica_that_dies_mid_check_hands_over_its_checks(
    aiohttp_client: Any, db_url: str, clock: FakeClock, card_server: CardServer
) -> None:
    """A dies holding the lease and a claimed check: B takes the lease when it expires and
    runs that check when the claim expires."""
    one = await _app(aiohttp_client, db_url, clock)
    two = await _app(aiohttp_client, db_url, clock)
    card_server.set(CARD, card_v1(card_server.url()))
    agent = await _register(one, card_server.url())
    await two.app[REGISTRY].sync()
    a, b = one.app[REFRESHER], two.app[REFRESHER]
    assert await a.renew_lease()
    clock.advance(60)
    store = one.app[REGISTRY].store
    until = clock.now + timedelta(seconds=a.claim_for)
    assert await store.claim(agent["id"], a.holder, clock.now, until, due_only=True)
    # ... and A dies here: no renewal, no result
    clock.advance(31)
    assert await b.renew_lease()
    assert (await b.run_due()).checked == []  # A's claim still stands
    clock.advance(a.claim_for)
    assert await b.renew_lease()
    assert (await b.run_due()).checked == [agent["id"]]


async def test_stopping_the_server_releases_the_lease(db_url: str, clock: FakeClock) -> None:
    from aiohttp.test_utils import TestServer

    app = create_app(make_settings(db_url, refresh=True, refresh_tick=0.05))
    server = TestServer(app)
    await server.start_server()
    refresher = app[REFRESHER]
    store = Store(db_url)
    try:
        assert await refresher.renew_lease()  # as its job does at start
        assert await store.lease_holder("refresh", refresher.registry.policy.now()) == (
            refresher.holder
        )
        await server.close()
        assert await store.lease_holder("refresh", refresher.registry.policy.now()) is None
    finally:
        await store.close()


async def test_a_full_health_reload_keeps_a_newer_local_write(db_url: str) -> None:
    """A check recorded while a full reload is reading must survive the reload."""
    from registry.crawler import Crawler
    from registry.service import Registry
    from tests.support.helpers import card_v03

    registry = Registry(Store(db_url), Crawler(make_settings(db_url)))
    try:
        await registry.load()
        await registry.register_card(card_v03("http://a.example"), "a")
        store = registry.store
        read = store.refresh_rows
        entered, gate = asyncio.Event(), asyncio.Event()

        async def held(since: int = -1) -> Any:
            rows = await read(since)
            entered.set()
            await gate.wait()
            return rows

        store.refresh_rows = held  # type: ignore[method-assign]
        reload = asyncio.create_task(registry.upkeep.reload_health(full=True))
        await entered.wait()
        store.refresh_rows = read  # type: ignore[method-assign]
        await registry.upkeep.record_failure("a", "boom", schedule=True)
        gate.set()
        await reload
        await registry.sync()
        row = await store.refresh_row("a")
        assert row is not None and row.consecutive_failures == 1
        assert registry.health_of("a").consecutive_failures == 1
    finally:
        await registry.store.close()


async def test_a_grpc_only_agent_is_probed_with_a_connection(
    sb: TestClient, clock: FakeClock
) -> None:
    """A gRPC server does not answer HTTP/1.1: its health is a TCP connection."""
    listening = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    card = card_v1(f"http://127.0.0.1:{port}")
    card["supportedInterfaces"] = [
        {"url": f"127.0.0.1:{port}", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
    ]
    resp = await sb.post("/api/v1/agents", json={"card": card}, headers=AUTH)
    agent = await resp.json()
    refresher = await _lease(sb)
    await _run(refresher, clock, 300)
    assert (await _agent(sb, agent["id"]))["health"]["status"] == "healthy"
    listening.close()
    await listening.wait_closed()
    await _run(refresher, clock, 300)
    health = (await _agent(sb, agent["id"]))["health"]
    assert health["status"] == "degraded" and "connect" in health["last_error"], health
