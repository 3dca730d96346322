"""A worker run as root: one line that says why, instead of Celery's warning.

Celery refuses to start as root only when the worker accepts pickle, whose messages can
run code; `C_FORCE_ROOT` overrides that refusal. With JSON only it starts and prints a
multi-line `SecurityWarning` on every start, which `memwell up` as root (a container, a
fresh VM) showed without a word on what it means. Memwell's workers accept JSON only, so
a message cannot make them run code of its choosing; what is left is what any process
running as root risks. So that warning is replaced by one line saying this. Nothing is
silenced when the worker accepts pickle (Celery's refusal and `C_FORCE_ROOT` stay as they
are), and the Docker image runs as an unprivileged user.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable
from typing import Any

from celery.exceptions import SecurityWarning
from celery.signals import celeryd_init

#: How Celery's root warning starts (celery/platforms.py, ROOT_DISCOURAGED).
ROOT_WARNING = r"You're running the worker with superuser privileges"
#: Content types whose messages can run code when deserialized.
CODE_CARRYING = frozenset({"pickle", "application/x-python-serialize", "yaml",
                           "application/x-yaml"})  # fmt: skip

EXPLANATION = (
    "worker runs as root: it accepts JSON messages only, which cannot run code, so "
    "Celery's superuser warning is replaced by this line; in production run workers as "
    "an unprivileged user (the Docker image does; docs/production.md)"
)


def accepts_code(accept_content: Iterable[str]) -> bool:
    return any(kind in CODE_CARRYING for kind in accept_content)


def explain_root(accept_content: Iterable[str], *, euid: int) -> str | None:
    """Replace Celery's root warning with one line, when it is safe to: returns the
    line (also written to stderr), or None where Celery's own warning stays."""
    if euid != 0 or accepts_code(accept_content):
        return None
    warnings.filterwarnings("ignore", message=ROOT_WARNING, category=SecurityWarning)
    print(EXPLANATION, file=sys.stderr, flush=True)
    return EXPLANATION


@celeryd_init.connect
def _on_worker_init(conf: Any = None, **_: Any) -> None:
    # celeryd_init fires just before Celery's privilege check, in worker processes only.
    explain_root(conf.accept_content if conf is not None else (), euid=os.geteuid())
