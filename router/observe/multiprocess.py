"""Several workers, one ``/metrics`` on the main port: prometheus-client's multiprocess mode.

With ``--workers N`` (N > 1), metrics on and no ``SWITCHBOARD_METRICS_PORT``, the supervisor
makes a temporary directory (:func:`make_directory`), names it in ``PROMETHEUS_MULTIPROC_DIR``
for its workers, removes a dead worker's live gauges (:func:`process_dead`) and the directory
at exit. Each worker, right after the fork, switches its metrics to files in that directory
(:func:`enable`); the main port's ``/metrics`` then adds up every worker's files
(:func:`collector`), the dead workers' counters and histograms included, so the totals only
grow across restarts.

Gauges need a rule for adding up processes (``multiprocess_mode``):

- ``switchboard_streams_open``: ``livesum``, the streams open in the live workers.
- ``switchboard_refresh_lease_holder``: ``livemax``, 1 when a live worker holds the lease (each
  worker sets it every second, :func:`lease_gauge`; alone it is read at scrape time).

Not in the sum: the ``process_*``, ``python_gc_*`` and ``python_info`` metrics (one process's
own; per worker on the metrics port), and the catalog gauges, which every worker reads from
the shared catalog (the answering worker's view). Prometheus-client writes no ``_created``
samples in this mode. With one worker none of this happens: the metrics stay in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable

from prometheus_client import Gauge, multiprocess, values
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from registry.metrics import METRICS

__all__ = [
    "ENV",
    "LEASE_HELD",
    "collector",
    "directory",
    "enable",
    "lease_gauge",
    "make_directory",
    "process_dead",
    "remove_directory",
]

ENV = "PROMETHEUS_MULTIPROC_DIR"

LEASE_HELD = Gauge(
    "switchboard_refresh_lease_holder",
    "1 when a worker of this process holds the refresh lease (runs the scheduled checks)",
    multiprocess_mode="livemax",
    registry=None,  # only in the multiprocess files; alone, the catalog collector says it
)


def make_directory() -> str:
    """A new, empty directory for the workers' metric files, named in ``ENV`` (inherited by
    the workers forked from now on)."""
    path = tempfile.mkdtemp(prefix="switchboard-metrics-")
    os.environ[ENV] = path
    return path


def remove_directory(path: str) -> None:
    """Remove the metric files' directory (the supervisor, at exit)."""
    os.environ.pop(ENV, None)
    shutil.rmtree(path, ignore_errors=True)


def process_dead(path: str) -> Callable[[int], None]:
    """What the supervisor calls with a worker's pid once it is reaped: its live gauges go."""

    def dead(pid: int) -> None:
        multiprocess.mark_process_dead(pid, path)

    return dead


def directory() -> str | None:
    """The metric files' directory when this process writes its metrics there."""
    return os.environ.get(ENV) if values.ValueClass is not values.MutexValue else None


def enable() -> None:
    """In a forked worker: write this process's metrics to files in ``ENV``'s directory. The
    metrics made before the fork (and their labelled children, which callers may have cached)
    keep their identity; only their values move to the files."""
    values.ValueClass = values.MultiProcessValue()
    for metric in [*METRICS._collector_to_names, LEASE_HELD]:
        if isinstance(metric, MetricWrapperBase):
            _to_files(metric)


def _to_files(metric: MetricWrapperBase) -> None:
    if not metric._is_parent():
        metric._metric_init()  # type: ignore[attr-defined]
        return
    with metric._lock:  # type: ignore[attr-defined]
        children = list(metric._metrics.values())  # type: ignore[attr-defined]
    for child in children:
        child._metric_init()


def collector(path: str) -> Collector:
    """The collector of every worker's metrics in ``path`` (added up), for an exposition."""
    return multiprocess.MultiProcessCollector(None, path)


async def lease_gauge(holds: Callable[[], bool], every: float = 1.0) -> AsyncIterator[None]:
    """While the app runs, set :data:`LEASE_HELD` from ``holds()`` every ``every`` seconds."""

    async def loop() -> None:
        while True:
            LEASE_HELD.set(1 if holds() else 0)
            await asyncio.sleep(every)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        LEASE_HELD.set(0)
