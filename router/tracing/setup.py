"""The OpenTelemetry SDK provider and its OTLP exporter, from the standard ``OTEL_*`` variables.

:func:`configure` installs a tracer provider only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, ``OTEL_SDK_DISABLED`` is not ``true`` and
``OTEL_TRACES_EXPORTER`` is ``otlp`` (the default) or ``console``; otherwise nothing is
imported or installed and every span is the API's no-op. Spans go over OTLP HTTP/protobuf
through a batch processor; the exporter itself reads the endpoint, ``OTEL_EXPORTER_OTLP_HEADERS``,
``..._TIMEOUT``, ``..._COMPRESSION`` and the certificate variables, the provider reads
``OTEL_TRACES_SAMPLER`` and the batch processor ``OTEL_BSP_*``. The service is
``OTEL_SERVICE_NAME`` (or ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``), else
``switchboard``. The SDK and exporter are the ``otel`` extra: ``pip install
'a2a-switchboard[otel]'``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_SERVICE_NAME", "TracingConfigError", "configure", "wanted"]

DEFAULT_SERVICE_NAME = "switchboard"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
_EXPORTERS = ("otlp", "console", "none")


class TracingConfigError(ValueError):
    """The ``OTEL_*`` variables ask for something Switchboard cannot do; says what to change."""


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the variables ask for traces to be exported (checked, see :func:`configure`)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = _exporter_name(environ)
    if exporter == "none":
        return False
    if exporter == "console":
        return True
    return any(environ.get(name, "").strip() for name in _ENDPOINTS)


def configure(*, install: bool = True) -> Any:
    """Make the SDK tracer provider the process's variables ask for (see the module
    docstring) and,
    with ``install``, make it the global one; return it, or None when none is wanted.

    Raises :class:`TracingConfigError` for an exporter or protocol other than OTLP
    HTTP/protobuf (or ``console``), or when the ``otel`` extra is not installed.
    """
    environ = os.environ
    if not wanted(environ):
        return None
    exporter_name = _exporter_name(environ)
    for name in _PROTOCOLS:
        protocol = environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise TracingConfigError(
                f"{name}={protocol!r} is not supported: Switchboard exports traces over "
                "OTLP HTTP/protobuf; set it to 'http/protobuf' or leave it unset"
            )
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as error:
        raise TracingConfigError(_MISSING) from error
    exporter: Any
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as error:
            raise TracingConfigError(_MISSING) from error
        exporter = OTLPSpanExporter()
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "unknown_service")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if install:
        trace.set_tracer_provider(provider)
    return provider


_MISSING = (
    "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: "
    "pip install 'a2a-switchboard[otel]'"
)


def _exporter_name(environ: Mapping[str, str]) -> str:
    value = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "otlp"
    if value not in _EXPORTERS:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={value!r} is not supported: use 'otlp' (HTTP/protobuf, the "
            "default), 'console' or 'none'"
        )
    return value
