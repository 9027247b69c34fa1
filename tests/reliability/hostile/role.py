"""The ``hostile`` role: several threads of the mix on one broker (sometimes two), in one process.

Besides the threads of :class:`.mix.Hand` the process runs, as a careless
application would: short-lived threads, forks of itself while its threads
work (the child makes a few calls on the inherited broker and ``os._exit``s;
a child that hangs, crashes or fails is a failure), a BufferedQueue shared by
its threads, and on request a thread on a broker with a tiny busy timeout
(lock timeouts expected; whatever comes after them must work).  A watchdog
fails the process, with every thread's stack on stderr, when one call runs
past ``hang`` seconds; ERROR log lines of durableq and exceptions escaping a
thread are journaled as failures.  With ``mode: drain`` it only empties the
checked queues instead (the run's last step).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import random
import signal
import threading
import time
from typing import Any

import durableq
from durableq import limits

from ..journal import Journal
from ..journaled import JournaledQueue
from ..roles import Config, role
from . import layout
from .caller import Busy, Caller, describe
from .mix import Hand

#: Seconds the child of the early fork usually needs for its one long poll of 1 s: the harness kills
#: no process younger than this plus a margin (run.YOUNG), so that child's end is usually seen.
EARLY_CHILD = 3.0
#: Seconds after which that child counts as hung: its long poll of 1 s, after a claim that may wait
#: for the write lock as long as the busy timeout (10 s) on a machine the mix loads to the full, and
#: a margin.  (3 s failed a 30-minute run at load 12 on 2 cores: the child's stacks showed it in its
#: 1-s wait, having waited for the lock first.)  The hang it is there for never ended; the first
#: process is never killed, so its early child is always judged.
EARLY_CHILD_HANG = 1 + limits.DEFAULT_BUSY_TIMEOUT + 4
#: Codes a worker may log at ERROR level for a message whose lease legitimately ended.
_LATE = {"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue"}


class LogCapture(logging.Handler):
    """Journals durableq's ERROR log lines as failures, except those that report a handler's
    failure on purpose (a message dead-lettered) or a late settle of a message another consumer has."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(logging.ERROR)
        self.journal = journal

    def emit(self, record: logging.LogRecord) -> None:
        template = str(record.msg)
        if "on its last allowed receive" in template:
            return
        args = record.args if isinstance(record.args, tuple) else ()
        late = [a for a in args if isinstance(a, durableq.DurableQError) and a.code in _LATE]
        if late and ("could not settle" in template or "could not be released" in template):
            return
        self.journal.write(
            "call",
            op=f"log:{record.name}",
            o="bad",
            err="ERROR log line",
            msg=record.getMessage()[:800],
            tb="",
        )


