"""Importance evaluation: ROC AUC of the local importance score on LoCoMo dev, with
evidence turns as positives, next to the baseline "turn length as the score".

Run from the repo root: ``python -m bench.evals.importance``. Prints a table.
"""

from __future__ import annotations

import numpy as np

from bench.harness.locomo_data import Conversation, dia_id, load, turn_view
from bench.harness.stack import LOCOMO_DEFAULT
from memwell.core.settings import Settings
from memwell.core.tokens import count_tokens
from memwell.intake.turns import TurnIn
from memwell.pipeline.extract import extract_local, without_speaker
from memwell.pipeline.importance import score_turn


def roc_auc(scores: list[float], labels: list[bool]) -> float:
    """Mann-Whitney AUC with ties counted half (no sklearn needed)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    order = s.argsort(kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    pos, neg = int(y.sum()), int((~y).sum())
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def _evidence(conv: Conversation) -> set[str]:
    return {e for q in conv.questions for e in q.evidence}


def _words(turn: TurnIn) -> str:
    """What the speaker said, without the transcript's "Speaker:" prefix."""
    return without_speaker(turn.content, str(turn.metadata.get("speaker", "")))


def main() -> None:
    if not LOCOMO_DEFAULT.exists():
        print(f"skipped: LoCoMo data not found at {LOCOMO_DEFAULT}")
        return
    conversations = load(LOCOMO_DEFAULT)
    rows: list[tuple[str, int, int, float, float]] = []
    all_scores: list[float] = []
    all_len: list[float] = []
    all_labels: list[bool] = []
    for conv in conversations:
        evidence = _evidence(conv)
        scores, lengths, labels = [], [], []
        for turn in conv.turns:
            text = _words(turn)
            scores.append(score_turn(text))
            lengths.append(float(len(text)))
            labels.append(dia_id(turn) in evidence)
        rows.append(
            (
                conv.sample_id,
                len(labels),
                sum(labels),
                roc_auc(scores, labels),
                roc_auc(lengths, labels),
            )
        )
        all_scores += scores
        all_len += lengths
        all_labels += labels
    print("Importance on LoCoMo dev: ROC AUC, evidence turns as positives")
    print(f"{'conversation':<14}{'turns':>7}{'evidence':>10}{'local score':>13}{'turn length':>13}")
    for sid, n, pos, auc, base in rows:
        print(f"{sid:<14}{n:>7}{pos:>10}{auc:>13.3f}{base:>13.3f}")
    print(
        f"{'ALL':<14}{len(all_labels):>7}{sum(all_labels):>10}"
        f"{roc_auc(all_scores, all_labels):>13.3f}{roc_auc(all_len, all_labels):>13.3f}"
    )
    print("goal: local score >= 0.75")
    extraction_coverage(conversations)


def extraction_coverage(conversations: list[Conversation]) -> None:
    """What local extraction keeps: evidence turns covered, and how long memories are."""
    threshold = Settings().extract_threshold
    turns = memories = covered = evidence_total = 0
    memory_tokens: list[int] = []
    turn_tokens: list[int] = []
    for conv in conversations:
        evidence = _evidence(conv)
        for t in conv.turns:
            found = extract_local(turn_view(t), threshold=threshold)
            turns += 1
            memories += len(found)
            turn_tokens.append(count_tokens(_words(t)))
            memory_tokens += [count_tokens(c.content) for c in found]
            if dia_id(t) in evidence:
                evidence_total += 1
                covered += bool(found)
    print(f"\nLocal extraction at threshold {threshold}: {turns} turns -> {memories} memories")
    print(
        f"evidence turns with at least one memory: {covered}/{evidence_total}"
        f" ({covered / evidence_total:.1%})"
    )
    print(f"mean tokens: memory {np.mean(memory_tokens):.1f}, raw turn {np.mean(turn_tokens):.1f}")


if __name__ == "__main__":
    main()
