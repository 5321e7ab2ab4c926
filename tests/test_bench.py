"""Smoke test of the benchmark harness: it runs end to end; timings are never asserted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bench import compare
from bench import wrk as wrk_mod
from bench.catalog import distinct_bodies, first_body
from bench.load import run_load

ROOT = Path(__file__).resolve().parent.parent

# the harness's runs: deselected by default, run by `pytest -m bench` and .ci/run
pytestmark = pytest.mark.bench


@pytest.mark.slow
@pytest.mark.timeout(300)  # many processes and rounds: 80 to 120 s on a slow machine
def test_bench_quick_runs_unary_crawl_and_reload() -> None:
    args = [sys.executable, "-m", "bench", "--quick", "--only", "unary,crawl,reload"]
    args += ["--rounds", "1", "--round-seconds", "0.2", "--postgres", "none", "--no-save"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    for heading in ("== 1. unary proxy", "== 4. crawl and verify", "== 7. reloads", "targets"):
        assert heading in done.stdout, done.stdout
    assert "router" in done.stdout and "verified" in done.stdout
    assert "floor (a relay doing nothing else) adds" in done.stdout, done.stdout
    assert "keep-alive" in done.stdout and "calls lost during reloads" in done.stdout


def test_egress_runs_its_four_contestants() -> None:
    args = [sys.executable, "-m", "bench.egress", "--seconds", "0.1", "--rounds", "1"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("lean direct", "lean proxied", "aiohttp direct", "aiohttp proxied"):
        assert name in done.stdout, done.stdout


def test_keepalive_fuzz_sees_no_reset_in_a_sample() -> None:
    """A sample of ``bench.keepalive`` (docs/benchmarks.md has the 200,000-request run): every
    fuzzed request on a reused connection answered, every keep-alive answer announcing the
    server's idle timeout."""
    args = [sys.executable, "-m", "bench.keepalive", "--requests", "600", "--connections", "4"]
    args += ["--pause-rate", "0.01", "--pause-max", "1.4", "--keepalive", "2"]
    args += ["--client-idle", "1.5"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resets on reused connections: 0" in done.stdout, done.stdout
    assert "keep-alive answers without Keep-Alive: timeout=2: 0" in done.stdout, done.stdout
    assert "closes announced by the server: 0" not in done.stdout  # bad requests: closed


def test_bench_rejects_unknown_scenario() -> None:
    args = [sys.executable, "-m", "bench", "--only", "nope", "--no-save"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "unknown scenario" in done.stdout


def test_compare_reads_the_cpu_time_of_a_process() -> None:
    before = compare.cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass  # spend CPU
    assert compare.cpu_seconds(os.getpid()) >= before + 0.03


def test_compare_counts_the_cpu_time_of_the_children_too() -> None:
    burn = "import sys, time\nt = time.process_time() + 0.3\nwhile time.process_time() < t:\n"
    burn += "    pass\nprint('done', flush=True)\nsys.stdin.read()\n"
    child = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        own = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        mine = (int(own[11]) + int(own[12])) / os.sysconf("SC_CLK_TCK")
        assert compare.cpu_seconds(os.getpid()) >= mine + 0.25  # the child's 0.3 s
    finally:
        child.communicate("")


def test_compare_checks_out_a_revision_and_removes_it() -> None:
    with compare.checkout("HEAD") as where:
        assert where != ROOT and (where / "bench" / "__main__.py").is_file()
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True)
    assert not where.exists()
    here = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True)
    assert head.stdout == here.stdout
    with compare.checkout(None) as where:
        assert where == ROOT


def test_compare_reports_medians_and_ratios() -> None:
    runs = {
        "before": [{"rps": r, "p50_ms": 2.0, "cpu_ms": 2.0} for r in (100.0, 300.0, 200.0)],
        "after": [{"rps": r, "p50_ms": 1.0, "cpu_ms": 1.5} for r in (400.0, 250.0, 600.0)],
    }
    text = compare.report({64: runs})
    assert "before     64    200.0" in text and "after      64    400.0" in text
    # the pairs' ratios of req/s: 4, 0.833 and 3
    assert text.splitlines()[-1] == (
        "after/before   64: rps 3.000 [0.833, 4.000], p50 0.500 [0.500, 0.500], "
        "cpu 0.750 [0.750, 0.750]"
    )


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_compare_runs_two_checkouts_side_by_side(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "bench.compare", str(ROOT), str(ROOT), "--pairs", "1"]
    args += ["--seconds", "1", "--concurrency", "1", "--json", str(tmp_path / "runs.json")]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[2].split()[:2] == ["before", "1"] and lines[3].split()[:2] == ["after", "1"]
    assert float(lines[2].split()[4]) > 0  # CPU per request was measured
    written = json.loads((tmp_path / "runs.json").read_text())
    assert set(written["meta"]["revisions"]) == {"before", "after"}
    assert [len(written["levels"]["1"][side]) for side in ("before", "after")] == [1, 1]


def test_distinct_bodies_are_distinct_requests(tmp_path: Path) -> None:
    path = distinct_bodies(tmp_path / "bodies.jsonl", count=1200)
    lines = path.read_text().splitlines()
    texts = [json.loads(line)["params"]["message"]["parts"][0]["text"] for line in lines]
    assert len(lines) == 1200 and len(set(texts)) == 1200
    assert texts[0].endswith(" (ref 0)") and json.loads(first_body(path))["id"] == 0
    assert {json.loads(line)["method"] for line in lines} == {"SendMessage"}


@pytest.mark.parametrize("generator", ["wrk", "python"])
async def test_a_bodies_file_is_sent_in_turn_and_not_again(
    generator: str, aiohttp_server: Any, tmp_path: Path
) -> None:
    if generator == "wrk" and wrk_mod.find() is None:
        pytest.skip("wrk is not installed")
    received: list[list[int]] = [[]]

    async def record(request: web.Request) -> web.Response:
        received[-1].append((await request.json())["n"])
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/", record)
    server = await aiohttp_server(app)
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(200_000)))
    spec = {
        "kind": "unary",
        "url": str(server.make_url("/")),
        "headers": {},
        "body": "{}",
        "bodies_file": str(bodies),
        "concurrency": 2,
        "warmup": 0,
        "rounds": 1,
        "round": 1.0,
    }
    run = wrk_mod.run_unary if generator == "wrk" else run_load
    for _ in range(2):
        await run(spec)
        received.append([])
    first, second = received[0], received[1]
    assert len(first) > 10 and len(second) > 10
    assert len(set(first)) == len(first) and len(set(second)) == len(second)
    assert not set(first) & set(second)  # the second run went on, it did not start over
