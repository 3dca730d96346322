"""What `MEMWELL_PIPELINE_MODE=auto` stands for (plain Settings, no services)."""

from __future__ import annotations

import pytest

from memwell.core.settings import Settings

LOCAL_SERVER = "http://127.0.0.1:8430/v1"


def _settings(**env: str) -> Settings:
    return Settings.model_validate(env)


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, "local"),
        ({"OPENAI_BASE_URL": "https://models.example.com/v1"}, "hybrid"),
        ({"OPENAI_API_KEY": "sk-test"}, "hybrid"),
        # the CPU model `memwell up --llm-gguf` supervises serves chat, not consolidation
        ({"OPENAI_BASE_URL": LOCAL_SERVER, "MEMWELL_LOCAL_LLM_URL": LOCAL_SERVER}, "local"),
        ({"OPENAI_BASE_URL": LOCAL_SERVER + "/", "MEMWELL_LOCAL_LLM_URL": LOCAL_SERVER}, "local"),
        ({"OPENAI_BASE_URL": LOCAL_SERVER, "MEMWELL_PIPELINE_MODE": "hybrid"}, "hybrid"),
        ({"OPENAI_BASE_URL": LOCAL_SERVER, "MEMWELL_PIPELINE_MODE": "llm"}, "llm"),
        ({"OPENAI_API_KEY": "sk-test", "MEMWELL_PIPELINE_MODE": "local"}, "local"),
        ({"MEMWELL_PIPELINE_MODE": "hybrid"}, "hybrid"),
    ],
)
def test_auto_is_hybrid_with_an_operators_endpoint_and_local_otherwise(
    env: dict[str, str], mode: str
) -> None:
    """Hybrid recalled more than local mode with a capable writer and no less with small
    ones (docs/evaluation.md); a small CPU model would only slow consolidation down."""
    settings = _settings(**env)
    assert settings.resolved_pipeline_mode == mode
    assert settings.pipeline_uses_llm is (mode != "local")
