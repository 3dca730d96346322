"""Alembic environment: online migrations against DATABASE_URL or the embedded stack."""

from __future__ import annotations

from logging.config import fileConfig

from pgvector.sqlalchemy import Vector
from sqlalchemy import create_engine, pool

from alembic import context
from memwell.core import stack
from memwell.core.settings import get_settings
from memwell.db.models import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or stack.database_url(get_settings())


def run_migrations_online() -> None:
    # Data migrations bind users' text: keep it out of an error's message (and the log).
    engine = create_engine(_url(), poolclass=pool.NullPool, hide_parameters=True)
    with engine.connect() as connection:
        # Let autogenerate compare `vector` columns instead of reporting them unknown.
        connection.dialect.ischema_names["vector"] = Vector
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run_migrations_online()
