"""The PostgreSQL engine: a database on a server many hosts share, its writes side by side where they
can be (see :mod:`.locks`).  Imported only when a URL asks for PostgreSQL (it needs psycopg, the
``postgres`` extra).

:mod:`.database` (connections, transactions, migrations), :mod:`.connection` (the connection the
operations use), :mod:`.locks` (the writers' lock: how each kind of transaction begins),
:mod:`.notify` (``LISTEN``/``NOTIFY`` for the change watcher), :mod:`.errors` (psycopg's errors as
durableq errors)."""
