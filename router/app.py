"""The Switchboard application factory: the admin API, the A2A router, health endpoints.

Resources (database engine, crawler session, the catalog sync loop) open and close with the
app through ``cleanup_ctx``; seed files are loaded before the server accepts requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from registry import api
from registry.access.apikeys import ApiKeys
from registry.access.audit import AUDIT, Audit, audit_middleware
from registry.access.authenticate import Authenticator
from registry.access.clientaddr import TRUSTED_PROXIES, TrustedProxies
from registry.access.credentials import AgentCredentials
from registry.access.jwt import JwtVerifier
from registry.access.policy import Policies
from registry.access.secrets import SecretBox
from registry.access.throttle import FailureThrottle
from registry.api import PASSIVE_HEALTH, POLICIES, REFRESHER, REGISTRY, SETTINGS
from registry.apiauth import AUTH_FAILURES
from registry.appkeys import ROUTED_CARD, SEARCH_BY_MEANING
from registry.bodies import RAW_BODIES
from registry.clients_api import CLIENTS, add_client_routes
from registry.crawler import Crawler
from registry.credentials_api import CREDENTIALS, add_credential_routes
from registry.examples import LearnedExamples
from registry.keys_api import KEYS_CHANGED, TRUST, add_key_routes
from registry.policies_api import add_policy_routes
from registry.refresh import PassiveHealth, Refresher, RefreshScheduler
from registry.seedfile import load_seed_file
from registry.seeds import apply_seeds
from registry.service import Registry
from registry.settings import Settings
from registry.store import Store
from registry.trust import TrustStore
from registry.version import switchboard_version
from router.choose.grants import policy_grants
from router.choose.search import search_by_meaning
from router.coherence.board import Board
from router.coherence.notify import Announcer, new_origin
from router.coherence.state import SharedState
from router.coherence.sync import Coherence
from router.forward.credentials import OutboundAuth
from router.forward.handler import Router
from router.modelload import ModelLoader
from router.observe.endpoint import add_observability
from router.signing import CardSigner
from router.tables import SCHEMA
from router.tracing.middleware import server_span
from router.tracing.registry import trace_registry
from router.transport.feedback import EXAMPLES, add_feedback_routes
from router.transport.fresh import COHERENCE, fresh_state
from router.transport.gate import GATE, Gate
from router.transport.ratelimit import CallerLimits
from router.transport.routes import (
    GRPC_ENDPOINT,
    ROUTER,
    SIGNER,
    GrpcEndpoint,
    add_router_routes,
    routed_card,
)
from router.transport.webhooks import add_push_routes
from router.ui.routes import add_ui_routes

log = logging.getLogger(__name__)

SHARED = web.AppKey("shared_state", SharedState)
MODEL = web.AppKey("model", ModelLoader)
ANNOUNCER = web.AppKey("announcer", Announcer)


@dataclass(frozen=True)
class Siblings:
    """What a worker of ``serve --workers N`` shares with the others: the board of writes and
    how to tell them to look at it (:mod:`router.coherence`)."""

    board: Board
    tell: Callable[[], None]
    origin: str
    """The ``serve``'s name in PostgreSQL notifications (its workers skip their own)."""


