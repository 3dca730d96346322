"""`memwell up` in LLM mode gives the llm queue a worker of its own (plain functions)."""

from __future__ import annotations

from pathlib import Path

from memwell.core.metrics import MULTIPROC_ENV
from memwell.core.metrics_dir import METRICS_FOLDER
from memwell.local.up import _workers

CLI = ["python", "-m", "memwell"]


def _queues(argv: list[str]) -> str | None:
    return argv[argv.index("--queues") + 1] if "--queues" in argv else None


def test_local_mode_runs_one_worker_on_every_queue(tmp_path: Path) -> None:
    [worker] = _workers(CLI, llm_pipeline=False, data=tmp_path)
    assert list(worker.argv) == [*CLI, "worker"]  # the worker's default: every queue


def test_llm_mode_keeps_model_calls_off_the_worker_that_ingests_and_embeds(
    tmp_path: Path,
) -> None:
    main, model = _workers(CLI, llm_pipeline=True, data=tmp_path)
    assert _queues(list(main.argv)) == "ingest,embed,maintenance"
    assert _queues(list(model.argv)) == "llm"
    # one process: a single-slot local model server gets one request at a time
    assert list(model.argv)[-2:] == ["--concurrency", "1"]
    # one metrics directory, served by the main worker's port alone
    assert main.env[MULTIPROC_ENV] == model.env[MULTIPROC_ENV]
    assert Path(main.env[MULTIPROC_ENV]).parent == tmp_path / METRICS_FOLDER  # not in /tmp
    assert model.env["MEMWELL_WORKER_METRICS_PORT"] == "0"
    assert "MEMWELL_WORKER_METRICS_PORT" not in main.env
