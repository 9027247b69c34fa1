"""``durableq analyze`` and ``durableq export``: thin shells over ``durableq.analytics``
(Spark is imported only when one of them runs)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from durableq import limits

from .base import CommandFailed, existing_db_location, settings
from .output import emit, json_option, table
from .parsing import UTC_TIME

F = TypeVar("F", bound=Callable[..., Any])

#: The report names of the command line, and the library's name for each.
REPORTS = {
    "depth": "depth",
    "age": "ages",
    "receives": "receive-counts",
    "dead-letters": "dead-letters",
    "throughput": "throughput",
    "latency": "latency",
    "processing": "processing",
    "retries": "retries",
    "wait": "wait",
    "all": "all",
}


def _analytics() -> Any:
    try:
        import durableq.analytics as analytics
    except ImportError as exc:  # the extra is missing: its message says how to install it
        raise CommandFailed(type(exc).__name__, str(exc)) from exc
    return analytics


def _conf(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as a dict (the library checks the names)."""
    conf: dict[str, str] = {}
    for item in given:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE (e.g. spark.executor.memory=4g)", ctx, param)
        conf[key] = value
    return conf


def spark_options(command: F) -> F:
    """The options both commands share: where Spark runs, where the snapshot goes, and the time window."""
    options = [
        click.option(
            "--master",
            help="Spark master URL when durableq starts Spark (default: local[*], Spark in this process, "
            "listening on 127.0.0.1 only); under spark-submit, spark-submit's master is used.",
        ),
        click.option(
            "--conf",
            "conf",
            multiple=True,
            metavar="KEY=VALUE",
            callback=_conf,
            help="A Spark setting for the session durableq starts, as spark-submit's --conf "
            "(repeat it for more); e.g. --conf spark.driver.memory=4g.",
        ),
        click.option(
            "--verbose",
            is_flag=True,
            help="Show Spark's own log lines (WARN and up); without it, only its errors.",
        ),
        click.option(
            "--jar",
            type=click.Path(dir_okay=False, path_type=Path),
            help="The JDBC driver jar (SQLite's; PostgreSQL's for a postgresql:// database).",
        ),
        click.option(
            "--snapshot-dir",
            type=click.Path(file_okay=False, path_type=Path),
            help="An existing folder for the snapshot copy, e.g. storage every executor of a cluster reads "
            "(default: a private folder in the temp folder). Anyone who may enter it can read the copy.",
        ),
        click.option(
            "--partitions",
            type=int,
            metavar="N",
            help=f"Parallel reads of the messages, of equal size, 1-{limits.MAX_ANALYTICS_PARTITIONS} "
            "(default: Spark's default parallelism).",
        ),
        click.option(
            "--since",
            type=UTC_TIME,
            help="Only messages sent, and minutes counted, at or after this time: ISO 8601 (UTC unless it "
            "has an offset), or how long ago (90s, 30m, 2h, 7d).",
        ),
        click.option("--until", type=UTC_TIME, help="...and before this time (same forms)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command()
@click.argument("queue", required=False)
@click.option(
    "--report",
    type=click.Choice(list(REPORTS)),
    default="all",
    show_default=True,
    help="Which report to run.",
)
@spark_options
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Also write each report as Parquet here."
)
@click.option(
    "--plot", type=click.Path(dir_okay=False, path_type=Path), help="Also draw depth and throughput as a PNG."
)
@click.option("--exact", is_flag=True, help="Exact percentiles (slower on many messages), not approximate.")
@click.option(
    "--completed-in-window",
    is_flag=True,
    help="History reports (latency, processing, retries, wait) count the messages completed in the "
    "--since/--until window, whenever they were sent.",
)
@json_option
def analyze(
    queue: str | None,
    report: str,
    master: str | None,
    conf: dict[str, str],
    verbose: bool,
    jar: Path | None,
    snapshot_dir: Path | None,
    partitions: int | None,
    since: datetime | None,
    until: datetime | None,
    out: Path | None,
    plot: Path | None,
    exact: bool,
    completed_in_window: bool,
    as_json: bool,
) -> None:
    """Analyse a consistent snapshot of the database with Spark: depth by state,
    age percentiles, receive counts, dead-letter rates, throughput per minute,
    and from message history send-to-delete latency, the wait before the first
    receive, processing time and retries (for QUEUE, or every queue).

    Needs `pip install 'durableq[spark]'`, Java and the JDBC driver (SQLite's, or PostgreSQL's).

    \b
      durableq analyze
      durableq analyze orders --report age
      durableq analyze --report throughput --since 2h --plot activity.png
      durableq analyze --since 2026-11-20T09:00 --until 2026-11-20T10:00
      durableq analyze --report wait --since 2h --completed-in-window --exact
      durableq analyze --master spark://host:7077 --snapshot-dir /shared/snapshots
    """
    result = _analytics().run_report(
        existing_db_location(),
        REPORTS[report],
        queue=queue,
        master=master,
        jar=jar,
        plot=plot,
        out_dir=out,
        partitions=partitions,
        snapshot_dir=snapshot_dir,
        since=since,
        until=until,
        schema=settings().schema,
        conf=conf,
        verbose=verbose,
        exact=exact,
        completed_in_window=completed_in_window,
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
@click.option(
    "--format",
    type=click.Choice(["parquet"]),
    default="parquet",
    show_default=True,
    expose_value=False,  # it names the one format there is: nothing to pass on
    help="The files' format: Parquet, the one export writes (with --incremental too).",
)
@click.option("--overwrite", is_flag=True, help="Replace folders written by an earlier export.")
@click.option(
    "--incremental",
    is_flag=True,
    help="Append the message events and audit events written since the last --incremental run "
    "(checkpoints kept in DIRECTORY); safe to re-run after a crash.",
)
@spark_options
@json_option
def export(
    directory: Path,
    overwrite: bool,
    incremental: bool,
    master: str | None,
    conf: dict[str, str],
    verbose: bool,
    jar: Path | None,
    snapshot_dir: Path | None,
    partitions: int | None,
    since: datetime | None,
    until: datetime | None,
    as_json: bool,
) -> None:
    """Write a consistent snapshot's tables (messages, queues, metrics) as Parquet
    under DIRECTORY, for a Spark cluster or any Parquet reader. With
    --incremental: append the events since the last run instead (DIRECTORY/events
    by queue and date, DIRECTORY/audit by date).

    \b
      durableq export --format parquet ./queue-parquet
      durableq export --since 2026-11-20 --until 2026-11-21 ./one-day
      durableq export --incremental ./history
    """
    if incremental:
        refused = [
            name
            for name, given in (("--overwrite", overwrite), ("--since", since), ("--until", until))
            if given
        ]
        if refused:
            raise CommandFailed(
                "InvalidParameterValue",
                f"--incremental exports everything after its checkpoint; leave out {', '.join(refused)}",
            )
        rows = _analytics().export_events(
            existing_db_location(),
            directory,
            master=master,
            jar=jar,
            partitions=partitions,
            snapshot_dir=snapshot_dir,
            schema=settings().schema,
            conf=conf,
            verbose=verbose,
        )
        columns = ["table", "path", "rows", "checkpoint"]
        emit(as_json, rows, lambda: table(columns, [[r[c] for c in columns] for r in rows]))
        return
    written = _analytics().export_parquet(
        existing_db_location(),
        directory,
        overwrite=overwrite,
        master=master,
        jar=jar,
        partitions=partitions,
        snapshot_dir=snapshot_dir,
        since=since,
        until=until,
        schema=settings().schema,
        conf=conf,
        verbose=verbose,
    )
    emit(as_json, written, lambda: table(["table", "path", "rows"], [list(w.values()) for w in written]))


COMMANDS = [analyze, export]
