"""The text of the one retrieval statement, composed from the request's filters.

Why composed rather than one fixed string with `(:x IS NULL OR ...)` guards: each
absent filter simply disappears, so the planner sees the plain per-user btree
predicate and never a generic OR it cannot index. Every value is still a bound
parameter; only fixed fragments and integers (the ANN index's dimension) are
formatted into the text.

Shape (one statement, no re-ranking in Python):

    q     the query vector, the query's words (each a tsquery) and their OR
    cand  candidates with their raw parts: cosine similarity, recency, and for a text
          match its words
          - exact: every visible row of the user (the btree on tenant, user_id)
          - ann:   the user's partial HNSW index (top `ann_k`) UNION the user's best
                   full-text matches (the user's partial GIN index, capped per query
                   term), then the same visibility checks
    hit, bm, idf, matched
          the text score's parts, BM25 over the candidates (_TEXT_MATCHES)
    s, sr the candidates with a text or entity term: their text score, normalised to
          the best one, and their entity_match
    top   the fused relevance, then the weighted score: the top k of `sr` and the top
          k of the other candidates (relevance from similarity alone), then the top k
          of both. Reciprocal-rank fusion needs every candidate's rank positions, so
          there every candidate goes through `c` and `r` (window functions) instead.

When the query names entities, CTEs before `q` (memwell/retrieval/entity_sql.py) find
the memories linked to them or to their neighbours, and `q` leaves the names of common
entities out of its tsquery: the ANN path adds the linked memories to its candidates,
and `s` (or `r`) joins their `entity_match`, which passes the floor like a full-text
match and is added to the relevance as `:ent_weight * entity_match`. A query that names
none gets the statement without any of this.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memwell.db.driver import pyformat
from memwell.retrieval.entity_sql import ANN_LINKED, COMMON_NAMES_LEFT_OUT, entity_ctes

Fusion = Literal["rrf", "score", "vector"]

# Rows visible "now": tombstones, superseded versions and expired rows never return.
_CURRENT = """
      AND m.deleted_at IS NULL
      AND m.superseded_by IS NULL"""

# Rows visible at a past instant: existed then, not yet deleted then, and not yet
# replaced then (a successor created later does not hide the version valid at as_of).
_AS_OF = """
      AND (m.deleted_at IS NULL OR m.deleted_at > CAST(:now AS timestamptz))
      AND (m.superseded_by IS NULL OR NOT EXISTS (
            SELECT 1 FROM memories s
            WHERE s.id = m.superseded_by
              AND coalesce(s.valid_from, s.created_at) <= CAST(:now AS timestamptz)))"""

_ALWAYS = """
      m.tenant = :tenant
      AND m.user_id = :user_id
      AND m.embedding_model = :model
      AND m.embedding IS NOT NULL
      AND m.created_at <= CAST(:now AS timestamptz)
      AND (m.valid_from IS NULL OR m.valid_from <= CAST(:now AS timestamptz))
      AND (m.valid_to IS NULL OR m.valid_to > CAST(:now AS timestamptz))
      AND (m.expires_at IS NULL OR m.expires_at > CAST(:now AS timestamptz))"""

_FILTERS = {
    "kinds": "\n      AND m.kind = ANY(CAST(:kinds AS text[]))",
    "metadata": "\n      AND m.metadata @> CAST(:metadata AS jsonb)",
    "created_after": "\n      AND m.created_at >= CAST(:created_after AS timestamptz)",
    "created_before": "\n      AND m.created_at < CAST(:created_before AS timestamptz)",
    "agent_id": "\n      AND m.agent_id = :agent_id",
    "session_id": "\n      AND m.session_id = :session_id",
    "exclude_ids": "\n      AND m.id <> ALL(CAST(:exclude_ids AS uuid[]))",
}

# A lexeme as tsquery input: in quotes, its quotes and backslashes escaped (chr(39) is
# the quote, chr(92) the backslash).
_QUOTED_LEXEME = (
    "chr(39) || replace(replace(l.word, chr(92), chr(92) || chr(92)), chr(39), chr(39) || chr(39))"
    " || chr(39)"
)

# The query's words as lexemes, each its own tsquery (for its rarity, below), and their
# OR: a question rarely contains every word of the memory that answers it, so any
# shared stem makes a text match (plainto_tsquery would AND them).
_Q = """
    q AS MATERIALIZED (
      SELECT CAST(:query AS vector) AS v, coalesce(w.terms, '{{}}') AS terms,
             CAST(array_to_string(w.quoted, ' | ') AS tsquery) AS tsq
      FROM (SELECT array_agg(CAST(x.quoted AS tsquery) ORDER BY x.quoted) AS terms,
                   array_agg(x.quoted ORDER BY x.quoted) AS quoted
            FROM (SELECT {quoted} AS quoted
                  FROM unnest(tsvector_to_array(to_tsvector(
                    'english', public.memwell_search_text(:qtext)))) l(word)
                  {where}) x) w
    )"""

# BM25's saturation and length normalisation, at the textbook values: a word matched
# weighs its rarity, and a long memory does not win by containing more words.
TEXT_K1 = 1.2
TEXT_B = 0.75

# Only narrow numeric columns travel through the ranking; the text and provenance are
# joined back for the top k alone (wide rows made the window functions 10x slower).
# A text match keeps its words (`fts`, NULL for the others) for the per-word scoring;
# `dl` is a memory's length in distinct words.
_PARTS = """
      SELECT m.id, m.importance,
             1 - (m.embedding <=> q.v) AS similarity,
             CASE WHEN q.tsq IS NOT NULL AND m.fts @@ q.tsq THEN m.fts END AS fts,
             length(m.fts) AS dl,
             greatest(
               exp(greatest(-50.0::float8, -0.6931471805599453::float8 * date_part('epoch',
                   CAST(:now AS timestamptz) - m.created_at) / 3600.0::float8 / :hl_created)),
               CASE WHEN m.last_accessed_at <= CAST(:now AS timestamptz)
                    THEN exp(greatest(-50.0::float8, -0.6931471805599453::float8 * date_part(
                         'epoch', CAST(:now AS timestamptz) - m.last_accessed_at)
                         / 3600.0::float8 / :hl_access))
                    ELSE 0 END
             ) AS recency
      FROM {source} CROSS JOIN q"""

# The ANN path's candidates: the user's HNSW neighbours plus the best full-text matches,
# materialized first so the scoring below reads only these rows by primary key (as a
# filter on the user's rows, the planner scanned all of them and probed the list).
# Full-text matches are gathered per query term, at most :term_cap rows each, before
# they are ranked: ranking means reading every match from the heap, and for a huge user
# one common word matches thousands of rows (10,000 of 100,000: 17 ms of reads, against
# 4 ms capped). A term that common says little about which memory is meant, while every
# match of a rare term is still found. The lookup runs in `memwell_text_candidates`
# (alembic 0009): under row-level security `@@` may not use an index, so as the
# service's role it read every row of the user. The rows written since the index was
# built and not folded into it yet (memwell/retrieval/ann.py) come from a small exact
# scan beside it.
_ANN_IDS = """
    ids AS MATERIALIZED (
      (SELECT a.id FROM memories a
       WHERE a.tenant = :tenant AND a.user_id = :user_id AND a.embedding_model = :model
         AND NOT a.ann_deferred
       ORDER BY (a.embedding::vector({dims})) <=> CAST(:query AS vector({dims}))
       LIMIT :ann_k)
      UNION
      (SELECT a.id FROM memories a
       WHERE a.tenant = :tenant AND a.user_id = :user_id AND a.embedding_model = :model
         AND a.ann_deferred
       ORDER BY a.embedding <=> CAST(:query AS vector)
       LIMIT :ann_k)
      UNION
      (SELECT t.id
       FROM memwell_text_candidates(
         CAST(:tenant AS text), CAST(:user_id AS text), CAST(:model AS text),
         CAST(:qtext AS text), CAST(:term_cap AS integer)) t
       GROUP BY t.id
       ORDER BY max(t.rank) DESC, max(t.created_at) DESC
       LIMIT :ann_k){linked}
    ),"""

# The text score is BM25 over the candidates: each query word matched adds its rarity
# among them, ln(1 + (N - df + 0.5) / (df + 0.5)) (a speaker's name, in every other
# memory, adds little; a rare name or noun a lot), scaled down for long memories.
# ts_rank, without any rarity, let a memory match on "things" or "really" outrank the
# one naming what was asked about. On the exact path the candidates are all the user's
# visible memories; on the ANN path, the neighbours and text matches gathered.
_TEXT_MATCHES = """
    hit AS MATERIALIZED (
      SELECT cand.id, cand.dl, t.i
      FROM cand CROSS JOIN q CROSS JOIN LATERAL {terms}
      WHERE cand.fts IS NOT NULL AND cand.fts @@ {term}
    ),
    bm AS MATERIALIZED (
      SELECT count(*)::float8 AS n, greatest(avg(cand.dl), 1)::float8 AS avgdl FROM cand
    ),
    idf AS MATERIALIZED (
      SELECT hit.i, ln(1 + (bm.n - count(*) + 0.5) / (count(*) + 0.5)) AS w
      FROM hit CROSS JOIN bm
      GROUP BY hit.i, bm.n
    ),
    matched AS (
      SELECT hit.id, max(hit.dl) AS dl, sum(idf.w) AS w
      FROM hit JOIN idf ON idf.i = hit.i GROUP BY hit.id
    )"""

# The query's words, each with its position, for `hit`. `unnest` is estimated at an
# array's length (about ten rows), where a set-returning function is estimated at a
# thousand: with it the planner hashes the few matched memories for each candidate to
# probe, instead of hashing every candidate. Reciprocal-rank fusion keeps the
# subscripts: its rank positions break ties in the order rows arrive, which the plan
# decides, so a new plan would reorder its tied memories.
_WORDS = {"terms": "unnest(q.terms) WITH ORDINALITY AS t(term, i)", "term": "t.term"}
_WORDS_RRF = {"terms": "generate_subscripts(q.terms, 1) AS t(i)", "term": "q.terms[t.i]"}

# A memory's BM25 text score from its matched words' rarities (`matched.w`) and its
# length in words (`dl`, of `cand` or of `matched`).
_TEXT_RAW_OF = (
    f"coalesce(matched.w * {TEXT_K1 + 1!r}"
    f" / (1 + {TEXT_K1!r} * (1 - {TEXT_B!r} + {TEXT_B!r} * {{dl}}.dl / bm.avgdl)), 0)"
)
_TEXT_RAW = _TEXT_RAW_OF.format(dl="cand")

_TEXT = f"""{_TEXT_MATCHES.format(**_WORDS_RRF)},
    c AS MATERIALIZED (
      SELECT cand.id, cand.importance, cand.similarity, cand.recency,
             {_TEXT_RAW} AS text_raw
      FROM cand CROSS JOIN bm LEFT JOIN matched ON matched.id = cand.id
    )"""

# Rank positions cost two sorts: only reciprocal-rank fusion needs them.
_POSITIONS = """
             row_number() OVER (ORDER BY c.similarity DESC) AS vec_pos,
             row_number() OVER (ORDER BY c.text_raw DESC) AS text_pos,"""

_RANKED = """
    r AS (
      SELECT c.*,{positions}
             coalesce(c.text_raw / nullif(max(c.text_raw) OVER (), 0), 0) AS text_rank,
             0::float8 AS entity_match
      FROM c
      WHERE c.similarity >= :floor OR c.text_raw > 0
    )"""

# A memory linked to the query's entities passes the floor as a full-text match does:
# it was asked about by name, whatever its wording.
_RANKED_ENTITIES = """
    r AS (
      SELECT c.*,{positions}
             coalesce(c.text_raw / nullif(max(c.text_raw) OVER (), 0), 0) AS text_rank,
             coalesce(em.entity_match, 0) AS entity_match
      FROM c LEFT JOIN em ON em.id = c.id
      WHERE c.similarity >= :floor OR c.text_raw > 0 OR em.entity_match > 0
    )"""

# Every fusion yields a relevance in 0..1, so the weights mean the same thing in each
# (the entity term, when present, adds at most :ent_weight on top).
# Cosine enters it through the model's calibration (:sim_scale, identity for the
# reference model): e5-small's unrelated pairs score 0.8, MiniLM's 0.3, so its raw
# cosines would crowd into a band where importance and recency outweigh them.
_RELEVANCE: dict[Fusion, str] = {
    "vector": "(1 - :sim_scale * (1 - {t}.similarity))",
    # Reciprocal rank: only positions count, normalised by the best possible value.
    "rrf": (
        "((1 - :text_weight) / (:rrf_k + {t}.vec_pos)"
        " + CASE WHEN {t}.text_raw > 0 THEN :text_weight / (:rrf_k + {t}.text_pos) ELSE 0 END)"
        " * (:rrf_k + 1)"
    ),
    # Normalised scores: cosine blended with the text rank scaled to the best match.
    "score": (
        "(1 - :text_weight) * greatest(1 - :sim_scale * (1 - {t}.similarity), 0)"
        " + :text_weight * {t}.text_rank"
    ),
}

# The score and vector fusions need no rank positions, so the ranking is one pass over
# the candidates: the text matches' scores (`mt`, from the few matched memories alone,
# and their best, `mx`) and the entity matches (`em`) are small hash tables each
# candidate probes, and a top-k heap sort keeps the best. Materializing the candidates
# with a text or entity term apart (a hash of every candidate to join them to) and
# ranking the others in a second scan cost more than the probes: the statement's time
# is in reading the user's rows once and in every extra pass over them.
_ONE_PASS = """
    mt AS MATERIALIZED (
      SELECT matched.id, {text_raw} AS text_raw FROM matched CROSS JOIN bm
    ),
    mx AS MATERIALIZED (SELECT max(mt.text_raw) AS best FROM mt),
    r AS (
      SELECT cand.id, cand.importance, cand.similarity, cand.recency,
             coalesce(mt.text_raw / nullif(mx.best, 0), 0) AS text_rank,
             {entity_match} AS entity_match
      FROM cand CROSS JOIN mx LEFT JOIN mt ON mt.id = cand.id{joins}
      WHERE cand.similarity >= :floor OR mt.id IS NOT NULL{passes}
    )"""


@dataclass(frozen=True)
class StatementShape:
    """What decides the statement's text (not its values)."""

    fusion: Fusion
    historical: bool
    filters: frozenset[str]
    ann_dims: int | None = None
    #: the query names entities (the entity CTEs are in the statement)
    entities: bool = False


