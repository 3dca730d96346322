"""Full-text search that works for Chinese and Japanese text too.

Postgres' text-search parser splits words at spaces and punctuation. Chinese and
Japanese text has no spaces, so a whole sentence ("我住在北京") became one lexeme,
which no question could match: for that text the hybrid search was silently
vector-only. `memwell_search_text` puts a space around every Han, Hiragana and
Katakana character. Each one becomes its own lexeme, and the text rank then weighs the
characters a question shares with a memory by their rarity, as it weighs the words of
other languages. Latin, Cyrillic, Greek and Hangul text, which has spaces, is
unchanged. Its configuration stays 'english': for other languages that is an English
stop list and an English stemmer, applied in the same way to memories and questions,
so their words still match.

The stored `fts` column and every query side (search, the ANN path's per-user function,
entity filtering, listing) apply the same function.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels = None
depends_on = None

FUNCTION = "memwell_search_text"
# One class of characters written without spaces: CJK ideographs (and extension A and
# the compatibility block), Hiragana and Katakana.
_SPACELESS = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"

CREATE_FUNCTION = rf"""
CREATE OR REPLACE FUNCTION public.{FUNCTION}(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN regexp_replace(p_text, '({_SPACELESS})', ' \1 ', 'g')
"""

NEW_FTS = f"to_tsvector('english'::regconfig, public.{FUNCTION}(content))"
OLD_FTS = "to_tsvector('english'::regconfig, content)"

TEXT_CANDIDATES = "memwell_text_candidates"
TEXT_CANDIDATES_BODY = r"""
CREATE OR REPLACE FUNCTION {name}(
    p_tenant text, p_user text, p_model text, p_qtext text, p_cap integer
) RETURNS TABLE (id uuid, rank real, created_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $fn$
DECLARE
    v_session_tenant text := current_setting('memwell.tenant', true);
    v_qtext text := {qtext};
    v_plain tsquery := plainto_tsquery('english', v_qtext);
    v_any tsquery;
    v_lexeme text;
BEGIN
    IF coalesce(v_session_tenant, '') <> '' AND v_session_tenant <> p_tenant THEN
        RETURN;
    END IF;
    IF numnode(v_plain) = 0 THEN
        RETURN;
    END IF;
    v_any := replace(v_plain::text, ' & ', ' | ')::tsquery;
    FOR v_lexeme IN
        SELECT DISTINCT term FROM unnest(tsvector_to_array(to_tsvector('english', v_qtext))) AS term
    LOOP
        -- A lexeme with a backslash cannot be quoted into a tsquery.
        CONTINUE WHEN strpos(v_lexeme, E'\\') > 0;
        RETURN QUERY EXECUTE format(
            'SELECT x.id, ts_rank(x.fts, $1, 1), x.created_at FROM public.memories x'
            ' WHERE x.tenant = %L AND x.user_id = %L AND x.embedding_model = %L'
            ' AND x.fts @@ %L::tsquery LIMIT %s',
            p_tenant, p_user, p_model, quote_literal(v_lexeme), p_cap
        ) USING v_any;
    END LOOP;
END
$fn$
"""


def _set_fts(expression: str) -> None:
    # Postgres 17 and later rewrite the generated column in place and rebuild every index
    # on it, the per-user partial ones of the ANN path included.
    op.execute(f"ALTER TABLE memories ALTER COLUMN fts SET EXPRESSION AS ({expression})")


def upgrade() -> None:
    op.execute(CREATE_FUNCTION)
    op.execute(f"GRANT EXECUTE ON FUNCTION public.{FUNCTION}(text) TO PUBLIC")
    _set_fts(NEW_FTS)
    op.execute(
        TEXT_CANDIDATES_BODY.format(name=TEXT_CANDIDATES, qtext=f"public.{FUNCTION}(p_qtext)")
    )


def downgrade() -> None:
    op.execute(TEXT_CANDIDATES_BODY.format(name=TEXT_CANDIDATES, qtext="p_qtext"))
    _set_fts(OLD_FTS)
    op.execute(f"DROP FUNCTION IF EXISTS public.{FUNCTION}(text)")
