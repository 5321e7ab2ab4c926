"""The HTTP side of read your writes, on a worker whose board it shares with a sibling that
never answers (a worker stuck in a long request) and with writes made by "another worker"
(a second app on the same database bumping the board)."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from registry.api import REGISTRY
from router.app import Siblings, create_app
from router.coherence.board import Board
from router.coherence.sync import Coherence
from router.transport.fresh import COHERENCE, STALE_HEADER
from tests.support.helpers import AUTH, card_v1, make_settings

STUCK = 999_999_999  # a sibling's pid on the board that never applies anything


async def _worker(aiohttp_client: Any, db_url: str, board: Board) -> TestClient:
    settings = make_settings(db_url, write_ack_timeout=0.05, catalog_sync_interval=60)
    return await aiohttp_client(create_app(settings, Siblings(board, lambda: None, "test")))


async def test_a_write_says_how_many_workers_lagged(aiohttp_client: Any, db_url: str) -> None:
    board = Board(4)
    client = await _worker(aiohttp_client, db_url, board)
    body = {"card": card_v1("http://127.0.0.1:9/a"), "id": "a"}
    resp = await client.post("/api/v1/agents", json=body, headers=AUTH)
    assert resp.status == 201 and resp.headers.get(STALE_HEADER) is None
    assert "stale_workers" not in await resp.json()
    board.claim(STUCK, board.generation)  # a sibling that will not apply the next write
    body = {"card": card_v1("http://127.0.0.1:9/b", name="B"), "id": "b"}
    resp = await client.post("/api/v1/agents", json=body, headers=AUTH)
    assert resp.status == 201 and resp.headers[STALE_HEADER] == "1"
    assert (await resp.json())["stale_workers"] == 1
    resp = await client.delete("/api/v1/agents/b", headers=AUTH)  # 204: the header says it
    assert resp.status == 204 and resp.headers[STALE_HEADER] == "1"
    assert board.behind(board.generation) == [STUCK]
    coherence: Coherence = client.app[COHERENCE]
    assert not coherence.behind  # the writer itself has every write


async def test_refused_and_read_requests_are_not_writes(aiohttp_client: Any, db_url: str) -> None:
    board = Board(4)
    client = await _worker(aiohttp_client, db_url, board)
    assert (await client.post("/api/v1/agents", json={}, headers=AUTH)).status == 400
    assert (await client.get("/api/v1/agents", headers=AUTH)).status == 200
    explain = {"version": "1.0", "message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    await client.post("/api/v1/route/explain", json=explain, headers=AUTH)
    assert board.generation == 0


async def test_a_worker_behind_catches_up_before_it_answers(
    aiohttp_client: Any, db_url: str
) -> None:
    board = Board(4)
    reader = await _worker(aiohttp_client, db_url, board)
    writer = await _worker(aiohttp_client, db_url, board)
    # the writer's write lands in the database; the reader has not synced (no poll)
    await writer.app[REGISTRY].register_card(card_v1("http://127.0.0.1:9/c"), "c")
    assert (await reader.get("/api/v1/agents/c", headers=AUTH)).status == 404  # not told yet
    board.bump()  # what the writer's acknowledgement does
    assert reader.app[COHERENCE].behind
    resp = await reader.get("/api/v1/agents/c", headers=AUTH)
    assert resp.status == 200, await resp.text()
    assert not reader.app[COHERENCE].behind


async def test_status_shows_the_workers_writes(aiohttp_client: Any, db_url: str) -> None:
    board = Board(4)
    client = await _worker(aiohttp_client, db_url, board)
    body = {"card": card_v1("http://127.0.0.1:9/a"), "id": "a"}
    assert (await client.post("/api/v1/agents", json=body, headers=AUTH)).status == 201
    writes = (await (await client.get("/api/v1/status", headers=AUTH)).json())["writes"]
    pid = str(client.app[COHERENCE].pid)
    assert writes["generation"] == writes["applied"] == 1
    assert writes["workers"] == {pid: 1}
