"""The schema step of ``switchboard serve`` as a real process, on SQLite and PostgreSQL: a
supervisor and its workers starting on a 979ef09 database migrate it once; a schema newer
than this version stops ``serve`` with one line and status 1, with one worker or several."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from registry.engine import create_engine
from registry.migrations import HEAD, read_revision
from router.cli.migrating import prepare_schema
from tests.support.schema_fixtures import load_fixture

ROOT = Path(__file__).resolve().parents[3]


async def _spawn(url: str, port: int, workers: int, cwd: Path) -> asyncio.subprocess.Process:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "serve",
        *("--port", str(port), "--workers", str(workers), "--database-url", url),
        env={**inherited, "PYTHONPATH": str(ROOT), "SWITCHBOARD_MATCHER": "lexical"},
        cwd=cwd,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_workers_starting_on_an_old_database_migrate_it_once(
    db_url: str, tmp_path: Path, unused_tcp_port: int
) -> None:
    """The supervisor migrates before forking (under the lock); the workers find the schema
    at head and only read the revision."""
    load_fixture("979ef09", db_url)
    proc = await _spawn(db_url, unused_tcp_port, 2, tmp_path)
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(60):
            while "all 2 workers ready" not in (seen[-1] if seen else ""):
                line = await proc.stderr.readline()
                assert line, "serve exited:\n" + "".join(seen)
                seen.append(line.decode(errors="replace"))
        proc.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(proc.communicate(), timeout=60)
        seen += rest.decode(errors="replace").splitlines(keepends=True)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    migrated = [line for line in seen if "database schema" in line]
    assert len(migrated) == 1, seen
    assert f"database schema upgraded: revision {HEAD} (was none)" in migrated[0]
    assert seen.index(migrated[0]) < min(i for i, s in enumerate(seen) if "worker 0" in s)
    engine = create_engine(db_url)
    try:
        assert await read_revision(engine) == HEAD
    finally:
        await engine.dispose()


@pytest.mark.parametrize("workers", [1, 2])
async def test_serve_refuses_a_newer_schema_in_one_line(
    db_url: str, tmp_path: Path, unused_tcp_port: int, workers: int
) -> None:
    await asyncio.to_thread(prepare_schema, db_url)
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:  # as a newer Switchboard leaves it
            await conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    finally:
        await engine.dispose()
    proc = await _spawn(db_url, unused_tcp_port, workers, tmp_path)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    stderr = err.decode(errors="replace")
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("switchboard: ")]
    assert lines == [
        "switchboard: cannot start: the database schema is at revision 9999, newer than this "
        f"Switchboard, which needs revision {HEAD}: run the newer version (or, with it, "
        f"`switchboard db downgrade {HEAD}` after a backup)"
    ], stderr
    assert stderr.rstrip().endswith(lines[0])
