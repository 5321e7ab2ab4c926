"""Starting the semantic tier from the settings: which model, where it comes from, and the
lexical fallback when it cannot be had.

- ``SWITCHBOARD_MATCHER=lexical``: no model; words alone (BM25), as before.
- ``SWITCHBOARD_EMBEDDINGS_URL``: an OpenAI-compatible ``/v1/embeddings`` endpoint
  (``SWITCHBOARD_EMBEDDINGS_MODEL``, ``SWITCHBOARD_EMBEDDINGS_API_KEY``).
- else a local model directory: ``SWITCHBOARD_EMBEDDING_MODEL``, or the default
  all-MiniLM-L6-v2 under ``SWITCHBOARD_DATA_DIR/models`` (``switchboard models fetch`` puts it
  there; ``serve --demo`` and ``SWITCHBOARD_MODEL_FETCH=true`` fetch it when it is missing).

A model that cannot be loaded is logged once at start with what to do, and routing goes by
words (:attr:`router.choose.matcher.Matcher.status` says so in explain and ``/readyz``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from registry.egress import OutboundProxy
from registry.embedding import EmbeddingUnavailable
from registry.embedding.bert import BertEmbedder
from registry.embedding.fetch import DEFAULT_MODEL, ModelFetchError, fetch_model, model_path
from registry.embedding.remote import RemoteEmbedder
from registry.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Loaded:
    """The embedder to use (None: words alone) and how matching works, in one line."""

    embedder: Any | None
    status: str


def describe(embedder: Any) -> str:
    """The status line of a working semantic tier."""
    return f"semantic ({getattr(embedder, 'name', embedder.model_id)})"


def data_dir(settings: Settings | None = None) -> Path:
    """The data directory of these settings (default: of the environment's)."""
    return Path((settings or Settings()).data_dir).expanduser()


def model_directory(settings: Settings) -> Path:
    """The local model directory the settings name (it may not exist yet)."""
    if settings.embedding_model:
        return Path(settings.embedding_model).expanduser()
    return model_path(data_dir(settings), DEFAULT_MODEL)


_LOADED: dict[tuple[str, int], BertEmbedder] = {}
_LOADING = threading.Lock()


def local_embedder(directory: Path | None = None, *, max_tokens: int = 128) -> BertEmbedder:
    """The local model in ``directory`` (default: the default model in the default data
    directory), loaded once per process (its weights are read-only); raises what loading
    raises."""
    directory = (directory or model_directory(Settings())).resolve()
    key = (str(directory), max_tokens)
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = BertEmbedder(directory, max_tokens=max_tokens)
        return _LOADED[key]


def _load_local(settings: Settings) -> BertEmbedder:
    directory = model_directory(settings)
    if not settings.embedding_model and settings.model_fetch:
        proxy = OutboundProxy.from_settings(settings)
        directory = fetch_model(data_dir(settings), log=log.info, proxy=proxy)
    return local_embedder(directory, max_tokens=settings.embedding_max_tokens)


async def load_embedder(settings: Settings, *, quiet: bool = False) -> Loaded:
    """The embedder the settings ask for (see the module docs); never raises. ``quiet``: no
    warning when there is none (said once already)."""
    if settings.matcher == "lexical":
        return Loaded(None, "lexical (SWITCHBOARD_MATCHER=lexical)")
    if settings.embeddings_url:
        if not settings.embeddings_model:
            reason = "SWITCHBOARD_EMBEDDINGS_URL is set but SWITCHBOARD_EMBEDDINGS_MODEL is not"
            return _fallback(reason, quiet)
        remote = RemoteEmbedder(
            settings.embeddings_url,
            settings.embeddings_model,
            settings.embeddings_api_key,
            proxy=OutboundProxy.from_settings(settings),
        )
        return Loaded(remote, describe(remote))
    try:
        embedder = await asyncio.to_thread(_load_local, settings)
    except (EmbeddingUnavailable, ModelFetchError, OSError, ValueError) as exc:
        hint = (
            ""
            if settings.embedding_model or "models fetch" in str(exc)
            else ("; run `switchboard models fetch`")
        )
        where = model_directory(settings)
        reason = f"the embedding model could not be loaded from {where}: {exc}{hint}"
        return _fallback(reason, quiet)
    one_blas_thread()
    return Loaded(embedder, describe(embedder))


def one_blas_thread() -> None:
    """Run numpy's BLAS in one thread in this process. The router embeds messages in batches,
    several at once in threads of their own (``SWITCHBOARD_EMBEDDING_THREADS``): BLAS threads
    on top of those would spin on the same cores, beside the event loop (new messages through
    the evaluation catalog at 64 connections on 2 CPUs: 2 threads of one-thread BLAS 171
    req/s and 9.6 ms of CPU per call; one thread of two-thread BLAS 134 req/s, 14.6 ms)."""
    threadpool_limits(limits=1, user_api="blas")


def _fallback(reason: str, quiet: bool = False) -> Loaded:
    if not quiet:
        log.warning("routing by words only (lexical matching): %s", reason)
    return Loaded(None, f"lexical (fallback: {reason})")
