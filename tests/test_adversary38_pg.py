"""Adversary 38: the PostgreSQL call path (a write's pg_temp function called through libpq) where it
meets an interrupt, a server that cancels, psycopg's own prepared statements and notify wake-ups."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durableq

from .conftest import until
from .test_postgres_functions import WRITERS, _cycle, _waiting_for_the_writers_lock


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def test_ctrl_c_while_a_call_waits_cancels_it_and_the_connection_goes_on(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """Ctrl-C while a send's call waits for the writers' lock: the send is cancelled on the server
    (nothing stored), KeyboardInterrupt reaches the caller, and the next calls on the same broker work."""
    assert threading.current_thread() is threading.main_thread()
    main = threading.main_thread().ident
    assert main is not None
    with durableq.open(pg_url, durability="normal", busy_timeout=30) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")

        def interrupt() -> None:
            until(lambda: _waiting_for_the_writers_lock(admin), "the send waits for the writers' lock")
            signal.pthread_kill(main, signal.SIGINT)

        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                jobs.send("interrupted")
        finally:
            interrupter.join()
            admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        assert not _waiting_for_the_writers_lock(admin)
        jobs.send("after")
        assert [m.body for m in jobs.receive(max_messages=10)] == ["after"]
        _cycle(jobs, "and on")


def test_a_forked_child_calls_on_its_own_connection(pg_url: str) -> None:
    """Functions and prepared statements belong to a session: a child forked after the parent made
    them must not call them on the parent's connection (nor break the parent's)."""
    import os

    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        for n in range(3):
            _cycle(jobs, f"warm {n}")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                jobs.send("from the child")
                [got] = jobs.receive(visibility_timeout=600)
                jobs.delete(got.receipt_handle)
                code = 0 if got.body == "from the child" else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        _cycle(jobs, "the parent goes on")
        assert jobs.receive() == []


def test_a_server_statement_timeout_under_a_call_is_a_durableq_error(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """The database's own statement_timeout ends a call that waits for the writers' lock: the caller
    gets a durableq error (not psycopg's QueryCanceled), nothing is stored, and the broker goes on.
    Found: the error said "cannot reach the database" (QueryCanceled is an OperationalError), sending
    whoever reads it after the network rather than the server's timeout."""
    database = admin.info.dbname
    admin.execute(f'ALTER DATABASE "{database}" SET statement_timeout = 300')
    with durableq.open(pg_url, durability="normal", busy_timeout=30) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")
        try:
            with pytest.raises(durableq.DurableQError) as raised:
                jobs.send("timed out")
        finally:
            admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        said = str(raised.value)
        assert "statement timeout" in said and "cannot reach" not in said and "not done" in said
        _cycle(jobs, "after")
        assert jobs.receive() == []
