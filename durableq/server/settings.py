"""Every bound and default of the SQS endpoint, in one place (docs/guides/endpoint.md, "Bounds", lists them).

A client that goes past a bound gets a clear answer at once (``503
ServiceUnavailable``, ``413``, ``408``, ``431``), never a request left waiting
behind others; SDKs retry a 503 with back-off.  :class:`Bounds` holds the
values one server runs with; ``serve(..., bounds=Bounds(...))`` changes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9324
DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "000000000000"
#: The endpoint's own paths: whether it serves (for process managers), and its Prometheus figures.
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"

#: Connections open at once, idle keep-alive ones and waiting long polls included; one more is
#: answered 503 and closed.  2,000 long polls, 500 slow clients and the senders fit.
MAX_CONNECTIONS = 4_096
#: Bytes of a request line and its headers together; more is answered 431.
MAX_HEADER_BYTES = 16_384
#: Seconds from a connection's first byte (or its opening) to the end of the request's headers; a
#: client slower than that (a header line every few seconds) gets 408 and is closed.
HEADER_TIMEOUT = 10.0
#: Bytes of a request body; more is answered 413 without reading it.  A 1 MiB message (the most a
#: queue allows) takes at most about 3 MiB once JSON- or form-encoded.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: Seconds to receive a whole request body once its headers are in; slower is answered 408.
BODY_TIMEOUT = 30.0
#: Seconds a keep-alive connection may sit idle between requests before it is closed (SDKs
#: reconnect on their own; AWS closes idle connections after about a minute too).
KEEP_ALIVE_TIMEOUT = 60
#: Threads that run library calls (each keeps one SQLite connection).  A waiting long poll holds
#: none of them: it waits on the event loop and needs a thread only to look at the queue.
POOL_THREADS = min(32, (os.cpu_count() or 1) * 8)
#: Library calls that may wait for a free pool thread; one more is answered 503 at once.
MAX_PENDING = 1_024
#: Request bodies up to this size are parsed and their signature checked on the event loop;
#: larger ones in a pool thread, so a 3 MiB body never stalls other requests.
INLINE_PARSE_BYTES = 65_536
#: On shutdown, seconds that running requests get to finish (waiting long polls end at once, empty).
SHUTDOWN_GRACE = 5.0


@dataclass(frozen=True, slots=True)
class Bounds:
    """The bounds one server runs with (defaults: the constants above)."""

    max_connections: int = MAX_CONNECTIONS
    max_header_bytes: int = MAX_HEADER_BYTES
    header_timeout: float = HEADER_TIMEOUT
    max_request_bytes: int = MAX_REQUEST_BYTES
    body_timeout: float = BODY_TIMEOUT
    keep_alive_timeout: int = KEEP_ALIVE_TIMEOUT
    pool_threads: int = POOL_THREADS
    max_pending: int = MAX_PENDING
    inline_parse_bytes: int = INLINE_PARSE_BYTES
    shutdown_grace: float = SHUTDOWN_GRACE
