"""A PNG of each queue's depth and traffic over time, drawn from the throughput report's rows.

One row of panels per queue (the busiest :data:`~durableq.limits.MAX_PLOTTED_QUEUES`):
its depth on the left, its messages per step on the right, so a small queue is
not flattened by a big one.  Minutes are merged into steps (5 minutes, 1 hour
...) so a long range stays readable, and nothing is drawn after the snapshot
time.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .. import limits
from .errors import SparkExtraMissing

#: Width of the figure, and the height of its title and of each queue's row, in inches; its resolution.
WIDTH = 12.0
TITLE_HEIGHT = 1.0
ROW_HEIGHT = 2.2
DPI = 100
#: The steps the minutes are merged into, in minutes: the first that keeps a line under
#: MAX_PLOT_POINTS points is used.
STEPS = (1, 5, 15, 30, 60, 180, 360, 720, 1440)
MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: The lines of the traffic panel: label, and the throughput columns summed into it.
FLOWS: dict[str, tuple[str, ...]] = {
    "sent": ("sent",),
    "received": ("received",),
    "deleted": ("deleted",),
    "moved in": ("moved_in",),
    "moved out": ("moved_to_dead_letter", "moved_out"),
    "expired or purged": ("expired", "expired_unswept", "purged"),
}
#: One colour per line, the same in every panel.
COLORS = dict(zip(FLOWS, ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:red", "tab:gray")))


def figure_size(queues: int) -> tuple[float, float]:
    """The figure's size in inches for a plot of ``queues`` queues (at least one row)."""
    return WIDTH, TITLE_HEIGHT + ROW_HEIGHT * max(1, min(queues, limits.MAX_PLOTTED_QUEUES))


def step_minutes(first: datetime, end: datetime) -> int:
    """The step for the range ``[first, end)``: the shortest that keeps the points under the limit."""
    span = max(1.0, (end - first) / MINUTE)
    for step in STEPS:
        if span / step <= limits.MAX_PLOT_POINTS:
            return step
    return STEPS[-1]


@dataclass
class _Series:
    """One queue's points, merged into steps: flows summed, depth as of each step's end."""

    traffic: int = 0
    flows: dict[datetime, dict[str, int]] = field(default_factory=dict)
    depth: dict[datetime, int] = field(default_factory=dict)


def _value(row: Mapping[str, Any], columns: Iterable[str]) -> int:
    return sum(int(row.get(c) or 0) for c in columns)


