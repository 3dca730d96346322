"""Make a sentence read on its own: the speaker named, relative dates made absolute.

"I went there yesterday" said by Caroline on 8 May 2023 becomes "Caroline went there
on 7 May 2023". Rules, all surface-level and deliberately conservative:

- first person singular becomes the speaker: I -> Caroline, I'm -> Caroline is,
  my/mine -> Caroline's, me/myself -> Caroline; the verb right after "I" agrees in
  the third person when it is a plain present-tense verb (love -> loves, have -> has);
- first person plural keeps its meaning and gains the speaker: we -> Caroline and
  others, our -> Caroline's;
- relative dates are resolved against the turn's event time: yesterday, today,
  tonight, tomorrow, last/next week/weekend/month/year, last <weekday>, N days or
  weeks or months or years ago. Anything subtler is left as said.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NO_AGREE: Final = frozenset(
    [
        "quit",
        "cut",
        "hit",
        "put",
        "let",
        "read",
        "am",
        "was",
        "were",
        "had",
        "did",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "can",
        "cannot",
        "can't",
        "couldn't",
        "wouldn't",
        "shouldn't",
        "won't",
        "don't",
        "didn't",
        "wasn't",
        "haven't",
        "hadn't",
        "just",
        "also",
        "never",
        "always",
        "still",
        "really",
        "actually",
        "already",
        "usually",
        "often",
        "sometimes",
        "recently",
        "finally",
        "even",
        "only",
        "totally",
        "definitely",
        "absolutely",
        "truly",
        "ever",
        "again",
        "too",
        "went",
        "got",
        "saw",
        "made",
        "took",
        "came",
        "found",
        "thought",
        "felt",
        "knew",
        "told",
        "said",
        "gave",
        "left",
        "bought",
        "brought",
        "began",
        "ran",
        "wrote",
        "read",
        "heard",
        "met",
        "kept",
        "lost",
        "paid",
        "put",
        "sent",
        "set",
        "spent",
        "stood",
        "taught",
        "won",
        "became",
        "built",
        "caught",
        "chose",
        "drew",
        "drove",
        "ate",
        "fell",
        "fought",
        "flew",
        "forgot",
        "grew",
        "hung",
        "held",
        "hurt",
        "led",
        "lent",
        "let",
        "lit",
        "meant",
        "rode",
        "rang",
        "rose",
        "sang",
        "sat",
        "slept",
        "spoke",
        "stuck",
        "swam",
        "threw",
        "understood",
        "woke",
        "wore",
    ]
)
_IRREGULAR_3RD: Final = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}

_CONTRACTIONS: Final = [
    (re.compile(r"\b[Ii]['’]m\b"), "{s} is"),
    (re.compile(r"\b[Ii]['’]ve\b"), "{s} has"),
    (re.compile(r"\b[Ii]['’]d\b"), "{s} would"),
    (re.compile(r"\b[Ii]['’]ll\b"), "{s} will"),
    (re.compile(r"\b[Ii] am\b"), "{s} is"),
]
# Chat often writes the pronoun in lower case; "i" alone is that pronoun.
_I_VERB: Final = re.compile(
    r"\b[Ii] ((?:\w+ly|just|also|never|always|still|often|sometimes|even|only) )?(\w+)"
)
_I_ALONE: Final = re.compile(r"\b[Ii]\b")
_MY: Final = re.compile(r"\b(?:[Mm]y|[Mm]ine)\b")
_ME: Final = re.compile(r"\b(?:[Mm]e|[Mm]yself)\b")
_WE_CONTRACTIONS: Final = [
    (re.compile(r"\b[Ww]e['’]re\b"), "{s} and others are"),
    (re.compile(r"\b[Ww]e['’]ve\b"), "{s} and others have"),
    (re.compile(r"\b[Ww]e['’]ll\b"), "{s} and others will"),
]
_WE: Final = re.compile(r"\b[Ww]e\b")
_OUR: Final = re.compile(r"\b[Oo]urs?\b")
_US: Final = re.compile(r"\bus\b")


def third_person(verb: str) -> str:
    """love -> loves, go -> goes, study -> studies; past tense and modals unchanged."""
    low = verb.lower()
    if low in _NO_AGREE or low.endswith(("ed", "ly", "n't")):
        return verb
    if low in _IRREGULAR_3RD:
        return _IRREGULAR_3RD[low]
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def name_speaker(sentence: str, speaker: str) -> str:
    """Replace first-person pronouns with the speaker's name."""
    # A role stands in for a name mid-sentence in lower case: "...ran the user's first".
    if speaker.startswith("The "):
        speaker = "the " + speaker[4:]
    out = sentence
    for pattern, template in _CONTRACTIONS:
        out = pattern.sub(template.format(s=speaker), out)
    out = _I_VERB.sub(lambda m: f"{speaker} {m.group(1) or ''}{third_person(m.group(2))}", out)
    out = _I_ALONE.sub(speaker, out)
    out = _MY.sub(f"{speaker}'s", out)
    out = _ME.sub(speaker, out)
    for pattern, template in _WE_CONTRACTIONS:
        out = pattern.sub(template.format(s=speaker), out)
    out = _WE.sub(f"{speaker} and others", out)
    out = _OUR.sub(f"{speaker}'s", out)
    return _US.sub(f"{speaker} and others", out)


