"""Run Alembic migrations from code (CLI, `memwell up`, tests).

The migrations are written in the checkout's top-level `alembic/` folder and ship in
the wheel as the package `memwell.migrations` (setup.py maps the folder there; a
top-level `alembic` package would shadow the library). An installed Memwell finds
them through that package, from any working directory; a source checkout, where an
editable install does not map the folder, finds them beside the code. The Alembic
configuration is built here, so no alembic.ini is needed (the checkout keeps one for
developers who run `alembic` by hand).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic.config import Config

from alembic import command
from memwell.core.errors import ConfigurationError

MIGRATIONS_PACKAGE = "memwell.migrations"
SOURCE_MIGRATIONS = Path(__file__).resolve().parents[2] / "alembic"


def _has_environment(folder: Path) -> bool:
    return (folder / "env.py").is_file() and (folder / "versions").is_dir()


def migrations_dir() -> Path:
    """The folder holding env.py and versions/: the installed package's, else the
    source checkout's."""
    try:
        spec = importlib.util.find_spec(MIGRATIONS_PACKAGE)
    except ImportError:
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if _has_environment(Path(location)):
            return Path(location)
    if _has_environment(SOURCE_MIGRATIONS):
        return SOURCE_MIGRATIONS
    raise ConfigurationError(
        "the database migrations are missing from this install "
        f"(no {MIGRATIONS_PACKAGE} package): reinstall Memwell from a wheel or sdist, "
        "e.g. `pip install --force-reinstall memwell`"
    )


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    # ConfigParser interpolation treats % specially; URLs may contain it.
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)
