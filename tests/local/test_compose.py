"""The reference deployment: one worker service per queue, a single beat, healthchecks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from memwell.core.queues import Queue


def _services(repo_root: Path) -> dict[str, Any]:
    spec = yaml.safe_load((repo_root / "docker-compose.yml").read_text())
    services: dict[str, Any] = spec["services"]
    return services


def test_every_queue_has_its_own_worker_service(repo_root: Path) -> None:
    services = _services(repo_root)
    consumed: dict[str, str] = {}
    for name, service in services.items():
        command = service.get("command") or []
        if command[:2] == ["memwell", "worker"]:
            queues = command[command.index("--queues") + 1].split(",")
            assert len(queues) == 1, f"{name} consumes several queues: {queues}"
            consumed[queues[0]] = name
            assert "healthcheck" in service, name
            assert "inspect ping" in " ".join(service["healthcheck"]["test"]), name
            assert service["restart"] == "unless-stopped", name  # a dead worker comes back
            assert service["environment"]["MEMWELL_WORKER_METRICS_PORT"] == "9808"
    assert set(consumed) == {q.value for q in Queue}


def test_one_beat_healthchecks_and_an_optional_flower(repo_root: Path) -> None:
    services = _services(repo_root)
    beats = [n for n, s in services.items() if (s.get("command") or [])[:2] == ["memwell", "beat"]]
    assert beats == ["beat"] and services["beat"]["deploy"]["replicas"] == 1
    for name in ("postgres", "redis", "api", "beat"):
        assert "healthcheck" in services[name], name
    assert services["flower"]["profiles"] == ["flower"]


def test_the_image_copies_what_the_build_reads(repo_root: Path) -> None:
    """Every COPY source exists, and the build's inputs are all copied: pyproject.toml,
    setup.py (the migrations' mapping), alembic/ and the three packages."""
    copied: set[str] = set()
    for line in (repo_root / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            sources = line.split()[1:-1]
            copied.update(s for s in sources if not s.startswith("--"))
    for source in copied:
        assert (repo_root / source).exists(), f"the Dockerfile copies a missing {source}"
    assert {"pyproject.toml", "setup.py", "alembic", "memwell", "api", "worker"} <= copied


def test_the_llm_local_profile_serves_a_mounted_gguf(repo_root: Path) -> None:
    """The model server is optional (its profile), reads the host's GGUF read-only, and
    the api and workers take their endpoint from .env (absent: unset, local mode)."""
    services = _services(repo_root)
    llm = services["llm"]
    assert llm["profiles"] == ["llm-local"]
    assert any(v.endswith(":/models/model.gguf:ro") for v in llm["volumes"])
    assert "MEMWELL_LOCAL_LLM_GGUF_HOST" in llm["volumes"][0]
    assert "/models/model.gguf" in llm["command"] and "healthcheck" in llm
    for name in ("api", "worker-llm", "worker-ingest"):
        env = services[name]["environment"]
        keys = ("OPENAI_BASE_URL", "MEMWELL_CHAT_MODEL", "MEMWELL_EMBEDDING_PROVIDER",
                "MEMWELL_PIPELINE_MODE")  # fmt: skip
        for key in keys:
            assert key in env and env[key] is None, (name, key)  # passed through, never ""
    text = (repo_root / "docker-compose.yml").read_text()
    assert "OPENAI_BASE_URL=http://llm:8080/v1" in text  # the documented .env lines
    assert "MEMWELL_PIPELINE_MODE=local" in text
