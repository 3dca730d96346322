"""Where the migrations are found: the checkout's alembic/ here (an installed wheel's
memwell.migrations is covered by tests/local/test_installed_wheel.py), and a one-line
error that says what to do when neither is there."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memwell.core.errors import ConfigurationError
from memwell.db import migrate
from memwell.local.cli import main


def test_a_checkout_finds_its_own_alembic_folder(repo_root: Path) -> None:
    assert migrate.migrations_dir() == repo_root / "alembic"
    assert migrate.alembic_config("postgresql://x/y").get_main_option("script_location") == str(
        repo_root / "alembic"
    )


def test_missing_migrations_fail_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(migrate, "SOURCE_MIGRATIONS", tmp_path / "alembic")
    monkeypatch.setattr(migrate, "MIGRATIONS_PACKAGE", "memwell.no_such_migrations")
    with pytest.raises(ConfigurationError, match="reinstall Memwell"):
        migrate.migrations_dir()
    result = CliRunner().invoke(main, ["migrate"], env={"DATABASE_URL": "postgresql://x/y"})
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: the database migrations are missing")