def create_app(settings: Settings, siblings: Siblings | None = None) -> web.Application:
    """Build the aiohttp application for ``settings`` (nothing is opened until startup);
    ``siblings`` for a worker of several."""
    store, crawler = Store(settings.database_url, SCHEMA), Crawler(settings)
    postgres = store.engine.dialect.name == "postgresql"
    coherence = Coherence(
        lambda: app[SHARED].sync(),
        board=siblings.board if siblings else None,
        tell=siblings.tell if siblings else None,
        announce=(lambda: app[ANNOUNCER].announce()) if postgres else None,
        ack_timeout=settings.write_ack_timeout,
    )
    app = web.Application(
        middlewares=[
            server_span,
            fresh_state(coherence),
            api.error_middleware,
            api.auth_middleware,
            audit_middleware,
        ],
        client_max_size=settings.max_request_bytes,
        handler_args=RAW_BODIES,  # bodies decoded by registry.bodies: every error in JSON
    )
    app[SETTINGS] = settings
    app[COHERENCE] = coherence
    app[CLIENTS] = ApiKeys(store)
    jwt = JwtVerifier(settings) if "jwt" in settings.client_auth_modes() else None
    app[api.AUTHENTICATOR] = Authenticator(settings, keys=app[CLIENTS], tokens=jwt)
    limits = CallerLimits.from_settings(settings)
    limited = limits.limits_requests or limits.limits_streams
    app[TRUSTED_PROXIES] = TrustedProxies(settings.trusted_proxies)
    failures = settings.rate_limit_auth_failures
    if failures:  # one budget per client address for the A2A endpoints and the admin API
        app[AUTH_FAILURES] = FailureThrottle(failures)
    app[GATE] = Gate(
        app[api.AUTHENTICATOR],
        limits if limited else None,
        failures=app.get(AUTH_FAILURES),
        proxies=app[TRUSTED_PROXIES],
    )
    trust = TrustStore(store, crawler, settings.trusted_jku)
    app[TRUST] = trust
    app[AUDIT] = Audit(store)
    app[REGISTRY] = Registry(
        store,
        crawler,
        max_card_bytes=settings.max_card_bytes,
        keys=trust,
        require_signed=settings.require_signed_cards,
        policy=settings.refresh_policy(),
        index_quiet=settings.index_quiet,
        index_max_delay=settings.index_max_delay,
        meaning=settings.matcher == "semantic",
    )
    app[KEYS_CHANGED] = app[REGISTRY].reverify_all
    trace_registry(app[REGISTRY])  # spans around crawls and verifications
    app[REFRESHER] = Refresher(
        app[REGISTRY],
        lease_ttl=settings.refresh_lease_ttl,
        concurrency=settings.refresh_concurrency,
        claim_for=2 * (settings.connect_timeout + settings.read_timeout) + 30,
        on_change=coherence.published,  # a card changed: the other workers, replicas told
    )
    app[ROUTER] = Router(app[REGISTRY], settings)
    app[EXAMPLES] = LearnedExamples(store)
    app[POLICIES] = Policies(store, settings)
    app[ROUTER].grants = policy_grants(app[POLICIES])
    app[SEARCH_BY_MEANING] = search_by_meaning(app[ROUTER].matcher)  # match=semantic searches
    app[ROUTED_CARD] = routed_card  # the catalog's cards for callers who may not see addresses
    app[PASSIVE_HEALTH] = PassiveHealth(app[REGISTRY])
    app[ROUTER].upstream.health = app[PASSIVE_HEALTH]
    app[CREDENTIALS] = AgentCredentials(store)  # its key is read at start (SecretBox)
    app[ROUTER].upstream.auth = OutboundAuth(
        app[CREDENTIALS],
        registry=app[REGISTRY],
        policy=app[ROUTER].upstream.policy,
        connect_timeout=settings.upstream_connect_timeout,
        read_timeout=settings.upstream_timeout,
        proxy=app[ROUTER].upstream.proxy,  # token endpoints through the outbound proxy too
    )
    app[SIGNER] = CardSigner()
    app[MODEL] = ModelLoader(settings, app[REGISTRY], app[ROUTER].chooser, app[EXAMPLES])
    app[SHARED] = SharedState(
        app[REGISTRY],
        app[POLICIES],
        app[CREDENTIALS],
        app[EXAMPLES],
        trust,
        embed_examples=app[MODEL].embed_examples,
    )
    if postgres:
        me = siblings.origin if siblings else new_origin()
        app[ANNOUNCER] = Announcer(settings.database_url, store.engine, coherence.on_announce, me)
    app.cleanup_ctx.append(_registry_context)
    app.cleanup_ctx.append(_verifiers)
    app.cleanup_ctx.append(app[ROUTER].ids.lifespan)  # ID key; task rows written at shutdown
    app.cleanup_ctx.append(_catalog_sync)
    app.cleanup_ctx.append(_upstream_pool)
    app.cleanup_ctx.append(_scheduled_refresh)
    app.cleanup_ctx.append(_push_outbox)
    if settings.grpc_port is not None:
        app[GRPC_ENDPOINT] = GrpcEndpoint()
        app.cleanup_ctx.append(_grpc_binding)  # started when the router is ready
    app.cleanup_ctx.append(_writes_heard)  # last: the worker counts in acknowledgements
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/.well-known/jwks.json", jwks)
    api.add_routes(app)
    add_key_routes(app)
    add_policy_routes(app)
    add_client_routes(app)
    add_credential_routes(app)
    if settings.ui:
        add_ui_routes(app)  # GET / from a browser: the console
    add_router_routes(app)
    add_feedback_routes(app)
    add_push_routes(app)
    add_observability(app)
    return app


