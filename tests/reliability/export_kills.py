"""The long proof of the incremental export: ``python -m tests.reliability.export_kills [--rounds N]``.

Each round adds traffic to one history file and runs the export in a process of its own, SIGKILLed
at each kill point of ``tests.analytics.export_kills.MOMENTS`` in turn (a batch planned, files
written but not committed, committed in the sink's log but not in the query's commit log, a later
batch planned); after every kill a Spark batch read must show exactly the committed events, and a
downstream Spark file-stream reader takes what is new.  At the end one export runs to completion and
the reader must have read every event of the file exactly once.  A JVM starts per kill (~15 s each),
hence not in the default run (test_export_kills.py kills once).  Exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from durableq.analytics import export_events
from durableq.analytics.incremental import committed_offset
from durableq.analytics.session import plan_session, start_session
from tests.analytics import history_traffic
from tests.analytics.export_kills import MOMENTS, StreamReader, batch_read, library_ids, run_and_kill
from tests.analytics.scenario import START
from tests.conftest import FakeClock


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of traffic, each killed at every point")
    parser.add_argument("--batch", type=int, default=25, help="events per micro-batch of the killed runs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="durableq-export-kills-"))
    spark, _ = start_session(plan_session(None, None))
    db, out = work / "q.db", work / "out"
    clock = FakeClock(START)
    history_traffic.create(db, clock)
    reader = StreamReader(spark, out, work)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    traffic = 0
    for round_ in range(args.rounds):
        for name, moment in MOMENTS.items():
            history_traffic.traffic(db, clock, traffic)
            traffic += 1
            killed = run_and_kill(db, out, args.batch, moment)
            seen[name] += killed.seen
            committed = committed_offset(out / "events")
            expected = [i for i in library_ids(db) if i <= committed]
            if batch_read(spark, out) != expected:
                failures.append(f"round {round_}, {name}: the batch read is not the committed events")
            reader.read()
            print(f"round {round_}: killed at {name}: {killed}, committed up to {committed}", flush=True)
    export_events(db, out, spark=spark, tables=("events",))
    reader.read()
    ids = library_ids(db)
    if batch_read(spark, out) != ids:
        failures.append("after the last run, the batch read is not every event")
    counts = Counter(reader.ids)
    if counts != Counter(ids):
        twice = sorted(i for i, n in counts.items() if n > 1)[:10]
        missing = sorted(set(ids) - set(counts))[:10]
        failures.append(f"the stream reader: twice {twice}..., missing {missing}...")
    print(f"{len(ids)} events; kill points reached: {dict(seen)}")
    spark.stop()
    if failures:
        print(f"FAILED (kept: {work})\n  " + "\n  ".join(failures))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("ok: every event exactly once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
