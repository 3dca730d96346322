"""The name of an erased user's tombstone: an HMAC of (tenant, user id) under a server
secret.

A plain hash of the id would let anyone who reads `user_erasures` confirm a guessed
id ("was alice@example.com a user here?"); the HMAC needs the secret too, which
lives outside the database. Every process that erases or ingests must use the same
secret, or a tombstone stops matching and a late queued turn of an erased user
would be stored. The secret comes from MEMWELL_ERASURE_SECRET; unset, it is generated
once into MEMWELL_DATA_DIR/erasure.secret (0600), which the processes of one
machine's stack share. Tombstones written before the HMAC (a plain SHA-256) are
still honoured by `legacy_user_hash`.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Final

from memwell.core.settings import Settings, get_settings

SECRET_FILE: Final = "erasure.secret"

log = logging.getLogger(__name__)


def _id_bytes(tenant: str, user_id: str) -> bytes:
    return f"{tenant}\x1f{user_id}".encode("utf-8", errors="surrogatepass")


def user_hash(tenant: str, user_id: str) -> str:
    """The tombstone's key: the erased id must not survive its own erasure."""
    return hmac.new(erasure_key(), _id_bytes(tenant, user_id), hashlib.sha256).hexdigest()


def turn_hash(tenant: str, turn_id: str) -> str:
    """The key of a dropped turn's record: a client's turn id may name its user."""
    return user_hash(tenant, f"turn\x1f{turn_id}")


def legacy_user_hash(tenant: str, user_id: str) -> str:
    """The unkeyed digest tombstones carried before the HMAC; read, never written."""
    return hashlib.sha256(_id_bytes(tenant, user_id)).hexdigest()


def erasure_key(settings: Settings | None = None) -> bytes:
    """This process's HMAC key (from the settings, or the data dir's generated one)."""
    resolved = settings or get_settings()
    configured = resolved.erasure_secret
    if configured is not None:
        return configured.get_secret_value().encode()
    return _generated_key(resolved.data_dir.resolve())


@lru_cache(maxsize=8)
def _generated_key(data_dir: Path) -> bytes:
    path = data_dir / SECRET_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        # Written whole under a private name, then linked into place: of several
        # processes starting at once, exactly one link wins, and none reads a half.
        fd, staged = tempfile.mkstemp(dir=data_dir, prefix=".erasure-")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32))
            os.link(staged, path)
            log.warning(
                "generated the erasure secret in %s; processes on other machines must "
                "share it (MEMWELL_ERASURE_SECRET)",
                path,
            )
        except FileExistsError:
            pass
        finally:
            os.unlink(staged)
    return path.read_text().strip().encode()
