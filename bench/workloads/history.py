"""W12: what message history costs: the W1 and W2 cycles on a queue with history on, against the
same queue with it off (issue 16's bound: under 15 %)."""

from __future__ import annotations

from ..compare import alternate, collect
from ..model import Config, Measurement, WorkloadResult
from ..systems import DurableQ, create_durableq_file
from .cycle import THROUGHPUT, TURNS, _batched, _single

SYSTEMS = ("history off", "history on")
_SETTINGS = {"history off": {}, "history on": {"history": True}}


def _case(cfg: Config, shape: str, durability: str, count: int) -> list[Measurement]:
    case = f"{shape}, durability={durability}"
    adapters = {}
    for name in SYSTEMS:
        path = cfg.path("W12", case.replace(", ", "-"), name.replace(" ", "_"))
        create_durableq_file(path, durability, **_SETTINGS[name])
        adapters[name] = DurableQ(path, durability, **_SETTINGS[name])
    run = (_single if shape == "single" else _batched)(count)
    turns = cfg.pick(TURNS, 2)

    def one_round(name: str) -> dict[str, float]:
        # Turns alternate inside the round too, as in W1/W2: the median of the turns is the round's value.
        values = sorted(run(adapters[name])[THROUGHPUT.name] for _ in range(turns))
        return {THROUGHPUT.name: values[len(values) // 2]}

    try:
        for name in SYSTEMS:
            (_single(5) if shape == "single" else _batched(2))(adapters[name])  # warm-up
        results = alternate(SYSTEMS, cfg.rounds, one_round, f"W12 {case}")
    finally:
        for adapter in adapters.values():
            adapter.close()
    return collect(case, SYSTEMS, [THROUGHPUT], results, {})


def run(cfg: Config) -> WorkloadResult:
    counts = {
        ("single", "normal"): cfg.pick(300, 30),
        ("single", "full"): cfg.pick(60, 10),
        ("batches of 10", "normal"): cfg.pick(60, 5),
        ("batches of 10", "full"): cfg.pick(15, 3),
    }
    measurements: list[Measurement] = []
    for (shape, durability), count in counts.items():
        measurements += _case(cfg, shape, durability, count)
    return WorkloadResult(
        "W12",
        "message history on vs off",
        "One process; the W1 cycle (send, receive, delete one message) and the W2 cycle (batches of 10) "
        "on a queue with history on (an event per send, receive and delete, in the same transaction) "
        "and on one with history off; per round, each system runs "
        + ", ".join(f"{n} {shape} cycles (durability={d})" for (shape, d), n in counts.items())
        + f", {TURNS} turns each, median turn.",
        measurements,
        reference="history off",
    )
