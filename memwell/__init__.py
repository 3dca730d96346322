"""Memwell: memory for AI agents.

The top-level names are the integration surface for apps that already run their
own model loop: enqueue turns over the broker, with no HTTP hop.
"""

from memwell.enqueue import enqueue_turn, enqueue_turns
from memwell.turns import IngestPayload, TurnIn

__all__ = ["IngestPayload", "TurnIn", "enqueue_turn", "enqueue_turns"]
__version__ = "0.1.0"
