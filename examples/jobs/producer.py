"""Sends thumbnail jobs to the `thumbnails` queue (creating it and its dead-letter queue).

python examples/jobs/producer.py [DB] [COUNT]
"""

from __future__ import annotations

import json
import sys

import durableq
from durableq import RedrivePolicy, SendEntry


def main(path: str = "durableq.db", count: int = 20) -> None:
    with durableq.open(path) as broker:
        broker.create_queue("thumbnails-dlq")
        queue = broker.create_queue(
            "thumbnails",
            visibility_timeout=10,
            redrive_policy=RedrivePolicy(dead_letter_queue="thumbnails-dlq", max_receive_count=2),
        )
        jobs = [{"image": f"photo-{i}.png", "size": 128, "flaky": i % 5 == 0} for i in range(count)]
        jobs.append({"image": "corrupt.png", "size": 128})
        for start in range(0, len(jobs), 10):
            chunk = jobs[start : start + 10]
            result = queue.send_batch([SendEntry(str(i), json.dumps(job)) for i, job in enumerate(chunk)])
            assert not result.failed, result.failed
        print(f"sent {len(jobs)} thumbnail jobs to {broker.path} (one of them is corrupt)")


if __name__ == "__main__":
    main(*sys.argv[1:2], *(int(a) for a in sys.argv[2:3]))
