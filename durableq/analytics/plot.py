"""A PNG of queue depth and throughput over time, drawn from the throughput report's rows."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .errors import SparkExtraMissing

#: Size of the figure in inches, and its resolution.
FIGSIZE = (11.0, 7.0)
DPI = 100
#: The counters drawn in the lower panel, summed over the queues shown.
FLOWS = ("sent", "received", "deleted", "moved_to_dead_letter")
MINUTE = timedelta(minutes=1)


def write_activity_png(
    rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], *, title: str = "durableq activity"
) -> Path:
    """Draw depth per queue (upper panel) and messages per minute (lower panel) into ``path``.

    ``rows`` are rows of the ``throughput`` report (``queue``, ``minute``,
    the counters and ``depth``), as :func:`~durableq.analytics.run_report`
    returns them.
    """
    try:
        # The Agg canvas directly: no pyplot, so the caller's backend and global state are untouched.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise SparkExtraMissing("matplotlib") from exc
    figure = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(figure)
    depth_axes, flow_axes = figure.subplots(2, 1, sharex=True)
    depth: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    flows: dict[datetime, dict[str, int]] = defaultdict(lambda: dict.fromkeys(FLOWS, 0))
    for row in sorted(rows, key=lambda r: (r["queue"], r["minute"])):
        depth[row["queue"]].append((row["minute"], row["depth"]))
        for name in FLOWS:
            flows[row["minute"]][name] += row[name]
    # A depth is as of the end of its minute; a count spans its minute (so the steps get a closing edge).
    for queue, points in depth.items():
        depth_axes.plot([m + MINUTE for m, _ in points], [d for _, d in points], marker=".", label=queue)
    minutes = sorted(flows)
    edges = [*minutes, minutes[-1] + MINUTE] if minutes else []
    for name in FLOWS:
        counts = [flows[m][name] for m in minutes]
        flow_axes.step(edges, [*counts, *counts[-1:]], where="post", label=name.replace("_", " "))
    depth_axes.set_title(title)
    depth_axes.set_ylabel("messages at the end of the minute")
    flow_axes.set_ylabel("messages per minute")
    flow_axes.set_xlabel("time (UTC)")
    if not rows:
        depth_axes.text(
            0.5, 0.5, "no counters recorded", ha="center", va="center", transform=depth_axes.transAxes
        )
    for axes in (depth_axes, flow_axes):
        axes.grid(True, alpha=0.3)
        if axes.has_data():
            axes.legend(loc="upper left", fontsize="small", ncol=2)
    figure.autofmt_xdate()
    target = Path(path)
    figure.savefig(target, format="png")
    return target