_SENTENCE_START_THE: Final = re.compile(r"(^|[.!?]\s+)the ")


def format_day(d: datetime) -> str:
    return f"{d.day} {d:%B %Y}"


def _month_shift(d: datetime, months: int) -> datetime:
    index = d.year * 12 + d.month - 1 + months
    return d.replace(year=index // 12, month=index % 12 + 1, day=1)


def _ago(when: datetime, n: int, unit: str) -> str:
    unit = unit.lower().rstrip("s")
    if unit == "day":
        return f"on {format_day(when - timedelta(days=n))}"
    if unit == "week":
        return f"in the week of {format_day(when - timedelta(weeks=n))}"
    if unit == "month":
        return f"in {_month_shift(when, -n):%B %Y}"
    return f"in {when.year - n}"


_NUMBER_WORDS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def _last_weekday(when: datetime, name: str) -> str:
    target = _WEEKDAYS.index(name.lower())
    delta = (when.weekday() - target) % 7 or 7
    return f"on {format_day(when - timedelta(days=delta))}"


def _rules(when: datetime) -> list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]]:
    def fixed(text: str) -> Callable[[re.Match[str]], str]:
        return lambda _m: text

    day = timedelta(days=1)
    return [
        (re.compile(r"\byesterday\b", re.I), fixed(f"on {format_day(when - day)}")),
        (re.compile(r"\b(?:today|tonight|this morning|this evening)\b", re.I),
         fixed(f"on {format_day(when)}")),
        (re.compile(r"\btomorrow\b", re.I), fixed(f"on {format_day(when + day)}")),
        (re.compile(r"\blast weekend\b", re.I),
         fixed(f"on the weekend before {format_day(when)}")),
        (re.compile(r"\blast week\b", re.I), fixed(f"in the week before {format_day(when)}")),
        (re.compile(r"\bnext week\b", re.I), fixed(f"in the week after {format_day(when)}")),
        (re.compile(r"\blast month\b", re.I), fixed(f"in {_month_shift(when, -1):%B %Y}")),
        (re.compile(r"\bnext month\b", re.I), fixed(f"in {_month_shift(when, 1):%B %Y}")),
        (re.compile(r"\bthis month\b", re.I), fixed(f"in {when:%B %Y}")),
        (re.compile(r"\blast year\b", re.I), fixed(f"in {when.year - 1}")),
        (re.compile(r"\bnext year\b", re.I), fixed(f"in {when.year + 1}")),
        (re.compile(r"\bthis year\b", re.I), fixed(f"in {when.year}")),
        (re.compile(r"\blast (" + "|".join(_WEEKDAYS) + r")\b", re.I),
         lambda m: _last_weekday(when, m.group(1))),
        (re.compile(r"\b(\d+|a|an|one|two|three|four|five) (days?|weeks?|months?|years?) ago\b",
                    re.I),
         lambda m: _ago(when, _count(m.group(1)), m.group(2))),
    ]  # fmt: skip


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def resolve_dates(sentence: str, when: datetime) -> tuple[str, bool]:
    """Relative date expressions made absolute; True when any was resolved."""
    changed = False
    out = sentence
    for pattern, repl in _rules(when):
        out, n = pattern.subn(repl, out)
        changed = changed or n > 0
    return out, changed


def standalone(sentence: str, *, speaker: str, when: datetime) -> tuple[str, bool]:
    """The sentence with the speaker named and dates resolved; True if a date was."""
    dated, resolved = resolve_dates(sentence, when)
    text = _SENTENCE_START_THE.sub(lambda m: m.group(1) + "The ", name_speaker(dated, speaker))
    return text[:1].upper() + text[1:], resolved