@lru_cache(maxsize=256)
def build_statement(shape: StatementShape) -> str:
    """The SQL text for one shape of request, with psycopg's named placeholders."""
    return pyformat(_statement(shape))


def _statement(shape: StatementShape) -> str:
    where = _ALWAYS + (_AS_OF if shape.historical else _CURRENT)
    where += "".join(_FILTERS[name] for name in sorted(shape.filters))
    ann_path = shape.ann_dims is not None
    if shape.entities:
        # The entities come first: the text query leaves out common ones' names, and
        # the ANN path takes the linked memories as candidates.
        head = entity_ctes(historical=shape.historical, ann=ann_path) + _Q.format(
            quoted=_QUOTED_LEXEME, where=COMMON_NAMES_LEFT_OUT
        )
    else:
        head = _Q.format(quoted=_QUOTED_LEXEME, where="")
    if ann_path:
        linked = ANN_LINKED if shape.entities else ""
        ann = _ANN_IDS.format(dims=int(shape.ann_dims or 0), linked=linked)
        parts = _PARTS.format(source="ids JOIN memories m ON m.id = ids.id")
    else:
        ann, parts = "", _PARTS.format(source="memories m")
    # cand is MATERIALIZED so the planner cannot pull it up and compute the cosine twice
    # (once for the floor, once for the output).
    ranking = _rrf_ranked(shape) if shape.fusion == "rrf" else _split_ranked(shape)
    return f"""
    WITH {head},{ann}
    cand AS MATERIALIZED ({parts}
      WHERE {where}
    ),{ranking}
    SELECT top.*, m.kind, m.content, m.created_at, m.session_id, m.agent_id,
           m.source_turn_ids, m.metadata
    FROM top JOIN memories m ON m.id = top.id
    ORDER BY top.score DESC, top.id
    """


