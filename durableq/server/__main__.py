"""``python -m durableq.server --db PATH [options]``: the endpoint without the CLI (what its tests start)."""

from __future__ import annotations

import argparse
import logging

from . import DEFAULT_ACCOUNT_ID, DEFAULT_HOST, DEFAULT_PORT, DEFAULT_REGION, run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m durableq.server", description=__doc__)
    parser.add_argument("--db", required=True, help="the durableq database file")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port (printed)")
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--account-id", default=DEFAULT_ACCOUNT_ID)
    parser.add_argument("--credentials", help="file of `ACCESS_KEY_ID SECRET` lines: require SigV4")
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    run(
        args.db,
        host=args.host,
        port=args.port,
        region=args.region,
        account_id=args.account_id,
        credentials=args.credentials,
        durability=args.durability,
    )


if __name__ == "__main__":
    main()
