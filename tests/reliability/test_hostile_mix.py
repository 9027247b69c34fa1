"""The hostile mix, short: every public call composed at random, failing ones included, in
processes SIGKILLed at random, on each engine and through the endpoint (see
tests/reliability/hostile/).  Each run fails listing every broken promise it found: a lost or
resurrected message, an exception that is not a DurableQError, a hang, a crash, a file outside
the payload store removed, an event a resuming reader never saw.

``python -m tests.reliability.hostile --minutes N`` (and ``make stress``) runs it long.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .hostile.run import endpoint_run, library_run

pytestmark = [pytest.mark.hostile, pytest.mark.slow]


def test_the_hostile_mix_breaks_no_promise(tmp_path: Path, target: str, rng: random.Random) -> None:
    # Three processes of four threads (one with a second broker, one with a broker whose busy
    # timeout is 1 ms), one SIGKILLed every 0.5-2 s for 15 s; then a drain and every check.
    # On each engine ([sqlite]: a file in tmp_path; [postgresql]: a fresh database).
    figures = library_run(tmp_path, rng, seconds=15, db=target, hang=30, drain_seconds=120)
    assert figures["kills"] >= 3 and figures["messages"] > 100, figures
    assert figures["events_checked"] > 0 and figures["call fork"] > 0, figures
    print({k: v for k, v in figures.items() if k.startswith("call tx.")})
    for form in ("own", "joined"):  # transactions drawn to commit and to roll back, in either form
        assert figures.get(f"call tx.{form}.commit", 0) + figures.get(f"call tx.{form}.rollback", 0) > 0, (
            figures
        )


def test_the_hostile_mix_through_the_endpoint_breaks_no_promise(tmp_path: Path, rng: random.Random) -> None:
    # `durableq serve` (SigV4 required) on a SQLite file, two client processes of four boto3
    # threads each; clients and server SIGKILLed at random for 15 s; then a drain and every check.
    figures = endpoint_run(tmp_path, rng, seconds=15, hang=30, drain_seconds=120)
    assert figures["kills"] >= 3 and figures["messages"] > 100, figures
    assert figures["call wire.metrics"] > 0, figures