async def _registry_context(app: web.Application) -> AsyncIterator[None]:
    registry = app[REGISTRY]
    app[COHERENCE].begin()  # what is loaded now holds every write acknowledged so far
    await registry.crawler.start()
    try:
        await registry.load()
        await app[POLICIES].load()
        await app[MODEL].start()  # the learned examples, the model and the catalog's vectors
        await app[TRUST].load()
        app[CREDENTIALS].box = SecretBox.from_settings(app[SETTINGS])
        await app[CREDENTIALS].load()
        await app[SIGNER].load(registry.store, app[SETTINGS].signing_key_file)
        for path in app[SETTINGS].seeds:
            seeds = load_seed_file(path)
            if await app[TRUST].apply_seed_keys(seeds.keys):
                await registry.reverify_all()
            added = await apply_seeds(registry, seeds.agents)
            log.info("seed file %s: %d agent(s) registered", path, len(added))
        yield
    finally:
        # the embedding of the last registrations gets the grace, then is cancelled (the
        # next start embeds what is left)
        await app[MODEL].close()
        await registry.indexing.close(app[SETTINGS].shutdown_grace)
        await app[ROUTER].chooser.close()
        await registry.crawler.close()
        await registry.store.close()


FREEZE_FROM = 1_000_000
"""Objects alive at start from which :func:`freeze_long_lived` freezes them (about 5,000
agents of ten skills; a full collection of a million takes about 150 ms on 2 cores, of the
130,000 of a router with a few agents tens of milliseconds)."""


async def freeze_long_lived(_app: web.Application | None = None, least: int = FREEZE_FROM) -> None:
    """With at least ``least`` objects alive, collect, then move them all to the permanent
    generation (:func:`gc.freeze`): a full collection no longer walks a large catalog's
    millions of objects (400 ms at 10,000 agents, taken out of whatever requests were in
    flight). Frozen objects are still freed by reference counting when let go. A small heap
    is left alone: its collections are short, and without them a burst of new streams
    opens faster but leaves a larger heap behind (docs/benchmarks.md). ``switchboard
    serve`` calls it once everything has started (an ``on_startup`` handler)."""
    if len(gc.get_objects()) < least:
        return
    gc.collect()
    gc.freeze()


def collect_young_every(allocations: int) -> None:
    """Collect the youngest generation every ``allocations`` net allocations of containers
    (``SWITCHBOARD_GC_THRESHOLD``; CPython's default is 700), the older ones as before.

    Under load the objects of the requests in flight are alive at every young collection, so
    they move to the oldest generation and die there, and CPython collects everything once
    such moves reach a quarter of what lives there: with 700, every 0.8 s at 64 connections
    for a router with one agent, 75 to 105 ms each. A larger value makes those rare (5,000:
    none in 6 s), at the price of a larger heap after a burst of new streams
    (docs/benchmarks.md). ``switchboard serve`` calls it before it starts."""
    gc.set_threshold(allocations, *gc.get_threshold()[1:])


async def _verifiers(app: web.Application) -> AsyncIterator[None]:
    """The JWT issuer's keys, fetched at start (and kept fresh) when JWTs are accepted."""
    tokens = app[api.AUTHENTICATOR].tokens
    if isinstance(tokens, JwtVerifier):
        await tokens.start()
    try:
        yield
    finally:
        if isinstance(tokens, JwtVerifier):
            await tokens.close()


async def _scheduled_refresh(app: web.Application) -> AsyncIterator[None]:
    """Run the scheduled refreshes (when this replica holds the lease), unless
    ``SWITCHBOARD_REFRESH=false``."""
    scheduler = None
    if app[SETTINGS].refresh:
        scheduler = RefreshScheduler(app[REFRESHER], tick=app[SETTINGS].refresh_tick)
        scheduler.start()
    try:
        yield
    finally:
        if scheduler is not None:
            await scheduler.stop()
        await app[PASSIVE_HEALTH].drain()


