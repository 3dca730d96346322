"""Entities and relations as LLM mode's extraction call returns them, beside each memory.

The analysis prompt (memwell/pipeline/llm_analysis.py) asks for them in the same model
call as the memories, not in a call of their own. The answer is checked here and made
an `Extraction` with keys normalised as the local extractor's are
(memwell/entities/names.py). A relation's ends that the model did not list as
entities are added as mentions; a relation with neither an object nor a value is
dropped. Whether a relation is single-valued is decided here, by its name (the slots
of memwell/pipeline/slots.py), not by the model.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, get_args

from pydantic import BaseModel, Field

from memwell.entities.extract import Extraction, Mention, RelationFact
from memwell.entities.names import normalize
from memwell.llm.output_rules import TEXT_RULE, one_of

SINGLE_VALUED: Final = frozenset({"lives_in", "works_at", "job", "name", "status", "age", "drives"})
_RELATION_NAME: Final = re.compile(r"[^a-z0-9_]+")

EntityKind = Literal["person", "place", "organization", "thing", "event", "other"]


ENTITY_KINDS: Final[tuple[str, ...]] = get_args(EntityKind)
#: A name, as the doors' rule takes text (memwell/llm/output_rules.py): one that breaks
#: it drops its entity or relation, never the memory.
Name = Annotated[str, Field(min_length=1, max_length=200), TEXT_RULE]


class EntityOut(BaseModel):
    name: Name
    kind: Annotated[EntityKind, one_of(ENTITY_KINDS, "other")] = "other"


class RelationOut(BaseModel):
    subject: Name
    relation: Annotated[str, Field(min_length=1, max_length=64), TEXT_RULE]
    object: Name | None = None
    value: Name | None = None


def relation_name(raw: str) -> str:
    """ "Lives in" -> "lives_in"; favourite -> favorite."""
    name = _RELATION_NAME.sub("_", raw.strip().lower()).strip("_")
    return name.replace("favourite", "favorite")[:64]


def single_valued(relation: str) -> bool:
    return relation in SINGLE_VALUED or relation.startswith("favorite_")


def to_extraction(entities: list[EntityOut], relations: list[RelationOut]) -> Extraction:
    """The model's entities and relations as an Extraction (see the module docstring)."""
    mentions: dict[str, Mention] = {}
    for e in entities:
        key = normalize(e.name)
        if key and key not in mentions:
            mentions[key] = Mention(key, e.name.strip(), e.kind)
    facts: dict[tuple[str, str, str | None, str | None], RelationFact] = {}
    for r in relations:
        subject, relation = normalize(r.subject), relation_name(r.relation)
        obj = normalize(r.object) if r.object else None
        value = r.value.strip() if r.value and not obj else None
        if not subject or not relation or not (obj or value):
            continue
        ends: list[tuple[str | None, str | None, str]] = [
            (subject, r.subject, "person"),
            (obj, r.object, "other"),
        ]
        for end_key, end_name, kind in ends:
            if end_key and end_key not in mentions:
                mentions[end_key] = Mention(end_key, (end_name or end_key).strip(), kind)
        fact = RelationFact(subject, relation, obj, value, single_valued(relation))
        facts.setdefault((subject, relation, obj, value), fact)
    return Extraction(mentions=tuple(mentions.values()), relations=tuple(facts.values()))
