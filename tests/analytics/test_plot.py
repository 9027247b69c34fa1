"""The plot: a row of panels per queue (up to a limit), steps that keep long ranges readable, and
nothing drawn after the snapshot time.  Drawn from throughput rows made here (no Spark needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.dates import date2num
from matplotlib.image import imread

from durableq import limits
from durableq.analytics import COUNTERS, write_activity_png
from durableq.analytics.plot import DPI, activity_figure, figure_size, step_minutes

START = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def rows(queues: list[str], minutes: int, sent: int = 10) -> list[dict[str, Any]]:
    """Throughput rows: ``sent`` messages a minute into each queue, none taken out."""
    return [
        {
            "queue": queue,
            "minute": START + n * MINUTE,
            **dict.fromkeys(COUNTERS, 0),
            "sent": sent * (i + 1),
            "expired_unswept": 0,
            "depth": sent * (i + 1) * (n + 1),
        }
        for i, queue in enumerate(queues)
        for n in range(minutes)
    ]


@pytest.mark.parametrize(
    ("span", "step"),
    [(timedelta(minutes=5), 1), (timedelta(hours=5), 1), (timedelta(days=1), 5), (timedelta(days=30), 180)],
)
def test_the_step_keeps_a_line_under_the_point_limit(span: timedelta, step: int) -> None:
    assert step_minutes(START, START + span) == step
    assert span / timedelta(minutes=step) <= limits.MAX_PLOT_POINTS


def test_one_row_of_panels_per_queue_up_to_the_limit(tmp_path: Path) -> None:
    names = [f"q{i}" for i in range(limits.MAX_PLOTTED_QUEUES + 2)]
    figure = activity_figure(rows(names, 10))
    # Two panels per queue shown; the busiest queues (the last ones here) are kept.
    panels = [axes for axes in figure.axes if axes.get_ylabel()]
    assert sorted(axes.get_ylabel() for axes in panels) == sorted(names[2:])
    assert "2 quieter queues not shown" in figure.texts[0].get_text()
    image = imread(write_activity_png(rows(names, 10), tmp_path / "many.png"))
    width, height = figure_size(len(names))
    assert figure_size(len(names)) == figure_size(limits.MAX_PLOTTED_QUEUES)
    assert image.shape[:2] == (round(height * DPI), round(width * DPI))


def test_a_day_is_drawn_in_five_minute_steps_per_queue(tmp_path: Path) -> None:
    day = rows(["orders", "emails"], 24 * 60)
    figure = activity_figure(day)
    assert "one point per 5 minutes" in figure.texts[0].get_text()
    depth_panels = [axes for axes in figure.axes if axes.get_ylabel() in ("orders", "emails")]
    for axes in depth_panels:
        [line] = axes.get_lines()
        assert len(line.get_xdata()) == 24 * 60 // 5
        # Each queue has its own line and scale: emails' depth is not flattened by orders'.
        assert max(line.get_ydata()) == max(r["depth"] for r in day if r["queue"] == axes.get_ylabel())


def test_nothing_is_drawn_after_the_snapshot_time() -> None:
    taken_at = START + 9 * MINUTE + timedelta(seconds=20)  # during the last minute with counters
    figure = activity_figure(rows(["jobs"], 10), end=taken_at)
    limit = date2num(taken_at)
    for axes in figure.axes:
        for line in axes.get_lines():
            assert np.max(date2num(line.get_xdata())) <= limit
        assert axes.get_xlim()[1] == pytest.approx(limit)
