"""The real-model tier (`pytest -m real_llm`, run by scripts/real-llm.sh): `memwell up
--llm-gguf` on llama.cpp's server with the 0.5B test model, through the product's own
doors. Each test skips, with the reason, where the runtime (the llm-local extra) or the
test model is missing. test_gguf_parts.py is not of the tier: it runs in the default
suite on fake parts."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memwell.core.errors import ConfigurationError
from memwell.local.llm_server import check_runtime
from memwell.local.waiting import wait_for
from tests.support.gguf_parts import QWEN_05B, ModelAssemblyError, assemble
from tests.support.up_process import Up

#: a model call on 2 cores takes seconds; a consolidation a minute or more
CONSOLIDATION_TIMEOUT_S = 600.0


@pytest.fixture(scope="session")
def test_gguf() -> Path:
    """The 0.5B test model's file; skips the test where it or the runtime is missing."""
    try:
        check_runtime()
    except ConfigurationError as exc:
        pytest.skip(f"no llama.cpp runtime: {exc}")
    if explicit := os.environ.get("MEMWELL_TEST_GGUF"):
        return Path(explicit)
    try:
        return assemble(QWEN_05B)
    except ModelAssemblyError as exc:
        pytest.skip(f"the 0.5B test model is missing ({exc}): run bash scripts/real-llm.sh")


@dataclass
class LlmStack:
    up: Up
    api_url: str
    alias: str

    @property
    def database_url(self) -> str:
        """A libpq URL of the stack's Postgres, for reading what it stored."""
        info = json.loads((self.up.data_dir / "stack.json").read_text())
        return str(info["database_url"]).replace("postgresql+psycopg://", "postgresql://")

    def server_pid(self) -> int:
        """The model server's pid, as `memwell up` records it."""
        pids = [int(str(e["pid"])) for e in self.up.recorded() if e["role"] == "llm-server"]
        assert pids, self.up.recorded()
        return pids[-1]

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url) as conn:
            return list(conn.execute(sql, params).fetchall())


def stop(up: Up) -> None:
    """Ctrl-C, as a terminal sends it; killed if it does not stop."""
    if up.process.poll() is None:
        os.killpg(up.process.pid, signal.SIGINT)
        try:
            up.process.wait(timeout=120)
        except Exception:
            up.kill()


@pytest.fixture(scope="session")
def llm_stack(
    test_gguf: Path, tmp_path_factory: pytest.TempPathFactory, repo_root: Path
) -> Iterator[LlmStack]:
    """One `memwell up --llm-gguf` for the tier. The buffer is small, so that a few chat
    turns overflow it and the running summary is asked of the model. LLM mode, so that
    the model's own extraction is what is tested (hybrid, the default, is measured
    against local mode by bench/evals/llm_modes.py)."""
    data = tmp_path_factory.mktemp("llm-stack") / "data"
    up = Up(data, repo_root, "llm-stack", "--llm-gguf", str(test_gguf),
            env={"MEMWELL_BUFFER_TOKENS": "60", "MEMWELL_PIPELINE_MODE": "llm"})  # fmt: skip
    try:
        url = up.wait_ready(timeout=900)
        yield LlmStack(up, url, test_gguf.name.removesuffix(".gguf"))
    finally:
        stop(up)
        print(f"\n--- memwell up (llm stack), last lines ---\n{up.text()[-3000:]}")


def new_user() -> str:
    return f"real-{uuid.uuid4().hex[:10]}"


def wait_processed(api_url: str, turn_ids: list[str], timeout: float) -> dict[str, str]:
    """Until every turn is processed or failed; their statuses."""
    with httpx.Client(base_url=api_url, timeout=30) as client:

        def statuses() -> dict[str, str] | None:
            found = {t: client.get(f"/v1/turns/{t}").json()["status"] for t in turn_ids}
            return found if all(s in ("processed", "failed") for s in found.values()) else None

        return wait_for(statuses, timeout=timeout, interval=1.0, what="consolidation")


def extractor(metadata: dict[str, Any]) -> Any:
    """Who wrote a memory, from its provenance metadata."""
    provenance = metadata.get("provenance")
    if isinstance(provenance, dict) and "extractor" in provenance:
        return provenance["extractor"]
    return metadata.get("extractor")


def elapsed(since: float) -> str:
    return f"{time.monotonic() - since:.1f} s"
