"""What every operation of one open broker shares: the file, the clock, and the helpers with state."""

from __future__ import annotations

import time
from pathlib import Path

from .. import limits
from ..engines.base import Database
from ..errors import InvalidParameterValue
from ..options import OpenOptions
from .counters import Counters
from .deletion import QueueDeleter
from .message_rows import MessageReader
from .moves import MoveTasks
from .payloads import Payloads
from .queue_rows import Catalog
from .receive import Receiver
from .redrive import DeadLetters
from .retention import Sweeper
from .sealing import Sealer
from .temporary import TemporaryQueues


class Runtime:
    #: Inside a transaction the operations do not commit (see ``ops/joined.py``)?
    in_transaction = False

    def __init__(self, db: Database, options: OpenOptions, payload_dir: Path | None) -> None:
        """``db`` is the database ``options`` name, opened; ``payload_dir`` the payload store's folder
        (the default filled in)."""
        self.db = db
        self.options = options  # how the broker was opened: what another process reopens from
        self.clock = clock = options.clock
        self.catalog = Catalog()
        self.counters = Counters(db)
        self.sweeper = Sweeper(self.counters)
        self.sealer = Sealer(options.keyring)
        self.payloads = Payloads(db, payload_dir)
        self.message_reader = MessageReader(self.sealer, self.payloads.store)
        self.dead_letters = DeadLetters()
        self.receiver = Receiver(
            db,
            self.now_ms,
            self.catalog,
            self.sweeper,
            self.counters,
            self.message_reader,
            self.dead_letters,
            real_clock=clock is time.time,
            remember_in_flight=True,
        )
        self.moves = MoveTasks(db, self.now_ms, self.counters, self.sealer)
        self.deleter = QueueDeleter(db, self.now_ms, self.catalog, self.payloads)
        self.temporary_queues = TemporaryQueues(db, self.now_ms, self.counters, self.deleter)

    def now_ms(self) -> int:
        """The broker clock in epoch milliseconds, the database's unit of time."""
        seconds = self.clock()
        if type(seconds) is float and 0 <= seconds <= limits.MAX_CLOCK:  # time.time(): the common case
            return int(seconds * 1000)
        # NaN fails both comparisons; a bool or a non-number is not a time.
        if (
            isinstance(seconds, (int, float))
            and not isinstance(seconds, bool)
            and 0 <= seconds <= limits.MAX_CLOCK
        ):
            return int(seconds * 1000)
        raise InvalidParameterValue(
            f"the broker clock returned {seconds!r}; it must return seconds since the epoch, "
            f"a finite number from 0 to {limits.MAX_CLOCK} (the end of year 9999)"
        )

    def close(self) -> None:
        try:
            self.receiver.close()  # no more looks for waiting receives
            self.payloads.settle()  # the files of rows this broker removed last
            self.temporary_queues.close()
            self.moves.close()
            self.counters.close()  # writes the last counts: may fail on a full disk
        finally:
            self.db.close()  # whatever happened, let go of the file
            self.receiver.release()  # waiting receives wake and fail with "closed"
