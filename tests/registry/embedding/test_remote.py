"""registry.embedding.remote: an OpenAI-compatible embeddings endpoint, served for real by an
aiohttp server in the test (batches, order, normalization, cache, errors without the key)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.embedding import EmbeddingUnavailable
from registry.embedding.remote import RemoteEmbedder, endpoint


class Embeddings:
    """An embeddings endpoint: a text's vector is (len, count of 'a', 1), answered reversed."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[str | None] = []
        self.status = 200
        self.body: Any = None

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(request.headers.get("Authorization"))
        if self.status != 200 or self.body is not None:
            return web.json_response(self.body or {"error": "no"}, status=self.status)
        data = [
            {"index": i, "embedding": [float(len(t)), float(t.count("a")), 1.0]}
            for i, t in enumerate(body["input"])
        ]
        return web.json_response({"object": "list", "data": data[::-1]})


@pytest.fixture
async def served(aiohttp_server: Any) -> tuple[Embeddings, TestServer]:
    handler = Embeddings()
    app = web.Application()
    app.router.add_post("/v1/embeddings", handler.handle)
    return handler, await aiohttp_server(app)


async def test_vectors_in_order_normalized_in_batches_and_cached(served: Any) -> None:
    handler, server = served
    model = RemoteEmbedder(str(server.make_url("/v1")), "m", "sk-key", batch_size=2)
    try:
        vectors = await model.embed(["a", "bbb", "aaaa", "c", "a"])
        assert vectors.shape == (5, 3) and model.dim == 3
        expected = np.array([1.0, 1.0, 1.0]) / np.sqrt(3)
        np.testing.assert_allclose(vectors[0], expected, rtol=1e-6)
        np.testing.assert_allclose(vectors[4], vectors[0])
        assert [len(r["input"]) for r in handler.requests] == [2, 2]  # 4 distinct texts
        assert handler.requests[0]["model"] == "m"
        assert set(handler.headers) == {"Bearer sk-key"}
        await model.embed(["bbb"])
        assert len(handler.requests) == 2  # from the cache
    finally:
        await model.close()


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (401, {"error": "bad key"}, "HTTP 401"),
        (500, {"error": "boom"}, "HTTP 500"),
        (200, {"data": "nope"}, "without 1 embedding"),
        (200, {"data": [{"index": 0, "embedding": "x"}]}, "wrong shape"),
    ],
)
async def test_failures_name_the_url_not_the_key(
    served: Any, status: int, body: Any, problem: str
) -> None:
    handler, server = served
    handler.status, handler.body = status, body
    model = RemoteEmbedder(str(server.make_url("")), "m", "sk-secret")
    try:
        with pytest.raises(EmbeddingUnavailable) as caught:
            await model.embed(["hello"])
    finally:
        await model.close()
    assert problem in str(caught.value) and "/v1/embeddings" in str(caught.value)
    assert "sk-secret" not in str(caught.value)


async def test_another_dimension_is_an_error(served: Any) -> None:
    handler, server = served
    model = RemoteEmbedder(str(server.make_url("/v1/embeddings")), "m")
    try:
        await model.embed(["x"])
        handler.body = {"data": [{"index": 0, "embedding": [1.0, 2.0]}]}
        with pytest.raises(EmbeddingUnavailable, match="2 dimensions after 3"):
            await model.embed(["y"])
    finally:
        await model.close()


async def test_an_endpoint_that_cannot_be_reached() -> None:
    model = RemoteEmbedder("http://127.0.0.1:9", "m", timeout=2.0)
    try:
        with pytest.raises(EmbeddingUnavailable, match="cannot be reached"):
            await model.embed(["x"])
    finally:
        await model.close()


def test_the_url_rule() -> None:
    assert endpoint("http://h:1", "embeddings") == "http://h:1/v1/embeddings"
    assert endpoint("http://h:1/v1/", "embeddings") == "http://h:1/v1/embeddings"
    assert endpoint("http://h:1/x/embeddings", "embeddings") == "http://h:1/x/embeddings"
    assert endpoint("http://h:1/v1", "chat/completions") == "http://h:1/v1/chat/completions"
    model = RemoteEmbedder("http://h:1/v1", "bge")
    assert model.model_id == "openai:bge@h:1/v1/embeddings"
