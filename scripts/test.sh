#!/usr/bin/env bash
# The whole test suite on real services (embedded Postgres+pgvector, Valkey, a real
# Celery worker), after lint and type checks. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/browser.sh  # the console's browser tests: Chromium, where it can be installed
export HF_HUB_OFFLINE=1
echo "==> ruff";  .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "==> mypy";  .venv/bin/mypy
echo "==> import contracts"; .venv/bin/lint-imports
# The documentation site, strictly: a broken link or a page left out of the nav fails.
# Built into the run's scratch space (ignored by git), not the system's /tmp.
site=.pytest-tmp/site
rm -rf "$site"
echo "==> docs"; NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site"
rm -rf "$site"
# Two pytest processes, each with its own Postgres, Valkey and Celery worker: most tests
# wait on a subprocess, so two share two cores well. `-n 0` after it runs one process.
echo "==> pytest"; exec .venv/bin/python -m pytest -n 2 "$@"
