"""What `MEMWELL_PIPELINE_MODE=auto` stands for (plain Settings, no services)."""

from __future__ import annotations

import pytest

from memwell.core.settings import Settings


def _settings(**env: str) -> Settings:
    return Settings.model_validate(env)


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, "local"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8430/v1"}, "hybrid"),
        ({"OPENAI_API_KEY": "sk-test"}, "hybrid"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8430/v1", "MEMWELL_PIPELINE_MODE": "llm"}, "llm"),
        ({"OPENAI_API_KEY": "sk-test", "MEMWELL_PIPELINE_MODE": "local"}, "local"),
        ({"MEMWELL_PIPELINE_MODE": "hybrid"}, "hybrid"),
    ],
)
def test_auto_is_hybrid_with_an_endpoint_and_local_without(env: dict[str, str], mode: str) -> None:
    """With a model configured, auto keeps the local extraction and adds the model's: a
    small model then cannot lose recall against local mode (docs/evaluation.md)."""
    settings = _settings(**env)
    assert settings.resolved_pipeline_mode == mode
    assert settings.pipeline_uses_llm is (mode != "local")
