"""A first tour of durableq on a local file: send, receive, delete, retry, dead letters.

Run it with `make demo` (or `python examples/quickstart.py [PATH]`).
"""

from __future__ import annotations

import sys

import durableq
from durableq import RedrivePolicy, SendEntry


def main(path: str = "durableq.db") -> None:
    with durableq.open(path) as broker:
        broker.create_queue("orders-dlq")
        orders = broker.create_queue(
            "orders",
            visibility_timeout=1,
            redrive_policy=RedrivePolicy(dead_letter_queue="orders-dlq", max_receive_count=2),
        )
        orders.purge()

        sent = orders.send_batch(
            [SendEntry(str(i), f'{{"order": {i}}}', attributes={"priority": i % 2}) for i in range(5)]
        )
        print(f"sent {len(sent.successful)} orders to {broker.path}")
        orders.send("this one always fails", attributes={"poison": "yes"})

        for message in orders.receive(max_messages=10, wait_time=1):
            if "poison" in message.attributes:
                print(f"failed {message.message_id}: left for a retry after the visibility timeout")
                continue  # not deleted: it comes back after 1 s
            print(f"processed {message.body} (received {message.receive_count}x)")
            orders.delete(message.receipt_handle)

        # The poison message comes back once more, fails again, then goes to the dead-letter queue.
        while True:
            retried = orders.receive(wait_time=2)
            if not retried:
                break
            print(f"retry {retried[0].receive_count} of {retried[0].body!r} failed again")

        dead = broker.get_queue("orders-dlq").receive(wait_time=1)
        for message in dead:
            print(f"dead letter from {message.dead_letter_source!r}: {message.body!r}")
        print("orders:", orders.stats())
        print("orders-dlq:", broker.get_queue("orders-dlq").stats())


if __name__ == "__main__":
    main(*sys.argv[1:2])
