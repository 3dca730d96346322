"""Consolidation: the plain functions the Celery tasks wrap. Each takes a database
session (the caller owns the transaction) and explicit collaborators."""
