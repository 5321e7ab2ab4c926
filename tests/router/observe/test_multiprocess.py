"""Several processes' metrics added up from their files (router/observe/multiprocess.py). Each
"worker" is a subprocess (switching to files is for a whole process); the sum is read here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from router.observe import multiprocess

ROOT = Path(__file__).resolve().parents[3]

_WORKER = """
import os, sys
from router.observe import metrics as m  # made before the switch, as in a forked worker
cached = m._child(m.REQUESTS, "SendMessage", "1.0", "ok")  # a child cached before it, too
from router.observe import multiprocess
multiprocess.enable()
assert multiprocess.directory() == os.environ[multiprocess.ENV]
cached.inc(int(sys.argv[1]))
m.STREAMS_OPEN.inc(int(sys.argv[1]))
multiprocess.LEASE_HELD.set(int(sys.argv[2]))
print(os.getpid())
"""


def _worker(path: str, calls: int, lease: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT), multiprocess.ENV: path}
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, str(calls), str(lease)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _scrape(path: str) -> str:
    exposition = CollectorRegistry()
    exposition.register(multiprocess.collector(path))
    return generate_latest(exposition).decode()


def test_the_processes_metrics_add_up_and_a_dead_ones_gauges_go(tmp_path: Path) -> None:
    path = str(tmp_path)
    first, second = _worker(path, 2, 0), _worker(path, 3, 1)
    text = _scrape(path)
    ok = 'switchboard_a2a_requests_total{method="SendMessage",outcome="ok",version="1.0"}'
    assert f"{ok} 5.0" in text
    # both processes have exited: their "live" gauges are kept until marked dead
    assert "switchboard_streams_open 5.0" in text
    assert "switchboard_refresh_lease_holder 1.0" in text
    for pid in (first, second):
        multiprocess.process_dead(path)(pid)
    text = _scrape(path)
    assert f"{ok} 5.0" in text  # the counts of dead processes stay
    assert "switchboard_streams_open" not in text and "lease_holder" not in text


def test_the_directory_is_made_named_and_removed() -> None:
    assert multiprocess.directory() is None  # this process keeps its metrics in memory
    path = multiprocess.make_directory()
    try:
        assert os.environ[multiprocess.ENV] == path and os.path.isdir(path)
        assert multiprocess.directory() is None  # named for the workers, not used here
    finally:
        multiprocess.remove_directory(path)
    assert multiprocess.ENV not in os.environ and not os.path.exists(path)
