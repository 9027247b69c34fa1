"""Charts as SVG, drawn on the server: no chart library, no script, nothing fetched from elsewhere.

A queue's per-minute counters are small series (one point a minute, a few hours long), so a polyline
per series is all a chart needs; drawing it here keeps the page working behind firewalls and with
scripts off, and keeps the dashboard's own code the only code it serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH, HEIGHT = 640, 180
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 12, 12, 24
#: One colour per series, in the order given (colour-blind safe: Okabe-Ito).
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]


def line_chart(title: str, minutes: Sequence[datetime], series: Sequence[Series]) -> str:
    """An SVG line chart of ``series`` over ``minutes`` (one value per minute each), with a legend."""
    top = max((max(s.values, default=0) for s in series), default=0)
    top = _nice(top)
    plot_w, plot_h = WIDTH - PAD_LEFT - PAD_RIGHT, HEIGHT - PAD_TOP - PAD_BOTTOM
    step = plot_w / max(len(minutes) - 1, 1)

    def y(value: float) -> float:
        return PAD_TOP + plot_h - (value / top) * plot_h if top else PAD_TOP + plot_h

    parts = [
        f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH - PAD_RIGHT}" '
        f'y2="{PAD_TOP + plot_h}"/>',
        f'<text class="tick" x="{PAD_LEFT - 6}" y="{PAD_TOP + 8}" text-anchor="end">{_number(top)}</text>',
        f'<text class="tick" x="{PAD_LEFT - 6}" y="{PAD_TOP + plot_h}" text-anchor="end">0</text>',
    ]
    if minutes:
        parts.append(_time_label(minutes[0], PAD_LEFT, "start"))
        parts.append(_time_label(minutes[-1], WIDTH - PAD_RIGHT, "end"))
    for i, one in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{PAD_LEFT + j * step:.1f},{y(v):.1f}" for j, v in enumerate(one.values))
        parts.append(
            f'<polyline class="series" data-series="{escape(one.name)}" fill="none" stroke="{colour}" '
            f'stroke-width="1.5" points="{points}"/>'
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{COLOURS[i % len(COLOURS)]}"></i>{escape(s.name)}</span>'
        for i, s in enumerate(series)
    )
    return f'<figure class="chart">{"".join(parts)}<figcaption>{escape(title)} {legend}</figcaption></figure>'


def per_minute(
    minutes: Sequence[datetime], rows: Mapping[datetime, Mapping[str, int]], names: Sequence[str]
) -> list[Series]:
    """Series of the counters ``names``, a value for every minute (0 where a minute has no row)."""
    return [Series(name, [rows.get(m, {}).get(name, 0) for m in minutes]) for name in names]


def _nice(top: float) -> float:
    """The axis' top: ``top`` rounded up to 1, 2 or 5 times a power of ten."""
    if top <= 0:
        return 0
    power = 1.0
    while power * 10 <= top:
        power *= 10
    for factor in (1, 2, 5, 10):
        if factor * power >= top:
            return factor * power
    return 10 * power


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 or value == 0 else f"{value:g}"


def _time_label(moment: datetime, x: float, anchor: str) -> str:
    return (
        f'<text class="tick" x="{x}" y="{HEIGHT - 6}" text-anchor="{anchor}">'
        f"{moment.strftime('%H:%M')} UTC</text>"
    )
