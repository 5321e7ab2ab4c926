"""``deploy/compose.yaml``: valid against the Compose specification's JSON schema (vendored:
tests/fixtures/compose/README.md); its files, names, ports and variables agree with the code
and with each other; and its Switchboard commands run without Docker: the migration, then the
two replicas on one PostgreSQL database, an agent registered through one and read through the
other, their metrics where Prometheus scrapes them, their spans where the collector listens."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from registry.settings import Settings
from router.cli import build_parser
from router.cli.running import ARRIVAL_WAIT, CANCEL_WAIT
from tests.deploy.conftest import ROOT, Image, Served, free_ports
from tests.support.helpers import FIXTURES, card_v1
from tests.support.otlp import otlp_receiver

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
SCHEMA = FIXTURES / "compose" / "compose-spec.json"
SETTINGS = {f"SWITCHBOARD_{name}".upper() for name in Settings.model_fields}
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _resolved(value: object) -> str:
    """A value with each ``${NAME:-default}`` as its default (not this machine's NAME)."""

    def default(match: re.Match[str]) -> str:
        assert match.group(2) is not None, f"{match.group(0)} has no default"
        return match.group(2)

    return _VARIABLE.sub(default, str(value))


def _switchboard(doc: dict[str, Any], image: Image) -> dict[str, dict[str, Any]]:
    """The services that run a ``switchboard`` command."""
    return {
        name: service
        for name, service in doc["services"].items()
        if service.get("command", [])[: len(image.entrypoint)] == image.entrypoint
    }


def _replicas(doc: dict[str, Any], image: Image) -> dict[str, dict[str, Any]]:
    """The services that run the image's ``CMD`` (``switchboard serve``)."""
    return {n: s for n, s in _switchboard(doc, image).items() if s["command"] == image.cmd}


def _environment(service: dict[str, Any], image: Image) -> dict[str, str]:
    """The variables a service's container starts with: the image's, then its own."""
    env = {k: v for k, v in image.env.items() if k != "PATH"}
    return env | {k: _resolved(v) for k, v in service.get("environment", {}).items()}


def _seconds(duration: str) -> float:
    """A Compose duration (``20s``, ``1m30s``) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def test_the_file_is_valid_against_the_compose_specification() -> None:
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    doc = _compose()
    assert [error.message for error in validator.iter_errors(doc)] == []
    doc["services"]["nginx"]["enviroment"] = {}  # misspelled keys are refused
    doc["services"]["postgres"]["healthcheck"]["intervall"] = "5s"
    found = " ".join(error.message for error in validator.iter_errors(doc))
    assert "enviroment" in found and "intervall" in found


def test_every_file_it_mounts_or_builds_from_exists() -> None:
    doc = _compose()
    for name, service in doc["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), (name, volume)
            else:
                assert source in doc["volumes"], (name, volume)
        build = service.get("build")
        if build:
            assert (DEPLOY / build["context"]).is_dir(), name
            if "dockerfile" in build:
                assert (DEPLOY / build["context"] / build["dockerfile"]).is_file(), name
            for context in build.get("additional_contexts", {}).values():
                assert context.removeprefix("service:") in doc["services"], (name, context)


def test_the_replicas_image_is_the_repository_s_with_the_otel_extra(image: Image) -> None:
    """The migration builds the repository's Dockerfile; the replicas build on it (named as
    an additional context), adding the ``otel`` extra that exports traces."""
    doc = _compose()
    migrate = doc["services"]["migrate"]
    assert (DEPLOY / migrate["build"]["context"]).resolve() == ROOT
    assert migrate["build"]["dockerfile"] == "Dockerfile"
    for name, service in _replicas(doc, image).items():
        build = service["build"]
        [(alias, context)] = build["additional_contexts"].items()
        assert context == "service:migrate", name
        lines = build["dockerfile_inline"].splitlines()
        assert lines[0] == f"FROM {alias}" and "'/app[otel]'" in build["dockerfile_inline"]
        assert lines[-1] == f"USER {image.user}", "the image's own user again"
        depends = service["depends_on"]["migrate"]["condition"]
        assert depends == "service_completed_successfully", name


def test_every_variable_set_is_a_setting_and_valid(
    image: Image, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = _switchboard(_compose(), image)
    assert {"migrate"} < set(services)
    for name in [n for n in os.environ if n.startswith("SWITCHBOARD_")]:
        monkeypatch.delenv(name)
    for name, service in services.items():
        env = _environment(service, image)
        named = {k for k in service.get("environment", {}) if k.startswith("SWITCHBOARD_")}
        assert named - SETTINGS == set(), (name, "not settings (registry/settings.py)")
        with monkeypatch.context() as patched:
            for key, value in env.items():
                patched.setenv(key, value)
            Settings()  # raises on a value serve would refuse


def test_every_command_starts_with_the_image_entry_point(image: Image) -> None:
    services = _switchboard(_compose(), image)
    assert services["migrate"]["command"][len(image.entrypoint) :] == ["db", "upgrade"]
    assert len(_replicas(_compose(), image)) == 2
    for name, service in services.items():
        args = build_parser().parse_args(service["command"][len(image.entrypoint) :])
        assert callable(getattr(args, "func", None)), name


def test_nginx_prometheus_and_the_collector_name_what_the_replicas_serve(image: Image) -> None:
    doc = _compose()
    replicas = _replicas(doc, image)
    compose_dir = DEPLOY / "compose"
    nginx = (compose_dir / "nginx.conf").read_text(encoding="utf-8")
    upstream = re.search(r"upstream switchboard \{(.*?)\}", nginx, flags=re.S)
    assert upstream is not None
    servers = set(re.findall(r"^\s*server (\S+);", upstream.group(1), flags=re.M))
    prometheus = yaml.safe_load((compose_dir / "prometheus.yml").read_text(encoding="utf-8"))
    [job] = prometheus["scrape_configs"]
    [static] = job["static_configs"]
    targets, expected_servers = set(static["targets"]), set()
    expected_targets: set[str] = set()
    for name, service in replicas.items():
        env = _environment(service, image)
        expected_servers.add(f"{name}:{env['SWITCHBOARD_PORT']}")
        first, workers = int(env["SWITCHBOARD_METRICS_PORT"]), int(env["SWITCHBOARD_WORKERS"])
        expected_targets |= {f"{name}:{port}" for port in range(first, first + workers)}
    assert servers == expected_servers
    assert targets == expected_targets and job["metrics_path"] == "/metrics"

    collector = yaml.safe_load((compose_dir / "otel-collector.yaml").read_text(encoding="utf-8"))
    listens = collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].rsplit(":", 1)[1]
    for service in replicas.values():
        endpoint = _environment(service, image)["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert endpoint == f"http://otel-collector:{listens}"
    exporter = collector["exporters"]["otlp/jaeger"]["endpoint"].split(":")[0]
    assert exporter in doc["services"]
    sources = yaml.safe_load((compose_dir / "grafana" / "datasources.yaml").read_text())
    for source in sources["datasources"]:
        assert source["url"].split("//")[1].split(":")[0] in doc["services"]


def test_the_stop_grace_period_covers_the_drain(image: Image) -> None:
    for name, service in _replicas(_compose(), image).items():
        grace = float(_environment(service, image)["SWITCHBOARD_SHUTDOWN_GRACE"])
        drain = ARRIVAL_WAIT + grace + CANCEL_WAIT
        assert drain + 2 <= _seconds(service["stop_grace_period"]) <= drain + 15, name


async def _instances(received: asyncio.Queue[ExportTraceServiceRequest], wanted: set[str]) -> None:
    """Wait for spans from every ``service.instance.id`` in ``wanted``."""
    seen: set[str] = set()
    while not wanted <= seen:
        export = await received.get()
        for spans in export.resource_spans:
            attributes = {a.key: a.value.string_value for a in spans.resource.attributes}
            assert attributes["service.name"] == "switchboard"
            seen.add(attributes.get("service.instance.id", ""))


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_the_stack_s_commands_run_without_docker(
    db_url: str,
    image: Image,
    tmp_path: Path,
    aiohttp_server: Any,
    run_command: Callable[[Sequence[str], Mapping[str, str]], Awaitable[str]],
    serve: Callable[[Sequence[str], Mapping[str, str]], Awaitable[Served]],
) -> None:
    """The services' own commands and variables, with the addresses changed for loopback
    (this test's PostgreSQL database for ``postgres``, a free port for each replica's 8080 and
    9464, a receiver on loopback for ``otel-collector``, an empty model directory): the
    migration, then both replicas, each with its supervisor and workers."""
    doc = _compose()
    endpoint, received = await otlp_receiver(aiohttp_server)
    loopback = {
        "SWITCHBOARD_DATABASE_URL": db_url,
        "SWITCHBOARD_HOST": "127.0.0.1",
        "SWITCHBOARD_PORT": "0",
        "SWITCHBOARD_DATA_DIR": str(tmp_path / "model"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
    }
    migrate = doc["services"]["migrate"]
    env = _environment(migrate, image)
    assert "upgraded from revision none to" in await run_command(
        migrate["command"], env | {k: v for k, v in loopback.items() if k in env}
    )

    replicas = _replicas(doc, image)
    envs = {}
    for name, service in replicas.items():
        env = _environment(service, image)
        assert set(loopback) <= set(env), "only addresses are changed"
        workers = int(env["SWITCHBOARD_WORKERS"])
        metrics = str(free_ports(workers))
        # spans exported every 0.1 s instead of every 5: the test waits less
        envs[name] = env | loopback | {"SWITCHBOARD_METRICS_PORT": metrics}
        envs[name]["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    (first, one), (second, two) = zip(
        replicas,
        await asyncio.gather(*(serve(replicas[n]["command"], envs[n]) for n in replicas)),
        strict=True,
    )

    for name, served in ((first, one), (second, two)):
        test = replicas[name]["healthcheck"]["test"]
        assert test[:2] == ["CMD", "python3"]
        code = test[3].replace(f":{image.env['SWITCHBOARD_PORT']}/", f":{served.port}/")
        check = await asyncio.create_subprocess_exec(sys.executable, *test[2:3], code)
        assert await asyncio.wait_for(check.wait(), 30) == 0, name

    token = envs[first]["SWITCHBOARD_ADMIN_TOKEN"]
    admin = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=admin, timeout=10) as http:
        body = {"card": card_v1("http://127.0.0.1:9"), "id": "weather"}
        added = await http.post(f"http://127.0.0.1:{one.port}/api/v1/agents", json=body)
        assert added.status_code == 201, added.text
        # the other replica hears of it through PostgreSQL (NOTIFY), tens of milliseconds
        # later: ask it, each question right after the answer to the last, until it knows
        url, deadline = f"http://127.0.0.1:{two.port}/api/v1/agents/weather", time.monotonic() + 10
        seen = await http.get(url)
        while seen.status_code == 404 and time.monotonic() < deadline:
            seen = await http.get(url)
        assert seen.status_code == 200 and seen.json()["name"] == "Weather Agent", seen.text

        for name in replicas:
            env = envs[name]
            base, workers = int(env["SWITCHBOARD_METRICS_PORT"]), int(env["SWITCHBOARD_WORKERS"])
            for port in range(base, base + workers):
                scraped = await http.get(f"http://127.0.0.1:{port}/metrics", headers={})
                assert scraped.status_code == 200 and "switchboard_" in scraped.text, (name, port)

    instances = {envs[n]["OTEL_RESOURCE_ATTRIBUTES"].split("=", 1)[1] for n in replicas}
    await asyncio.wait_for(_instances(received, instances), 30)

    for name, served in ((first, one), (second, two)):
        code = await served.stop(_seconds(replicas[name]["stop_grace_period"]))
        assert code == 0 and "Traceback" not in served.output.text, served.output.text
