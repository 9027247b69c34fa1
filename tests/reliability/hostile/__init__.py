"""The hostile mix: every public call, composed at random, the failing ones included.

Each feature passes its own tests; the promises broke where features met (a
failing delete on one thread, a read on another, sends in a shared commit on
a third).  This mode runs them all together, as a careless or hostile
application would: role processes (``hostile``) run several threads on one
broker, and sometimes a second broker on the same database, each thread
drawing calls from the whole public surface (:mod:`.mix`), with short-lived
threads, forks, a worker now and then, and SIGKILLs from the harness; on a
SQLite file, on PostgreSQL, and through ``durableq serve`` driven by boto3
(:mod:`.wire`).  Calls on the checked queues are journaled in the format the
reliability checker reads; every other call is journaled as a ``call`` line
with what it was expected to do.  :mod:`.oracle` judges the run: the
checker's promises on the checked queues, no unexpected exception, no hang,
no crash, no file outside the payload store touched, and every message event
seen exactly once by a reader that resumes after the last id it saw.

``python -m tests.reliability.hostile --minutes N --engine sqlite|postgresql|endpoint|all``
runs it long; ``tests/reliability/test_hostile_mix.py`` runs it short.
"""
