"""nginx ``proxy_pass`` in front of the echo agent: the reference reverse proxy."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

from bench.procs import free_port, process

SKIPPED = "nginx not installed (apt-get install nginx): skipped"

_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
worker_rlimit_nofile 20000;
events {{ worker_connections 10000; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream agent {{
        server 127.0.0.1:{upstream};
        keepalive 256;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://agent;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
}}
"""


def find(path: str | None) -> str | None:
    """The nginx executable: ``path`` if given, else ``nginx`` on PATH or in /usr/sbin."""
    if path:
        return path
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


@contextlib.asynccontextmanager
async def nginx(executable: str, upstream: str, tmp: Path) -> AsyncIterator[str]:
    """Run nginx proxying to ``upstream`` (``http://127.0.0.1:PORT``); yields its base URL."""
    port = free_port()
    work = tmp / "nginx"
    work.mkdir(exist_ok=True)
    conf = work / "nginx.conf"
    conf.write_text(_CONF.format(tmp=work, upstream=upstream.rsplit(":", 1)[1], port=port))
    base = f"http://127.0.0.1:{port}"
    args = [executable, "-c", str(conf), "-p", str(work), "-e", str(work / "nginx-error.log")]
    async with process(args, f"{base}/.well-known/agent-card.json", work / "nginx.out"):
        yield base
