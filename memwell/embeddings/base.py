"""The contract every embedding backend meets, and the one error type they raise.

Callers (the store, retrieval, the workers) depend only on this protocol, so the
backend can be swapped by configuration without touching them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float32]
FloatVector = npt.NDArray[np.float32]


class EmbeddingError(Exception):
    """An embedding backend could not be set up or failed to produce vectors."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``model_name`` is stored with every vector: vectors from different models are
    not comparable, so retrieval must filter on it.
    """

    # Read-only properties, so both plain attributes and lazily computed values
    # (an OpenAI endpoint learns its width from the first response) satisfy it.
    @property
    def model_name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Return shape (len(texts), dimensions), float32, every row of unit L2 norm.

        An empty input returns shape (0, dimensions).
        """
        ...
