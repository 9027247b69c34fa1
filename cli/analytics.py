"""``durableq analyze`` and ``durableq export``: thin shells over ``durableq.analytics``
(Spark is imported only when one of them runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .base import CommandFailed, existing_db_path
from .output import emit, json_option, table

#: The report names of the command line, and the library's name for each.
REPORTS = {
    "depth": "depth",
    "age": "ages",
    "receives": "receive-counts",
    "dead-letters": "dead-letters",
    "throughput": "throughput",
    "all": "all",
}


def _analytics() -> Any:
    try:
        import durableq.analytics as analytics
    except ImportError as exc:  # the extra is missing: its message says how to install it
        raise CommandFailed(type(exc).__name__, str(exc)) from exc
    return analytics


@click.command()
@click.argument("queue", required=False)
@click.option(
    "--report",
    type=click.Choice(list(REPORTS)),
    default="all",
    show_default=True,
    help="Which report to run.",
)
@click.option("--master", help="Spark master URL (default: local[*], Spark in this process).")
@click.option("--jar", type=click.Path(dir_okay=False, path_type=Path), help="The SQLite JDBC driver jar.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Also write each report as Parquet here."
)
@click.option(
    "--plot", type=click.Path(dir_okay=False, path_type=Path), help="Also draw depth and throughput as a PNG."
)
@json_option
def analyze(
    queue: str | None,
    report: str,
    master: str | None,
    jar: Path | None,
    out: Path | None,
    plot: Path | None,
    as_json: bool,
) -> None:
    """Analyse a consistent snapshot of the database with Spark: depth by state,
    age percentiles, receive counts, dead-letter rates, throughput per minute
    (for QUEUE, or every queue).

    Needs `pip install 'durableq[spark]'`, Java and the SQLite JDBC driver.

    \b
      durableq analyze
      durableq analyze orders --report age
      durableq analyze --plot activity.png --out ./reports
    """
    result = _analytics().run_report(
        existing_db_path(), REPORTS[report], queue=queue, master=master, jar=jar, plot=plot, out_dir=out
    )
    emit(as_json, result, lambda: _text(result, plot, out))


def _text(result: dict[str, list[dict[str, Any]]], plot: Path | None, out: Path | None) -> str:
    [snapshot] = result["snapshot"]
    parts = [f"snapshot of {snapshot['source']} at {snapshot['taken_at']:%Y-%m-%d %H:%M:%S} UTC"]
    for name, rows in result.items():
        if name == "snapshot":
            continue
        parts.append(f"\n{name}")
        parts.append(table(list(rows[0]), [list(row.values()) for row in rows]) if rows else "(no rows)")
    if plot is not None:
        parts.append(f"\nplot written to {plot}")
    if out is not None:
        parts.append(f"Parquet written under {out}")
    return "\n".join(parts)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default="parquet", show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace folders written by an earlier export.")
@click.option("--master", help="Spark master URL (default: local[*]).")
@click.option("--jar", type=click.Path(dir_okay=False, path_type=Path), help="The SQLite JDBC driver jar.")
@json_option
def export(
    directory: Path, fmt: str, overwrite: bool, master: str | None, jar: Path | None, as_json: bool
) -> None:
    """Write a consistent snapshot's tables (messages, queues, metrics) as Parquet
    under DIRECTORY, for a Spark cluster or any Parquet reader.

    \b
      durableq export --format parquet ./queue-parquet
    """
    written = _analytics().export_parquet(
        existing_db_path(), directory, overwrite=overwrite, master=master, jar=jar
    )
    emit(as_json, written, lambda: table(["table", "path", "rows"], [list(w.values()) for w in written]))


COMMANDS = [analyze, export]
