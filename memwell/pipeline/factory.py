"""Builds the pipeline's collaborators from Settings: the one place that chooses
between local mode, LLM mode and hybrid mode (local extraction plus the model's) for
consolidation and summaries."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from sqlalchemy.orm import Session, sessionmaker

from memwell.core.settings import Settings
from memwell.llm.provider_rate_limit import RedisRateLimiter
from memwell.llm.structured import StructuredLLM
from memwell.llm.usage import UsageRecorder
from memwell.pipeline.consolidate import Analyzer, ConsolidationConfig, LocalAnalyzer
from memwell.pipeline.reconcile import Decider
from memwell.pipeline.summarize import LocalSummarizer, Summarizer

#: A model call started before the consolidate task's model deadline (half its soft
#: limit) may end this share of the soft limit after it; the last quarter is left for
#: embedding and reconcile.
CALL_GRACE_SHARE = 0.25


@dataclass(frozen=True)
class PipelineSteps:
    config: ConsolidationConfig
    analyzer: Analyzer
    decider: Decider | None
    summarizer: Summarizer
    llm: StructuredLLM | None


def build_steps(
    settings: Settings, *, sessions: sessionmaker[Session], redis_client: redis.Redis
) -> PipelineSteps:
    config = ConsolidationConfig.from_settings(settings)
    local = LocalAnalyzer(threshold=config.extract_threshold)
    local_summary = LocalSummarizer(
        budget_tokens=settings.summary_tokens, threshold=config.extract_threshold
    )
    if not settings.pipeline_uses_llm:
        return PipelineSteps(config, local, None, local_summary, None)
    from memwell.pipeline.llm_analysis import LlmAnalyzer
    from memwell.pipeline.llm_steps import LlmDecider, LlmSummarizer

    key = settings.openai_api_key
    llm = StructuredLLM(
        model=settings.chat_model,
        base_url=settings.openai_base_url,
        api_key=key.get_secret_value() if key else None,
        timeout_s=settings.llm_timeout_s,
        limiter=RedisRateLimiter(
            redis_client,
            per_minute=settings.llm_requests_per_minute,
            max_wait_s=settings.llm_rate_wait_s,
        ),
        usage=UsageRecorder(sessions),
        response_format=settings.llm_response_format,
    )
    analyzer = LlmAnalyzer(
        llm,
        local,
        window_turns=settings.llm_window_turns,
        window_tokens=settings.llm_window_tokens,
        hybrid=settings.resolved_pipeline_mode == "hybrid",
        brief=settings.llm_answer == "brief",
        call_grace_s=settings.consolidate_soft_limit_s * CALL_GRACE_SHARE,
    )
    # A model decision per candidate would cost a call each: only ambiguous cases, and
    # only when asked for; the local rule decides the rest.
    decider = (
        LlmDecider(llm, merge_threshold=config.policy.merge_threshold)
        if settings.llm_reconcile
        else None
    )
    return PipelineSteps(config, analyzer, decider, LlmSummarizer(llm, local_summary), llm)
