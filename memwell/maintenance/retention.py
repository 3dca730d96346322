"""The retention model: how strongly a memory is held, as a pure function of its row
and the clock. Decay stores it; prune re-computes it at its own `now`, so a memory
used since the last decay run is never pruned on a stale value.

    strength  = 2 ^ -(age_days / half_life_days)            in (0, 1]
    age_days  = days since the service last stored, reinforced or returned it
                = now - greatest(updated_at, last_accessed_at)
    half_life = H0 * (1 + a * importance) * (1 + b * ln(1 + uses))
    uses      = access_count + reinforcement_count

Why this shape:
- Exponential forgetting (Ebbinghaus) with a half-life, the same curve retrieval's
  recency term uses, so "fading" means one thing across the service.
- Importance stretches the half-life linearly: with H0 = 7 days and a = 4, a trivial
  memory (importance 0) halves in a week, the default 0.5 in three weeks and a
  crucial one (1.0) in five.
- Use stretches it logarithmically (b = 1): each retrieval or reinforcement is
  evidence the memory matters (spaced repetition: stability grows with successful
  recalls), but with diminishing returns, so a burst of reads cannot make a memory
  immortal: 1 use x1.7, 3 uses x2.4, 10 uses x3.4, 100 uses x5.6.
- Age runs from the service's own clock (updated_at), never from the event time:
  history replayed today with 2023 timestamps starts fresh instead of being pruned.
- Being a pure function of (row, now), a rerun at the same `now` writes the same
  value: the job is idempotent, and how often it runs does not change the result.

With the prune floor at 0.05 (4.3 half-lives), an unused memory of default importance
is pruned after about 91 days, a trivial one after 30, and one used three times after
about 217 days. Memories at or above the importance floor (0.8) or pinned never are.
"""

from __future__ import annotations

from dataclasses import dataclass

from memwell.core.settings import Settings


@dataclass(frozen=True)
class RetentionPolicy:
    half_life_days: float = 7.0
    importance_boost: float = 4.0
    use_boost: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPolicy:
        return cls(
            half_life_days=settings.decay_half_life_days,
            importance_boost=settings.decay_importance_boost,
            use_boost=settings.decay_use_boost,
        )

    def binds(self) -> dict[str, float]:
        return {
            "h0": self.half_life_days,
            "imp_boost": self.importance_boost,
            "use_boost": self.use_boost,
        }


#: The formula above in SQL over alias `m`; binds :now, :h0, :imp_boost, :use_boost.
STRENGTH_SQL = """
    power(2.0, -greatest(0.0, extract(epoch FROM (CAST(:now AS timestamptz)
              - greatest(m.updated_at, m.last_accessed_at))) / 86400.0)
          / (:h0 * (1 + :imp_boost * m.importance)
                 * (1 + :use_boost * ln(1 + m.access_count + m.reinforcement_count))))
"""


def strength(policy: RetentionPolicy, *, age_days: float, importance: float, uses: int) -> float:
    """The same formula in Python, for tests and documentation."""
    import math

    half_life = (
        policy.half_life_days
        * (1 + policy.importance_boost * importance)
        * (1 + policy.use_boost * math.log(1 + uses))
    )
    return float(2.0 ** (-max(0.0, age_days) / half_life))
