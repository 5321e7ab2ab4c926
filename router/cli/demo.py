"""``serve --demo``: the demo agents on free (or chosen) ports, registered at their real URLs.

``seeds/demo.toml`` names each demo agent with its default URL; the agents are started first
(on free ports unless ``--demo-ports`` names them) and each is registered at the URL it really
listens on. A demo agent registered by an earlier run at another URL (another port) is
registered again at the new one.

Each demo agent signs its card with a key of its own, made when it starts and published at
its ``/.well-known/jwks.json``; the ``[[keys]]`` of ``seeds/demo.toml`` trust those JWKS URLs,
moved to the ports the agents really listen on like the agents' URLs (the URLs of an earlier
run's ports are no longer trusted), so the demo agents are ``verified``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from importlib import resources

from aiohttp import web

from registry.api import REGISTRY
from registry.errors import RegistryError
from registry.keys_api import TRUST
from registry.seedfile import SeedAgent, SeedKey, load_seed_file
from registry.seeds import apply_seeds
from registry.trust import jwks_anchor_id
from router.cli.errors import CliError

#: The base URLs of the running demo agents, by name (set once they are started).
DEMO_URLS = web.AppKey("demo_urls", dict)

DEMO_NAMES = ("currency", "translate", "caption")
log = logging.getLogger("switchboard.demo")


def parse_demo_ports(text: str) -> dict[str, int]:
    """``--demo-ports``: three ports ``A,B,C`` (currency, translate, caption) or one start
    port ``A`` (then ``A``, ``A+1``, ``A+2``); ``0`` picks a free port."""
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        numbers = []
    if len(numbers) == 1 and numbers[0] > 0:
        numbers = [numbers[0] + n for n in range(len(DEMO_NAMES))]
    if len(numbers) != len(DEMO_NAMES) or not all(0 <= n <= 65535 for n in numbers):
        raise CliError(
            f"invalid --demo-ports {text!r}: give three ports A,B,C (currency, translate, "
            "caption), or one start port, e.g. --demo-ports 9101",
            status=2,
        )
    fixed = [n for n in numbers if n]
    if len(set(fixed)) != len(fixed):
        raise CliError(f"invalid --demo-ports {text!r}: each agent needs its own port", status=2)
    return dict(zip(DEMO_NAMES, numbers, strict=True))


def demo_agents(ports: dict[str, int]) -> Callable[[web.Application], AsyncIterator[None]]:
    """A ``cleanup_ctx`` that runs the demo agents on ``ports`` for the app's lifetime and
    registers them (to be appended after the registry's own context)."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        from seeds.demo_agents import start_demo_agents

        agents = await start_demo_agents(ports=ports)
        try:
            app[DEMO_URLS] = agents.urls
            for name, url in agents.urls.items():
                log.info("demo agent %s at %s", name, url)
            await _register(app, agents.urls)
            yield
        finally:
            await agents.close()

    return context


async def _register(app: web.Application, urls: dict[str, str]) -> None:
    """Trust the keys and register the agents of ``seeds/demo.toml`` at their actual ``urls``."""
    registry = app[REGISTRY]
    seeds = load_seed_file(str(resources.files("seeds") / "demo.toml"))
    defaults = {seed.id: seed.url for seed in seeds.agents if seed.id in urls and seed.url}
    wanted = [
        SeedAgent(id=seed.id, url=urls[seed.id], refresh_interval=seed.refresh_interval)
        for seed in seeds.agents
        if seed.id in urls
    ]
    await registry.sync()
    earlier: dict[str, str] = {}  # default base URL (demo.toml) -> an earlier run's
    for seed in wanted:
        current = registry.catalog.snapshot.agents.get(seed.id or "")
        if current is not None and current.source_url != seed.url:
            log.info("demo agent %s moved to %s: registering it again", seed.id, seed.url)
            if current.source_url:
                earlier[defaults[seed.id]] = current.source_url
            await registry.remove(current.id)
    trust = app[TRUST]
    known = {anchor.id for anchor in trust.anchors()}
    for before, stale in zip(seeds.keys, _moved_keys(seeds.keys, earlier), strict=True):
        if stale != before and stale.jwks_url and jwks_anchor_id(stale.jwks_url) in known:
            await trust.remove(jwks_anchor_id(stale.jwks_url))  # an earlier run's port
    real = {defaults[name]: url for name, url in urls.items() if name in defaults}
    if await trust.apply_seed_keys(_moved_keys(seeds.keys, real)):
        await registry.reverify_all()
    for seed in wanted:  # still registered from an earlier run: its card has a new key now
        if seed.id in registry.catalog.snapshot.agents:
            await _refresh(app, seed.id)
    added = await apply_seeds(registry, wanted)
    log.info("demo agents: %d registered", len(added))


def _moved_keys(keys: list[SeedKey], bases: dict[str, str]) -> list[SeedKey]:
    """``keys`` with each JWKS URL under a base URL of ``bases`` moved under its new base."""
    moved = []
    for key in keys:
        for old, new in bases.items():
            if key.jwks_url and key.jwks_url.startswith(f"{old}/"):
                key = SeedKey(jwks_url=new + key.jwks_url.removeprefix(old))
                break
        moved.append(key)
    return moved


async def _refresh(app: web.Application, agent_id: str) -> None:
    try:
        await app[REGISTRY].upkeep.refresh(agent_id)
    except RegistryError as exc:
        log.warning("demo agent %s: its card was not fetched again: %s", agent_id, exc)


def ready_lines(base_url: str, agents: dict[str, str], *, console: bool = True) -> list[str]:
    """What ``serve`` prints once it accepts requests: one URL per line (the web console's
    unless ``SWITCHBOARD_UI=off``)."""
    lines = [
        f"Switchboard (A2A router) at {base_url}/",
        f"admin API at {base_url}/api/v1 (OpenAPI: {base_url}/api/v1/openapi.json)",
    ]
    if console:
        lines.append(f"web console at {base_url}/ui/")
    lines += [f"demo agent {name} at {url}" for name, url in agents.items()]
    return lines
