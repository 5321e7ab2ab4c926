"""The SDK provider from the OTEL_* variables (router.tracing.setup): nothing without them (the
API's no-op, the SDK not even imported), OTLP HTTP/protobuf export from a real ``switchboard
serve`` to a real receiver with them, and clear errors for what is not supported."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from router.tracing.setup import DEFAULT_SERVICE_NAME, TracingConfigError, configure, wanted
from tests.support.otlp import otlp_receiver

ROOT = Path(__file__).resolve().parents[3]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _clean_env() -> dict[str, str]:
    """The environment without OTEL_* and SWITCHBOARD_* variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SWITCHBOARD_"))}


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def test_without_configuration_no_sdk_provider_is_installed(tmp_path: Path) -> None:
    """In a fresh interpreter: the app built and tracing configured without variables leave
    the API's proxy provider in place, and the SDK is never imported."""
    script = f"""
import sys
from opentelemetry import trace
from router.app import create_app
from router.tracing.setup import configure
from tests.support.helpers import make_settings
create_app(make_settings("sqlite:///{tmp_path / "db.sqlite"}"))
assert configure() is None
print(type(trace.get_tracer_provider()).__name__)
print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**_clean_env(), "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ProxyTracerProvider", "[]"]


@pytest.mark.usefixtures("no_otel_env")
def test_which_variables_ask_for_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not wanted() and configure() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert wanted()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not wanted() and configure() is None
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert not wanted() and configure() is None


@pytest.mark.usefixtures("no_otel_env")
def test_the_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    names = []
    for service in (None, "edge-router"):
        if service is not None:
            monkeypatch.setenv("OTEL_SERVICE_NAME", service)
        provider = configure(install=False)
        names.append(provider.resource.attributes["service.name"])
        provider.shutdown()
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource,team=a2a")
    provider = configure(install=False)
    names.append(provider.resource.attributes["service.name"])
    provider.shutdown()
    assert names == [DEFAULT_SERVICE_NAME, "edge-router", "from-resource"]


@pytest.mark.usefixtures("no_otel_env")
def test_what_is_not_supported_says_what_to_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(TracingConfigError, match="http/protobuf"):
        configure(install=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(TracingConfigError, match="'otlp'"):
        configure(install=False)


async def test_serve_exports_its_spans_over_otlp(
    aiohttp_server: Any, tmp_path: Path, unused_tcp_port: int
) -> None:
    """A real ``switchboard serve`` with OTEL_EXPORTER_OTLP_ENDPOINT: the server span of a
    request reaches the receiver, as service ``switchboard``, in the caller's trace."""
    endpoint, received = await otlp_receiver(aiohttp_server)
    env = {
        **_clean_env(),
        "PYTHONPATH": str(ROOT),
        "SWITCHBOARD_MATCHER": "lexical",  # no model to load: no message is routed
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    database = f"sqlite:///{tmp_path / 'traced.db'}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "router.cli", "serve", "--port", str(unused_tcp_port),
        "--workers", "2",  # each worker's exporter started after the fork; not one per CPU
        "--database-url", database, env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        while "Running on" not in "".join(seen):
            line = await asyncio.wait_for(proc.stderr.readline(), timeout=60)
            assert line, "".join(seen)
            seen.append(line.decode(errors="replace"))
        traceparent = f"00-{TRACE}-00f067aa0ba902b7-01"
        reader, writer = await asyncio.open_connection("127.0.0.1", unused_tcp_port)
        writer.write(
            f"GET /healthz HTTP/1.1\r\nHost: x\r\ntraceparent: {traceparent}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        assert b" 200 " in (await asyncio.wait_for(reader.read(), timeout=10)).split(b"\r\n")[0]
        writer.close()
        spans = []
        while not any(s.name == "GET /healthz" for s in spans):
            export = await asyncio.wait_for(received.get(), timeout=30)
            for resource_spans in export.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}[
                    "service.name"
                ]
                assert service == "switchboard"
                spans += [s for scope in resource_spans.scope_spans for s in scope.spans]
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        drain = asyncio.ensure_future(proc.stderr.read())
        code = await asyncio.wait_for(proc.wait(), timeout=30)
        seen.append((await drain).decode(errors="replace"))
    assert code == 0, "".join(seen)
    [span] = [s for s in spans if s.name == "GET /healthz"]
    assert span.trace_id.hex() == TRACE and span.parent_span_id.hex() == "00f067aa0ba902b7"


def test_serve_refuses_an_unsupported_protocol_in_one_line(tmp_path: Path) -> None:
    env = {
        **_clean_env(),
        "PYTHONPATH": str(ROOT),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    done = subprocess.run(
        [sys.executable, "-m", "router.cli", "serve", "--database-url",
         f"sqlite:///{tmp_path / 'x.db'}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "cannot export traces" in line and "http/protobuf" in line
