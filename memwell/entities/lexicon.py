"""The small word lists the local extractor recognises things by.

Common nouns that name something a user owns, likes, does or goes to, with their
entity kind; kinship words with the relation they make; cue words that make a
capitalised name a place, an organisation or an event. Deliberately small: a word
missing here is a missed entity, a wrong word is an entity in every memory.
"""

from __future__ import annotations

from typing import Final

from memwell.entities.names import word_set

PETS: Final = word_set(
    "dog dogs puppy puppies cat cats kitten kittens horse horses pony rabbit rabbits bunny "
    "hamster guinea parrot bird birds fish turtle turtles snake lizard gecko pet pets"
)
INSTRUMENTS: Final = word_set(
    "guitar piano violin ukulele drums flute clarinet saxophone cello keyboard harmonica "
    "trumpet banjo harp"
)
ACTIVITIES: Final = word_set(
    "painting pottery swimming camping hiking running yoga reading dancing dance cooking "
    "baking surfing skiing snowboarding photography gardening knitting writing singing "
    "climbing cycling biking fishing gaming chess basketball football soccer tennis golf "
    "volleyball baseball skateboarding meditation journaling drawing sculpting woodworking "
    "kayaking sailing karate boxing poetry calligraphy volunteering programming coding "
    "hockey art music gymnastics pilates crochet sewing traveling travelling travel "
    "boardgames puzzles crafts comics anime sketching"
)
THINGS: Final = word_set(
    "car house book books novel bike bicycle camera laptop phone necklace painting paintings "
    "sculpture bowl vase garden album song songs recipe recipes blog podcast movie game "
    "tattoo shoes sneakers"
)
EVENTS: Final = word_set(
    "trip concert race marathon festival parade conference wedding party workshop exhibit "
    "exhibition show tournament competition meetup ceremony graduation hike vacation retreat "
    "fundraiser recital gig performance match camp class audition interview"
)
ORGS: Final = word_set("group club team startup shelter church school band")

#: multi-word common nouns, kept whole (their own kind)
COMPOUNDS: Final = {
    "support group": "organization",
    "camping trip": "event",
    "board game": "thing",
    "board games": "thing",
    "road trip": "event",
    "book club": "organization",
    "video games": "thing",
    "video game": "thing",
    "rock climbing": "thing",
    "horseback riding": "thing",
    "martial arts": "thing",
    "pride parade": "event",
    "charity run": "event",
    "charity race": "event",
    "art show": "event",
    "dinosaur exhibit": "event",
    "birthday party": "event",
    "pottery class": "event",
    "dance class": "event",
    "yoga class": "event",
    "music festival": "event",
    "book fair": "event",
}


#: words that make a compound with a following group or event word ("travel club")
MODIFIERS: Final = word_set(
    "travel book art music support charity birthday road camping dance yoga pottery "
    "benefit family school film movie comedy photo photography cooking baking writing "
    "poetry hiking running cycling chess gaming tennis soccer basketball football "
    "volleyball baseball golf hockey swimming climbing"
)


def compound_kind(word: str, following: str) -> str | None:
    """The kind of a two-word common noun ("hiking club", "camping trip"), or None."""
    phrase = f"{word} {following}"
    if phrase in COMPOUNDS:
        return COMPOUNDS[phrase]
    if word in MODIFIERS or word in ACTIVITIES:
        head = following[:-1] if following.endswith("s") else following
        if head in ORGS:
            return "organization"
        if head in EVENTS or head == "game":
            return "event"
    return None


def noun_kind(word: str) -> str | None:
    """The entity kind of a lowercase common noun we recognise, or None."""
    if word in PETS or word in INSTRUMENTS or word in ACTIVITIES or word in THINGS:
        return "thing"
    if word in EVENTS:
        return "event"
    if word in ORGS:
        return "organization"
    return None