class Proc:
    """What the threads of one hostile process share."""

    def __init__(self, config: Config, journal: Journal) -> None:
        self.config = config
        self.journal = journal
        self.db: str = config["db"]
        self.folder: str = config["folder"]
        self.options: dict[str, Any] = {"keyring": config["keyring"], "payload_dir": config["payload_dir"]}
        self.busy = Busy()
        self.rng = random.Random(config["seed"])
        self.buffered: durableq.BufferedQueue | None = None
        self.children = 0
        self.threads = 0
        self.hang: float = config.get("hang", 60)
        lifetime = config.get("lifetime")  # (low, high): stop cleanly after a random time in it
        self.until: float | None = None if lifetime is None else time.time() + self.rng.uniform(*lifetime)
        self._seeds = random.Random(config["seed"] + 1)
        self._lock = threading.Lock()

    def seed(self) -> int:
        with self._lock:
            return self._seeds.randrange(2**31)

    # -- forks ---------------------------------------------------------------

    def fork(
        self, hand: Hand, first_call: str | None = None, *, wait: bool = True, deadline: float | None = None
    ) -> int:
        """Fork this running, multi-threaded process; the child makes ``first_call`` (alone, if
        given with a ``deadline``) or 1-3 calls, then ``os._exit``.  Waits for the child and judges
        its end (:meth:`reap`) unless ``wait`` is False; returns its pid."""
        seed = self.seed()
        hand.journal.write("call", op="fork", o="ok")
        pid = os.fork()
        if pid == 0:
            self._child(hand, seed, deadline or self.child_deadline, first_call, more=deadline is None)
        if wait:
            self.reap(hand, pid, deadline)
        return pid

    @property
    def child_deadline(self) -> float:
        return min(self.hang / 3, 20)

    def reap(self, hand: Hand, pid: int, deadline: float | None = None) -> None:
        """Wait for forked child ``pid``: one that hangs (past its ``deadline`` it dumps its stacks
        and exits 1), dies of a signal or fails is a failure."""
        limit = (deadline or self.child_deadline) + 5
        hand.busy.enter("fork.wait")
        try:
            status = _wait(pid, limit)
        finally:
            hand.busy.leave()
        if status is None:
            hand.bad("fork", f"a forked child (pid {pid}) did not finish within {limit:g} s; killed")
        elif os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            hand.bad("fork", f"a forked child (pid {pid}) died of {name}")
        elif os.WEXITSTATUS(status) != 0:
            hand.bad(
                "fork",
                f"a forked child (pid {pid}) exited with {os.WEXITSTATUS(status)}: it hung or failed "
                f"(its stacks or traceback are in {self.journal.path.with_suffix('.err').name})",
            )

    def _child(self, hand: Hand, seed: int, deadline: float, first_call: str | None, more: bool) -> None:
        try:
            faulthandler.dump_traceback_later(deadline, exit=True)  # stacks to stderr, then exit 1
            path = hand.journal.path.with_name(f"{hand.journal.path.stem}.fork{os.getpid()}.jsonl")
            journal = Journal(path)  # a run of its own: no "stop", so its lost counts are allowed for
            journal.write("start", role="fork", pid=os.getpid(), receives_from=list(layout.CHECKED))
            self.busy, self.buffered = Busy(), None
            child = Hand(self, hand.broker, random.Random(seed), f"{hand.tag}.f{os.getpid()}", journal)
            if first_call is not None:
                getattr(child, first_call)()
            for _ in range(child.rng.randint(1, 3) if more else 0):
                child.rng.choice(
                    [child.receive_long, child.send, child.fail_then_read, child.read, child.delete_held]
                )()
            os._exit(0)
        except BaseException:  # noqa: BLE001 - a child must never return into its parent's code
            import traceback

            traceback.print_exc()
            os._exit(1)

    # -- threads -------------------------------------------------------------

    def short_thread(self, hand: Hand) -> None:
        """A thread for 1-3 calls (failing writes among them), left to end by itself."""
        with self._lock:
            self.threads += 1
            number = self.threads
        seed = self.seed()

        def run() -> None:
            short = hand.call(
                "get_queue",
                lambda: Hand(self, hand.broker, random.Random(seed), f"{hand.tag}.s{number}", hand.journal),
            )
            if short is None:
                return
            for _ in range(short.rng.randint(1, 3)):
                short.rng.choice(
                    [short.failing_write, short.fail_then_read, short.send, short.invalid, short.read]
                )()

        hand.journal.write("call", op="thread", o="ok")
        threading.Thread(target=run, name=f"short-{number}", daemon=True).start()

    def loop(self, broker: durableq.Broker, index: int, tolerated: tuple[str, ...] = ()) -> None:
        hand = Hand(
            self, broker, random.Random(self.seed()), f"{self.journal.path.stem}.t{index}", self.journal
        )
        hand.tolerated = tolerated
        if (
            tolerated
        ):  # a tight broker: nothing on the checked queues, only calls that may meet a lock timeout
            hand.table = [(5, hand.failing_write), (5, hand.read), (8, hand.scratch), (2, hand.invalid)]
        while self.until is None or time.time() < self.until:
            hand.step()
            if tolerated:
                time.sleep(0.01)  # its calls are cheap: paced, so the others' writes get the CPU

    def watchdog(self) -> None:
        while True:
            time.sleep(0.5)
            overdue = self.busy.overdue(self.hang)
            if overdue:
                _, op, seconds = overdue[0]
                self.journal.write(
                    "call", op=op, o="bad", err="hang", msg=f"{op} still running after {seconds:.0f} s", tb=""
                )
                faulthandler.dump_traceback(all_threads=True)
                os._exit(70)