def _merge(rows: Sequence[Mapping[str, Any]], step: int) -> dict[str, _Series]:
    series: dict[str, _Series] = defaultdict(_Series)
    for row in sorted(rows, key=lambda r: (r["queue"], r["minute"])):
        minute: datetime = row["minute"]
        start = minute - timedelta(minutes=((minute - _EPOCH) // MINUTE) % step)
        queue = series[row["queue"]]
        counts = queue.flows.setdefault(start, dict.fromkeys(FLOWS, 0))
        for label, columns in FLOWS.items():
            counts[label] += _value(row, columns)
        queue.traffic += _value(row, ("sent", "received", "deleted"))
        queue.depth[start] = row["depth"]  # rows come in time order: the last minute's depth wins
    return series


def write_activity_png(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str = "durableq activity",
    end: datetime | None = None,
) -> Path:
    """Draw each queue's depth and traffic into ``path`` (a PNG) and return the path.

    ``rows`` are rows of the ``throughput`` report (``queue``, ``minute``, the
    counters and ``depth``), as :func:`~durableq.analytics.run_report` returns
    them.  ``end``: the snapshot time; nothing is drawn after it (default: the
    end of the last minute).
    """
    target = Path(path)
    activity_figure(rows, title=title, end=end).savefig(target, format="png")
    return target


def activity_figure(
    rows: Sequence[Mapping[str, Any]], *, title: str = "durableq activity", end: datetime | None = None
) -> Any:
    """The matplotlib ``Figure`` that :func:`write_activity_png` saves."""
    try:
        # The Agg canvas directly: no pyplot, so the caller's backend and global state are untouched.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.dates import ConciseDateFormatter
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
    except ImportError as exc:
        raise SparkExtraMissing("matplotlib") from exc
    last = max((r["minute"] for r in rows), default=None)
    first = min((r["minute"] for r in rows), default=None)
    stop = end if end is not None else (last + MINUTE if last is not None else None)
    step = step_minutes(first, stop) if first is not None and stop is not None else 1
    series = _merge(rows, step)
    shown = sorted(series, key=lambda q: (-series[q].traffic, q))[: limits.MAX_PLOTTED_QUEUES]
    shown.sort()
    figure = Figure(figsize=figure_size(len(shown)), dpi=DPI)
    FigureCanvasAgg(figure)
    left_out = len(series) - len(shown)
    heading = title + (f" ({left_out} quieter queues not shown)" if left_out else "")
    heading += f"\none point per {_step_name(step)}" if rows else ""
    figure.suptitle(heading)
    if not shown:
        axes = figure.subplots(1, 1)
        axes.text(0.5, 0.5, "no counters recorded", ha="center", va="center", transform=axes.transAxes)
        axes.set_axis_off()
        figure.tight_layout()
    else:
        assert stop is not None
        grid = figure.subplots(len(shown), 2, sharex=True, squeeze=False)
        for (depth_axes, flow_axes), queue in zip(grid, shown):
            _draw_queue(depth_axes, flow_axes, queue, series[queue], step, stop)
        grid[0][0].set_title("messages in the queue (at the end of each step)", fontsize="medium")
        grid[0][1].set_title(f"messages per {_step_name(step)}", fontsize="medium")
        for axes in grid[-1]:
            axes.set_xlabel("time (UTC)")
        for axes in grid[-1]:
            locator = axes.xaxis.get_major_locator()
            axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        drawn = {label for axes in grid[:, 1] for label in axes.get_legend_handles_labels()[1]}
        handles = [Line2D([], [], color=COLORS[label], label=label) for label in FLOWS if label in drawn]
        figure.tight_layout(rect=(0, 0.03 if handles else 0, 1, 1))
        if handles:
            figure.legend(
                handles=handles, loc="lower center", ncol=len(handles), fontsize="small", frameon=False
            )
    return figure


def _draw_queue(
    depth_axes: Any, flow_axes: Any, queue: str, series: _Series, step: int, stop: datetime
) -> None:
    width = timedelta(minutes=step)
    # Every step from the queue's first to the snapshot: no row means no traffic, and the depth held.
    starts = [min(series.flows)]
    while starts[-1] + width < stop:
        starts.append(starts[-1] + width)
    depth = series.depth[starts[0]]
    for start in starts:
        depth = series.depth.setdefault(start, depth)
        series.flows.setdefault(start, dict.fromkeys(FLOWS, 0))
    # A depth is as of the end of its step; the last step ends at the snapshot time at the latest.
    depth_axes.plot(
        [min(s + width, stop) for s in starts],
        [series.depth[s] for s in starts],
        color="black",
        linewidth=1.2,
    )
    depth_axes.set_ylabel(queue, rotation=0, ha="right", va="center", fontsize="medium")
    depth_axes.set_ylim(bottom=0)
    edges = [*starts, min(starts[-1] + width, stop)]
    for label in FLOWS:
        counts = [series.flows[s][label] for s in starts]
        if any(counts):
            # A count spans its step: draw it as a step line with a closing edge.
            flow_axes.step(
                edges, [*counts, counts[-1]], where="post", label=label, color=COLORS[label], linewidth=1
            )
    flow_axes.set_ylim(bottom=0)
    for axes in (depth_axes, flow_axes):
        axes.grid(True, alpha=0.3)
        axes.set_xlim(right=stop)


def _step_name(step: int) -> str:
    if step < 60:
        return "minute" if step == 1 else f"{step} minutes"
    hours = step // 60
    return "hour" if hours == 1 else ("day" if hours == 24 else f"{hours} hours")
