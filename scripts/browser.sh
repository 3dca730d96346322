#!/usr/bin/env bash
# The console's browser tests drive the system's Chromium (Playwright never downloads
# one). Only the test command needs it, so only scripts/test.sh runs this: `memwell up`
# and scripts/start.sh never install a system package. Install Debian's package where we
# can (root with apt-get); elsewhere the browser tests skip and say how to install it.
set -euo pipefail

# The browsers tests/console/helpers.py looks for, or the one MEMWELL_CHROMIUM names.
if [ -n "${MEMWELL_CHROMIUM:-}" ] && [ -x "$MEMWELL_CHROMIUM" ]; then
  exit 0
fi
for browser in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$browser" >/dev/null 2>&1; then
    exit 0
  fi
done

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "==> installing chromium (apt) for the console's browser tests"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; then
    echo "    could not install chromium: the browser tests will skip" >&2
  fi
else
  echo "==> no chromium: the console's browser tests will skip" \
       "(install it: sudo apt-get install -y chromium)" >&2
fi
