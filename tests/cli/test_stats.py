"""stats: depth by state, the oldest age, per-minute rates, and --watch ending on Ctrl-C."""

from __future__ import annotations

import json
import time

import pytest
from durableq.cli import stats as stats_module

import durableq

from .conftest import Run


def _setup(broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    for body in ("a", "b", "c"):
        jobs.send(body)
    jobs.send("later", delay_seconds=900)
    jobs.receive(visibility_timeout=600)
    broker.create_queue("other")


def test_every_queue_by_state_with_rates(run: Run, broker: durableq.Broker, location: str) -> None:
    _setup(broker)
    with durableq.open(location, clock=lambda: time.time() - 125) as earlier:  # a message sent 125 s ago
        earlier.get_queue("other").send("old")
    snapshot = json.loads(run("stats", "--json").stdout)
    assert snapshot["window_minutes"] == 5
    rows = {row["queue"]: row for row in snapshot["queues"]}
    assert sorted(rows) == ["jobs", "other"]
    jobs = rows["jobs"]
    assert (jobs["visible"], jobs["in_flight"], jobs["delayed"]) == (2, 1, 1)
    # The command runs on the real clock: the ages are those of the messages, in whole seconds.
    assert jobs["oldest_message_age"] < 60
    assert 125 <= rows["other"]["oldest_message_age"] < 185
    # the broker's counters reach the file when it flushes them (at the latest when it closes)
    broker.close()
    rates = json.loads(run("stats", "jobs", "--window", "1", "--json").stdout)["queues"][0]["per_minute"]
    assert rates["sent"] == 4 and rates["received"] == 1
    assert set(rates) == {"sent", "received", "deleted", "moved_to_dead_letter", "expired", "empty_receives"}


def test_text_table(run: Run, broker: durableq.Broker) -> None:
    _setup(broker)
    text = run("stats", "jobs").stdout
    header, row = text.splitlines()
    assert header.split()[:5] == ["queue", "visible", "in", "flight", "delayed"]
    assert row.split()[:4] == ["jobs", "2", "1", "1"]
    assert run("stats").stdout.count("\n") == 3


def test_no_queues_and_a_missing_queue(run: Run, broker: durableq.Broker) -> None:
    assert run("stats").stdout == "no queues\n"
    assert run("stats", "nope", code=1).stderr == "error: QueueDoesNotExist: queue 'nope' does not exist\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--window", "0"), "--window must be from 1 to 527040 minutes; got 0"),
        # Once a timedelta overflow that printed "a bug in durableq".
        (
            ("--window", "999999999999999999999"),
            "--window must be from 1 to 527040 minutes; got 999999999999999999999",
        ),
        (("--interval", "0.01", "--watch"), "--interval must be from 0.1 to 3600 seconds; got 0.01"),
        (("--interval", "nan", "--watch"), "--interval must be from 0.1 to 3600 seconds; got nan"),
        (("--interval", "1e400", "--watch"), "--interval must be from 0.1 to 3600 seconds; got inf"),
    ],
)
def test_a_window_or_interval_out_of_range_is_refused_in_one_line(
    run: Run, broker: durableq.Broker, args: tuple[str, ...], message: str
) -> None:
    broker.create_queue("jobs")
    result = run("stats", "jobs", *args, code=1)
    assert result.stdout == ""
    assert result.stderr == f"error: InvalidParameterValue: {message}\n"


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, refreshes: int) -> list[float]:
    """Make --watch's pause raise KeyboardInterrupt (as Ctrl-C would) on its ``refreshes``-th call."""
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == refreshes:
            raise KeyboardInterrupt

    monkeypatch.setattr(stats_module, "_sleep", pause)
    return pauses


def test_watch_redraws_until_ctrl_c_and_exits_0(
    run: Run, broker: durableq.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(broker)
    pauses = _interrupt_after(monkeypatch, 2)
    result = run("stats", "--watch", "--interval", "0.5")
    assert pauses == [0.5, 0.5]
    assert result.stdout.count("Ctrl-C to stop") == 2
    assert result.stdout.count("jobs") == 2


def test_watch_with_json_prints_one_line_per_refresh(
    run: Run, broker: durableq.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(broker)
    _interrupt_after(monkeypatch, 3)
    lines = run("stats", "jobs", "--watch", "--json").stdout.splitlines()
    assert len(lines) == 3
    assert all(json.loads(line)["queues"][0]["queue"] == "jobs" for line in lines)
