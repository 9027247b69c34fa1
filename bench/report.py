"""The results folder: ``results.md`` (tables) and one PNG per workload."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .model import Measurement, WorkloadResult, ratio
from .systems import ALL_SYSTEMS, DURABILITY, SEMANTICS, version
from .targets import Target

COLUMNS = ("case", "system", "metric", "value", "unit", "spread (rounds)", "× ref", "rounds", "note")


def number(value: float) -> str:
    """Three significant figures or so, with thousands separators: noise makes more meaningless."""
    if float(value).is_integer() and abs(value) < 100:
        return str(int(value))  # counts
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(headers), line(["---"] * len(headers)), *(line(row) for row in rows)]


def _row(m: Measurement, result: WorkloadResult) -> list[str]:
    if m.status:
        return [m.case, m.system, m.metric, m.status, "", "", "", "", m.note]
    reference = result.reference_for(m.case, m.metric)
    ref = result.find(m.case, reference, m.metric) if reference else None
    r = ratio(m, ref) if ref is not None and ref is not m else None
    spread = f"{number(min(m.samples))} – {number(max(m.samples))}" if m.samples else ""
    value = "—" if m.value is None else number(m.value)
    return [
        m.case,
        m.system,
        m.metric,
        value,
        m.unit,
        spread,
        "" if r is None else f"{r:.2f}",
        str(len(m.samples)),
        m.note,
    ]


def _workload_section(result: WorkloadResult, plot: Path | None) -> list[str]:
    lines = [f"## {result.key}: {result.title}", "", result.what, ""]
    references = list(dict.fromkeys(r for case in result.cases() if (r := result.reference_for(case, ""))))
    if references:
        which = " or ".join(f"**{r}**" for r in references)
        lines += [f"× ref: speed relative to {which} in the same case (above 1 is faster).", ""]
    lines += table(COLUMNS, [_row(m, result) for m in result.measurements])
    if result.notes:
        lines += [""] + [f"- {note}" for note in result.notes]
    if plot is not None:
        lines += ["", f"![{result.key}]({plot.name})"]
    return [*lines, ""]


def write_markdown(
    path: Path,
    results: list[WorkloadResult],
    targets: list[Target],
    plots: dict[str, Path],
    about: dict[str, str],
) -> None:
    lines = ["# durableq benchmark results", ""]
    lines += [f"- **{k}**: {v}" for k, v in about.items()] + [""]
    lines += ["## Targets of issues 8, 15 and 30", ""]
    lines += table(
        ("target", "goal", "measured", "status"), [(t.name, t.goal, t.measured, t.status) for t in targets]
    )
    lines += ["", "## Systems", ""]
    lines += table(
        ("system", "version", "durability=normal", "durability=full", "what a cycle does"),
        [(s, version(s), DURABILITY[s]["normal"], DURABILITY[s]["full"], SEMANTICS[s]) for s in ALL_SYSTEMS],
    )
    lines += [""]
    for result in results:
        lines += _workload_section(result, plots.get(result.key))
    path.write_text("\n".join(lines), encoding="utf-8")


def plot(result: WorkloadResult, folder: Path) -> Path | None:
    """Grouped bars per metric: cases along x, one bar per system at its value, dots at each round."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    measured = [m for m in result.measurements if m.value is not None]
    metrics = list(dict.fromkeys(m.metric for m in measured))
    if not metrics:
        return None
    systems = list(dict.fromkeys(m.system for m in measured))
    panels = len(metrics) + (result.distribution is not None)
    fig, axes = plt.subplots(1, panels, figsize=(max(6.0, 4.5 * panels), 4.5), squeeze=False)
    legend: dict[str, Any] = {}  # system -> its first bars, for one legend entry each
    for ax, metric in zip(axes[0], metrics):
        # Only the cases that have this metric, and in each only the systems measured there (a workload's
        # cases may measure different things); a system keeps its colour across panels.
        cases = list(dict.fromkeys(m.case for m in measured if m.metric == metric))
        unit = ""
        for x, case in enumerate(cases):
            present = [(s, m) for s in systems if (m := result.find(case, s, metric)) and m.value is not None]
            width = 0.8 / len(present)
            for i, (system, m) in enumerate(present):
                unit = m.unit
                position = x - 0.4 + width * (i + 0.5)
                color = f"C{systems.index(system) % 10}"
                legend.setdefault(system, ax.bar(position, m.value, width, color=color))
                ax.scatter([position] * len(m.samples), m.samples, s=8, color="black", zorder=3)
        ax.set_title(metric)
        ax.set_ylabel(unit)
        ax.set_xticks(range(len(cases)), cases, rotation=15, fontsize=8)
    if result.distribution is not None:
        label, values = result.distribution
        ordered = sorted(values)
        ax = axes[0][-1]
        ax.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], where="post")
        ax.set_title(f"distribution ({len(ordered)} values)")
        ax.set_xlabel(label)
        ax.set_ylabel("fraction at or below")
        ax.grid(alpha=0.3)
    columns = min(len(legend), 6)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=columns, fontsize=8)
    fig.suptitle(f"{result.key}: {result.title}")
    rows = -(-len(legend) // columns) if legend else 1
    fig.tight_layout(rect=(0, 0.04 + 0.03 * rows, 1, 1))  # room for the legend below
    path = folder / f"{result.key.lower()}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
