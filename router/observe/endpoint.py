"""``GET /metrics``: the Prometheus exposition, on the main port or on its own.

:func:`add_observability` wires an application: request ids on every response
(:mod:`router.observe.http`), ``GET /api/v1/status`` (:mod:`router.observe.status`) and the
metrics endpoint per the settings:

- ``SWITCHBOARD_METRICS=off``: no endpoint (``/metrics`` answers 404); metrics are still
  counted (the cost is a few counter increments per call).
- ``SWITCHBOARD_METRICS_PORT`` set: served on that port (same host) without authentication,
  and not on the main port: an internal port for the scraper.
- otherwise on the main port; with ``SWITCHBOARD_READ_TOKEN`` set or client authentication on
  it needs a caller with the reader or admin role (as the admin API's reads of the whole
  catalog), else it is open. With several workers it adds up every worker's metrics
  (:mod:`router.observe.multiprocess`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from registry.access.errors import AuthError
from registry.appkeys import AUTHENTICATOR, REFRESHER, REGISTRY, SETTINGS
from registry.errors import RegistryError
from registry.metrics import METRICS
from router.observe import multiprocess
from router.observe.collector import CatalogCollector
from router.observe.http import add_request_id_header, request_id_middleware
from router.observe.status import add_status_route

__all__ = ["EXPOSITION", "METRICS_ENDPOINT", "MetricsEndpoint", "add_observability", "metrics"]

METRICS_PATH = "/metrics"


@dataclass
class MetricsEndpoint:
    """The separate metrics port once it listens (None: metrics are not served on their own)."""

    port: int | None = None


class _Process(Collector):
    """The process-wide metrics (:data:`registry.metrics.METRICS`) inside an app's exposition."""

    def collect(self) -> Iterator[Metric]:
        """Every process-wide metric."""
        yield from METRICS.collect()


EXPOSITION = web.AppKey("exposition", CollectorRegistry)
METRICS_ENDPOINT = web.AppKey("metrics_endpoint", MetricsEndpoint)


def add_observability(app: web.Application) -> None:
    """Request ids on every response; ``/metrics`` where the settings say (module docstring).
    ``app`` holds SETTINGS, REGISTRY and REFRESHER."""
    app.middlewares.insert(0, request_id_middleware)  # outermost: errors get the id too
    app.on_response_prepare.append(add_request_id_header)
    add_status_route(app)
    settings = app[SETTINGS]
    if not settings.metrics:
        return
    exposition = CollectorRegistry()
    files = multiprocess.directory() if settings.metrics_port is None else None
    if files is None:
        exposition.register(_Process())
        exposition.register(CatalogCollector(app[REGISTRY], app.get(REFRESHER)))
    else:  # one of several workers: every worker's metrics, added up
        exposition.register(multiprocess.collector(files))
        exposition.register(CatalogCollector(app[REGISTRY]))  # the lease: in the files
        refresher = app.get(REFRESHER)
        if refresher is not None:
            app.cleanup_ctx.append(lambda _: multiprocess.lease_gauge(refresher.holds_lease))
    app[EXPOSITION] = exposition
    if settings.metrics_port is None:
        app.router.add_get(METRICS_PATH, metrics)
        return
    app[METRICS_ENDPOINT] = MetricsEndpoint()
    app.cleanup_ctx.append(_metrics_port)


async def metrics(request: web.Request) -> web.Response:
    """The Prometheus text exposition (the main port's, guarded as the module docstring says)."""
    await _check_reader(request)
    return _exposition(request.app[EXPOSITION])


def _exposition(exposition: CollectorRegistry) -> web.Response:
    response = web.Response(body=generate_latest(exposition))
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


async def _check_reader(request: web.Request) -> None:
    settings, authenticator = request.app[SETTINGS], request.app[AUTHENTICATOR]
    if not settings.read_token and not authenticator.client_auth:
        return
    challenge = {"WWW-Authenticate": authenticator.challenge()}
    try:
        principal = await authenticator.authenticate(request.headers)
    except AuthError as error:
        raise web.HTTPUnauthorized(reason=error.message, headers=challenge) from None
    if principal is None:
        raise web.HTTPUnauthorized(
            reason="missing credentials: send 'Authorization: Bearer <token>'", headers=challenge
        )
    if not principal.is_reader:
        raise RegistryError(
            "metrics need the reader or admin role", code="forbidden", status=403,
            details={"caller": principal.label()},
        )  # fmt: skip


async def _metrics_port(app: web.Application) -> AsyncIterator[None]:
    """Serve ``/metrics`` on ``SWITCHBOARD_METRICS_PORT`` while ``app`` runs."""
    exposition, settings = app[EXPOSITION], app[SETTINGS]

    async def scrape(request: web.Request) -> web.Response:
        return _exposition(exposition)

    exporter = web.Application()
    exporter.router.add_get(METRICS_PATH, scrape)
    runner = web.AppRunner(exporter, access_log=None)
    await runner.setup()
    try:
        # a worker of several shares the port its supervisor holds (router/cli/ports.py)
        shared = (settings.workers or 1) > 1 or None
        await web.TCPSite(runner, settings.host, settings.metrics_port, reuse_port=shared).start()
        app[METRICS_ENDPOINT].port = runner.addresses[0][1]
        yield
    finally:
        app[METRICS_ENDPOINT].port = None
        await runner.cleanup()
