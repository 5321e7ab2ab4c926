"""``switchboard db current|upgrade|downgrade|history`` on SQLite and PostgreSQL: the
revision as an operator reads it, migrations once however many run together, one-line
refusals."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from registry.engine import create_engine
from registry.migrations import HEAD
from registry.migrations.revisions import history
from router.cli import main
from tests.support.schema_fixtures import load_fixture

REVISIONS = ", ".join(revision.id for revision in history())

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.usefixtures("no_switchboard_environment")


def db(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``switchboard db ARGV``: (status, stdout, stderr)."""
    status = main(["db", *argv])
    out, err = capsys.readouterr()
    return status, out, err


async def stamp(url: str, revision: str) -> None:
    """Record ``revision`` as the database's, as a newer Switchboard would have."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    finally:
        await engine.dispose()


def test_an_empty_database_current_upgrade_and_history(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    assert db(capsys, "current", "--database-url", db_url)[:2] == (
        0,
        "none: an empty database (`switchboard db upgrade` or `serve` creates it)\n",
    )
    status, out, _ = db(capsys, "upgrade", "--database-url", db_url)
    assert status == 0 and out.endswith(f": upgraded from revision none to {HEAD}\n"), out
    assert db(capsys, "current", "--database-url", db_url)[:2] == (0, f"{HEAD} (head)\n")
    status, out, _ = db(capsys, "upgrade", "--database-url", db_url)
    assert out.endswith(f": already at revision {HEAD}\n"), out
    status, out, _ = db(capsys, "history")
    assert status == 0 and out.splitlines()[-1].startswith(f"{HEAD} (head)  "), out
    assert "0001  Baseline: the schema of Switchboard at commit 979ef09." in out.replace(
        "0001 (head)", "0001"
    )


def test_the_url_comes_from_the_environment_like_serves(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("SWITCHBOARD_DATABASE_URL", url)
    status, out, _ = db(capsys, "upgrade")
    assert status == 0 and out == f"{url}: upgraded from revision none to {HEAD}\n"
    config = tmp_path / "switchboard.toml"
    config.write_text(f'database_url = "sqlite:///{tmp_path / "file.db"}"\n')
    monkeypatch.delenv("SWITCHBOARD_DATABASE_URL")
    monkeypatch.setenv("SWITCHBOARD_CONFIG", str(config))
    assert db(capsys, "current")[1] == "none: an empty database (`switchboard db upgrade` or " \
        "`serve` creates it)\n"  # fmt: skip
    monkeypatch.setenv("SWITCHBOARD_DATABASE_URL", "mysql://nope")
    status, _, err = db(capsys, "current")
    assert status == 2 and err.startswith("switchboard: cannot use database mysql://nope"), err


def test_a_database_of_979ef09_is_adopted(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    load_fixture("979ef09", db_url)
    assert db(capsys, "current", "--database-url", db_url)[1] == (
        "none: a database made before schema migrations (979ef09 or earlier); "
        "`switchboard db upgrade` adopts it\n"
    )
    status, out, _ = db(capsys, "upgrade", HEAD, "--database-url", db_url)
    assert status == 0 and out.endswith(f": upgraded from revision none to {HEAD}\n"), out


async def test_a_newer_schema_and_unknown_revisions_are_one_line(
    capsys: pytest.CaptureFixture[str], db_url: str
) -> None:
    assert (await asyncio.to_thread(db, capsys, "upgrade", "--database-url", db_url))[0] == 0
    await stamp(db_url, "9999")
    status, out, _ = await asyncio.to_thread(db, capsys, "current", "--database-url", db_url)
    assert (status, out) == (0, f"9999 (newer than this Switchboard, which needs {HEAD})\n")
    status, _, err = await asyncio.to_thread(db, capsys, "upgrade", "--database-url", db_url)
    assert status == 1 and err == (
        "switchboard: cannot upgrade: the database schema is at revision 9999, newer than this "
        f"Switchboard, which needs revision {HEAD}: run the newer version (or, with it, "
        f"`switchboard db downgrade {HEAD}` after a backup)\n"
    )
    await stamp(db_url, HEAD)
    status, _, err = await asyncio.to_thread(
        db, capsys, "upgrade", "0042", "--database-url", db_url
    )
    assert (status, err) == (
        1,
        f"switchboard: cannot upgrade: no revision '0042': the revisions are {REVISIONS}\n",
    )
    status, _, err = await asyncio.to_thread(
        db, capsys, "downgrade", "base", "--database-url", db_url
    )
    assert status == 2 and "no downgrade below the baseline" in err
    status, out, _ = await asyncio.to_thread(
        db, capsys, "downgrade", HEAD, "--database-url", db_url
    )
    assert status == 0 and out.endswith(f": already at revision {HEAD}\n")


async def test_two_upgrades_at_once_migrate_an_old_database_once(db_url: str) -> None:
    """Two ``db upgrade`` processes started together on a 979ef09 database: one migrates it,
    the other waits for the lock and finds it done."""
    load_fixture("979ef09", db_url)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env = {**inherited, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "router.cli", "db", "upgrade", "--database-url", db_url]
    processes = [
        await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(2)
    ]
    results = [await asyncio.wait_for(p.communicate(), timeout=60) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    outs = sorted(out.decode().split(": ", 1)[-1] for out, _ in results)
    assert outs == [f"already at revision {HEAD}\n", f"upgraded from revision none to {HEAD}\n"]
