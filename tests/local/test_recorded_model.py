"""The recorded model (bench/harness/recorded_model.py) finds a window's messages by
their text, as Memwell renders them, and answers with the observations recorded for
them, under the window's numbers; a summary call gets its session's summary; an
OpenAI client reads its answers and token counts over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai

from bench.harness.locomo_data import stored_views
from bench.harness.recorded_model import RecordedModel, completion, recorded_server
from memwell.intake.importers import read_locomo
from memwell.llm.structured import StructuredLLM
from memwell.pipeline.llm_analysis import (
    ANALYZE_PROMPT,
    ANALYZE_PROMPT_BRIEF,
    WindowOut,
    render_window,
    windows,
)
from memwell.pipeline.llm_steps import LlmSummarizer
from memwell.pipeline.summarize import LocalSummarizer

SESSION_1 = [
    ("Ada", "I finally bought a cello and I practise every evening."),
    ("Ben", "Thanks!"),
    ("Ada", "My sister Clara just moved to Lisbon for work."),
]
SESSION_2 = [
    ("Ben", "I adopted a grey cat named Pixel."),
    ("Ada", "Thanks!"),
]


def _sample(tmp_path: Path) -> Path:
    def turns(n: int, lines: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [
            {"speaker": s, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (s, t) in enumerate(lines)
        ]

    sample: dict[str, Any] = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1": turns(1, SESSION_1),
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": turns(2, SESSION_2),
            "session_2_date_time": "2:00 pm on 9 May, 2023",
        },
        "observation": {
            "session_1_observation": {
                "Ada": [
                    ["Ada bought a cello and practises every evening.", "D1:1"],
                    ["Ada's sister Clara moved to Lisbon for work.", ["D1:3", "D1:1"]],
                ],
                "Ben": [],
            },
            "session_2_observation": {
                "Ben": [["Ben adopted a grey cat named Pixel.", "D2:1"]],
                "Ada": [["Ada thanked Ben.", "D:2:2"]],
            },
        },
        "session_summary": {
            "session_1_summary": "Ada bought a cello; her sister moved to Lisbon.",
            "session_2_summary": "Ben adopted a cat named Pixel.",
        },
        "qa": [],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def _windows(path: Path, session: int) -> list[str]:
    views = [v for v in stored_views(read_locomo(path)) if v.session_id.endswith(f"_{session}")]
    return [render_window(w) for w in windows(views, max_turns=12, max_tokens=1500)]


def test_a_window_gets_the_observations_of_its_messages_under_its_numbers(
    tmp_path: Path,
) -> None:
    path = _sample(tmp_path)
    model = RecordedModel.from_file(path)
    (window,) = _windows(path, 2)
    # "Ada: Thanks!" is said in both sessions: the window's other message places it.
    answer = WindowOut.model_validate_json(model.analysis(ANALYZE_PROMPT_BRIEF, window))
    assert [(m.id, m.content) for m in answer.memories] == [
        (1, "Ben adopted a grey cat named Pixel."),
        (2, "Ada thanked Ben."),
    ]
    assert all(m.score is None and m.entities is None for m in answer.memories)


def test_an_observation_citing_several_turns_is_recorded_with_its_first(tmp_path: Path) -> None:
    path = _sample(tmp_path)
    model = RecordedModel.from_file(path)
    (window,) = _windows(path, 1)
    raw = json.loads(model.analysis(ANALYZE_PROMPT, window))
    assert raw["memories"] == [
        {"id": 1, "content": "Ada bought a cello and practises every evening.", "valid_from": None},
        {"id": 3, "content": "Ada's sister Clara moved to Lisbon for work.", "valid_from": None},
    ]


def test_a_window_cut_short_keeps_its_own_numbers(tmp_path: Path) -> None:
    path = _sample(tmp_path)
    model = RecordedModel.from_file(path)
    views = [v for v in stored_views(read_locomo(path)) if v.session_id.endswith("_1")]
    windows_of_one = windows(views, max_turns=1, max_tokens=1500)
    answers = [
        WindowOut.model_validate_json(model.analysis(ANALYZE_PROMPT_BRIEF, render_window(w)))
        for w in windows_of_one
    ]
    assert [[(m.id, m.content) for m in a.memories] for a in answers] == [
        [(1, "Ada bought a cello and practises every evening.")],
        [],
        [(1, "Ada's sister Clara moved to Lisbon for work.")],
    ]


def test_the_usage_counts_the_prompt_and_the_answer(tmp_path: Path) -> None:
    path = _sample(tmp_path)
    model = RecordedModel.from_file(path)
    (window,) = _windows(path, 2)
    body = {
        "messages": [
            {"role": "system", "content": ANALYZE_PROMPT},
            {"role": "user", "content": window},
        ]
    }
    usage = completion(model, body)["usage"]
    assert usage["prompt_tokens"] > 100  # the prompt's instructions and the window
    assert 10 < usage["completion_tokens"] < 60
    assert model.stats["analysis"] == 1


def test_a_summary_call_gets_its_sessions_summary_over_http(tmp_path: Path) -> None:
    path = _sample(tmp_path)
    model = RecordedModel.from_file(path)
    views = [v for v in stored_views(read_locomo(path)) if v.session_id.endswith("_2")]
    with recorded_server(model) as base_url:
        assert [m.id for m in openai.OpenAI(base_url=base_url, api_key="x").models.list()]
        llm = StructuredLLM(model="recorded", base_url=base_url, api_key=None, timeout_s=10)
        summary = LlmSummarizer(llm, LocalSummarizer()).summarize(None, views)
    assert summary == "Ben adopted a cat named Pixel."
    assert model.stats["summary"] == 1


def test_a_call_it_has_no_record_for_is_refused_by_the_caller(tmp_path: Path) -> None:
    model = RecordedModel.from_file(_sample(tmp_path))
    assert model.complete([{"role": "user", "content": "New: <memory>x</memory>"}]) == "{}"
    assert model.stats["unknown"] == 1
