"""Each report checked against the library (stats, metrics) or plain Python over the snapshot file."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from durableq import limits
from durableq.analytics import COUNTERS, QueueAnalytics, to_rows
from durableq.analytics.reports import ACCURACY, PERCENTILES
from durableq.errors import InvalidParameterValue, QueueDoesNotExist

from . import reference, scenario
from .conftest import Library

ReportRows = Callable[[str], list[dict[str, Any]]]


def by_queue(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["queue"]: row for row in rows}


def test_depth_by_state_equals_queue_stats(report_rows: ReportRows, library: Library) -> None:
    depth = by_queue(report_rows("depth"))
    assert sorted(depth) == list(scenario.QUEUE_NAMES)
    for name, stats in library.stats.items():
        row = depth[name]
        assert (row["visible"], row["in_flight"], row["delayed"]) == (
            stats.approximate_number_of_messages,
            stats.approximate_number_of_messages_not_visible,
            stats.approximate_number_of_messages_delayed,
        ), name
        assert row["total"] == row["visible"] + row["in_flight"] + row["delayed"]
    assert depth["idle"]["total"] == 0
    assert all(depth["orders"][state] > 0 for state in ("visible", "in_flight", "delayed"))


def test_age_percentiles_against_the_ages_in_the_file(
    analytics: QueueAnalytics, report_rows: ReportRows, snapshot_rows: list[reference.Row], library: Library
) -> None:
    now = analytics.now_ms
    ages: dict[str, list[float]] = defaultdict(list)
    for row in reference.live(snapshot_rows, now):
        ages[row.queue].append((now - row.enqueued_at) / 1000)
    report = by_queue(report_rows("ages"))
    assert sorted(report) == list(scenario.QUEUE_NAMES)
    for name, row in report.items():
        assert row["oldest"] == library.stats[name].oldest_message_age, name
        assert row["messages"] == len(ages[name])
        if not ages[name]:
            assert row["p50"] is row["p90"] is row["p99"] is None
            continue
        for fraction in PERCENTILES:
            low, high = reference.rank_window(ages[name], fraction, ACCURACY)
            assert low <= row[f"p{round(fraction * 100)}"] <= high, (name, fraction)
        assert row["p50"] <= row["p90"] <= row["p99"] <= row["oldest"] + 1
    # The scenario spreads orders over three minutes: the percentiles tell them apart.
    assert report["orders"]["p50"] < report["orders"]["p99"]


def test_receive_count_histogram(
    analytics: QueueAnalytics, report_rows: ReportRows, snapshot_rows: list[reference.Row]
) -> None:
    expected = Counter((r.queue, r.receive_count) for r in reference.live(snapshot_rows, analytics.now_ms))
    rows = report_rows("receive-counts")
    assert {(r["queue"], r["receive_count"]): r["messages"] for r in rows} == expected
    assert [(r["queue"], r["receive_count"]) for r in rows] == sorted(expected)
    assert expected[("payments", 2)] == scenario.PAYMENTS_SENT - scenario.PAYMENTS_MOVED


def test_dead_letter_rates(
    analytics: QueueAnalytics, report_rows: ReportRows, library: Library, snapshot_rows: list[reference.Row]
) -> None:
    report = by_queue(report_rows("dead-letters"))
    # Exactly the queues with a redrive policy.
    assert sorted(report) == ["events.fifo", "orders", "payments"]
    held = Counter(r.dead_letter_source for r in reference.live(snapshot_rows, analytics.now_ms))
    for name, row in report.items():
        minutes = library.metrics[name]
        received = sum(m.received for m in minutes)
        moved = sum(m.moved_to_dead_letter for m in minutes)
        assert (row["received"], row["moved_to_dead_letter"]) == (received, moved)
        # Rounded (issue 31: 17 digits were printed), to RATE_DIGITS places.
        assert row["dead_letter_rate"] == pytest.approx(moved / received, abs=0.5 * 10**-limits.RATE_DIGITS)
        assert round(row["dead_letter_rate"], limits.RATE_DIGITS) == row["dead_letter_rate"]
        assert row["in_dead_letter_queues"] == held[name]
        assert row["dead_letter_queue"] == library.attributes[name]["redrive_policy"].dead_letter_queue
    payments = report["payments"]
    assert (payments["received"], payments["moved_to_dead_letter"]) == (
        scenario.PAYMENTS_RECEIVED,
        scenario.PAYMENTS_MOVED,
    )
    assert payments["dead_letter_rate"] == 0.3333
    assert report["events.fifo"]["moved_to_dead_letter"] > 0
    assert report["orders"]["moved_to_dead_letter"] == 0


def test_throughput_per_minute_and_reconstructed_depth(
    analytics: QueueAnalytics, report_rows: ReportRows, library: Library, snapshot_rows: list[reference.Row]
) -> None:
    rows = report_rows("throughput")
    depth_now = {
        name: s.approximate_number_of_messages
        + s.approximate_number_of_messages_not_visible
        + s.approximate_number_of_messages_delayed
        for name, s in library.stats.items()
    }
    unswept = reference.unswept_by_minute(snapshot_rows, analytics.now_ms)
    assert sum(unswept["audit"].values()) == scenario.AUDIT_EXPIRED
    expected = reference.depth_estimate(library.metrics, depth_now, unswept)
    got: dict[str, list[tuple[Any, int]]] = defaultdict(list)
    for row in rows:
        got[row["queue"]].append((row["minute"], row["depth"]))
    assert got == {q: [(minute, depth) for minute, _, depth in walked] for q, walked in expected.items()}
    # Counters pass through unchanged.
    counters = {(r["queue"], r["minute"]): tuple(r[c] for c in COUNTERS) for r in rows}
    for name, minutes in library.metrics.items():
        for m in minutes:
            assert counters[(name, m.minute)] == tuple(getattr(m, c) for c in COUNTERS)
    expired_unswept = {(r["queue"], r["minute"]): r["expired_unswept"] for r in rows if r["expired_unswept"]}
    assert expired_unswept == {(q, m): n for q, minutes in unswept.items() for m, n in minutes.items()}
    # Every change was counted (audit's expired messages when they expired, though no sweep
    # has counted them yet), so each queue started empty and no depth is negative.
    started = {q: walked[0][2] - walked[0][1] for q, walked in expected.items()}
    assert started == dict.fromkeys(expected, 0)
    assert min(r["depth"] for r in rows) >= 0
    assert "payments-dlq" in expected and "events-dlq.fifo" in expected


# The filter is applied after each report is computed; these two would go wrong if it were not.
@pytest.mark.parametrize("name", ["throughput", "ages"])
def test_a_queue_filter_keeps_that_queue_s_rows(
    analytics: QueueAnalytics, report_rows: ReportRows, name: str
) -> None:
    everything = report_rows(name)
    payments = [r for r in everything if r["queue"] == "payments"]
    assert payments and to_rows(analytics.report(name, queue="payments")) == payments


def test_unknown_report_or_queue(analytics: QueueAnalytics) -> None:
    with pytest.raises(InvalidParameterValue, match="depth"):
        analytics.report("nope")
    with pytest.raises(QueueDoesNotExist, match="nope"):
        analytics.report("depth", queue="nope")
