"""The test model's assembly (tests/support/gguf_parts.py), on tiny fake part
packages; part of the default suite. The parts are found without running their code,
kept in the declared order, and a result that is not the pinned file is refused."""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import pytest

from tests.support.gguf_parts import ModelAssemblyError, PartedModel, assemble, part_file

PIECES = {"zz_fake_part_c": b"first-", "zz_fake_part_a": b"second-", "zz_fake_part_b": b"third"}
ORDER = ("zz_fake_part_c", "zz_fake_part_a", "zz_fake_part_b")  # not the names' order


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Installed-looking part packages whose import would leave a trace."""
    site = tmp_path / "site"
    for i, (name, piece) in enumerate(PIECES.items(), start=1):
        package = site / name
        (package / "data").mkdir(parents=True)
        (package / "data" / f"part{i:02d}.bin").write_bytes(piece)
        (package / "__init__.py").write_text(
            f"open({str(tmp_path / 'imported')!r}, 'a').write({name!r})\n"
        )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return tmp_path


def _model(sha256: str) -> PartedModel:
    return PartedModel(file_name="fake.gguf", packages=ORDER, sha256=sha256)


def _pinned() -> str:
    return hashlib.sha256(b"".join(PIECES[n] for n in ORDER)).hexdigest()


def test_parts_are_joined_in_the_declared_order_without_importing_them(parts: Path) -> None:
    path = assemble(_model(_pinned()), parts / "cache")
    assert path.read_bytes() == b"first-second-third"
    assert not (parts / "imported").exists()
    assert not any(name in sys.modules for name in PIECES)


def test_a_hash_mismatch_is_refused_and_leaves_no_file(parts: Path) -> None:
    wrong = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(ModelAssemblyError, match="refused and deleted"):
        assemble(_model(wrong), parts / "cache")
    assert list((parts / "cache").iterdir()) == []


def test_a_verified_file_is_reused_and_a_changed_one_rebuilt(parts: Path) -> None:
    path = assemble(_model(_pinned()), parts / "cache")
    first = path.stat().st_mtime_ns
    assert assemble(_model(_pinned()), parts / "cache").stat().st_mtime_ns == first
    path.write_bytes(b"tampered")
    assert assemble(_model(_pinned()), parts / "cache").read_bytes() == b"first-second-third"


def test_a_missing_part_package_is_named(parts: Path) -> None:
    model = PartedModel(file_name="x.gguf", packages=("zz_not_installed_part",), sha256=_pinned())
    with pytest.raises(ModelAssemblyError, match="zz_not_installed_part is not installed"):
        assemble(model, parts / "cache")


def test_the_part_file_is_the_packages_data_file(parts: Path) -> None:
    assert part_file("zz_fake_part_a").read_bytes() == b"second-"
