"""The entity term of the retrieval statement: the fragments `sql.py` adds when the
query names at least one entity (memwell/entities/query.py `query_keys`).

    qk  the query's keys found among this user's aliases (an entity's own key is one of
        its aliases, memwell/entities/names.py)
    n   how many memories the user has, the collection rarity is measured in; only
        counted when a key was found
        - exact: from the (tenant, user_id, created_at) btree alone
        - ann:   the row count recorded when the user's index was built (counting a
                 huge user's rows per query would cost more than the search)
    qw  each found entity with its rarity (below)
    qe  those weighing at least `ENTITY_MIN_WEIGHT`: an entity named in most
        memories goes no further, so its many links and relations are never read
    ne  qe and their one-hop neighbours through relations that hold at :now, in
        either direction; a neighbour weighs `:ent_hop` x its query entity's weight
        x its own, so only a rare entity's rare neighbours count
    em  the memories linked to any of them, with `entity_match` = the sum of their
        weights, at most 1 (a memory naming two of the query's entities says more)
    q   (in sql.py) the query vector and its words, without the words that name an
        entity under the minimum weight (COMMON_NAMES_LEFT_OUT)

Rarity is BM25's idf over the user's memories, scaled to 0..1 by its largest value
(an entity named in one memory):

    w(e) = ln((N - df + 0.5) / (df + 0.5)) / ln((N - 0.5) / 1.5),  clipped to 0..1

with df = the entity's mention_count. It is 0 for an entity in half of the memories
or more: the user's own name, or each speaker of a two-person conversation, appears
in nearly every memory and says nothing about which one is meant.

Every table here is under the tenant's row-level security, and every lookup also
names the tenant and user, so one user's entities never reach another's search.
"""

from __future__ import annotations

from typing import Final

#: Entities (and neighbours) weighing less are left out: they cannot change a ranking,
#: and a common entity's links are the expensive ones to read.
ENTITY_MIN_WEIGHT: Final = 0.05


_MIN_W: Final = f"{ENTITY_MIN_WEIGHT!r}::float8"


def _idf(df: str) -> str:
    """The normalised rarity of an entity with `df` mentions among `n.n` memories."""
    clipped = f"least({df}, n.n)"
    return (
        f"least(1.0::float8, greatest(0.0::float8, ln((n.n - {clipped} + 0.5) / ({clipped} + 0.5))"
        " / ln(greatest((n.n - 0.5) / 1.5, 2.0::float8))))"
    )


# Counted from the (tenant, user_id, created_at) btree alone, and only when one of the
# query's names is an entity of the user.
N_EXACT = """
    n AS MATERIALIZED (
      SELECT greatest(count(*), 1)::float8 AS n FROM memories u
      WHERE u.tenant = :tenant AND u.user_id = :user_id AND EXISTS (SELECT 1 FROM qk)
    ),"""

N_ANN = """
    n AS MATERIALIZED (
      SELECT greatest(coalesce((
        SELECT a.rows_at_build FROM memory_ann_indexes a
        WHERE a.tenant = :tenant AND a.user_id = :user_id AND a.embedding_model = :model
      ), (
        SELECT count(*) FROM memories u WHERE u.tenant = :tenant AND u.user_id = :user_id
      )), 1)::float8 AS n
      WHERE EXISTS (SELECT 1 FROM qk)
    ),"""

# A relation edge that holds at :now: current (not superseded) in the present shape;
# started and not yet ended at a past instant.
_RELATION_CURRENT = (
    "r.superseded_by IS NULL AND (r.valid_to IS NULL OR r.valid_to > CAST(:now AS timestamptz))"
)
_RELATION_AS_OF = (
    "(r.valid_from IS NULL OR r.valid_from <= CAST(:now AS timestamptz))"
    " AND (r.valid_to IS NULL OR r.valid_to > CAST(:now AS timestamptz))"
)

_KEYS = """
    qk AS MATERIALIZED (
      SELECT e.id, e.mention_count, a.alias AS named
      FROM entity_aliases a JOIN entities e ON e.id = a.entity_id
      WHERE a.tenant = :tenant AND a.user_id = :user_id
        AND a.alias = ANY(CAST(:ent_keys AS text[]))
    ),"""

_ENTITIES = """
    qw AS MATERIALIZED (SELECT qk.id, qk.named, {idf_q} AS w FROM qk CROSS JOIN n),
    qe AS (SELECT DISTINCT qw.id, qw.w FROM qw WHERE qw.w >= {min_w}),
    ne AS MATERIALIZED (
      SELECT h.id, max(h.w) AS w FROM (
        SELECT qe.id, qe.w FROM qe
        UNION ALL
        SELECT o.id, :ent_hop * qe.w * {idf_nb}
        FROM entity_relations r
        JOIN qe ON qe.id IN (r.subject_id, r.object_id)
        JOIN entities o
          ON o.id = CASE WHEN r.subject_id = qe.id THEN r.object_id ELSE r.subject_id END
        CROSS JOIN n
        WHERE r.tenant = :tenant AND r.user_id = :user_id AND r.object_id IS NOT NULL
          AND (r.subject_id = ANY(ARRAY(SELECT qe.id FROM qe))
               OR r.object_id = ANY(ARRAY(SELECT qe.id FROM qe)))
          AND {current}
      ) h
      WHERE h.w >= {min_w}
      GROUP BY h.id
    ),
    em AS MATERIALIZED (
      SELECT l.memory_id AS id, least(sum(ne.w), 1.0::float8) AS entity_match
      FROM ne JOIN memory_entities l ON l.entity_id = ne.id
      WHERE l.tenant = :tenant AND l.user_id = :user_id
      GROUP BY l.memory_id
    ),"""

#: The ANN path's share of the candidates: the best-linked memories, capped.
ANN_LINKED = """
      UNION
      (SELECT em.id FROM em ORDER BY em.entity_match DESC, em.id LIMIT :ent_cap)"""


# The query's words that name an entity too common to say anything are left out of its
# text query (the speakers of a conversation matched every memory's text, and short
# memories like "That's great, Melanie!" then ranked first): a filter on the words `l`.
COMMON_NAMES_LEFT_OUT = f"""
                  WHERE l.word <> ALL(ARRAY(
                    SELECT unnest(tsvector_to_array(
                      to_tsvector('english', public.memwell_search_text(qw.named))))
                    FROM qw WHERE qw.w < {_MIN_W}))"""


def entity_ctes(*, historical: bool, ann: bool) -> str:
    """n, qk, qw, qe, ne and em, in the order they need each other."""
    return (_KEYS + (N_ANN if ann else N_EXACT) + _ENTITIES).format(
        idf_q=_idf("qk.mention_count"),
        idf_nb=_idf("o.mention_count"),
        min_w=_MIN_W,
        current=_RELATION_AS_OF if historical else _RELATION_CURRENT,
    )
