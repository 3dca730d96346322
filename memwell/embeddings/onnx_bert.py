"""Builds a BERT-family sentence encoder as an ONNX graph from plain numpy weights.

No torch: the graph is written node by node with ``onnx.helper``. It covers the two
encoders local mode ships (BERT for all-MiniLM-L6-v2, XLM-RoBERTa for
multilingual-e5-small): post-norm transformer layers with exact (erf) GELU, then mean
pooling over the attention mask and L2 normalisation, so the output "embedding" is the
final sentence vector, as sentence-transformers computes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

OPSET = 17
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
TOKEN_TYPE_IDS = "token_type_ids"
OUTPUT_NAME = "embedding"

Weights = Mapping[str, npt.NDArray[Any]]
#: Word embeddings kept as Q4_0 (nibbles (vocab, blocks, 16) uint8, scales (vocab, blocks,
#: 1) float32) instead of embeddings.word_embeddings.weight: dequantised in the graph.
PACKED_WORDS = "embeddings.word_embeddings.q4"
PACKED_WORD_SCALES = "embeddings.word_embeddings.q4_scale"


@dataclass(frozen=True)
class EncoderShape:
    """What the weights alone do not say about an encoder."""

    layers: int
    heads: int
    hidden: int
    layer_norm_eps: float
    #: XLM-R numbers positions from padding_idx + 1 (= 2); BERT from 0. Inputs are
    #: right-padded, so a real token's position is its index plus this offset.
    position_offset: int = 0
    #: BERT feeds segment ids; an XLM-R model has one segment, so no input is needed.
    token_type_input: bool = True


class _Graph:
    """Accumulates nodes and initialisers under unique names."""

    def __init__(self) -> None:
        from onnx import TensorProto, helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self._tensor_proto = TensorProto
        self.nodes: list[object] = []
        self.initializers: list[object] = []
        self._count = 0

    def name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, stem: str, value: npt.ArrayLike, dtype: type = np.float32) -> str:
        name = self.name(stem)
        self.initializers.append(
            self._numpy_helper.from_array(np.ascontiguousarray(np.asarray(value, dtype)), name)
        )
        return name

    def tensor(self, stem: str, value: npt.NDArray[np.generic]) -> object:
        return self._numpy_helper.from_array(value, self.name(stem))

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        out = output or self.name(op_type.lower())
        self.nodes.append(self._helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weight: npt.NDArray[np.float32], bias: npt.NDArray[np.float32]) -> str:
        # torch Linear stores (out, in); MatMul wants (in, out). The transposed constant is
        # what quantize_dynamic recognises as a weight to quantise per output channel.
        product = self.op("MatMul", [x, self.const("weight", weight.T)])
        return self.op("Add", [product, self.const("bias", bias)])

    def layer_norm(
        self, x: str, gamma: npt.NDArray[np.float32], beta: npt.NDArray[np.float32], eps: float
    ) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const("gamma", gamma), self.const("beta", beta)],
            axis=-1,
            epsilon=eps,
        )

    def gelu(self, x: str) -> str:
        # 0.5 * x * (1 + erf(x / sqrt(2))): opset 17 has no Gelu op, and onnxruntime fuses
        # exactly this pattern into its own.
        scaled = self.op("Div", [x, self.const("sqrt2", math.sqrt(2.0))])
        erf = self.op("Erf", [scaled])
        one_plus = self.op("Add", [erf, self.const("one", 1.0)])
        half_x = self.op("Mul", [x, self.const("half", 0.5)])
        return self.op("Mul", [half_x, one_plus])


def build_encoder(weights: Weights, shape: EncoderShape) -> bytes:
    """The serialised ONNX model for ``weights`` (Hugging Face BertModel/XLMRobertaModel
    tensor names, without a model prefix)."""
    import onnx
    from onnx import TensorProto, helper

    g = _Graph()
    ids_info = helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "sequence"])
    mask_info = helper.make_tensor_value_info(
        ATTENTION_MASK, TensorProto.INT64, ["batch", "sequence"]
    )
    inputs = [ids_info, mask_info]
    if shape.token_type_input:
        inputs.append(
            helper.make_tensor_value_info(TOKEN_TYPE_IDS, TensorProto.INT64, ["batch", "sequence"])
        )

    hidden = _embeddings(g, weights, shape)
    mask_bias = _attention_bias(g)
    for layer in range(shape.layers):
        hidden = _layer(g, weights, shape, f"encoder.layer.{layer}.", hidden, mask_bias)
    _mean_pool_normalise(g, hidden)

    output = helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", shape.hidden])
    graph = helper.make_graph(
        g.nodes,  # type: ignore[arg-type]
        "sentence_encoder",
        inputs,
        [output],
        initializer=g.initializers,  # type: ignore[arg-type]
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="memwell",
    )
    # IR 8 loads in every onnxruntime since 1.14.
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def _embeddings(g: _Graph, weights: Weights, shape: EncoderShape) -> str:
    words = _word_vectors(g, weights, shape)
    # positions 0..S-1 index a table already shifted by the offset.
    table = weights["embeddings.position_embeddings.weight"][shape.position_offset :]
    ones = g.op(
        "ConstantOfShape",
        [g.op("Shape", [INPUT_IDS])],
        value=g.tensor("one_i", np.ones(1, np.int64)),
    )
    counted = g.op("CumSum", [ones, g.const("axis", 1, np.int64)])
    positions = g.op("Sub", [counted, g.const("one_i", 1, np.int64)])
    position_vectors = g.op("Gather", [g.const("position_embeddings", table), positions], axis=0)
    summed = g.op("Add", [words, position_vectors])
    types = weights["embeddings.token_type_embeddings.weight"]
    if shape.token_type_input:
        type_vectors = g.op(
            "Gather", [g.const("token_type_embeddings", types), TOKEN_TYPE_IDS], axis=0
        )
    else:
        type_vectors = g.const("token_type_0", types[0])
    summed = g.op("Add", [summed, type_vectors])
    return g.layer_norm(
        summed,
        weights["embeddings.LayerNorm.weight"],
        weights["embeddings.LayerNorm.bias"],
        shape.layer_norm_eps,
    )


def _word_vectors(g: _Graph, weights: Weights, shape: EncoderShape) -> str:
    if PACKED_WORDS not in weights:
        table = weights["embeddings.word_embeddings.weight"]
        return g.op("Gather", [g.const("word_embeddings", table), INPUT_IDS], axis=0)
    # Each byte holds weight j (low nibble) and j + 16 (high) of its block of 32.
    packed = g.op(
        "Gather", [g.const("word_nibbles", weights[PACKED_WORDS], np.uint8), INPUT_IDS], axis=0
    )
    four = g.const("four", np.full(1, 4, np.uint8), np.uint8)
    high = g.op("BitShift", [packed, four], direction="RIGHT")
    low = g.op("Sub", [packed, g.op("BitShift", [high, four], direction="LEFT")])
    nibbles = g.op("Cast", [g.op("Concat", [low, high], axis=-1)], to=1)  # FLOAT
    centred = g.op("Sub", [nibbles, g.const("eight", 8.0)])
    scales = g.op(
        "Gather", [g.const("word_scales", weights[PACKED_WORD_SCALES]), INPUT_IDS], axis=0
    )
    values = g.op("Mul", [centred, scales])
    return g.op("Reshape", [values, g.const("merge_shape", [0, 0, shape.hidden], np.int64)])


def _attention_bias(g: _Graph) -> str:
    """(batch, 1, 1, sequence): 0 where a token is real, the float32 minimum where it is
    padding, as Hugging Face's eager attention adds it to the scores."""
    mask = g.op("Cast", [ATTENTION_MASK], to=1)  # FLOAT
    inverted = g.op("Sub", [g.const("one", 1.0), mask])
    bias = g.op("Mul", [inverted, g.const("neg", np.finfo(np.float32).min)])
    return g.op("Unsqueeze", [bias, g.const("axes", [1, 2], np.int64)])


