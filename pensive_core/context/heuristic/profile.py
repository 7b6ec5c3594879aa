"""What a text shows about each named entity: whether it is a person, an organisation, a place
or another named thing, a person's gender, and which name is each sentence's subject.

The evidence is read off the words around the mentions (honorifics, "in Porto", "Acme
reported", a speaker's label, "she" opening the next sentence); nothing is looked up. The
pronoun resolver (:mod:`.referents`) decides from it whom a pronoun may mean.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...graph.extract import Mention
from .names import at_sentence_start
from .outline import within_spans

__all__ = ["EntityProfile", "learn_genders", "profile_entities"]

_ORG_WORDS = frozenset(
    """inc inc. corp corp. corporation ltd ltd. llc plc co co. company companies university
    institute institution bank group council committee department ministry agency association
    party church school college hospital museum foundation society club union commission board
    court office authority bureau federation league organisation organization airlines airways
    press times news team fund trust laboratory laboratories labs centre center academy
    service services government administration parliament senate congress army navy police""".split()
)
_PLACE_WORDS = frozenset(
    """river lake mountain mountains mount street road avenue lane square park island islands
    city county province state states kingdom republic bay sea ocean valley desert forest
    north south east west northern southern eastern western new san santa los las saint st fort
    port cape gulf strait district region territory""".split()
)
# head nouns of named things that are neither organisations nor places ("World War II",
# "Oak Leaves", "National Historic Landmark"): capitalised runs that are not anyone's name
_THING_WORDS = frozenset(
    """war wars battle award awards prize medal cross order cup championship championships games
    olympics series show festival conference summit act law treaty agreement accord declaration
    constitution house hall building tower bridge station airport palace castle cathedral
    temple stadium arena theatre theater hotel library seminary landmark monument memorial
    day week age era period empire dynasty revolution movement project programme program plan
    system model index test scale syndrome disease virus protein gene theory effect principle
    method album song film movie novel book magazine journal report edition class leaves
    force forces guard corps division regiment brigade fleet ship line railway highway route
    trail express network channel radio television records studios pictures entertainment
    productions world national international royal federal central global annual general
    grand great old holy historic""".split()
)
# after these a name is a place ("in Porto", "near Oslo"); "from"/"to" only after a verb of motion
_PLACE_PREPS = frozenset(
    "in at near into inside outside across throughout toward towards via around".split()
)
_MOTION = frozenset(
    """moved went go goes going travelled traveled travel flew fly drove drive sailed sail
    returned return came come comes arrived emigrated immigrated relocated back way trip
    journey route road flight train moving headed""".split()
)
# verbs that make a one-word subject a company ("Acme reported"), not a person
_ORG_VERBS = frozenset(
    """reported announced posted acquired launched released shipped listed raised filed
    recalled manufactures manufactured produces produced sells sold employs employed""".split()
)
_HONORIFIC_RE = re.compile(
    r"\b(Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Lady|Lord|Dame|Rev|Capt|Col|Gen|Sgt)\.?\s+$"
)
_MALE_HONORIFICS = frozenset({"mr", "sir", "lord"})
_FEMALE_HONORIFICS = frozenset({"mrs", "ms", "miss", "lady", "dame"})
# lowercase words that may come before a sentence's subject ("Then the young Anna ...")
_BEFORE_SUBJECT = frozenset(
    """the a an then later now soon yesterday today finally eventually meanwhile also young
    old former late little""".split()
)
# capitalised sentence openers the extractor may take for a one-word name
_OPENERS = frozenset(
    """upon overall later meanwhile instead finally perhaps indeed moreover furthermore
    therefore hence unfortunately fortunately surprisingly interestingly importantly notably
    specifically additionally similarly likewise nevertheless nonetheless consequently
    accordingly afterwards eventually suddenly recently currently previously initially
    originally ultimately generally typically usually often sometimes together next last soon
    yesterday tomorrow tonight everyone everybody someone somebody nobody nothing something
    anyone please thanks sure maybe""".split()
)
# a sentence opening with these starts with a clause whose names are not the subject
_SUBORDINATORS = frozenset(
    """after when while although though before since if because as once until unless despite
    following during whereas""".split()
)
# a word of a person's name: "Anna", "O'Brien", "Jean-Luc", an initial "J.", a particle "van"
_NAME_WORD_RE = re.compile(
    r"[A-Z][a-z]+(?:['’-][A-Z]?[a-z]+)*|[A-Z]\.|(?:van|von|de|del|da|der|du|la|le|di)"
)


def _previous_word(text: str, pos: int) -> str:
    m = re.search(r"([^\W\d_]+)[^\w\n]*$", text[max(0, pos - 40) : pos])
    return m.group(1).casefold() if m else ""


def _word_before_previous(text: str, pos: int) -> str:
    m = re.search(r"([^\W\d_]+)\s+[^\W\d_]+[^\w\n]*$", text[max(0, pos - 60) : pos])
    return m.group(1).casefold() if m else ""


@dataclass
class EntityProfile:
    """What the text shows about one named entity (all its mentions, aliases included).

    Made and filled in by :func:`profile_entities` and :func:`learn_genders`; the properties
    weigh the evidence.

    Attributes:
        key: The entity's key (its normalised name; aliases are merged into it).
        display: How it is shown: written in full where the text does so ("Anna Berg", not
            "Berg"), with its honorific when it is a single word ("Dr Berg").
        first: Where its first mention starts.
        full: Whether ``display`` is the entity written in full, not an alias.
        lexical_org: A word of its name marks an organisation ("Acme Corp", "Oslo University").
        lexical_place: A word of its name marks a place ("Glomma River", "Baker Street").
        thing_word: A word of its name marks another named thing ("World War II", "Nobel
            Prize").
        person_cue: An honorific or a speaker's label.
        name_shape: Two to four capitalised words, as people's names are written.
        place_cue: It comes after "in", "at", "near", "moved to" ...
        org_verb: A one-word subject of "reported", "announced" ...
        subject_cue: A one-word subject of a sentence, followed by a lowercase word.
        mid_sentence: Capitalised where a capital says it is a name.
        acronym: A one-word name in capitals.
        gender: ``"f"``, ``"m"``, ``""`` unknown, ``"?"`` conflicting.
    """

    key: str
    display: str
    first: int
    full: bool
    lexical_org: bool = False
    lexical_place: bool = False
    thing_word: bool = False
    person_cue: bool = False
    name_shape: bool = False
    place_cue: bool = False
    org_verb: bool = False
    subject_cue: bool = False
    mid_sentence: bool = False
    acronym: bool = False
    gender: str = ""

    @property
    def is_person(self) -> bool:
        """A person: not an acronym and no word of the name says otherwise, and an honorific, a
        speaker's label or a known gender says so; failing those, with no place or company cue,
        the shape of a person's name or a subject's place in a sentence does."""
        if self.lexical_org or self.lexical_place or self.thing_word or self.acronym:
            return False
        if self.person_cue or self.gender in ("f", "m"):
            return True
        if self.place_cue or self.org_verb:
            return False
        # a lone word as a subject ("Anna went home") is a person only if its capital is not
        # just the sentence's ("Upon arrival", "Overall, ...")
        return self.name_shape or (self.subject_cue and self.mid_sentence)

    @property
    def maybe_person(self) -> bool:
        """Written like a person's name, though the text also reads it as something else."""
        if self.lexical_org or self.lexical_place or self.thing_word or self.acronym:
            return False
        return self.name_shape or self.subject_cue

    @property
    def is_thing(self) -> bool:
        """A named organisation, place or thing (a one-word name must be capitalised where a
        capital means a name)."""
        if self.is_person:
            return False
        return (
            self.mid_sentence
            or self.lexical_org
            or self.lexical_place
            or self.thing_word
            or self.org_verb
        )

    @property
    def is_org(self) -> bool:
        """A named organisation (a word of its name says so)."""
        return self.lexical_org

    def note_gender(self, gender: str) -> None:
        """Record a sign of the person's gender; two different signs leave it ``"?"``.

        Args:
            gender: ``"f"`` or ``"m"``.
        """
        if not self.gender:
            self.gender = gender
        elif self.gender != gender:
            self.gender = "?"


def _subjects(
    text: str, sentences: Sequence[tuple[int, int]], names: Sequence[Mention]
) -> dict[int, int]:
    """The mention that is the grammatical subject of each sentence, where a name is.

    Returns:
        ``{sentence index: mention index}``: the first name of the main clause, when at most
        three words come before it, none of them a verb or preposition ("In 1998 Anna Berg
        moved", not "Police arrested Anna Berg" or "The award went to Anna Berg").
    """
    out: dict[int, int] = {}
    j = 0
    for si, (s, e) in enumerate(sentences):
        while j < len(names) and names[j].start < s:
            j += 1
        head = s
        words = text[s:e].split(None, 1)
        if words and words[0].strip(",").casefold() in _SUBORDINATORS:
            comma = text.find(",", s, min(e, s + 120))
            if comma < 0:
                continue
            head = comma + 1
        k = j
        while k < len(names) and names[k].start < head:
            k += 1
        if k >= len(names) or names[k].start >= e:
            continue
        before = [w.strip(",;:\"'“”‘’()") for w in text[head : names[k].start].split()]
        if len(before) <= 3 and all(
            not w or w[0].isupper() or w[0].isdigit() or w in _BEFORE_SUBJECT for w in before
        ):
            out[si] = k
    return out


def profile_entities(
    text: str,
    names: Sequence[Mention],
    merged: Sequence[Mention],
    sentences: Sequence[tuple[int, int]],
    heading_spans: Sequence[tuple[int, int]],
) -> tuple[dict[str, EntityProfile], list[int], dict[int, int]]:
    """Gather each entity's evidence; also each mention's sentence and each sentence's subject.

    Args:
        text: The text the mentions are in.
        names: Its name mentions, as found (:func:`~.names.find_names`), in text order.
        merged: The same mentions with aliases merged (one for one with ``names``).
        sentences: The text's sentence spans, in order.
        heading_spans: The spans of its headings, sorted; names in them are left out.

    Returns:
        ``(entities by key, sentence index of each mention, subject mention by sentence)``.
    """
    entities: dict[str, EntityProfile] = {}
    sentence_of: list[int] = []
    si = 0
    for m in merged:
        while si + 1 < len(sentences) and sentences[si][1] <= m.start:
            si += 1
        sentence_of.append(si)
    subjects = _subjects(text, sentences, names)
    subject_mentions = set(subjects.values())
    for idx, (raw, m) in enumerate(zip(names, merged)):
        if within_spans(heading_spans, m.start):
            continue  # a heading is a label, not a sentence about anyone
        ent = entities.get(m.key)
        full = raw.key == m.key  # written in full, not as an alias merged into it
        shown = " ".join(m.text.split())
        if ent is None:
            ent = entities[m.key] = EntityProfile(m.key, shown, m.start, full)
        elif full and not ent.full:
            ent.display, ent.full = shown, True  # show the long form ("Anna Berg", not "Berg")
        words = m.text.split()
        if len(words) > 1 or not at_sentence_start(text, m.start):
            ent.mid_sentence = True
        low = [w.casefold().strip(".,") for w in words]
        ent.lexical_org |= any(w in _ORG_WORDS for w in low)
        ent.lexical_place |= any(w in _PLACE_WORDS for w in low)
        ent.thing_word |= any(w in _THING_WORDS for w in low)
        ent.acronym |= len(words) == 1 and m.text.isupper() and len(m.text) > 1
        honorific = _HONORIFIC_RE.search(text[max(0, m.start - 8) : m.start])
        if honorific:
            ent.person_cue = True
            title = honorific.group(1).casefold()
            if title in _MALE_HONORIFICS:
                ent.note_gender("m")
            elif title in _FEMALE_HONORIFICS:
                ent.note_gender("f")
            if " " not in ent.display and not ent.display.startswith(honorific.group(1)):
                ent.display = f"{honorific.group(0).strip()} {ent.display}"
        elif low and low[0] in _FEMALE_HONORIFICS | _MALE_HONORIFICS and len(words) > 1:
            ent.person_cue = True
        elif 2 <= len(words) <= 4 and all(_NAME_WORD_RE.fullmatch(w) for w in words):
            ent.name_shape = True
        prev = _previous_word(text, m.start)
        if prev in _PLACE_PREPS or (
            prev in ("from", "to") and _word_before_previous(text, m.start) in _MOTION
        ):
            ent.place_cue = True
        line_start = text.rfind("\n", 0, m.start) + 1
        if text[line_start : m.start].strip() == "" and text[m.end : m.end + 1] == ":":
            ent.person_cue = True  # a speaker's label in a transcript
        if idx in subject_mentions and len(words) == 1 and m.key not in _OPENERS:
            after = re.match(r"\s+([a-z][\w'’]*)", text[m.end : m.end + 30])
            if after and after.group(1) in _ORG_VERBS:
                ent.org_verb = True  # "Acme reported": a company, not a person
            elif after:
                ent.subject_cue = True
    return entities, sentence_of, subjects


def learn_genders(
    text: str,
    sentences: Sequence[tuple[int, int]],
    merged: Sequence[Mention],
    subjects: dict[int, int],
    entities: dict[str, EntityProfile],
) -> None:
    """Learn a person's gender from the text itself: the sentence after one whose subject they
    are, opening with "she" or "he", says which.

    Args:
        text: The text.
        sentences: Its sentence spans, in order.
        merged: Its name mentions, aliases merged.
        subjects: The subject mention of each sentence, as :func:`profile_entities` gives it.
        entities: The entities by key, as :func:`profile_entities` gives them; updated in place.
    """
    for si, mi in subjects.items():
        if si + 1 >= len(sentences):
            continue
        ent = entities.get(merged[mi].key)
        if ent is None or ent.lexical_org or ent.lexical_place or ent.acronym or ent.place_cue:
            continue
        s, e = sentences[si + 1]
        first = re.match(r"\W*([A-Za-z]+)", text[s:e])
        if first:
            word = first.group(1).casefold()
            if word in ("she", "her"):
                ent.note_gender("f")
            elif word in ("he", "his"):
                ent.note_gender("m")
