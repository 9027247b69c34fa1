"""``python -m bench.endpoint.launch``: the new endpoint, optionally on another HTTP stack (for the bench).

Without ``--http`` it is ``durableq serve`` as shipped (httptools with the
endpoint's bounds, uvloop when installed).  ``--http h11`` runs uvicorn's
pure-Python HTTP parser instead (without the head bounds, which hook into
the httptools protocol): it shows what httptools buys.
"""

from __future__ import annotations

import argparse
import signal
import threading

import durableq
from durableq.server import Bounds
from durableq.server.runner import start


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.endpoint.launch")
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--http", choices=("h11", "httptools"))
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    parser.add_argument("--durability", default="full")
    args = parser.parse_args()
    http = None
    if args.http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        http = H11Protocol
    broker = durableq.open(args.db, durability=args.durability)
    _, runner = start(
        broker,
        host="127.0.0.1",
        port=args.port,
        region="us-east-1",
        account_id="000000000000",
        credentials=None,
        tls=None,
        allow_hosts=(),
        bounds=Bounds(),
        loop=args.loop if args.http else "auto",
        http=http,
    )
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    stopping.wait()
    runner.stop()
    broker.close()


if __name__ == "__main__":
    main()
