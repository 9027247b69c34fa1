"""The SQLite engine: one durableq file, written by one writer at a time (WAL: readers run beside it).

:mod:`.database` (connections, transactions, migrations), :mod:`.transactions` (where statements run),
:mod:`.errors` (``sqlite3`` errors as durableq errors), :mod:`.copies` (copies of the file in use)."""
