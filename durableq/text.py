"""Text for a line of a log or a terminal: what a client or a user typed, shown so it cannot start a line.

A queue URL, an action name or a refused queue name may carry line breaks and
other control characters; written as they are, one request would read as two
log lines (the second one the client's), and escape sequences would drive the
terminal of whoever reads ``durableq audit``.  The endpoint's access log, its
other log lines about a request, the CLI's tables and its error line show such
text through :func:`printable`; the JSON outputs keep the exact text (JSON
escapes it).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["OneLineFormatter", "printable"]


def printable(text: object) -> str:
    """``text`` with every character that is not printable (C0 and C1 controls, line and paragraph
    separators, lone surrogates, ...) written as its Python escape: ``\\n``, ``\\x1b``, ``\\u2028``.

    Printable text comes back as it is, so applying it twice changes nothing.
    """
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value)


class OneLineFormatter(logging.Formatter):
    """A text log formatter of one line per record: the message through :func:`printable`, and the
    lines of a traceback marked ``  | `` so that none of them reads as a record (the endpoint's log,
    ``durableq worker``'s)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return _continued(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _continued(super().formatStack(stack_info))


def _continued(text: str) -> str:
    return "\n".join(f"  | {printable(line)}" for line in text.splitlines())