def _layer(
    g: _Graph, weights: Weights, shape: EncoderShape, prefix: str, x: str, mask_bias: str
) -> str:
    head_dim = shape.hidden // shape.heads
    split = g.const("split_shape", [0, 0, shape.heads, head_dim], np.int64)

    def heads(name: str, perm: list[int]) -> str:
        projected = g.linear(
            x,
            weights[f"{prefix}attention.self.{name}.weight"],
            weights[f"{prefix}attention.self.{name}.bias"],
        )
        return g.op("Transpose", [g.op("Reshape", [projected, split])], perm=perm)

    query = heads("query", [0, 2, 1, 3])  # (B, h, S, d)
    key = heads("key", [0, 2, 3, 1])  # (B, h, d, S)
    value = heads("value", [0, 2, 1, 3])
    scores = g.op("MatMul", [query, key])
    scores = g.op("Div", [scores, g.const("scale", math.sqrt(head_dim))])
    scores = g.op("Add", [scores, mask_bias])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, value])], perm=[0, 2, 1, 3])
    context = g.op("Reshape", [context, g.const("merge_shape", [0, 0, shape.hidden], np.int64)])

    attended = g.linear(
        context,
        weights[f"{prefix}attention.output.dense.weight"],
        weights[f"{prefix}attention.output.dense.bias"],
    )
    x = g.layer_norm(
        g.op("Add", [attended, x]),
        weights[f"{prefix}attention.output.LayerNorm.weight"],
        weights[f"{prefix}attention.output.LayerNorm.bias"],
        shape.layer_norm_eps,
    )
    inner = g.gelu(
        g.linear(
            x,
            weights[f"{prefix}intermediate.dense.weight"],
            weights[f"{prefix}intermediate.dense.bias"],
        )
    )
    out = g.linear(
        inner, weights[f"{prefix}output.dense.weight"], weights[f"{prefix}output.dense.bias"]
    )
    return g.layer_norm(
        g.op("Add", [out, x]),
        weights[f"{prefix}output.LayerNorm.weight"],
        weights[f"{prefix}output.LayerNorm.bias"],
        shape.layer_norm_eps,
    )


def _mean_pool_normalise(g: _Graph, hidden: str) -> str:
    mask = g.op("Unsqueeze", [g.op("Cast", [ATTENTION_MASK], to=1), g.const("axis", [2], np.int64)])
    summed = g.op(
        "ReduceSum", [g.op("Mul", [hidden, mask]), g.const("axis", [1], np.int64)], keepdims=0
    )
    counts = g.op("ReduceSum", [mask, g.const("axis", [1], np.int64)], keepdims=0)
    counts = g.op("Max", [counts, g.const("tiny", 1e-9)])
    mean = g.op("Div", [summed, counts])
    # F.normalize: x / max(||x||, 1e-12)
    norm = g.op("ReduceL2", [mean], axes=[1], keepdims=1)
    norm = g.op("Max", [norm, g.const("eps", 1e-12)])
    return g.op("Div", [mean, norm], output=OUTPUT_NAME)
