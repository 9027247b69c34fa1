"""``python -m bench.otel``: what OpenTelemetry instrumentation costs (issue 32).

One process, one SQLite file at durability ``normal`` (no fsync per commit, so that the
instrumentation's cost is not hidden under the disk's; ``--durability full`` for the default), and
one job cycle — a send, a receive of
one message, its delete — timed in rounds, in three states:

- ``never``: before ``durableq.otel`` is imported at all (durableq as it ships);
- ``off``: after ``DurableqInstrumentor().instrument()`` then ``uninstrument()``;
- ``on``: instrumented, with the SDK's tracer and meter providers, spans batched to an exporter
  that drops them (the cost of making and recording them, not of a network).

``off`` and ``on`` rounds alternate after the ``never`` rounds, so drift on a shared machine lands
on both.  The figures are medians of per-round microseconds per cycle, and ratios to ``never``;
never judge them across machines.

    python -m bench.otel                 # 7 rounds of 2,000 cycles
    python -m bench.otel --rounds 3 --cycles 200 --durability full --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import durableq


def _round(queue: durableq.Queue, cycles: int) -> float:
    """Microseconds per cycle of one round."""
    started = time.perf_counter()
    for i in range(cycles):
        queue.send(f"job {i}")
        [message] = queue.receive()
        queue.delete(message.receipt_handle)
    return (time.perf_counter() - started) / cycles * 1e6


def measure(rounds: int, cycles: int, durability: str = "normal") -> dict[str, float]:
    """Median microseconds per cycle in each state, and ``on``'s and ``off``'s ratio to ``never``."""
    assert "durableq.otel" not in sys.modules, "run this in a fresh process: durableq.otel was imported"
    with tempfile.TemporaryDirectory(prefix="durableq-bench-otel-") as folder:
        broker = durableq.open(Path(folder) / "otel.db", durability=durability)
        try:
            queue = broker.create_queue("jobs")
            _round(queue, max(cycles // 10, 1))  # warm up: caches, the first statements
            never = [_round(queue, cycles) for _ in range(rounds)]
            on, off = _alternating(queue, rounds, cycles)
        finally:
            broker.close()
    figures = {
        state: statistics.median(times) for state, times in (("never", never), ("off", off), ("on", on))
    }
    figures["off/never"] = figures["off"] / figures["never"]
    figures["on/never"] = figures["on"] / figures["never"]
    return figures


def _alternating(queue: durableq.Queue, rounds: int, cycles: int) -> tuple[list[float], list[float]]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from durableq.otel import DurableqInstrumentor

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracing = TracerProvider()
    tracing.add_span_processor(BatchSpanProcessor(Dropping()))
    meters = MeterProvider([InMemoryMetricReader()])
    instrumentor = DurableqInstrumentor()
    on: list[float] = []
    off: list[float] = []
    try:
        for _ in range(rounds):
            instrumentor.instrument(tracer_provider=tracing, meter_provider=meters)
            on.append(_round(queue, cycles))
            instrumentor.uninstrument()
            off.append(_round(queue, cycles))
    finally:
        tracing.shutdown()
        meters.shutdown()
    return on, off


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.otel", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds in each state (default 7)")
    parser.add_argument("--cycles", type=int, default=2_000, help="send-receive-delete cycles a round")
    parser.add_argument("--durability", choices=("normal", "full"), default="normal")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.cycles < 1:
        parser.error("--rounds and --cycles take whole numbers >= 1")
    figures = measure(args.rounds, args.cycles, args.durability)
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in figures.items()}))
        return 0
    print(f"send + receive + delete, SQLite at {args.durability}, {args.rounds} rounds of {args.cycles}")
    for state in ("never", "off", "on"):
        print(
            f"{state:>6}: {figures[state]:8.1f} µs a cycle  ({figures[state] / figures['never']:.3f}× never)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
