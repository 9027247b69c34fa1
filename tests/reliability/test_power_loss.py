"""Power loss, modelled as an instant copy of the files while producers run with durability="full"."""

from __future__ import annotations

import random
from pathlib import Path

from .power_loss import power_loss_run


def test_a_copy_taken_at_any_instant_opens_and_holds_every_acknowledged_send(
    tmp_path: Path, rng: random.Random
) -> None:
    figures = power_loss_run(tmp_path, rng, snapshots=8, every=(0.2, 1.0))
    assert figures["snapshots"] == 8 and figures["messages"] > 0, figures
