"""The handler a worker runs: ``durableq worker thumbnails examples.jobs.handlers:make_thumbnail``.

A job is JSON: {"image": name, "size": pixels}.  Some images are "flaky" (the
first attempt fails, a retry succeeds) and "corrupt.png" always fails, so the
worker's retries and the dead-letter queue can be seen at work.
"""

from __future__ import annotations

import json
import logging
import time

import durableq

log = logging.getLogger("examples.jobs")


class CorruptImage(Exception):
    pass


def make_thumbnail(message: durableq.Message) -> None:
    job = json.loads(message.body)
    if job["image"] == "corrupt.png":
        raise CorruptImage(f"{job['image']} cannot be decoded")
    if job.get("flaky") and message.receive_count == 1:
        raise ConnectionError("storage timed out (a retry will do)")
    time.sleep(0.05)  # the "work"
    log.info("thumbnail of %s at %spx ready (attempt %d)", job["image"], job["size"], message.receive_count)
