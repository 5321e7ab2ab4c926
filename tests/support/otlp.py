"""An OTLP HTTP/protobuf receiver on loopback, standing in for an OpenTelemetry collector."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["otlp_receiver"]


async def otlp_receiver(
    aiohttp_server: Any,
) -> tuple[str, asyncio.Queue[ExportTraceServiceRequest]]:
    """A receiver started with the ``aiohttp_server`` fixture: its URL (the exporter's
    endpoint), and the export requests it gets, as they come."""
    received: asyncio.Queue[ExportTraceServiceRequest] = asyncio.Queue()

    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        received.put_nowait(export)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/"), received
