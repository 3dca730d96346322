"""Memwell as a user installs it: a wheel built from this checkout, in a fresh venv
outside the repo, run from an empty directory.

The wheel and the sdist are built with `python -m build --no-isolation` (no download).
The venv reuses the dependencies already installed in this interpreter's environment
through a .pth file, so the install costs seconds; the checkout itself is on no path
of it, and the test checks that `memwell` is imported from the venv, not from here.
From an empty temporary directory it runs `memwell --version`, imports the public
names, runs `memwell up --demo --exit-after-demo` (three `[ok]` lines) and `memwell
migrate` against an empty database, which must then hold the schema.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import memwell
from memwell.db.driver import libpq_url
from memwell.local.session_services import PostgresService

# `memwell up` takes the usual ports when free: one such module runs at a time.
pytestmark = pytest.mark.usefixtures("one_stack_at_a_time")

# What would point the installed package at another stack or at this checkout.
FOREIGN = ("PYTHONPATH", "DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL", "TEST_REDIS_URL",
           "MEMWELL_API_URL", "MEMWELL_API_PORT", "MEMWELL_REDIS_PORT",
           "MEMWELL_WORKER_METRICS_PORT", "VIRTUAL_ENV")  # fmt: skip
OK_LINE = re.compile(r"^\s*\[ok\] .+ -> top memory mentions '.+'$", re.MULTILINE)
# What the wheel must carry besides Python modules.
PACKAGED = (
    "memwell/py.typed",
    "memwell/buffer/append.lua",
    "memwell/buffer/remove.lua",
    "memwell/buffer/tokens_of.lua",
    "memwell/auth/rate_limit.lua",
    "memwell/intake/ingest-payload.v1.schema.json",
    "memwell/migrations/env.py",
    "memwell/migrations/script.py.mako",
    "memwell/migrations/versions/0001_initial_schema.py",
    "api/console/templates/base.html",
    "api/console/static/console.css",
)


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv)} failed ({done.returncode}):\n{output[-4000:]}"
    return output


@pytest.fixture(scope="module")
def dists(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("build", reason="the dev extra installs `build`")
    out = tmp_path_factory.mktemp("dist")
    _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(repo_root)],
        cwd=repo_root,
        env=dict(os.environ),
        timeout=300,
    )
    return {"wheel": next(out.glob("memwell-*.whl")), "sdist": next(out.glob("memwell-*.tar.gz"))}


@pytest.fixture(scope="module")
def venv(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the wheel installed, its dependencies borrowed from ours."""
    root = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)], root, dict(os.environ), 120)
    python = root / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            text=True,
        ).strip()
    )
    # Only the lines of a .pth in a site dir are added; the .pth files found in the
    # borrowed folder (the checkout's editable install among them) are not processed.
    (site / "borrowed-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # --ignore-installed: the borrowed folder's own memwell (editable) is neither
    # uninstalled nor taken as already satisfying the wheel.
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
         "--no-deps", "--ignore-installed", "--disable-pip-version-check", str(dists["wheel"])],
        root, dict(os.environ), 300,
    )  # fmt: skip
    yield root


@pytest.fixture
def user_env(venv: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env.update(
        {
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "MEMWELL_DATA_DIR": str(tmp_path / "data"),
            "MEMWELL_LOG_FORMAT": "console",
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


@pytest.fixture
def empty_dir(tmp_path: Path) -> Path:
    here = tmp_path / "empty"
    here.mkdir()
    return here


def test_dists_carry_every_piece(dists: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    missing = [p for p in PACKAGED if p not in names]
    assert not missing, f"the wheel lacks {missing}"
    assert not any(n.startswith("alembic/") for n in names), "a top-level alembic would shadow"
    with tarfile.open(dists["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert {"setup.py", "pyproject.toml", "alembic/env.py", "memwell/py.typed"} <= members


def test_version_and_public_names_come_from_the_wheel(
    venv: Path, user_env: dict[str, str], empty_dir: Path
) -> None:
    out = _run(["memwell", "--version"], empty_dir, user_env, 60)
    assert out.strip() == f"memwell, version {memwell.__version__}"
    where = _run(
        [str(venv / "bin" / "python"), "-c",
         "from memwell import MemoryClient, enqueue_turns\n"
         "import memwell, memwell.db.migrate as m\n"
         "print(memwell.__file__); print(m.migrations_dir()); print(memwell.__version__)"],
        empty_dir, user_env, 60,
    ).split()  # fmt: skip
    assert Path(where[0]).is_relative_to(venv), f"memwell imported from {where[0]}"
    assert Path(where[1]).is_relative_to(venv), f"migrations found at {where[1]}"
    assert where[2] == memwell.__version__


def test_migrate_creates_the_schema_in_an_empty_database(
    postgres: PostgresService, user_env: dict[str, str], empty_dir: Path
) -> None:
    url = postgres.create_database("memwell_installed_wheel")
    _run(["memwell", "migrate"], empty_dir, {**user_env, "DATABASE_URL": url}, 300)
    with psycopg.connect(libpq_url(url)) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables").fetchall()}
        head = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert {"turns", "memories", "memory_events", "sessions", "api_keys"} <= tables
    assert head is not None
    assert list(empty_dir.iterdir()) == [], "migrate left files in the working directory"


def test_up_demo_from_an_empty_directory(user_env: dict[str, str], empty_dir: Path) -> None:
    out = _run(["memwell", "up", "--demo", "--exit-after-demo"], empty_dir, user_env, 600)
    assert len(OK_LINE.findall(out)) == 3, out[-4000:]
    assert "MISSING" not in out
