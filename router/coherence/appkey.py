"""The app key under which the app keeps its :class:`~router.coherence.sync.Coherence`."""

from __future__ import annotations

from aiohttp import web

from router.coherence.sync import Coherence

__all__ = ["COHERENCE"]

COHERENCE = web.AppKey("coherence", Coherence)
