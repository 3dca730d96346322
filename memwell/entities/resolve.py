"""Which stored entity each name of a batch means, decided in Python before any write.

Given the aliases a user already has (alias -> the key of its entity) and a batch's
mentions, `resolve` returns the canonical key of every name, the aliases to add and
the merges to make (memwell/entities/names.py has the alias rules):

- a name that is an alias already means that alias's entity ("caroline" -> "caroline
  smith" once that is known);
- a person with a multi-word key gets its first name as an alias, unless the first
  name already means someone else. When the first name is an entity of its own (a
  bare "Caroline", stored before her surname was), that entity merges into the
  full name: the same person, met first by first name;
- an (alias, key) pair an extraction revealed ("caroline's sister" is "ana") adds the
  alias; when the alias is an entity of its own, it merges into the key's entity.

A merge's loser is always an entity stored under the alias itself, never one that
merely holds the alias: "caroline" held by "caroline jones" is not taken over by
"caroline smith" (the first stays), so a wrong guess never moves another person's
memories.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memwell.entities.names import first_name


@dataclass
class Resolution:
    """One user's batch, resolved."""

    #: alias or key -> canonical key
    canon: dict[str, str]
    #: canonical key -> kind, display name (for the entities to upsert)
    entities: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: (alias, canonical key) to insert
    new_aliases: dict[str, str] = field(default_factory=dict)
    #: (loser key, winner key), in order
    merges: list[tuple[str, str]] = field(default_factory=list)

    def key(self, name: str) -> str:
        """The canonical key of a name (following merges)."""
        seen: set[str] = set()
        while name in self.canon and self.canon[name] != name and name not in seen:
            seen.add(name)
            name = self.canon[name]
        return name

    def _merge(self, loser: str, winner: str) -> None:
        if loser == winner:
            return
        self.merges.append((loser, winner))
        for alias, target in list(self.canon.items()):
            if target == loser:
                self.canon[alias] = winner
        for alias, target in list(self.new_aliases.items()):
            if target == loser:
                self.new_aliases[alias] = winner
        kind_name = self.entities.pop(loser, None)
        if kind_name is not None and winner not in self.entities:
            self.entities[winner] = kind_name
        self.canon[loser] = winner


def resolve(
    stored: Mapping[str, str],
    stored_kinds: Mapping[str, str],
    mentions: Iterable[tuple[str, str, str]],
    pairs: Iterable[tuple[str, str]],
) -> Resolution:
    """`stored`: alias -> key of the user's existing entities (for the names at hand);
    `stored_kinds`: key -> kind of those entities; `mentions`: (key, name, kind) in
    order; `pairs`: (alias, key) revealed by the batch."""
    res = Resolution(canon=dict(stored))
    for key, name, kind in mentions:
        canonical = res.key(key)
        if canonical not in res.canon:
            res.canon[canonical] = canonical
            if canonical not in stored_kinds:
                res.new_aliases[canonical] = canonical
        known = res.entities.get(canonical)
        if known is None or (known[0] == "other" and kind != "other"):
            res.entities[canonical] = (kind, name)
    for key, (kind, _) in list(res.entities.items()):
        first = first_name(key) if kind == "person" else None
        if first is not None and res.key(key) == key:
            _claim(res, first, key, stored_kinds, person_only=True)
    for alias, key in pairs:
        _claim(res, alias, res.key(key), stored_kinds, person_only=False)
    return res


def _claim(
    res: Resolution, alias: str, key: str, stored_kinds: Mapping[str, str], *, person_only: bool
) -> None:
    """Make `alias` mean `key`, merging an entity stored under the alias itself."""
    holder = res.canon.get(alias)
    if holder is None:
        res.canon[alias] = key
        res.new_aliases[alias] = key
        return
    if holder != alias or holder == key:
        return  # someone else's already: the first stays
    kind = res.entities.get(alias, (stored_kinds.get(alias, "other"), ""))[0]
    if person_only and kind != "person":
        return
    res._merge(alias, key)
