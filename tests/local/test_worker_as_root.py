"""A worker run as root says so in one line, with why that is safe here, instead of
Celery's multi-line superuser warning; and only where it is safe (JSON messages only)."""

from __future__ import annotations

import os

import pytest

from memwell.local.worker_process import WorkerProcess
from worker.privileges import EXPLANATION, explain_root


def test_a_root_worker_explains_itself_in_one_line(worker: WorkerProcess) -> None:
    if os.geteuid() != 0:
        pytest.skip("Celery warns only when the worker runs as root")
    started = worker.log_path.read_text(errors="replace")[:50_000]  # the start, not the tail
    assert EXPLANATION in started
    assert "superuser privileges" not in started


def test_celerys_warning_stays_where_a_message_could_run_code() -> None:
    assert explain_root(["json", "pickle"], euid=0) is None
    assert explain_root(["application/x-yaml"], euid=0) is None
    assert explain_root(["json"], euid=1000) is None