async def _upstream_pool(app: web.Application) -> AsyncIterator[None]:
    """The router's pooled client to the agents."""
    upstream = app[ROUTER].upstream
    await upstream.start()
    try:
        yield
    finally:
        await upstream.close()


async def _grpc_binding(app: web.Application) -> AsyncIterator[None]:
    """The A2A gRPC binding on ``SWITCHBOARD_GRPC_PORT`` (the ``grpc`` extra, imported only
    then); calls in flight get ``SWITCHBOARD_SHUTDOWN_GRACE`` seconds at shutdown."""
    try:
        from router.transport.grpcserver import GrpcServer
    except ImportError as error:
        raise RuntimeError(
            "SWITCHBOARD_GRPC_PORT is set but gRPC is not installed: "
            "pip install 'a2a-switchboard[grpc]'"
        ) from error
    server = GrpcServer(app[ROUTER], app[GATE], app[SETTINGS], app[COHERENCE])
    app[GRPC_ENDPOINT].port = await server.start()
    try:
        yield
    finally:
        app[GRPC_ENDPOINT].port = None
        await server.stop(app[SETTINGS].shutdown_grace)


_OUTBOX_STOP = 5.0  # seconds the push outbox's round in progress gets at shutdown


async def _push_outbox(app: web.Application) -> AsyncIterator[None]:
    """Deliver the push outbox in the background (this replica's notifications at once,
    other replicas' and retries when due), and follow the tasks of agents without push."""
    outbox, push = app[ROUTER].outbox, app[ROUTER].push
    await push.start(app[CREDENTIALS].box)  # the key was read by _registry_context
    await outbox.start()
    task = asyncio.create_task(outbox.run())
    watching = asyncio.create_task(push.watcher.run())  # synthesized push
    try:
        yield
    finally:
        outbox.stop()  # the round in progress ends cleanly, not cancelled mid-query
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=_OUTBOX_STOP)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await push.watcher.close()
        await outbox.close()


async def _catalog_sync(app: web.Application) -> AsyncIterator[None]:
    """Poll the database so that changes made by other replicas show up here too (the
    fallback of the notifications: :mod:`router.coherence`)."""
    coherence, interval = app[COHERENCE], app[SETTINGS].catalog_sync_interval

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            await coherence.refresh()  # a failure is logged; /readyz reports the database

    task = asyncio.create_task(loop())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _writes_heard(app: web.Application) -> AsyncIterator[None]:
    """From now on this process counts in the acknowledgement of every write, and hears the
    other replicas' (PostgreSQL)."""
    announcer = app.get(ANNOUNCER)
    if announcer is not None:
        await announcer.start()
    app[COHERENCE].join()
    try:
        yield
    finally:
        app[COHERENCE].leave()
        if announcer is not None:
            await announcer.close()


async def jwks(request: web.Request) -> web.Response:
    """The public key the router signs the cards it serves with."""
    return web.json_response(
        request.app[SIGNER].jwks(),
        content_type="application/jwk-set+json",
        headers={"Cache-Control": "public, max-age=300"},
    )


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the process answers, and says which Switchboard it is."""
    return web.json_response({"status": "ok", "version": switchboard_version()})


async def readyz(request: web.Request) -> web.Response:
    """Readiness: the database answers and the catalog is loaded."""
    registry = request.app[REGISTRY]
    checks = {"database": "ok", "catalog": "ok"}  # what readiness needs
    try:
        await registry.store.ping()
    except Exception as exc:  # any driver error means "not ready"; say which
        checks["database"] = f"unreachable: {type(exc).__name__}"
    if not registry.catalog.loaded:
        checks["catalog"] = "not loaded"
    ready = all(value == "ok" for value in checks.values())
    matcher = request.app[ROUTER].matcher
    body: dict[str, Any] = {
        "status": "ready" if ready else "not_ready",
        "checks": {**checks, "model": request.app[MODEL].state},  # words meanwhile: ready
        "agents": len(registry.catalog.snapshot),
        "matcher": matcher.status,
    }
    warnings = []
    if "fallback" in matcher.status:
        warnings.append(f"routing by words only: {matcher.status}")
    if matcher.semantic is not None and matcher.semantic.vectors.failure:
        warnings.append(f"embedding at index time failed: {matcher.semantic.vectors.failure}")
    if warnings:
        body["warnings"] = warnings
    return web.json_response(body, status=200 if ready else 503)
