"""Smoke test of the benchmark harness: it runs end to end; timings are never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_bench_quick_runs_unary_and_crawl() -> None:
    args = [sys.executable, "-m", "bench", "--quick", "--only", "unary,crawl"]
    args += ["--rounds", "1", "--round-seconds", "0.2", "--postgres", "none", "--no-save"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    for heading in ("== 1. unary proxy", "== 4. crawl and verify", "targets"):
        assert heading in done.stdout, done.stdout
    assert "router" in done.stdout and "verified" in done.stdout


def test_bench_rejects_unknown_scenario() -> None:
    args = [sys.executable, "-m", "bench", "--only", "nope", "--no-save"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "unknown scenario" in done.stdout
