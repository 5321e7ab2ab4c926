"""The server's logging: the format, the level, and one line for a bad HTTP request.

aiohttp's ``RequestHandler.handle_error`` logs every request its parser rejects with
``logger.exception`` on the ``aiohttp.server`` logger: an HTTP/2 client (``PRI * HTTP/2.0``),
a header it cannot read or other bytes that are no HTTP/1.1 give a traceback at ERROR,
although nothing failed in the server (the client got its ``400``). aiohttp offers no hook for
this: the handler class is fixed inside ``aiohttp.web_server.Server`` and only a logger can be
passed. So a filter on that logger rewrites exactly these records (the exception a
``BadHttpMessage``) into one line at INFO; every other record, tracebacks included, passes
unchanged. aiohttp itself already logs the commonest case (a bad method in a connection's first
request: TLS or a scanner on the port) at DEBUG; those stay at DEBUG, as one line too.
"""

from __future__ import annotations

import logging
from typing import get_args

from aiohttp.http_exceptions import BadHttpMessage

from registry.settings import LogLevel
from router.observe.logformat import ACCESS_LOGGER, CALL_LOGGER, LogFormat, log_handler

LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)
SERVER_LOGGER = "aiohttp.server"
_HANDLE_ERROR = "Error handling request from %s"


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    """Log to stderr at ``level`` (one of ``LOG_LEVELS``) in ``log_format`` (text, or one
    JSON object per line: :mod:`router.observe.logformat`), quiet the scheduler and Alembic, install
    ``BadRequestFilter`` on aiohttp's server logger (once).

    The per-call lines (the access line and ``switchboard.a2a``) are written once per turn
    of the event loop (:mod:`router.observe.logwriter`). Records carry no thread or process
    names and ids: neither format shows them, and looking them up (a system call and two
    lookups) was almost half of the making of each record (5.7 -> 3.1 µs)."""
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = log_handler(log_format=log_format, batched=(ACCESS_LOGGER, CALL_LOGGER))
    logging.basicConfig(level=level, handlers=[handler])
    if level != "DEBUG":  # it logs every job run at INFO: twice a second here
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)  # its context lines per run
    server = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(f, BadRequestFilter) for f in server.filters):
        server.addFilter(BadRequestFilter())


class BadRequestFilter(logging.Filter):
    """Rewrites aiohttp's "Error handling request" record for a request its parser rejected
    (``BadHttpMessage``) into ``bad HTTP request from ADDRESS: WHAT`` at INFO (DEBUG stays
    DEBUG), without the traceback. Other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a bad request's record in place; drop it if its new level is disabled."""
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, BadHttpMessage) or record.msg != _HANDLE_ERROR:
            return True
        level = min(record.levelno, logging.INFO)
        if not logging.getLogger(record.name).isEnabledFor(level):
            return False  # it passed the logger's level as ERROR: not as INFO
        record.levelno, record.levelname = level, logging.getLevelName(level)
        record.msg, record.args = "bad HTTP request from %s: %s", (*record.args, describe(exc))
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def describe(exc: BadHttpMessage) -> str:
    """What the client sent, in one line, from the parser's message (which can show the bytes
    on a second line and a caret under them on a third)."""
    lines = [line.strip() for line in (exc.message or "").splitlines()]
    lines = [line for line in lines if line and set(line) != {"^"}]
    if not lines:
        return type(exc).__name__
    if lines[0].startswith("Pause on PRI/Upgrade"):  # llhttp, on the HTTP/2 preface
        return "an HTTP/2 connection preface (PRI * HTTP/2.0): this server speaks HTTP/1.1"
    if len(lines) > 1 and lines[1] != "b''":
        return f"{lines[0].rstrip(':')}: {' '.join(lines[1:])}"
    return lines[0].rstrip(":")
