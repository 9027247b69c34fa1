"""The message-history reports without Spark or Java: Arrow tables, read with durableq itself.

    python examples/arrow_reports.py demo.db

Prints the ``wait`` report (exact percentiles) and the ``retries`` report of the
last two hours, counting the messages completed in them whenever they were sent.
Hand the tables to pandas (``table.to_pandas()``), Polars (``polars.from_arrow``)
or DuckDB (``duckdb.sql("SELECT * FROM table")``).
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

import durableq
from durableq import arrow


def show(name: str, table: object) -> None:
    rows = table.to_pylist()  # type: ignore[attr-defined]
    print(name)
    if rows:
        print("  ".join(rows[0]))
    for row in rows:
        print("  ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", help="the durableq file (or a postgresql:// URL)")
    args = parser.parse_args()
    started = time.perf_counter()
    with durableq.open(args.db) as broker:
        wait = arrow.report(broker, "wait", exact=True)
        since = datetime.now(UTC) - timedelta(hours=2)
        retries = arrow.report(broker, "retries", since=since, completed_in_window=True)
    show("wait", wait)
    show("retries, completed in the last 2 hours", retries)
    print(f"({time.perf_counter() - started:.1f} s, no JVM)")


if __name__ == "__main__":
    main()
