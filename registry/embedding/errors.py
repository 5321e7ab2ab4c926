"""Errors of the embedding models."""

from __future__ import annotations


class EmbeddingUnavailable(Exception):
    """A model that cannot be loaded or an endpoint that cannot answer: the message says what
    is missing and how to fix it."""
