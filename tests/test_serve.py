"""``switchboard serve --demo`` as a user runs it: a real process, real demo agents."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp


async def _wait_for_line(stream: asyncio.StreamReader, needle: str, seen: list[str]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            raise AssertionError("server exited before serving:\n" + "".join(seen))
        seen.append(line.decode(errors="replace"))
        if needle in seen[-1]:
            return


async def test_serve_demo_registers_the_demo_agents(tmp_path: Path, unused_tcp_port: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "serve",
        "--demo",
        "--port",
        str(unused_tcp_port),
        "--database-url",
        f"sqlite:///{tmp_path / 'demo.db'}",
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        await asyncio.wait_for(_wait_for_line(proc.stderr, "Running on", seen), timeout=60)
        base = f"http://127.0.0.1:{unused_tcp_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/readyz") as resp:
                assert resp.status == 200
                assert (await resp.json())["agents"] == 3
            async with http.get(f"{base}/api/v1/agents") as resp:
                agents = (await resp.json())["agents"]
            assert {a["id"]: a["card_format"] for a in agents} == {
                "caption": "1.0",
                "currency": "1.0",
                "translate": "0.3",
            }
            async with http.get(f"{base}/api/v1/skills?input_mode=image/png") as resp:
                skills = (await resp.json())["skills"]
            assert [(s["agent"]["id"], s["id"]) for s in skills] == [("caption", "caption-image")]
    finally:
        proc.send_signal(signal.SIGINT)
        drain = asyncio.ensure_future(proc.stderr.read())
        code = await asyncio.wait_for(proc.wait(), timeout=30)
        seen.append((await drain).decode(errors="replace"))
    assert code == 0, "".join(seen)
    assert "Traceback" not in "".join(seen)
