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
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8430/v1"}, "local"),
        ({"OPENAI_API_KEY": "sk-test"}, "local"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8430/v1", "MEMWELL_PIPELINE_MODE": "llm"}, "llm"),
        ({"OPENAI_API_KEY": "sk-test", "MEMWELL_PIPELINE_MODE": "local"}, "local"),
        ({"MEMWELL_PIPELINE_MODE": "hybrid"}, "hybrid"),
    ],
)
def test_auto_is_local_and_the_model_joins_consolidation_when_asked(
    env: dict[str, str], mode: str
) -> None:
    """With small local models every mode that used the model recalled less than local
    mode on LoCoMo (docs/evaluation.md): auto stays local, an endpoint or not."""
    settings = _settings(**env)
    assert settings.resolved_pipeline_mode == mode
    assert settings.pipeline_uses_llm is (mode != "local")