def _wait(pid: int, seconds: float) -> int | None:
    """The exit status of child ``pid``, or None (and the child SIGKILLed) after ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _guard(journal: Journal) -> None:
    faulthandler.enable()
    logging.getLogger("durableq").addHandler(LogCapture(journal))

    def escaped(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            fields = describe(args.exc_value)
            thread = args.thread.name if args.thread else "?"
            journal.write("call", op="thread.escaped", o="bad", th=thread, **fields)

    threading.excepthook = escaped


def _open_tight(proc: Proc) -> durableq.Broker | None:
    caller = Caller(proc.journal, proc.busy)
    caller.tolerated = ("DatabaseLocked", "RequestTimeout")
    for _ in range(20):
        opened = caller.call("open.tight", lambda: durableq.open(proc.db, busy_timeout=0.001, **proc.options))
        if opened is not None:
            return opened
    return None


@role
def hostile(config: Config, journal: Journal) -> None:
    journal.write("start", role="hostile", pid=os.getpid(), receives_from=list(layout.CHECKED))
    _guard(journal)
    proc = Proc(config, journal)
    if config.get("mode") == "drain":
        return drain(proc)
    with durableq.open(proc.db, **proc.options) as broker:
        second = durableq.open(proc.db, **proc.options) if config.get("second") else None
        tight = _open_tight(proc) if config.get("tight") else None
        proc.buffered = durableq.BufferedQueue(broker.get_queue(layout.STANDARD), max_wait=0.01)
        threads = [
            threading.Thread(
                target=proc.loop, args=(second if second and i % 2 else broker, i), name=f"mix-{i}"
            )
            for i in range(config.get("threads", 4))
        ]
        if tight is not None:
            tolerated = ("DatabaseLocked", "RequestTimeout")
            threads.append(threading.Thread(target=proc.loop, args=(tight, 99, tolerated), name="tight"))
        threading.Thread(target=proc.watchdog, name="watchdog", daemon=True).start()
        # First, a fork while the process's first long poll starts (the change watcher with it);
        # the child's first call is a long poll of its own.  Then the mix.
        first = Hand(proc, broker, random.Random(proc.seed()), f"{journal.path.stem}.main", journal)
        poller = threading.Thread(target=first.idle_long_poll, name="first-long-poll")
        poller.start()
        time.sleep(proc.rng.choice([0, 0.001, 0.002, 0.005, 0.01]))
        child = proc.fork(first, first_call="idle_long_poll", wait=False, deadline=EARLY_CHILD_HANG)
        for thread in threads:
            thread.start()
        proc.reap(first, child, EARLY_CHILD_HANG)
        poller.join()
        for thread in threads:
            thread.join()
        proc.buffered.close()
        for other in (second, tight):
            if other is not None:
                other.close()


def drain(proc: Proc) -> None:
    """Receive and delete on every checked queue until all are empty (no kills now)."""
    with durableq.open(proc.db, **proc.options) as broker:
        caller = Caller(proc.journal, proc.busy)

        def empty(name: str) -> None:
            queue = JournaledQueue(broker.get_queue(name), proc.journal, 30)
            end = time.time() + proc.config.get("drain_seconds", 240)
            while time.time() < end:
                got = caller.call("drain.receive", lambda: queue.receive(10, wait_time=1), judged=True)
                if got:
                    caller.call(
                        "drain.delete_batch",
                        lambda handles=[m.receipt_handle for m in got]: queue.delete_batch(handles),
                        judged=True,
                    )
                    continue
                stats = queue.stats()
                left = stats.approximate_number_of_messages
                left += (
                    stats.approximate_number_of_messages_not_visible
                    + stats.approximate_number_of_messages_delayed
                )
                if got is not None and left == 0:
                    return
            caller.bad(
                "drain",
                f"{name!r} still held messages after the drain's {proc.config.get('drain_seconds', 240)} s",
            )

        threading.Thread(target=proc.watchdog, name="watchdog", daemon=True).start()
        threads = [
            threading.Thread(target=empty, args=(name,), name=f"drain-{name}") for name in layout.CHECKED
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


# Last: the endpoint's client role lives in .wire, which builds on Proc.
from . import wire as _wire  # noqa: E402,F401 - registers the hostile_client role
