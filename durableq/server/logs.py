"""The endpoint's log: one access line per request on ``durableq.server.access``, text or JSON.

The library never configures logging; the programs that run the endpoint
(``durableq serve``, ``python -m durableq.server``) call :func:`configure`.
Each access line carries the client, method, action, queue, HTTP status,
duration and (for errors) the SQS error code; in JSON these are fields, with
the request id that the client also got in ``x-amzn-RequestId``.

One record is one line: what a client sent is escaped in the text of a line
(:func:`durableq.text.printable`), and in the text format the lines of a
traceback are marked ``  | `` so that none of them reads as a record.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys

from durableq.text import OneLineFormatter

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and an access line's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            line.update(access)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(OneLineFormatter):
    """:data:`TEXT_FORMAT`, one line per record (a traceback follows on lines marked ``  | ``)."""


def configure(level: str = "INFO", log_format: str = "text") -> logging.Handler:
    """Send log lines to stderr, as text or JSON (for a program that runs the endpoint).

    Returns the handler added to the root logger (remove it to undo).
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}; got {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter(TEXT_FORMAT))
    wanted = logging.getLevelName(level.upper())
    if not isinstance(wanted, int):
        raise ValueError(f"unknown log level {level!r}")
    root = logging.getLogger()
    root.addHandler(handler)
    # durableq's lines at the level asked for; other libraries' (alembic's set-up chatter on every
    # migration, uvicorn's start and stop lines) only from WARNING, unless DEBUG asks for everything.
    root.setLevel(wanted if wanted <= logging.DEBUG else max(logging.WARNING, wanted))
    logging.getLogger("durableq").setLevel(wanted)
    return handler
