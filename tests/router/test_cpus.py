"""The CPUs available (affinity and cgroup quota) and the embedding threads per worker."""

from __future__ import annotations

import os
from pathlib import Path

from router.cpus import available_cpus, embedding_threads


def test_cpus_follow_the_cgroup_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus(tmp_path) == affinity  # no quota files: the affinity mask
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert available_cpus(tmp_path) == affinity
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert available_cpus(tmp_path) == 1  # half a CPU: one worker
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert available_cpus(tmp_path) == 1
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert available_cpus(tmp_path) == affinity


def test_each_worker_embeds_in_its_share_of_the_cpus(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("400000 100000\n")  # four CPUs, if the mask has them
    cpus = min(4, len(os.sched_getaffinity(0)))
    assert embedding_threads(None, tmp_path) == cpus
    assert embedding_threads(1, tmp_path) == cpus
    assert embedding_threads(2, tmp_path) == max(1, cpus // 2)
    assert embedding_threads(64, tmp_path) == 1
