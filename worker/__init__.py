"""Celery workers and beat: the consolidation pipeline and the scheduled jobs."""
