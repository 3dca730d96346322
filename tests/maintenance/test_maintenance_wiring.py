"""Beat, worker and CLI reach the same maintenance functions: every scheduled task is
registered, expires with its interval, routes to the maintenance queue; the CLI runs
each job (dry) against the real stack; the job lock lets one run in at a time."""

from __future__ import annotations

import json

import redis
from click.testing import CliRunner

from memwell.core.queues import TASK_QUEUES, Queue, TaskName
from memwell.core.settings import get_settings
from memwell.local.cli import main
from memwell.maintenance.lock import job_lock


def test_every_beat_entry_is_a_registered_maintenance_task(stack_env: dict[str, str]) -> None:
    from worker.celery_app import create_app

    app = create_app(get_settings())
    app.loader.import_default_modules()
    schedule = app.conf.beat_schedule
    assert {e["task"] for e in schedule.values()} == {
        TaskName.SWEEP_PENDING,
        TaskName.DECAY,
        TaskName.PRUNE,
        TaskName.CLOSE_IDLE_SESSIONS,
        TaskName.FLUSH_ACCESS,
        TaskName.MAINTAIN_ANN,
        TaskName.FOLD_ANN_TAILS,
        TaskName.REEMBED_TICK,
    }
    for entry in schedule.values():
        assert entry["task"] in app.tasks
        assert entry["options"]["expires"] == entry["schedule"]
        assert entry["options"]["queue"] == Queue.MAINTENANCE
        assert TASK_QUEUES[TaskName(entry["task"])] == Queue.MAINTENANCE


def test_cli_runs_each_job_dry(stack_env: dict[str, str]) -> None:
    runner = CliRunner()
    for job in ("decay", "prune", "sweep", "close-idle"):
        result = runner.invoke(main, ["maintenance", job, "--dry-run"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output.strip().splitlines()[-1])
        assert report["dry_run"] is True and report["finished"] is True


def test_job_lock_admits_one_run(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    with (
        job_lock(client, "test-job", ttl_s=30) as first,
        job_lock(client, "test-job", ttl_s=30) as second,
    ):
        assert first and not second
    with job_lock(client, "test-job", ttl_s=30) as third:
        assert third
    client.close()