def _score(relevance: str, alias: str) -> str:
    return f":w_rel * ({relevance}) + :w_imp * {alias}.importance + :w_rec * {alias}.recency"


def _fused(shape: StatementShape, alias: str) -> str:
    """The fusion's relevance of the rows under `alias`, plus the entity term if any."""
    relevance = _RELEVANCE[shape.fusion].format(t=alias)
    if shape.entities:
        return f"({relevance}) + :ent_weight * {alias}.entity_match"
    return relevance


def _rrf_ranked(shape: StatementShape) -> str:
    """Every candidate through the text and entity joins, with its rank positions."""
    relevance = _fused(shape, "r")
    ranked = (_RANKED_ENTITIES if shape.entities else _RANKED).format(positions=_POSITIONS)
    return f"""{_TEXT},{ranked},
    top AS (
      SELECT r.id, r.importance, r.similarity, r.text_rank, r.recency, r.entity_match,
             {relevance} AS relevance, {_score(relevance, "r")} AS score
      FROM r
      ORDER BY score DESC, r.id
      LIMIT :k
    )"""


def _split_ranked(shape: StatementShape) -> str:
    """Every candidate scored in one pass, text and entity terms by lookup (_ONE_PASS)."""
    if shape.entities:
        ranked = _ONE_PASS.format(
            text_raw=_TEXT_RAW_OF.format(dl="matched"),
            entity_match="coalesce(em.entity_match, 0)",
            joins=" LEFT JOIN em ON em.id = cand.id",
            passes=" OR em.entity_match > 0",
        )
    else:
        ranked = _ONE_PASS.format(
            text_raw=_TEXT_RAW_OF.format(dl="matched"), entity_match="0::float8", joins="",
            passes="",
        )  # fmt: skip
    relevance = _fused(shape, "r")
    return f"""{_TEXT_MATCHES.format(**_WORDS)},{ranked},
    top AS (
      SELECT r.id, r.importance, r.similarity, r.text_rank, r.recency, r.entity_match,
             {relevance} AS relevance, {_score(relevance, "r")} AS score
      FROM r
      ORDER BY score DESC, r.id
      LIMIT :k
    )"""


FILTER_NAMES = frozenset(_FILTERS)
