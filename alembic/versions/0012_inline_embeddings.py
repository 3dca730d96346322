"""a memory's embedding stays in its heap row, uncompressed, however long its text.

Postgres moves a row's widest values out of line (TOAST) once the row passes about
2 kB, and pgvector marks `vector` for exactly that. A 384-dimension embedding is
1.5 kB, so a memory with a few sentences of text crossed the line and every search
fetched its embedding through the TOAST index: a second and third buffer per row
scanned, on the exact path for every visible row of the user. Keeping the vector in
the row (storage MAIN) alone is worse: the row is then still over 2 kB, and Postgres
compresses the text and its tsvector in place, which each search decompresses for the
full-text test. So rows are left whole up to a page (toast_tuple_target), and only a
row that still does not fit has its text compressed first, its vector last.

Rows written before this migration keep their layout until they are rewritten
(`VACUUM FULL memories`, or any update of the row).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The largest value Postgres accepts: a row is toasted only when it would not fit a page.
ROW_TARGET_BYTES = 8160


def upgrade() -> None:
    op.execute("ALTER TABLE memories ALTER COLUMN embedding SET STORAGE MAIN")
    op.execute(f"ALTER TABLE memories SET (toast_tuple_target = {ROW_TARGET_BYTES})")


def downgrade() -> None:
    op.execute("ALTER TABLE memories RESET (toast_tuple_target)")
    op.execute("ALTER TABLE memories ALTER COLUMN embedding SET STORAGE EXTERNAL")
