"""Waiting for the workers: poll Postgres until a number of turns are processed."""

from __future__ import annotations

import sys
import time

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

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
    while done < total and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.2)
        done = processed_turns(sessions)
        print(f"  processed {done}/{total}", end="\r", file=sys.stderr)
    print(file=sys.stderr)
    return done
