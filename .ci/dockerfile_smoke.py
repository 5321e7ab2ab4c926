"""Check the Dockerfile without a Docker engine: run its install command in a fresh virtual
environment, start its CMD with its ENV, and probe it with its HEALTHCHECK command.

Exit status 0 when the health check passes within its retries, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, rest = line.partition(" ")
            out.append((name.upper(), rest.strip()))
    return out


def exec_form(argument: str) -> list[str]:
    return json.loads(argument) if argument.startswith("[") else ["sh", "-c", argument]


def main() -> int:
    steps = instructions((ROOT / "Dockerfile").read_text())
    workdir = Path(tempfile.mkdtemp(prefix="switchboard-docker-"))
    app = workdir / "app"
    data = workdir / "data"
    data.mkdir()
    env = dict(os.environ)
    for name in ("SWITCHBOARD_ADMIN_TOKEN", "SWITCHBOARD_SEEDS", "SWITCHBOARD_DATABASE_URL"):
        env.pop(name, None)
    try:
        for name, arg in steps:
            if name == "COPY":
                *sources, _dest = shlex.split(arg)
                app.mkdir(exist_ok=True)
                for source in sources:
                    src = ROOT / source
                    if src.is_dir():
                        shutil.copytree(
                            src, app / src.name, ignore=shutil.ignore_patterns("__pycache__")
                        )
                    else:
                        shutil.copy(src, app / src.name)
            elif name == "RUN" and ("pip install" in arg or arg.startswith("/app/.venv/bin/")):
                command = arg.replace("/app/", f"{app}/")
                print(f"+ {command}", flush=True)
                subprocess.run(["sh", "-c", command], cwd=app, check=True, env=env)
            elif name == "ENV":
                for key, value in re.findall(r"(\w+)=(\S+)", arg):
                    value = value.replace("$PATH", env["PATH"]).replace("/app/", f"{app}/")
                    env[key] = value.replace("/data/", f"{data}/")
        env["SWITCHBOARD_HOST"] = "127.0.0.1"  # the container binds 0.0.0.0; here loopback
        env["SWITCHBOARD_PORT"] = str(_free_port())
        cmd = exec_form(dict(steps)["CMD"])
        health = dict(steps)["HEALTHCHECK"]
        health_cmd = exec_form(health.split("CMD", 1)[1].strip())
        print(f"+ {' '.join(cmd)}  (port {env['SWITCHBOARD_PORT']})", flush=True)
        server = subprocess.Popen(cmd, cwd=workdir, env=env)
        try:
            for _attempt in range(60):  # like Docker's retries, bounded: at most ~30 s
                if server.poll() is not None:
                    print(f"server exited with {server.returncode}", file=sys.stderr)
                    return 1
                if subprocess.run(health_cmd, env=env, capture_output=True).returncode == 0:
                    print("HEALTHCHECK passed", flush=True)
                    if not (data / "switchboard.db").exists():
                        print("no SQLite file on the data volume", file=sys.stderr)
                        return 1
                    return _check_ready(env)
                time.sleep(0.5)
            print("HEALTHCHECK never passed", file=sys.stderr)
            return 1
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _check_ready(env: dict[str, str]) -> int:
    """The image routes by meaning: /readyz names the semantic matcher (the model baked in)."""
    url = f"http://127.0.0.1:{env['SWITCHBOARD_PORT']}/readyz"
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.loads(answer.read())
    print(f"readyz matcher: {body.get('matcher')}", flush=True)
    if not str(body.get("matcher", "")).startswith("semantic"):
        print("the image does not route by meaning (model missing?)", file=sys.stderr)
        return 1
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
