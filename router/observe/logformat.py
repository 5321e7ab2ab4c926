"""Log formats: readable text (the default) or one JSON object per line
(``SWITCHBOARD_LOG_FORMAT=json``), both carrying the request's id and A2A facts.

:func:`log_handler` makes the handler :func:`router.cli.logs.configure_logging` installs: its
:class:`~router.observe.requestid.RequestContextFilter` puts the current request's fields on
every record. A JSON line has ``timestamp`` (UTC, ISO 8601), ``level``, ``logger``, ``message``
and, when known, ``request_id``, ``method``, ``version``, ``agent_id``, ``tier``, ``task_id``,
``outcome``, ``duration_ms``, ``upstream_ms``, ``trace_id`` and ``span_id`` (set by whatever
sets them on a record: a tracing integration later), and ``exception`` (the traceback).
:class:`RequestAccessLogger` gives aiohttp's access log line the request's id and duration.
"""

from __future__ import annotations

import json
import logging
import time as clock
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import IO, Any, Literal

from aiohttp import web
from aiohttp.web_log import AccessLogger

from registry.access.clientaddr import client_address
from router.observe.http import OBSERVED
from router.observe.logwriter import TurnHandler
from router.observe.requestid import Observed, RequestContextFilter, observing
from router.observe.turn import later

__all__ = [
    "ACCESS_LOGGER",
    "CALL_LOGGER",
    "LOG_FORMATS",
    "TEXT_FORMAT",
    "JsonFormatter",
    "LogFormat",
    "RequestAccessLogger",
    "TextFormatter",
    "log_handler",
    "log_info",
]

LogFormat = Literal["text", "json"]
ACCESS_LOGGER = "switchboard.access"
"""The access log's logger (aiohttp's line, one per HTTP request)."""
CALL_LOGGER = "switchboard.a2a"
"""The logger of the line written for every A2A call answered."""
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FIELDS = (
    "request_id",
    "method",
    "version",
    "agent_id",
    "tier",
    "task_id",
    "outcome",
    "duration_ms",
    "upstream_ms",
    "trace_id",
    "span_id",
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The readable format, with ``[request id]`` after the logger name when there is one;
    an access log line of an A2A call ends with the agent it went to and the routing tier
    (``agent=currency tier=lexical``)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """``logging``'s default time text, its seconds part made once per second."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if self._second[0] != second:
            self._second = (
                second,
                clock.strftime(self.default_time_format, self.converter(second)),
            )
        return self.default_msec_format % (self._second[1], record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        """The record as text."""
        line = super().format(record)
        if record.name.endswith(".access"):
            values = [(name, getattr(record, key, None)) for name, key in _ACCESS_FACTS]
            facts = [f"{name}={value}" for name, value in values if value is not None]
            if facts:
                line = f"{line} {' '.join(facts)}"
        request_id = getattr(record, "request_id", None)
        if request_id is None:
            return line
        head = f"{record.name}: "
        return line.replace(head, f"{record.name} [{request_id}]: ", 1)


_ACCESS_FACTS = (("agent", "agent_id"), ("tier", "tier"), ("outcome", "outcome"))


def log_handler(
    stream: IO[str] | None = None, log_format: LogFormat = "text", batched: Iterable[str] = ()
) -> logging.Handler:
    """A handler writing to ``stream`` (stderr by default) in ``log_format``, with the
    request context filter; the records of the ``batched`` loggers are written once per turn
    of the event loop (:class:`router.observe.logwriter.TurnHandler`)."""
    handler = TurnHandler(stream, batched)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestContextFilter())
    return handler


def log_info(logger: logging.Logger, msg: str, *args: Any, extra: Any = None) -> None:
    """``logger.info(msg, *args, extra=extra)`` without the caller lookup (the record's
    ``pathname``, ``lineno`` and ``funcName`` are ``logging``'s unknowns): for the lines
    written for every call."""
    if logger.isEnabledFor(logging.INFO):
        logger.handle(
            logger.makeRecord(
                logger.name, logging.INFO, "(unknown file)", 0, msg, args, None,
                "(unknown function)", extra,
            )
        )  # fmt: skip


def _client(request: web.BaseRequest, response: web.StreamResponse, time: float) -> str:
    """aiohttp's ``%a``, the client's address (``-`` when unknown)."""
    return (client_address(request) if request is not None else None) or "-"


class RequestAccessLogger(AccessLogger):
    """aiohttp's access log, its record carrying the request's fields (id, A2A method, agent,
    outcome) and the request's duration.

    The line and the record's ``extra`` are aiohttp's; the path to the handlers is shorter:
    the request's start time (``%t``) is formatted once per second, and the record is made
    and handled directly (no caller lookup: its ``pathname``, ``lineno`` and ``funcName``
    are ``logging``'s unknowns). The address (``%a``) is the client's as the rate limits see
    it (:func:`registry.access.clientaddr.client_address`: ``X-Forwarded-For`` from a
    trusted proxy).
    """

    def __init__(self, logger: logging.Logger, log_format: str = AccessLogger.LOG_FORMAT) -> None:
        super().__init__(logger, log_format)
        self._second: tuple[int, Any, str] = (-1, None, "")  # second, its zone, its text
        own = {self.LOG_FORMAT_MAP["t"]: self._start_time, self.LOG_FORMAT_MAP["a"]: _client}
        self._methods = [type(m)(m.key, own[m.key]) if m.key in own else m for m in self._methods]

    def _start_time(
        self, request: web.BaseRequest, response: web.StreamResponse, time: float
    ) -> str:
        """aiohttp's ``%t``: the request's start, local time, to the second."""
        now = AccessLogger._get_local_time()
        second = int((now - timedelta(seconds=time)).timestamp() // 1)
        if self._second[:2] != (second, now.tzinfo):
            start = datetime.fromtimestamp(second, now.tzinfo)
            self._second = (second, now.tzinfo, start.strftime("[%d/%b/%Y:%H:%M:%S %z]"))
        return self._second[2]

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        """Log as aiohttp does, in the request's context, at the end of the loop's turn
        (:func:`router.observe.turn.later`: after the answer, with the other calls' lines)."""
        observed = request.get(OBSERVED)
        if observed is not None and observed.duration is None:
            observed.duration = time
        later(self._log, request, response, time, observed)

    def _log(
        self,
        request: web.BaseRequest,
        response: web.StreamResponse,
        time: float,
        observed: Observed | None,
    ) -> None:
        if observed is None:
            self._emit(request, response, time)
            return
        restore = observing(observed)
        try:
            self._emit(request, response, time)
        finally:
            restore()

    def _emit(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        logger = self.logger
        try:
            values: list[Any] = []
            extra: dict[str, Any] = {}
            for key, method in self._methods:
                value = method(request, response, time)
                values.append(value)
                if isinstance(key, str):
                    extra[key] = value
                else:
                    extra.setdefault(key[0], {})[key[1]] = value
            log_info(logger, self._log_format % tuple(values), extra=extra)
        except Exception:
            logger.exception("Error in logging")
