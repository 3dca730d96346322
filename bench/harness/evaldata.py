"""Where the external evaluation data lives (LoCoMo is read by bench/harness/locomo_data.py).

The data is never copied into the repo: it is read from MEMWELL_EVAL_DATA, or from
../shared/data next to the project root. Evaluations skip cleanly when it is missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_root() -> Path:
    env = os.environ.get("MEMWELL_EVAL_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO_ROOT.parent / "shared" / "data", Path("/work/shared/data")]
    for path in candidates:
        if path.is_dir():
            return path
    return candidates[0]


def require(relative: str) -> Path:
    """The data file, or exit 0 with a message saying it is missing."""
    path = data_root() / relative
    if not path.exists():
        print(f"SKIP: {path} not found (set MEMWELL_EVAL_DATA to the data folder)")
        sys.exit(0)
    return path
