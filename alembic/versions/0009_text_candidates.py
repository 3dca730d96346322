"""Full-text candidates of a big user's search, found through their own GIN index.

Under row-level security Postgres may not evaluate a non-leakproof operator before the
policy's check, and the full-text match (`@@`) is not leakproof: as `memwell_app` the
ANN path's per-term lookup could use no GIN index at all and read every row of the
user (measured, 100,000-row user: 216 ms a search, against 18 ms as the table owner).
Marking `@@` leakproof needs a superuser, so this function runs the lookup as the
table's owner instead (SECURITY DEFINER) and keeps the isolation itself: it answers
only for the tenant of the session's `memwell.tenant` when one is set, and returns ids
and ranks, which the calling statement joins back under the policy. The statement is
built with literals (EXECUTE format) so the planner can match the user's partial index,
whose predicate spells out tenant, user and model.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels = None
depends_on = None

FUNCTION = "memwell_text_candidates"

CREATE = rf"""
CREATE FUNCTION {FUNCTION}(
    p_tenant text, p_user text, p_model text, p_qtext text, p_cap integer
) RETURNS TABLE (id uuid, rank real, created_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $fn$
DECLARE
    v_session_tenant text := current_setting('memwell.tenant', true);
    v_plain tsquery := plainto_tsquery('english', p_qtext);
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
        SELECT DISTINCT term FROM unnest(tsvector_to_array(to_tsvector('english', p_qtext))) AS term
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


def upgrade() -> None:
    op.execute(CREATE)
    op.execute(f"REVOKE ALL ON FUNCTION {FUNCTION}(text, text, text, text, integer) FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {FUNCTION}(text, text, text, text, integer) TO memwell_app")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}(text, text, text, text, integer)")
