"""The durableq benchmark harness (issue 8): ``python -m bench``.

It measures durableq against the floor (plain ``sqlite3`` running the same
statements with the same pragmas) and against the queues users would pick
instead (persist-queue, litequeue).  See ``bench/README.md``.
"""
