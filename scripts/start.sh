#!/usr/bin/env bash
# The main job on the embedded default: set up, start embedded Postgres+pgvector and
# Valkey, api, worker and beat, run the demo, and keep serving until Ctrl-C.
# Extra arguments go to `memwell up` (e.g. --exit-after-demo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export HF_HUB_OFFLINE=1
exec .venv/bin/memwell up --demo "$@"
