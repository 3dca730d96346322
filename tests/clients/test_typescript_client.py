"""The TypeScript client (clients/typescript) against a live stack: its `node --test`
suite run over real HTTP; its generated types checked against the published OpenAPI
document (docs/openapi.json, itself checked against the app by
tests/api/test_reference_fresh.py); and its documented example.

The suite gets the stack through the environment: MEMWELL_TEST_API_URL (an API whose
model endpoint is the tests' fake OpenAI server, so /v1/chat and the OpenAI-compatible
door answer), MEMWELL_TEST_LIMITED_URL (the same stack behind a tight rate limit),
and keys of two tenants. Skipped, with the reason, where node or npm is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.local.worker_process import WorkerProcess
from tests.support.fake_openai import FakeOpenAI
from tests.support.live_api import serve_api
from tests.support.profile_factory import seed_profile

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"
OPENAPI = ROOT / "docs" / "openapi.json"
NPM = shutil.which("npm")
NODE = shutil.which("node")


def _node_major() -> int:
    if NODE is None or NPM is None:
        return 0
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout
    match = re.match(r"v(\d+)\.", version)
    return int(match.group(1)) if match else 0


needs_node = pytest.mark.skipif(
    _node_major() < 20, reason="Node 20 or later, with npm, is not installed"
)
KeyMaker = Callable[..., dict[str, str]]


def _npm(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    assert NPM is not None
    done = subprocess.run(
        [NPM, *args], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=timeout
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        failed = [part for part in output.split("# Subtest: ") if "not ok " in part]
        pytest.fail(f"npm {' '.join(args)} failed:\n" + ("\n".join(failed) or output)[-12000:])
    return output


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The pinned packages of package-lock.json, installed (`npm ci`) when missing or
    older than the lockfile."""
    installed = CLIENT / "node_modules" / ".package-lock.json"
    lock = CLIENT / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        _npm("ci", "--no-audit", "--no-fund")
    return CLIENT / "node_modules"


def _stack_settings(stack_env: dict[str, str], fake_openai: FakeOpenAI, **extra: float) -> Settings:
    return Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        openai_base_url=fake_openai.base_url, openai_api_key="upstream-key",
        embedding_provider="local", llm_timeout_s=5, pipeline_mode="local", **extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def api_url(stack_env: dict[str, str], fake_openai: FakeOpenAI) -> Iterator[str]:
    with serve_api(_stack_settings(stack_env, fake_openai)) as url:
        yield url


@pytest.fixture(scope="module")
def limited_url(stack_env: dict[str, str], fake_openai: FakeOpenAI) -> Iterator[str]:
    settings = _stack_settings(stack_env, fake_openai, rate_limit_per_s=1, rate_limit_burst=2)
    with serve_api(settings) as url:
        yield url


def _key(make_key: KeyMaker, tenant: str, *scopes: str) -> str:
    return make_key(tenant, scopes)["Authorization"].removeprefix("Bearer ")


@needs_node
@pytest.mark.timeout(900)
def test_the_node_suite_passes_against_a_live_stack(
    node_modules: Path, api_url: str, limited_url: str, make_key: KeyMaker,
    db: sessionmaker[Session], worker: WorkerProcess, ids: dict[str, str],
) -> None:  # fmt: skip
    profile_user = ids["user"] + "-profile"
    with db.begin() as session:
        seed_profile(session, tenant=ids["tenant"], user_id=profile_user)
    env = {
        **os.environ,
        "MEMWELL_TEST_API_URL": api_url,
        "MEMWELL_TEST_LIMITED_URL": limited_url,
        "MEMWELL_TEST_KEY": _key(make_key, ids["tenant"], "admin"),
        "MEMWELL_TEST_READ_KEY": _key(make_key, ids["tenant"], "read"),
        "MEMWELL_TEST_OTHER_KEY": _key(make_key, ids["tenant"] + "-other", "admin"),
        "MEMWELL_TEST_LIMITED_KEY": _key(make_key, ids["tenant"], "read", "write"),
        "MEMWELL_TEST_PROFILE_USER": profile_user,
        "MEMWELL_TEST_RUN": ids["user"],
    }
    started = time.monotonic()
    output = _npm("test", env=env, timeout=600)
    print(f"node --test suite: {time.monotonic() - started:.1f} s\n{output[-4000:]}")
    assert "# fail 0" in output and "# pass " in output


@needs_node
def test_the_committed_types_are_generated_from_the_published_document(
    node_modules: Path, tmp_path: Path
) -> None:
    # docs/openapi.json is the served document (tests/api/test_reference_fresh.py).
    fresh = tmp_path / "schema.ts"
    _npm("exec", "--", "openapi-typescript", str(OPENAPI), "--output", str(fresh))
    assert fresh.read_text() == (CLIENT / "src" / "schema.ts").read_text(), (
        "clients/typescript/src/schema.ts is stale: run `npm run generate` in clients/typescript"
    )


def test_the_docs_example_is_the_one_the_suite_runs(repo_root: Path) -> None:
    page = (repo_root / "docs" / "integrations" / "typescript.md").read_text()
    block = re.search(r"^```ts\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    assert block is not None, "docs/integrations/typescript.md has no ```ts block"
    assert block.group(1) == (CLIENT / "examples" / "quickstart.ts").read_text(), (
        "the page's first TypeScript block must be clients/typescript/examples/quickstart.ts"
    )
