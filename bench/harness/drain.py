"""Waiting for the workers: poll Postgres until a number of turns are processed."""

from __future__ import annotations

import time

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from bench.harness.progress import progress
from memwell.db.models import Turn


def processed_turns(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        stmt = select(func.count()).select_from(Turn).where(Turn.status == "processed")
        return session.scalar(stmt) or 0


def wait_processed(
    sessions: sessionmaker[Session], total: int, *, timeout_s: float | None = None
) -> int:
    """Block until `total` turns are processed (or the timeout); returns how many were."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    done = 0
    with progress("processed", total) as bar:
        while done < total and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.2)
            done = processed_turns(sessions)
            bar.update(done)
    return done
