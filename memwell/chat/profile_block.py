"""A user's profile as short sentences for a model's context ("Caroline lives in
Boston", "Caroline's sibling: Ana"), most useful first, each current fact once.

The relation names are the entity extractor's (memwell/entities/extract.py); one this
module does not know reads as "<subject>'s <relation>: <value>", which a model
understands whatever the relation is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Final

from memwell.users.profile import UserProfile

#: Sentences of the relations that read better as a verb than as a possessive.
_VERBS: Final = {
    "lives_in": "{s} lives in {o}",
    "works_at": "{s} works at {o}",
    "job": "{s} works as {o}",
    "drives": "{s} drives {o}",
    "status": "{s} is {o}",
    "name": "{s}'s name is {o}",
    "likes": "{s} likes {o}",
    "owns": "{s} owns {o}",
    "has_pet": "{s} has a pet: {o}",
    "member_of": "{s} is a member of {o}",
    "attended": "{s} attended {o}",
    "went_to": "{s} went to {o}",
    "friend_of": "{s} is a friend of {o}",
}


def fact_sentence(subject: str, relation: str, value: str) -> str:
    """One edge as a sentence: subject, relation and value (or object's name)."""
    if relation in _VERBS:
        return _VERBS[relation].format(s=subject, o=value)
    words = relation.replace("_", " ").strip()
    if relation == "age" and value.isdigit():
        return f"{subject} is {value} years old"
    if relation.startswith("favorite_"):
        return f"{subject}'s favorite {words.removeprefix('favorite ')} is {value}"
    if relation.endswith("_of"):
        return f"{subject} is {words} {value}"
    return f"{subject}'s {words}: {value}"


def _edges(profile: UserProfile) -> Iterator[tuple[uuid.UUID, str, str, str]]:
    for subject in profile.facts:
        for relation, slot in subject.slots.items():
            yield slot.relation_id, subject.name, relation, slot.value
    for entity in profile.entities:
        for edge in entity.relations:
            if edge.direction == "out":
                yield edge.relation_id, entity.name, edge.relation, edge.value
            else:
                yield edge.relation_id, edge.value, edge.relation, entity.name


def profile_sentences(profile: UserProfile) -> list[str]:
    """The slots by entity first (the most mentioned entity first), then the top
    entities' other relations; an edge seen from both of its entities comes once."""
    seen: set[uuid.UUID] = set()
    sentences = []
    for relation_id, subject, relation, value in _edges(profile):
        if relation_id not in seen:
            seen.add(relation_id)
            sentences.append(fact_sentence(subject, relation, value))
    return sentences