#: kinship word -> relation from the owner to the relative
KINSHIP: Final = {
    **dict.fromkeys(("sister", "brother", "sibling", "siblings", "sisters", "brothers"), "sibling"),
    **dict.fromkeys(
        ("mom", "mother", "dad", "father", "parents", "mum", "mommy", "daddy"), "parent"
    ),
    **dict.fromkeys(
        ("kid", "kids", "son", "daughter", "child", "children", "sons", "daughters", "baby"),
        "child",
    ),
    **dict.fromkeys(
        ("husband", "wife", "partner", "boyfriend", "girlfriend", "fiance", "fiancee", "spouse"),
        "partner",
    ),
    **dict.fromkeys(("friend", "friends", "buddy", "bestie", "bff", "mentor"), "friend_of"),
    **dict.fromkeys(
        (
            "grandma",
            "grandpa",
            "grandmother",
            "grandfather",
            "aunt",
            "uncle",
            "cousin",
            "niece",
            "nephew",
            "family",
        ),
        "relative",
    ),
}
KIN_MODIFIERS: Final = word_set("little big older younger best old new dear late twin two three")

ORG_CUES: Final = word_set(
    "university college school inc corp company club group center centre foundation "
    "association church hospital bank team studio cafe café restaurant shelter society "
    "institute academy league network project agency store shop bakery gym band "
    "organization organisation charity lab labs"
)
EVENT_CUES: Final = word_set(
    "festival parade marathon conference concert fair expo pride olympics cup championship "
    "tournament summit con week day race tour christmas thanksgiving halloween easter "
    "hanukkah diwali"
)
PLACE_CUES: Final = word_set(
    "city town park lake river mountain mountains beach street avenue county state island "
    "valley canyon falls bay hills forest museum"
)
#: well-known places, so that "in Paris" and "Paris was lovely" agree
PLACES: Final = word_set("""
    paris london berlin lisbon rome madrid barcelona tokyo kyoto beijing shanghai seoul
    sydney melbourne toronto vancouver montreal boston chicago seattle portland denver
    austin dallas houston miami atlanta phoenix vegas orleans york brooklyn california
    texas florida oregon washington colorado arizona nevada hawaii alaska canada mexico
    france germany spain portugal italy japan china korea india brazil argentina peru
    chile australia england scotland ireland wales sweden norway denmark finland iceland
    greece turkey egypt morocco kenya thailand vietnam indonesia philippines netherlands
    amsterdam belgium switzerland austria poland prague vienna dublin edinburgh europe
    asia africa america sweden michigan ohio georgia virginia carolina tennessee utah
    """)
#: capitalised words that are never names (sentence openers, months, days, pronouns)
NOT_NAMES: Final = word_set("""
    i i'm i've i'd i'll the a an and but or so yes no yeah yep yup nope oh ah wow hey hi
    hello thanks thank cheers bye ok okay sure well hmm haha lol omg aw aww awesome cool
    great nice good sounds sound congrats congratulations totally definitely absolutely
    really honestly actually anyway btw by for from in on at to of with what when where who
    why how which whose is are was were do does did have has had can could would should
    will it it's its this that these those there here they them their he she him her his
    you your we our us my me if then also just not never always maybe perhaps sometimes
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun
    let let's lets gonna wanna gotta being doing having getting going making taking
    looking thinking feeling glad happy sorry love lovely amazing beautiful exactly
    absolutely agreed true right plus after before since while because although though
    as all any each every both many much more most some such other another one two three
    keep take make see look check go get try tell give hope bet guess mind
    dear mr mrs ms dr st lgbtq lgbt tv dm ai covid
    woah whoa yay ugh oops bummer dang gosh nah yikes hooray geez ahh ooh phew damn
    everyone everybody someone somebody anyone anybody nobody none something everything
    nothing anything now then today tonight tomorrow yesterday ouch got alright overall
    even tues thurs
    """)


def _forms(word: str) -> tuple[str, ...]:
    plural = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return (word, plural, word + "es")


#: every word `extract` may act on, in its plural forms too: other words are skipped
VOCABULARY: Final = frozenset(
    form
    for word in (
        PETS | INSTRUMENTS | ACTIVITIES | THINGS | EVENTS | ORGS | MODIFIERS
        | frozenset(KINSHIP) | frozenset(c.split(" ")[0] for c in COMPOUNDS)
    )
    for form in _forms(word)
)  # fmt: skip

#: words a question names a whole class of things by -> the class's members
CLASS_MEMBERS: Final = {
    **dict.fromkeys(
        ("activity", "activities", "hobby", "hobbies", "sport", "sports", "pastime", "pastimes"),
        ACTIVITIES,
    ),
    **dict.fromkeys(("pet", "pets", "animal", "animals"), PETS),
    **dict.fromkeys(("instrument", "instruments"), INSTRUMENTS),
    **dict.fromkeys(("event", "events"), EVENTS),
}
