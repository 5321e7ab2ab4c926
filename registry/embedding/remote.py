"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (TEI, vLLM, Ollama, a cloud
API) instead of a local model.

The URL may be a base (``http://host:8080`` or ``http://host:8080/v1``) or the endpoint
itself: a path ending in ``/embeddings`` is used as it is, ``/embeddings`` is appended to one
ending in ``/v1``, else ``/v1/embeddings``. Texts go in batches; answers are put back in
order by their ``index``; vectors are L2-normalized; message vectors are cached by text. The
API key is sent as ``Authorization: Bearer`` and never appears in errors or logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import numpy as np
from cachetools import LRUCache

from registry.egress import OutboundProxy
from registry.embedding.errors import EmbeddingUnavailable
from registry.outbound import outbound_middlewares


def endpoint(url: str, leaf: str) -> str:
    """The full endpoint URL for ``leaf`` (``embeddings``, ``chat/completions``)."""
    base = url.rstrip("/")
    if base.endswith("/" + leaf):
        return base
    if base.endswith("/v1"):
        return f"{base}/{leaf}"
    return f"{base}/v1/{leaf}"


class LazySession:
    """An aiohttp client session given, or opened at first use (through ``proxy``, the
    operator's outbound proxy, unless its no-proxy list names the host) and closed by
    :meth:`close`."""

    def __init__(
        self, session: aiohttp.ClientSession | None = None, proxy: OutboundProxy | None = None
    ) -> None:
        self._session = session
        self._own_session = session is None
        self._proxy = proxy

    async def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                middlewares=outbound_middlewares(self._proxy, None), trust_env=False
            )
            self._own_session = True
        return self._session

    async def close(self) -> None:
        """Close the session if this object opened it."""
        if self._own_session and self._session is not None:
            await self._session.close()


class RemoteEmbedder(LazySession):
    """Vectors from an OpenAI-compatible embeddings endpoint."""

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        *,
        batch_size: int = 64,
        timeout: float = 10.0,
        cache_size: int = 4096,
        session: aiohttp.ClientSession | None = None,
        proxy: OutboundProxy | None = None,
    ) -> None:
        self.url = endpoint(url, "embeddings")
        self.model = model
        self._key = api_key
        self.batch_size = batch_size
        self.timeout = timeout
        self.dim: int | None = None
        parts = urlsplit(self.url)
        self.model_id = f"openai:{model}@{parts.netloc}{parts.path}"
        self.name = f"{model} at {parts.scheme}://{parts.netloc}{parts.path}"
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=cache_size)
        super().__init__(session, proxy)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalized float32 row per text; EmbeddingUnavailable on any failure."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            for text, vector in zip(chunk, await self._request(chunk), strict=True):
                self._cache[text] = vector
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    async def _request(self, texts: list[str]) -> list[np.ndarray]:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        try:
            session = await self._open()
            async with session.post(
                self.url,
                json=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    start = raw[:200].decode("utf-8", "replace")
                    raise EmbeddingUnavailable(f"{self.url} answered HTTP {resp.status}: {start}")
                data = await resp.json(content_type=None)
        except TimeoutError:
            raise EmbeddingUnavailable(
                f"{self.url} did not answer within {self.timeout:g} s"
            ) from None
        except aiohttp.ClientError as exc:
            raise EmbeddingUnavailable(f"{self.url} cannot be reached: {exc}") from None
        except ValueError:
            raise EmbeddingUnavailable(f"{self.url} answered something that is not JSON") from None
        return self._vectors(data, len(texts))

    def _vectors(self, data: Any, count: int) -> list[np.ndarray]:
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list) or len(rows) != count:
            raise EmbeddingUnavailable(
                f"{self.url} answered without {count} embedding(s) in 'data'"
            )
        try:
            ordered = sorted(rows, key=lambda r: int(r.get("index", 0)))
            vectors = [np.asarray(r["embedding"], dtype=np.float32) for r in ordered]
        except (TypeError, KeyError, ValueError, AttributeError):
            raise EmbeddingUnavailable(
                f"{self.url} answered embeddings of the wrong shape"
            ) from None
        out = []
        for vector in vectors:
            if vector.ndim != 1 or not len(vector):
                raise EmbeddingUnavailable(f"{self.url} answered an embedding that is no vector")
            if self.dim is None:
                self.dim = len(vector)
            elif len(vector) != self.dim:
                raise EmbeddingUnavailable(
                    f"{self.url} answered {len(vector)} dimensions after {self.dim}: a different "
                    "model behind the same name?"
                )
            norm = float(np.linalg.norm(vector))
            out.append(vector / norm if norm > 0 else vector)
        return out
