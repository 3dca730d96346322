"""Run Alembic migrations from code (CLI, `memwell up`, tests)."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config

from alembic import command

REPO_ROOT = Path(__file__).resolve().parents[2]


def _alembic_root() -> Path:
    """The folder holding alembic.ini: the source checkout, or the working directory
    of an installed deployment (the Docker image copies alembic/ beside it)."""
    for candidate in (REPO_ROOT, Path.cwd()):
        if (candidate / "alembic.ini").is_file():
            return candidate
    raise FileNotFoundError("alembic.ini not found in the source tree or the working directory")


def alembic_config(database_url: str) -> Config:
    root = _alembic_root()
    cfg = Config(str(root / "alembic.ini"))
    cfg.set_main_option("script_location", str(root / "alembic"))
    # ConfigParser interpolation treats % specially; URLs may contain it.
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)
