"""Postgres access: the ORM models (the schema's source for Alembic) and engines."""
