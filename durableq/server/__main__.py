"""``python -m durableq.server --db PATH [options]``: the endpoint without the CLI (what its tests start)."""

from __future__ import annotations

import argparse

from durableq.errors import DurableQError
from durableq.text import printable

from . import DEFAULT_ACCOUNT_ID, DEFAULT_HOST, DEFAULT_PORT, DEFAULT_REGION, LOOPS, logs, run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m durableq.server", description=__doc__)
    parser.add_argument("--db", required=True, help="the durableq database file")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port (printed)")
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--account-id", default=DEFAULT_ACCOUNT_ID)
    parser.add_argument("--credentials", help="file of `ACCESS_KEY_ID SECRET` lines: require SigV4")
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    parser.add_argument("--tls-cert", help="PEM certificate file: serve HTTPS (with --tls-key)")
    parser.add_argument("--tls-key", help="PEM private key file of --tls-cert")
    parser.add_argument(
        "--allow-host", action="append", default=[], help="another name the Host header may carry ('*': any)"
    )
    parser.add_argument("--keyring", help="keyring file with the master keys of encrypted queues")
    parser.add_argument("--payload-dir", help="payload store of large payloads (default: DB.payloads)")
    parser.add_argument("--schema", help="PostgreSQL: the schema of durableq's tables (default: durableq)")
    parser.add_argument("--loop", choices=LOOPS, default="auto")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--log-format", choices=logs.LOG_FORMATS, default="text")
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    try:
        run(
            args.db,
            host=args.host,
            port=args.port,
            region=args.region,
            account_id=args.account_id,
            credentials=args.credentials,
            durability=args.durability,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            allow_hosts=args.allow_host,
            loop=args.loop,
            keyring=args.keyring,
            payload_dir=args.payload_dir,
            schema=args.schema,
        )
    except (ValueError, OSError, DurableQError) as exc:  # refused at start (credentials, port, file)
        parser.exit(1, f"{parser.prog}: error: {printable(exc)}\n")


if __name__ == "__main__":
    main()
