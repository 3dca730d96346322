"""A fake model's answers to the pipeline's prompts, for FakeOpenAI Handlers.

`analysis_answer` answers the windowed analysis call (memwell/pipeline/llm_analysis.py):
each numbered message gets one memory, "<speaker> said: <text>", scored 8 (marked so a
test can tell the model's memories from local mode's); greetings get none. A message
containing "garbled" makes the whole answer unparseable."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support.fake_openai import last_user_message

MSG = re.compile(r'<msg id=(\d+) from="([^"]*)">(.*?)</msg>', re.S)
GREETING = re.compile(r"^\W*(hi|hello|hey|thanks|ok)\b[\W\w]{0,20}$", re.I)


def is_analysis(body: dict[str, Any]) -> bool:
    return "pick what to remember" in body["messages"][0]["content"]


def window_messages(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(id, speaker, text) of the numbered messages of an analysis request."""
    text = body["messages"][1]["content"]  # the window, also on a retry
    return [(int(i), speaker, content) for i, speaker, content in MSG.findall(text)]


def analysis_answer(body: dict[str, Any]) -> str:
    messages = window_messages(body)
    if any("garbled" in text for _, _, text in messages):
        return "not json at all"
    memories = [
        {"id": n, "score": 8, "kind": "fact", "content": f"{speaker} said: {text}"}
        for n, speaker, text in messages
        if not GREETING.match(text)
    ]
    return json.dumps({"memories": memories})


def summary_answer(body: dict[str, Any]) -> str:
    return json.dumps({"summary": f"Summary of {len(last_user_message(body))} characters."})


def pipeline_answer(body: dict[str, Any]) -> str:
    """Analysis and summaries, by the system prompt."""
    return analysis_answer(body) if is_analysis(body) else summary_answer(body)
