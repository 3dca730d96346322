"""A memory's row holds its embedding and its text uncompressed, however long the text:
a search reads each candidate's vector and tsvector without a TOAST fetch or a
decompression (alembic 0012)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

# About 2.6 kB of text: with its 1.5 kB embedding the row is well past the 2 kB at which
# Postgres would otherwise move or compress its widest values.
LONG_TEXT = " ".join(
    f"On day {i} Priya walked the coastal trail past the lighthouse and the old harbour."
    for i in range(32)
)


def test_a_long_memory_keeps_its_embedding_and_text_in_its_row(
    api: TestClient, db: sessionmaker[Session], ids: dict[str, str]
) -> None:
    assert len(LONG_TEXT) > 2500
    response = api.post(
        "/v1/memories",
        json={"user_id": ids["user"], "memories": [{"content": LONG_TEXT}], "reconcile": False},
    )
    assert response.status_code == 200, response.text
    memory_id = response.json()["results"][0]["memory_id"]
    with db() as session:
        row = session.execute(
            text(
                "SELECT pg_column_toast_chunk_id(embedding) AS vector_chunk,"
                " pg_column_compression(embedding) AS vector_codec,"
                " pg_column_toast_chunk_id(fts) AS fts_chunk,"
                " pg_column_compression(fts) AS fts_codec,"
                " pg_column_compression(content) AS content_codec,"
                " vector_dims(embedding) AS dims"
                " FROM memories WHERE id = :id"
            ),
            {"id": memory_id},
        ).one()
    assert row.dims == 384
    assert (row.vector_chunk, row.vector_codec) == (None, None)
    assert (row.fts_chunk, row.fts_codec, row.content_codec) == (None, None, None)
