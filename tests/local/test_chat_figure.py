"""Figure 1's table: the path's own steps are summed with the floors' query embedding,
the one step the two yardsticks share."""

from __future__ import annotations

from bench.figures.chat import FLOOR_SUM, NO_MODEL, STEPS_SUM, Sample, summarize

EMBEDDING = "query embedding, batch 1 (int8)"


def _samples(n: int) -> list[Sample]:
    stages = {"total": 10.0, "model": 1.0}
    return [Sample(client_ms=12.0, stages_ms=dict(stages)) for _ in range(n)]


def test_the_steps_sum_is_the_embedding_and_the_paths_steps() -> None:
    floors = {"Redis round trip": [0.5] * 4, EMBEDDING: [3.0] * 4, "bare top-10": [2.0] * 4}
    path = {"step: buffer read": [1.0] * 4, "step: search": [4.0] * 4, "step: enqueue": [0.5] * 4}
    rows = summarize(_samples(4), floors, floors, path)
    assert rows[NO_MODEL] == [9.0, 9.0, 9.0]
    assert rows[FLOOR_SUM] == [5.5, 5.5, 5.5]
    assert rows[STEPS_SUM] == [8.5, 8.5, 8.5]
    assert rows["step: search"] == [4.0, 4.0, 4.0]
