"""A clock a test moves by hand, for code that takes a `clock` callable."""

from __future__ import annotations


class FakeClock:
    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
