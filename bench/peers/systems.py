"""What the bench needs of each system: a name, the Postgres it alone uses (for its CPU
time), how it ingested, one search, and the scoring of its hits (bench.evals.locomo's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bench.evals.locomo import Scores
from bench.harness.locomo_data import Conversation, Question
from bench.harness.stack import BenchStack


@dataclass(frozen=True)
class Ingest:
    """How a system took the turns in."""

    turns: int
    #: wall seconds, as the system ingests (Memwell: enqueue to every turn consolidated)
    seconds: float
    #: the embedding of the stored texts, when it is not inside `seconds` (a peer handed
    #: precomputed vectors); None: it is inside
    embed_s: float | None = None

    @property
    def rate(self) -> float:
        """Turns per second, the embedding included."""
        return self.turns / (self.seconds + (self.embed_s or 0.0))

    @property
    def rate_without_embedding(self) -> float | None:
        return None if self.embed_s is None else self.turns / self.seconds


class System(Protocol):
    """One row of the table."""

    @property
    def name(self) -> str: ...

    @property
    def database_url(self) -> str:
        """The database this system alone uses."""
        ...

    @property
    def postgres_pid(self) -> int:
        """The postmaster of the Postgres this system alone uses."""
        ...

    @property
    def ingested(self) -> Ingest: ...

    async def search(self, conv: Conversation, q: Question) -> Sequence[Any]:
        """The top 10 for `q` as the system returns them, its query embedding included
        (this call is what is timed)."""
        ...

    def score(self, conv: Conversation, q: Question, hits: Sequence[Any], scores: Scores) -> None:
        """Add the hits `search` returned to `scores` (not timed)."""
        ...


class OnItsOwnPostgres:
    """A peer's database and server: those of the embedded Postgres it was given."""

    stack: BenchStack

    @property
    def database_url(self) -> str:
        return self.stack.database_url

    @property
    def postgres_pid(self) -> int:
        assert self.stack.postgres_pid is not None
        return self.stack.postgres_pid
