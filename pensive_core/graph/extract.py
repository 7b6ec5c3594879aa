"""Entity extraction for the entity graph: a protocol, and a fast rule-based default.

The default finds, without a model:

* **names**: runs of capitalised words, joined by short connectors ("University of Oxford",
  "Bank of America"), without capitalised function words ("The", "In") that open a sentence;
* **identifiers**: tokens mixing letters and digits or joined by dashes (``INV-4471``,
  ``BRCA1``, ``Q3``);
* **quantities**: numbers with a unit or scale (``12%``, ``$4.1 billion``, ``3,200 euros``,
  ``42 km``);
* **dates**: ``2 May 2024``, ``May 2, 2024``, ``January 2021``, ``2024-05-02``, and years
  (``in 1999``);
* **titles**: short quoted phrases ("The Night Ferry").

Each mention gets a normal form (Unicode NFKC, case folded, possessive and leading article
dropped, spaces collapsed) so that one entity written several ways is one node, and
:func:`merge_aliases` maps short forms within a text onto the long form they abbreviate ("Smith"
onto "John Smith", "IBM" onto "International Business Machines").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "EntityExtractor",
    "Mention",
    "RuleExtractor",
    "resolve_overlaps",
    "merge_aliases",
    "normalize_entity",
]

#: Entity kinds the rule-based extractor emits; they become the graph's type nodes.
KINDS = ("name", "id", "quantity", "date", "title")


@dataclass(frozen=True)
class Mention:
    """One entity mention in a text.

    Attributes:
        key: The normal form; mentions with equal keys are one entity.
        text: The words as written.
        kind: One of :data:`KINDS` (or an extractor's own label, e.g. spaCy's).
        start: Character offset of the mention in the text.
        end: Offset just past it.
    """

    key: str
    text: str
    kind: str
    start: int
    end: int


@runtime_checkable
class EntityExtractor(Protocol):
    """Finds entity mentions in a passage."""

    name: str

    def extract(self, text: str) -> list[Mention]:
        """Mentions in ``text``, in order of position (overlaps resolved, longest first)."""
        ...


# words that join the parts of one name ("and" would join two names: "Acme and Globex")
_CONNECTORS = {"of", "the", "de", "del", "da", "van", "von", "der", "du", "la", "le"}
# capitalised only because they begin a sentence (or a heading), rarely names on their own
_FUNCTION = {
    "a", "an", "the", "this", "that", "these", "those", "in", "on", "at", "by", "for", "from",
    "with", "without", "to", "of", "as", "and", "or", "but", "if", "when", "while", "after",
    "before", "during", "since", "until", "it", "its", "he", "she", "they", "we", "you", "i",
    "his", "her", "their", "our", "my", "your", "there", "here", "what", "which", "who", "whom",
    "whose", "where", "why", "how", "is", "was", "are", "were", "be", "been", "has", "have",
    "had", "do", "does", "did", "not", "no", "yes", "also", "however", "although", "though",
    "both", "each", "every", "all", "some", "many", "most", "such", "other", "another", "one",
    "new", "first", "then", "thus", "so", "because", "according", "despite", "neither",
    "either", "none", "nor", "yet", "still", "even", "only", "just", "now", "today",
    # prepositions and adverbs that open a sentence before a name ("Over Christmas Caroline
    # visited...", "Later that year Hana Kraind left"), and greetings before one ("Hey Mel")
    "over", "under", "about", "above", "across", "along", "around", "behind", "below",
    "beside", "besides", "between", "beyond", "into", "onto", "upon", "within", "through",
    "throughout", "toward", "towards", "against", "among", "amid", "via", "unlike", "like",
    "last", "next", "later", "earlier", "yesterday", "tomorrow", "tonight", "recently",
    "lately", "afterwards", "afterward", "finally", "eventually", "meanwhile", "sometimes",
    "usually", "often", "once", "twice", "again", "back", "maybe", "perhaps", "honestly",
    "actually", "basically", "luckily", "unfortunately", "fortunately", "apparently",
    "obviously", "clearly", "anyway", "instead", "otherwise", "therefore", "hence", "indeed",
    "well", "oh", "ok", "okay", "hey", "hi", "hello", "thanks", "thank", "dear", "congrats",
    "congratulations", "wow", "yeah", "yep", "sure", "please", "sorry", "me", "him",
    "them", "us", "everyone", "someone", "anyone", "nobody", "somebody", "everybody",
}  # fmt: skip
# times of the year or week: after an opener they say when, not who ("In June Caroline went",
# "After Easter Caroline..."); a name they open stays whole ("June Carter", "Christmas Island")
_TIME_WORDS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday", "christmas", "xmas", "easter", "thanksgiving", "halloween",
    "hanukkah", "ramadan", "diwali", "eid", "passover", "year", "year's", "spring", "summer",
    "autumn", "fall", "winter", "weekend", "morning", "evening", "night",
}  # fmt: skip
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_UNITS = (
    r"%|percent|per cent|million|billion|trillion|thousand|km|kilometres?|kilometers?|miles?|"
    r"m|metres?|meters?|cm|mm|kg|kilograms?|g|grams?|tonnes?|tons?|lbs?|pounds?|mph|km/h|"
    r"°C|°F|degrees?|hours?|minutes?|seconds?|days?|weeks?|months?|years?|euros?|dollars?|"
    r"yen|USD|EUR|GBP|MW|GW|kW|kWh|GB|MB|TB|ms"
)
# no digits (those are identifiers); a possessive "'s" ends the name
# abbreviations ("Mr.", "St.", "J.") keep their dot; a longer word's dot ends the sentence
_WORD = r"(?:[A-Z][^\W\d_]{0,2}\.|[A-Z][^\W\d_]*(?:['’](?!s\b)[^\W\d_]+|-[^\W\d_]+)*)"
_HONORIFICS = {"mr", "mrs", "ms", "dr", "prof", "sir", "mr.", "mrs.", "ms.", "dr.", "prof."}
# a name stays on one line: a heading's last word and the next line's first are two names
_NAME_RE = re.compile(
    rf"\b{_WORD}(?:[^\S\n]+(?:(?:{'|'.join(sorted(_CONNECTORS))})[^\S\n]+)*{_WORD})*"
)
_TOKEN_RE = re.compile(r"\S+")
_LAST_WORD = re.compile(r"\b(\w+)[^\S\n]+$")  # the word just before a name, on its line
_ID_RE = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)*\b")
_QTY_RE = re.compile(
    rf"(?:[$€£¥]\s?)?\b\d[\d,]*(?:\.\d+)?(?:\s?(?:{_UNITS})\b|(?<=\d)%)|[$€£¥]\s?\d[\d,]*(?:\.\d+)?"
    rf"(?:\s(?:million|billion|trillion))?"
)
_DATE_RE = re.compile(
    rf"\b\d{{1,2}}\s+(?:{_MONTHS})\.?\s+\d{{4}}\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}},?\s+\d{{4}}\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{4}}\b"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:1[0-9]|20)\d{2}s?\b"
)
_TITLE_RE = re.compile(r"[\"“]([^\"“”\n]{2,80})[\"”]")


def normalize_entity(text: str) -> str:
    """The normal form under which mentions of one entity meet."""
    t = unicodedata.normalize("NFKC", text).replace("’", "'").casefold().strip()
    t = re.sub(r"'s$", "", t)
    t = re.sub(r"^(?:the|a|an)\s+", "", t)
    t = re.sub(r"[\s_]+", " ", t)
    return t.strip(" .,;:-'\"")


class RuleExtractor:
    """The default extractor: regular expressions and capitalisation, no model.

    Args:
        kinds: Which kinds to emit (default all of :data:`KINDS`).
        max_words: Longest name or title kept, in words.
    """

    name = "rules"

    def __init__(self, kinds: Sequence[str] = KINDS, max_words: int = 8) -> None:
        self.kinds = frozenset(kinds)
        self.max_words = max_words

    def extract(self, text: str) -> list[Mention]:
        """Mentions in ``text``: dates, quantities, identifiers, titles and names, longest first
        where they overlap, returned in order of position."""
        found: list[Mention] = []
        if "date" in self.kinds:
            found += self._matches(_DATE_RE, text, "date")
        if "quantity" in self.kinds:
            found += self._matches(_QTY_RE, text, "quantity")
        if "id" in self.kinds:
            found += [m for m in self._matches(_ID_RE, text, "id") if not m.text.isdigit()]
        if "title" in self.kinds:
            for m in _TITLE_RE.finditer(text):
                words = m.group(1).split()
                if 1 <= len(words) <= self.max_words:
                    found.append(self._mention(m.group(1), "title", m.start(1), m.end(1)))
        if "name" in self.kinds:
            # names are looked for where nothing else was found ("May" in a date, "INV" in
            # "INV-4471" are not names)
            masked = list(text)
            for other in found:
                masked[other.start : other.end] = " " * (other.end - other.start)
            found += self._names("".join(masked))
        return resolve_overlaps(found)

    def _matches(self, pattern: re.Pattern[str], text: str, kind: str) -> list[Mention]:
        return [self._mention(m.group(0), kind, m.start(), m.end()) for m in pattern.finditer(text)]

    def _mention(self, raw: str, kind: str, start: int, end: int) -> Mention:
        return Mention(normalize_entity(raw), raw, kind, start, end)

    def _names(self, text: str) -> list[Mention]:
        out = []
        for m in _NAME_RE.finditer(text):
            # the words with their offsets (spacing inside a name may be more than one space)
            words = [(w.group(0), m.start() + w.start()) for w in _TOKEN_RE.finditer(m.group(0))]
            # trailing connectors belong to the sentence, not the name ("Bank of")
            while words and words[-1][0].casefold() in _CONNECTORS:
                words.pop()
            # a capitalised function word opening a sentence is not part of a name, nor are
            # honorifics or connectors left leading
            # opened by a word before the run too: "back in March Caroline", "since May Bo"
            before = _LAST_WORD.search(text, max(0, m.start() - 40), m.start())
            opened = before is not None and before.group(1).casefold() in _FUNCTION
            while words and words[0][0].casefold() in _FUNCTION | _HONORIFICS | _CONNECTORS:
                words.pop(0)
                opened = True
            # a time word after an opener, with more of the run after it: "In June Caroline"
            while opened and len(words) > 1 and words[0][0].casefold() in _TIME_WORDS:
                words.pop(0)
                while words and words[0][0].casefold() in _FUNCTION | _CONNECTORS:
                    words.pop(0)
            if not words or len(words) > self.max_words:
                continue
            start = words[0][1]
            raw = text[start : words[-1][1] + len(words[-1][0])].rstrip(".'’")
            if len(raw) < 2:
                continue
            out.append(self._mention(raw, "name", start, start + len(raw)))
        return out


def resolve_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Keep the longest of overlapping mentions (earlier wins a tie), in position order."""
    kept: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for m in sorted(mentions, key=lambda m: (-(m.end - m.start), m.start)):
        if not m.key or any(m.start < e and s < m.end for s, e in taken):
            continue
        kept.append(m)
        taken.append((m.start, m.end))
    return sorted(kept, key=lambda m: m.start)


def merge_aliases(mentions: Sequence[Mention]) -> list[Mention]:
    """Map short names onto the long names they abbreviate within one text.

    A one-word name equal to the first or last word of exactly one longer name ("Smith",
    "John Smith") takes that name's key; so does an all-capitals word equal to the initials of
    exactly one longer name ("IBM", "International Business Machines"). Ambiguous short forms
    (two Smiths) keep their own key.
    """
    longs = {m.key for m in mentions if m.kind == "name" and " " in m.key}
    out = []
    for m in mentions:
        if m.kind != "name" or " " in m.key:
            out.append(m)
            continue
        by_word = {k for k in longs if m.key in (k.split()[0], k.split()[-1])}
        by_initials = (
            {k for k in longs if "".join(w[0] for w in k.split() if w not in _CONNECTORS) == m.key}
            if m.text.isupper() and len(m.text) >= 2
            else set()
        )
        target = by_word | by_initials
        if len(target) == 1:
            out.append(Mention(target.pop(), m.text, m.kind, m.start, m.end))
        else:
            out.append(m)
    return out
