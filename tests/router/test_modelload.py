"""router.modelload: vectors are part of a write. A registration answers once its skills'
vectors are stored and routes by meaning at once; while the model is missing or the
embeddings endpoint fails it answers ``"vectors": "pending"``, routing goes by words (tier
``lexical-fallback``, in explain and the metrics), ``/readyz`` stays ready and says why, and
the vectors come as soon as they can. The embeddings endpoint is a real server of the test's
that answers with the local model's vectors (held at a gate, or failing on demand)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from registry.appkeys import REGISTRY
from registry.metrics import METRICS
from router.app import MODEL, create_app
from router.choose.models import local_embedder
from tests.support.helpers import AUTH, card_v1, make_settings

FLIGHTS = {
    "id": "air-booking",
    "name": "Airline reservations",
    "description": "Reserves seats on commercial flights and changes existing itineraries.",
    "tags": ["airline", "itinerary"],
}
PAYROLL = {
    "id": "salary-statements",
    "name": "Salary statements",
    "description": "Explains payslips, wage deductions and the dates salaries are paid.",
    "tags": ["payroll", "wages"],
}
MESSAGE = "get me on the earliest plane to Berlin on Tuesday"  # no word of either skill
WORDS = "airline reservations for Tuesday"  # the flights skill's own words


class Embeddings:
    """An OpenAI-compatible embeddings endpoint answering with the local model's vectors once
    :attr:`gate` is open (:attr:`asked` is set when a request waits at it); 503 while
    :attr:`down`."""

    def __init__(self, model_dir: Path) -> None:
        self.model = local_embedder(model_dir)
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = asyncio.Event()
        self.down = False

    async def handle(self, request: web.Request) -> web.Response:
        if self.down:
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        texts = (await request.json())["input"]
        self.asked.set()
        await self.gate.wait()
        vectors = await asyncio.to_thread(self.model.embed, texts)
        data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        return web.json_response({"object": "list", "data": data})


async def _remote(aiohttp_server: Any, aiohttp_client: Any, url: str, embeddings: Embeddings):
    endpoint = web.Application()
    endpoint.router.add_post("/v1/embeddings", embeddings.handle)
    model: TestServer = await aiohttp_server(endpoint)
    settings = make_settings(
        url, matcher="semantic", embeddings_url=str(model.make_url("/v1")),
        embeddings_model="minilm",
    )  # fmt: skip
    app = create_app(settings)
    app[MODEL].retry_min = 0.01  # texts whose embedding failed: tried again at once
    return await aiohttp_client(app)


def _card(agent_id: str, skill: dict[str, Any]) -> dict[str, Any]:
    return {"card": card_v1(f"https://{agent_id}.example.com", name=agent_id.title(),
                            skills=[skill]), "id": agent_id}  # fmt: skip


async def _explain(client: TestClient, text: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": "x", "parts": [{"text": text}]}
    resp = await client.post("/api/v1/route/explain", json={"version": "1.0", "message": message})
    return await resp.json()


async def test_a_registration_answers_once_its_vectors_are_stored(
    aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str, model_dir: Path
) -> None:
    embeddings = Embeddings(model_dir)
    client = await _remote(aiohttp_server, aiohttp_client, sqlite_url, embeddings)
    assert (
        await client.post("/api/v1/agents", json=_card("payroll", PAYROLL), headers=AUTH)
    ).status == 201
    embeddings.gate.clear()
    embeddings.asked.clear()
    posted = asyncio.create_task(
        client.post("/api/v1/agents", json=_card("flights", FLIGHTS), headers=AUTH)
    )
    await embeddings.asked.wait()  # its texts are at the endpoint, held at the gate
    assert not posted.done()  # so the registration has not answered
    status = await (await client.get("/api/v1/status", headers=AUTH)).json()
    assert status["indexing"]["backlog"] > 0
    embeddings.gate.set()
    resp = await posted
    assert resp.status == 201 and (await resp.json())["vectors"] == "ready"
    explained = await _explain(client, MESSAGE)  # at once: no wait for anything
    assert explained["choice"]["agent_id"] == "flights", explained
    assert explained["choice"]["tier"] == "semantic" and "vectors" not in explained


async def test_an_endpoint_down_means_pending_then_vectors_as_soon_as_it_is_back(
    aiohttp_server: Any, aiohttp_client: Any, sqlite_url: str, model_dir: Path
) -> None:
    embeddings = Embeddings(model_dir)
    client = await _remote(aiohttp_server, aiohttp_client, sqlite_url, embeddings)
    loader, registry = client.app[MODEL], client.app[REGISTRY]
    embeddings.down = True
    resp = await client.post("/api/v1/agents", json=_card("flights", FLIGHTS), headers=AUTH)
    assert resp.status == 201 and (await resp.json())["vectors"] == "pending"
    ready = await (await client.get("/readyz")).json()
    assert ready["status"] == "ready" and ready["checks"]["model"].startswith("embedding failed")
    explained = await _explain(client, WORDS)
    assert explained["vectors"] == "pending" and explained["vectors_pending"] == 1
    assert explained["choice"]["tier"] == "lexical-fallback", explained
    before = (
        METRICS.get_sample_value(
            "switchboard_routing_decisions_total", {"tier": "lexical-fallback", "agent": "flights"}
        )
        or 0.0
    )
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "role": "ROLE_USER", "messageId": "m", "parts": [{"text": WORDS}]}}}  # fmt: skip
    await client.post("/", json=body, headers={"A2A-Version": "1.0"})  # the agent is not there
    after = METRICS.get_sample_value(
        "switchboard_routing_decisions_total", {"tier": "lexical-fallback", "agent": "flights"}
    )
    assert after == before + 1
    embeddings.down = False  # back: the next try embeds them
    record = registry.get("flights")
    async with loader.embedded:
        await asyncio.wait_for(
            loader.embedded.wait_for(lambda: registry.vectors.has_all(record)), 10
        )
    explained = await _explain(client, MESSAGE)
    assert explained["choice"]["tier"] == "semantic" and "vectors" not in explained
    assert (await (await client.get("/readyz")).json())["checks"]["model"] == "ok"


async def test_a_model_that_arrives_later_is_loaded_then(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, tmp_path: Path
) -> None:
    later = tmp_path / "model"
    later.mkdir()
    settings = make_settings(sqlite_url, matcher="semantic", embedding_model=str(later))
    app = create_app(settings)
    loader = app[MODEL]
    loader.retry = 0.05  # looked for again often
    client = await aiohttp_client(app)
    ready = await (await client.get("/readyz")).json()
    assert ready["status"] == "ready" and "no embedding model" in ready["checks"]["model"]
    resp = await client.post("/api/v1/agents", json=_card("flights", FLIGHTS), headers=AUTH)
    assert resp.status == 201 and (await resp.json())["vectors"] == "pending"
    explained = await _explain(client, WORDS)
    assert explained["vectors"] == "pending" and explained["choice"]["tier"] == "lexical-fallback"
    _copy_files(model_dir, later)  # what `switchboard models fetch` puts there
    async with loader.embedded:
        await asyncio.wait_for(loader.embedded.wait_for(lambda: not loader.loading and
                                                       app[MODEL].state == "ok"), 30)  # fmt: skip
    explained = await _explain(client, MESSAGE)
    assert (
        explained["choice"]["agent_id"] == "flights" and explained["choice"]["tier"] == "semantic"
    )


def _copy_files(source: Path, target: Path) -> None:
    for item in source.iterdir():
        if item.is_file():
            shutil.copy(item, target / item.name)
