"""Which threads hold durableq's own transaction open (``Broker.transaction()`` without a
connection), so that their other calls are refused at once rather than waiting for themselves.

The transaction holds what a write needs until its block ends: on SQLite the group-commit gate and
the write lock, on PostgreSQL the writers' lock as its operations took it.  A call of the same thread
without ``transaction=`` would wait for that: forever at the gate, or for the busy timeout at a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InvalidParameterValue


class OwnTransactions:
    """The threads of this process inside one database's own transaction."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def held(self, name: str) -> Iterator[None]:
        """This thread is inside the database's own transaction for the block (refused if it is in
        one already: transactions do not nest)."""
        self.refuse_outside(name)
        self._local.held = True
        try:
            yield
        finally:
            self._local.held = False

    def refuse_outside(self, name: str) -> None:
        """Raise if this thread holds the database's own transaction (a write outside it would wait
        for it, as would a second one: transactions do not nest)."""
        if getattr(self._local, "held", False):
            raise InvalidParameterValue(
                f"this thread holds a transaction of {name} open (broker.transaction()): give the "
                "calls inside its block transaction=tx, or make them after the block; a call outside "
                "the transaction, or a second transaction (they do not nest), would wait for the "
                "transaction's own locks"
            )
