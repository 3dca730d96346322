#!/usr/bin/env bash
# Create .venv and install Memwell with its local-mode and dev extras.
# Re-running is cheap: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${MEMWELL_TORCH_SPEC:-torch==2.13.0}

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi

stamp=.venv/.memwell-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing dependencies (torch CPU first, then memwell[local,dev])"
  # torch must come first, as a CPU build: pulled in as a dependency of
  # sentence-transformers, pip would resolve the CUDA build (several GB).
  # Where no local CPU wheel is configured, point pip at the CPU index:
  #   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
  .venv/bin/pip install --quiet --disable-pip-version-check "$TORCH_SPEC"
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[local,dev]"
  echo "$want" > "$stamp"
fi
