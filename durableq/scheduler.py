"""``durableq.Scheduler``: a loop that sends the ticks of every schedule of a broker as they come due
(``durableq scheduler``, and ``durableq worker --schedules`` beside a worker).

Each round is :meth:`Broker.fire_due_schedules` (each tick claimed and sent in one transaction, so
any number of schedulers on one database send it once); between rounds the loop sleeps until the
soonest tick it knows of, and at most ``poll_interval`` seconds, so that a schedule another process
created or changed is seen that soon.  SIGINT and SIGTERM stop it between two rounds (a round in
progress ends first; a transaction cut by SIGKILL sends nothing and claims nothing).
"""

from __future__ import annotations

import logging
import signal
import threading

from . import limits, validation
from .broker import Broker
from .errors import BrokerClosed, DatabaseError, DurableQError, InvalidParameterValue
from .signals import on_stop_signals

log = logging.getLogger(__name__)


class Scheduler:
    """Sends the due ticks of ``broker``'s schedules until :meth:`stop`, SIGINT or SIGTERM."""

    def __init__(self, broker: Broker, *, poll_interval: float = limits.SCHEDULER_POLL_INTERVAL) -> None:
        if not isinstance(broker, Broker):
            raise InvalidParameterValue(f"broker must be a durableq.Broker; got {type(broker).__name__}")
        self.broker = broker
        self.poll_interval = validation.number("poll_interval", poll_interval, 0.01, 3_600)
        self._stop = threading.Event()
        self._stopped_by: str | None = None
        self.sent = 0  # ticks this scheduler sent

    def stop(self) -> None:
        """End :meth:`run` after the round in progress."""
        self._stop.set()

    def _on_signal(self, signum: int) -> None:
        self._stopped_by = signal.Signals(signum).name  # logged by the loop, not inside the handler
        self.stop()

    def run(self) -> None:
        """Fire due ticks until stopped (see the module)."""
        restore = on_stop_signals(self._on_signal)
        log.info("scheduler started on %s", self.broker.location)
        try:
            while not self._stop.is_set():
                self._stop.wait(self._round())
        finally:
            restore()
            reason = f"{self._stopped_by} received" if self._stopped_by else "stop() called"
            log.info("%s: scheduler stopped (%d ticks sent)", reason, self.sent)

    def _round(self) -> float:
        """One round; returns how long to sleep before the next."""
        try:
            fired = self.broker.fire_due_schedules()
        except BrokerClosed:
            raise
        except (DatabaseError, DurableQError) as exc:  # locked, a connection lost: the next round retries
            log.error("firing schedules failed: %s; retrying in %g s", exc, self.poll_interval)
            return self.poll_interval
        self.sent += len(fired.sent)
        if fired.next_due is None:
            return self.poll_interval
        until = fired.next_due.timestamp() - self.broker.options.clock()
        if until <= 0 and not fired.sent:
            return self.poll_interval  # a tick due that this round could not send: not a busy loop
        return min(self.poll_interval, max(until, 0.0))
