"""alembic environment and revisions of the durableq schema (installed as ``durableq.migrations``)."""
