"""alembic environment: migrations run on durableq's own connections (see the engines'
``migration_engine``), in one transaction, so a migration killed half-way leaves the
database as it was (SQLite and PostgreSQL both have transactional DDL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from durableq.engines.schema import metadata

config = context.config


def _engine() -> Engine:
    database = config.attributes.get("durableq_database")
    if database is not None:
        engine: Engine = database.migration_engine()
        return engine
    # plain `alembic -x` use with sqlalchemy.url set in an ini file
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=NullPool)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _autocommit(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            dbapi_connection.isolation_level = None

        # pysqlite does not begin transactions for DDL; take the write lock explicitly.
        @event.listens_for(engine, "begin")
        def _begin(connection):  # type: ignore[no-untyped-def]
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or "sqlite://",
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    database = config.attributes.get("durableq_database")
    version_table = database.version_table if database is not None else "alembic_version"
    with _engine().connect() as connection:
        # SQLite's DDL is transactional, though alembic assumes otherwise: say so, and a run of several
        # revisions is one transaction (a kill leaves the database at the first revision or the last).
        context.configure(
            connection=connection,
            target_metadata=metadata,
            render_as_batch=True,
            transactional_ddl=True,
            version_table=version_table,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
