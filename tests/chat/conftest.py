"""The chat tests' shared stack: a live Memwell whose model is the fake upstream."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memwell.core.settings import Settings
from tests.support.fake_openai import FakeOpenAI
from tests.support.live_api import serve_api


@pytest.fixture(scope="module")
def door(stack_env: dict[str, str], fake_openai: FakeOpenAI) -> Iterator[str]:
    """A live Memwell whose model is the fake upstream."""
    settings = Settings(
        database_url=stack_env["DATABASE_URL"], redis_url=stack_env["REDIS_URL"],
        openai_base_url=fake_openai.base_url, openai_api_key="upstream-key",
        embedding_provider="local", llm_timeout_s=5, pipeline_mode="local",
    )  # fmt: skip
    with serve_api(settings) as url:
        yield url


@pytest.fixture
def tenant_key(make_key: Callable[..., dict[str, str]], ids: dict[str, str]) -> str:
    return make_key(ids["tenant"], ("read", "write"))["Authorization"].removeprefix("Bearer ")
