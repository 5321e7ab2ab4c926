"""Spans around the registry's work: crawling a card and verifying it.

The registry never imports the router, so its objects are instrumented from here:
:func:`trace_registry` wraps the crawler's ``discover`` and ``fetch_card`` and the verifier's
``check`` of one :class:`~registry.service.Registry` (instance attributes; the classes are
untouched). Spans: ``discover card`` (the well-known URLs tried in turn), ``crawl card`` (one
card URL: its status, 304), ``verify card`` (the verification status, key id and payload form).
A failed crawl is an error span with the registry's error code (``switchboard.error.code``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from registry.errors import RegistryError
from registry.netguard import redact_url
from registry.service import Registry
from router.tracing.spans import URL_FULL, tracer

__all__ = [
    "CARD_NOT_MODIFIED",
    "ERROR_CODE",
    "KEY_ID",
    "PAYLOAD_FORM",
    "VERIFICATION",
    "trace_registry",
]

ERROR_CODE = "switchboard.error.code"
CARD_NOT_MODIFIED = "switchboard.card.not_modified"
VERIFICATION = "switchboard.verification.status"
KEY_ID = "switchboard.verification.kid"
PAYLOAD_FORM = "switchboard.verification.payload_form"
_STATUS = "http.response.status_code"


def trace_registry(registry: Registry) -> None:
    """Record spans for ``registry``'s crawls and verifications from now on."""
    crawler = registry.crawler
    crawler.fetch_card = _crawl("crawl card", crawler.fetch_card, SpanKind.CLIENT)  # type: ignore[method-assign]
    crawler.discover = _crawl("discover card", crawler.discover, SpanKind.INTERNAL)  # type: ignore[method-assign]
    registry.verifier.check = _verify(registry.verifier.check)  # type: ignore[method-assign]


def _crawl(name: str, fetch: Callable[..., Awaitable[Any]], kind: SpanKind) -> Any:
    @functools.wraps(fetch)
    async def wrapper(url: str, **kwargs: Any) -> Any:
        with tracer().start_as_current_span(
            name, kind=kind, record_exception=False, set_status_on_exception=False
        ) as span:
            if span.is_recording():
                span.set_attribute(URL_FULL, redact_url(url))
            try:
                fetched = await fetch(url, **kwargs)
            except RegistryError as error:
                if span.is_recording():
                    span.set_attribute(ERROR_CODE, error.code)
                    span.set_status(Status(StatusCode.ERROR, error.code))
                raise
            if span.is_recording():
                span.set_attributes(
                    {_STATUS: fetched.status, CARD_NOT_MODIFIED: bool(fetched.not_modified)}
                )
            return fetched

    return wrapper


def _verify(check: Callable[[Any], Awaitable[Any]]) -> Any:
    @functools.wraps(check)
    async def wrapper(data: Any) -> Any:
        with tracer().start_as_current_span(
            "verify card", record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                card, record = await check(data)
            except RegistryError as error:  # not a valid card
                if span.is_recording():
                    span.set_attribute(ERROR_CODE, error.code)
                    span.set_status(Status(StatusCode.ERROR, error.code))
                raise
            if span.is_recording():
                span.set_attribute(VERIFICATION, record.status)
                if record.kid:
                    span.set_attribute(KEY_ID, record.kid)
                if record.payload_form:
                    span.set_attribute(PAYLOAD_FORM, record.payload_form)
            return card, record

    return wrapper
