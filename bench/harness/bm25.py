"""A small Okapi BM25 (k1=1.5, b=0.75) for the LoCoMo baseline; no dependency needed."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    def __init__(self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(tokenize(d)) for d in documents]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = tokenize(query)
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / self.avg)
            out.append(
                sum(
                    self.idf.get(t, 0.0) * doc[t] * (self.k1 + 1) / (doc[t] + norm)
                    for t in terms
                    if t in doc
                )
            )
        return out

    def top(self, query: str, k: int) -> list[int]:
        scores = self.scores(query)
        return sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
