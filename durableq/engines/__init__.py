"""Storage, below the operations: the engine contract (``base``), SQLite (``sqlite/``) and PostgreSQL
(``postgres/``) behind it, the SQL fragments that differ (``dialect``), change notification
(``watch``), forks (``forks``), the schema and its migrations.  Nothing here imports above it.
"""
