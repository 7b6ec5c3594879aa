"""A model-free context generator: title, section, dates, principal entities and referents.

For each passage it writes a short line of facts the passage itself lacks, from its document:

* the **title** (``metadata["title"]``, else the first markdown heading, else the file name);
* the **heading path** of the section the passage starts in ("Results > Revenue");
* the **date** (the document's timestamp, else the dates its text mentions most);
* the **principal entities** (the names the document mentions most);
* the **referents** of pronouns the passage opens with ("She finally told him" ->
  ``She: Anna Berg. Him: Tomas Lind.``), resolved from the text just before it.

For example ``"Ferry story. 8 May 2023. About: Oslo. She: Anna Berg. Him: Tomas Lind."``.
Anything the passage already says is left out, so that every word added is one a question could
use and the passage could not match on its own. Nothing here loads a model: a document costs a
date scan and one pass of the rule-based entity extractor, whatever its number of passages.

Pronoun resolution is deliberately timid: a pronoun is resolved only when it comes before any name
in the passage's first sentence, and only to a name whose kind (person, organisation, place) the
text shows; an unresolved pronoun costs nothing, a wrong referent misleads the index.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...chunking import split_sentences
from ...errors import ConfigError
from ...graph.extract import Mention, normalize_entity
from ...temporal.dates import DateMention, find_dates
from ...types import Chunk, Document
from ..base import ContextRequest
from .names import at_sentence_start, find_names, merge_document_aliases
from .outline import document_title, find_headings, heading_paths, within_spans
from .profile import EntityProfile, learn_genders, profile_entities
from .records import is_records

__all__ = ["HeuristicContextGenerator", "is_records", "leading_referents"]

_VERSION = "heuristic-v1"

# single capitalised words that open sentences or name calendar units, not entities
_NOT_NAMES = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december i""".split()
)
# statistical abbreviations: frequent in abstracts, never what a question is about
_STAT_ABBREVIATIONS = frozenset("ci or hr rr sd se sem iqr auc roc ns vs aor ors hrs rrs".split())

# --- pronouns ---------------------------------------------------------------------------------------

_PRONOUN_RE = re.compile(r"\b(he|she|him|his|her|they|them|their|it|its|this|these)\b", re.I)
# the same on lowercased text: a cheap test of whether a passage could open with a pronoun
_PRONOUN_LOW_RE = re.compile(r"\b(?:he|she|him|his|her|they|them|their|it|its|this|these)\b")
_LEAD = 400  # a first sentence longer than this opens with no pronoun worth resolving
_FEMALE = frozenset({"she", "her"})
_MALE = frozenset({"he", "him", "his"})
_PLURAL = frozenset({"they", "them", "their"})
_THING = frozenset({"it", "its", "this", "these"})
# "this"/"these" are pronouns only before a verb ("This led to ..."); before a noun they are
# determiners ("This study ..."), whose referent is the noun
_VERB_AFTER_THIS = frozenset(
    """is was are were has had have will would can could may might must should did does do
    led leads made makes meant means caused causes allowed allows became becomes remains
    remained""".split()
)
# "it is clear that", "it rained": "it" refers to nothing
_EXPLETIVE_AFTER_IT = frozenset(
    """is was 's were be been seems seemed seem appears appeared appear remains remained
    rains rained snowed snows happens happened turns turned takes took matters mattered
    follows followed""".split()
)


_LABEL_BEFORE_RE = re.compile(r"(?:^|[.!?:\n\]])[\s\[(]*(?:[A-Z]{2,}[\s,&/]+)*$")
_LABEL_AFTER_RE = re.compile(r"(?:[\s,&/]*[A-Z]{2,}\b)*[\s,:&/]*[A-Z][a-z]")


def _is_label(text: str, m: Mention) -> bool:
    """Whether a name is (or starts with) a section label in capitals opening a sentence:
    "METHODS The ...", "CONTEXT Sexual dysfunction ...", "DESIGN, SETTING, AND PATIENTS A ..."
    (an acronym opening a sentence is followed by lowercase words: "HIV infection ...")."""
    first = m.text.split(None, 1)[0]
    if not (len(first) >= 3 and first.isupper() and first.isalpha()):
        return False
    if not _LABEL_BEFORE_RE.search(text, max(0, m.start - 80), m.start):
        return False
    return _LABEL_AFTER_RE.match(text, m.start + len(first)) is not None


# --- leading pronouns -------------------------------------------------------------------------


def _first_sentence(passage: str) -> tuple[int, int]:
    """The span of a passage's first sentence, skipping heading lines."""
    head = passage[:_LEAD]
    for s, e, _ in split_sentences(head):
        if not head[s:e].lstrip().startswith("#"):
            return s, e
    return 0, 0


def _leading_pronouns(passage: str, names: Sequence[Mention]) -> list[tuple[str, int]]:
    """The pronouns of the passage's first sentence that come before any name in it, as
    ``(pronoun lowercased, offset)``; pronouns that refer to nothing are left out."""
    s, e = _first_sentence(passage)
    if s >= e:
        return []
    first_name = next((m.start for m in names if s <= m.start < e), e)
    # words are counted after an opening phrase ("In 1998, she ..."; "However, they ...")
    opening = s
    comma = passage.find(",", s, first_name)
    if comma >= 0 and len(passage[s:comma].split()) <= 6:
        opening = comma + 1
    out: list[tuple[str, int]] = []
    for m in _PRONOUN_RE.finditer(passage, s, first_name):
        # the passage must open with the pronoun: one after a subject of its own ("the
        # investigators became suspicious because they ...") refers to that subject
        position = len(passage[opening : m.start()].split())
        if position > (3 if not out else 10):
            break
        word = m.group(1).casefold()
        after = re.match(r"\s*([\w'’]+)", passage[m.end() : m.end() + 30])
        nxt = after.group(1).casefold() if after else ""
        if word in ("this", "these") and nxt not in _VERB_AFTER_THIS:
            continue
        if word == "it" and (nxt in _EXPLETIVE_AFTER_IT or passage[m.end() : m.end() + 2] == "'s"):
            continue
        out.append((word, m.start()))
    return out


def _resolve(
    preceding: str,
    pre_names: Sequence[Mention],
    merged: Sequence[Mention],
    passage: str,
    passage_names: Sequence[Mention],
) -> dict[str, list[EntityProfile]]:
    """:func:`leading_referents` on names already found (offsets within each text), each
    pronoun's referent as the entities it names.

    Args:
        preceding: The text before the passage.
        pre_names: Its name mentions, as found.
        merged: The same mentions with aliases merged (within the whole document, where
            there is one: "Downs" is not "Steve Downs" when the document also has a "Diane
            Downs" that the window before the passage happens not to show).
        passage: The passage.
        passage_names: Its name mentions.
    """
    pronouns = _leading_pronouns(passage, passage_names)
    if not pronouns or not pre_names:
        return {}
    sentences = [(s, e) for s, e, _ in split_sentences(preceding)]
    if not sentences:
        return {}
    heading_spans = [(s, e) for s, e, _, _ in find_headings(preceding)]
    entities, sentence_of, subjects = profile_entities(
        preceding, pre_names, merged, sentences, heading_spans
    )
    learn_genders(preceding, sentences, merged, subjects, entities)

    # people, most salient first: sentence by sentence from the last, its subject first
    by_sentence: dict[int, list[int]] = {}
    for mi, si in enumerate(sentence_of):
        by_sentence.setdefault(si, []).append(mi)
    # (key, sentence, is its subject, surely a person): a name that may be a person's ("went
    # to Anna Berg" reads as a place) is kept, so that an older person is not taken past it
    ranked: list[tuple[str, int, bool, bool]] = []
    seen: set[str] = set()
    for si in sorted(by_sentence, reverse=True):
        order = by_sentence[si]
        subj = subjects.get(si)
        if subj is not None:
            order = [subj] + [mi for mi in order if mi != subj]
        for mi in order:
            key = merged[mi].key
            ent = entities.get(key)
            if ent is None or key in seen or not (ent.is_person or ent.maybe_person):
                continue
            seen.add(key)
            ranked.append((key, si, mi == subj, ent.is_person))

    def person(gender: str, exclude: str = "") -> str:
        """The key of the most salient person of a gender ("" when none or unsure)."""
        for n, (key, si, is_subject, sure) in enumerate(ranked):
            if key == exclude or entities[key].gender not in ("", gender):
                continue
            if not sure:
                return ""
            # two people in one sentence, neither its subject: which one is meant is a guess
            rivals = [
                k
                for k, s2, _, _ in ranked[n + 1 :]
                if s2 == si and k != exclude and entities[k].gender in ("", gender)
            ]
            return "" if rivals and not is_subject and not exclude else key
        return ""

    out: dict[str, list[EntityProfile]] = {}
    gendered = [w for w, _ in pronouns if w in _FEMALE | _MALE]
    if gendered:
        # the first gender named is the salient person; the other gender, someone else
        first, second = (_FEMALE, _MALE) if gendered[0] in _FEMALE else (_MALE, _FEMALE)
        g1, g2 = ("f", "m") if first is _FEMALE else ("m", "f")
        primary = person(g1)
        secondary = person(g2, exclude=primary) if primary else ""
        for w in gendered:
            key = primary if w in first else secondary
            if key:
                out[w] = [entities[key]]

    words = {w for w, _ in pronouns}
    if words & _PLURAL:
        plural = _plural_referent(merged, entities, sentence_of, len(sentences) - 2)
        for w in words & _PLURAL if plural else ():
            out[w] = plural
    if words & _THING:
        thing = _thing_referent(merged, entities, sentences, subjects, sentence_of)
        if thing is not None:
            for w in words & _THING:
                out[w] = [thing]
    return out


def _plural_referent(
    merged: Sequence[Mention],
    entities: dict[str, EntityProfile],
    sentence_of: Sequence[int],
    recent: int,
) -> list[EntityProfile]:
    """ "They": the last two people named, unless an organisation was named after them; only
    names from the last two sentences (an older "they" is most often a plural noun's)."""
    people: list[EntityProfile] = []
    org = None
    for m, si in zip(reversed(merged), reversed(sentence_of)):
        if si < recent:
            break
        ent = entities.get(m.key)
        if ent is None:
            continue
        if ent.is_org and not people and org is None:
            return [ent]
        if ent.is_org and org is None:
            org = ent
        elif ent.is_person and ent not in people and len(people) < 2:
            people.append(ent)
    if len(people) == 2:
        return sorted(people, key=lambda e: e.first)
    return [org] if org is not None else []


def _thing_referent(
    merged: Sequence[Mention],
    entities: dict[str, EntityProfile],
    sentences: Sequence[tuple[int, int]],
    subjects: dict[int, int],
    sentence_of: Sequence[int],
) -> EntityProfile | None:
    """ "It": the subject of the sentence just before, when that is a named thing, not a person
    (anything else "it" might mean, "the study", "the weather", is no name)."""
    last = len(sentences) - 1
    mi = subjects.get(last)
    if mi is None:
        return None
    ent = entities.get(merged[mi].key)
    if ent is None or not ent.is_thing or sentence_of[mi] != last:
        return None
    return ent


def leading_referents(preceding: str, passage: str) -> dict[str, str]:
    """Resolve the pronouns a passage opens with, from the text just before it.

    Only pronouns in the passage's first sentence that come before any name are resolved (a
    passage that names its subject needs no help): "she"/"he" and their forms to the most
    salient person (the subject of the latest sentence naming one; the other person when the
    sentence has both "she" and "him"), "they" to the last two people named (or an
    organisation), "it"/"its"/"this"/"these" to a named organisation or place that was the
    subject of the last sentence. Places ("in Porto"), organisations ("Acme Corp") and
    headings are never taken for people. When in doubt, nothing is returned.

    Args:
        preceding: The text before the passage (about one passage's worth is plenty).
        passage: The passage.

    Returns:
        ``{pronoun as written, lowercased: referent}``, e.g. ``{"she": "Anna Berg"}``;
        empty when no leading pronoun could be resolved.
    """
    if not _PRONOUN_LOW_RE.search(passage[:_LEAD].lower()) or not preceding.strip():
        return {}
    names = find_names(preceding)
    found = _resolve(preceding, names, merge_document_aliases(names), passage, find_names(passage))
    return {word: _render_referent(ents) for word, ents in found.items()}


def _render_referent(entities: Sequence[EntityProfile]) -> str:
    return " and ".join(e.display for e in entities)


# --- dates ------------------------------------------------------------------------------------


def _render_date(d: DateMention) -> str:
    start, end = d.start, d.end
    if d.granularity == "day":
        return f"{start.day} {start:%B} {start.year}"
    if d.granularity == "month":
        return f"{start:%B} {start.year}"
    if d.granularity == "year":
        return str(start.year)
    if d.granularity == "range" and (start.month, start.day, end.month, end.day) == (1, 1, 1, 1):
        return f"{start.year}-{end.year - 1}" if end.year - start.year > 1 else str(start.year)
    return d.text


# --- the generator ----------------------------------------------------------------------------


@dataclass
class _Facts:
    """What a document says about all of its passages, computed once per document."""

    title: str
    heading_starts: list[int]
    heading_paths: list[tuple[str, ...]]
    date: str  # the timestamp, rendered
    dates: list[tuple[str, tuple[Any, ...], list[int]]]  # (text, key, mention offsets)
    entities: list[tuple[str, str, list[int]]]  # (display, key, mention offsets), ranked
    names: list[Mention]  # name mentions as found, for referents
    merged: list[Mention]  # the same, aliases merged within the document
    starts: list[int]  # where each name starts


def _contains(haystack_low: str, needle: str) -> bool:
    """Whether ``needle`` occurs in the (lowercased) text as whole words."""
    n = needle.casefold()
    i = haystack_low.find(n)
    while i >= 0:
        before = haystack_low[i - 1] if i else " "
        after = haystack_low[i + len(n)] if i + len(n) < len(haystack_low) else " "
        if not before.isalnum() and not after.isalnum():
            return True
        i = haystack_low.find(n, i + 1)
    return False


def _in_span(offsets: Sequence[int], start: int, end: int) -> bool:
    i = bisect_right(offsets, start - 1)
    return i < len(offsets) and offsets[i] < end


class HeuristicContextGenerator:
    """Situating contexts without a model: title, section, dates, principal entities and the
    referents of leading pronouns.

    Args:
        max_entities: How many principal entities to name ("About: ...").
        max_dates: How many dates mentioned in the text to give when the document has no
            timestamp.
        referents: Whether to resolve the pronouns a passage opens with.
        window: How many characters before a passage are read to resolve them.

    Raises:
        ConfigError: If a count is negative or the window is not positive.
    """

    def __init__(
        self,
        max_entities: int = 3,
        max_dates: int = 2,
        referents: bool = True,
        window: int = 1500,
    ) -> None:
        for arg, value in (("max_entities", max_entities), ("max_dates", max_dates)):
            if not isinstance(value, int) or value < 0:
                raise ConfigError(
                    f"HeuristicContextGenerator: {arg} must be an int >= 0, got {value!r}"
                )
        if not isinstance(window, int) or window <= 0:
            raise ConfigError(
                f"HeuristicContextGenerator: window must be a positive int, got {window!r}"
            )
        self.max_entities = max_entities
        self.max_dates = max_dates
        self.referents = referents
        self.window = window
        # the name is a cache key: every setting that changes the output must change it
        suffix = []
        if max_entities != 3:
            suffix.append(f"e{max_entities}")
        if max_dates != 2:
            suffix.append(f"d{max_dates}")
        if not referents:
            suffix.append("noref")
        if window != 1500:
            suffix.append(f"w{window}")
        self.name = _VERSION + (":" + ",".join(suffix) if suffix else "")

    def __repr__(self) -> str:
        return f"HeuristicContextGenerator(name={self.name!r})"

    def generate(self, requests: Sequence[ContextRequest]) -> list[list[str]]:
        """Contexts for each request's passages, in order (``""`` where there is nothing to add).

        Args:
            requests: Documents with their passages.

        Returns:
            One list per request, one context per passage.
        """
        out: list[list[str]] = []
        for req in requests:
            if not req.chunks:
                out.append([])
                continue
            facts = self._facts(req.document, req.chunks)
            out.append([self._context(req.document, facts, c) for c in req.chunks])
        return out

    def _facts(self, document: Document, chunks: Sequence[Chunk]) -> _Facts:
        text = document.text
        headings = find_headings(text)
        starts, paths = heading_paths(headings)
        title = document_title(document, headings)
        # a passage that is the whole document mentions every date and name in it: finding
        # them (most of the cost) could add nothing
        whole = (
            len(chunks) == 1
            and not text[: chunks[0].start].strip()
            and not text[chunks[0].end :].strip()
        )
        # the dates also keep "May" in "8 May 2023" from being taken for a name
        found = [] if whole else find_dates(text)
        date = ""
        if document.timestamp is not None:
            ts = document.timestamp
            date = f"{ts.day} {ts:%B} {ts.year}"
        dates: list[tuple[str, tuple[Any, ...], list[int]]] = []
        if not date and self.max_dates:
            by_key: dict[tuple[Any, ...], tuple[str, list[int]]] = {}
            for d in found:
                key = (d.start, d.end)
                if key not in by_key:
                    by_key[key] = (_render_date(d), [])
                by_key[key][1].append(d.span[0])
            # most frequent first; a tie goes to the first mentioned (dicts keep insertion order)
            ranked = sorted(by_key.items(), key=lambda kv: -len(kv[1][1]))
            dates = [(rendered, key, offs) for key, (rendered, offs) in ranked]
        wanted = self.max_entities or self.referents
        names = find_names(text, found) if wanted and not whole else []
        merged = merge_document_aliases(names)
        entities = (
            self._rank_entities(text, names, merged, headings, title) if self.max_entities else []
        )
        return _Facts(
            title, starts, paths, date, dates, entities, names, merged, [m.start for m in names]
        )

    def _rank_entities(
        self,
        text: str,
        names: Sequence[Mention],
        merged: Sequence[Mention],
        headings: Sequence[tuple[int, int, int, str]],
        title: str,
    ) -> list[tuple[str, str, list[int]]]:
        """Entities by number of mentions (the first mentioned first among equals), each as
        ``(as shown, key, offsets of its mentions)``; labels, headings and lone capitalised
        words that only open sentences are left out."""
        spans = [(s, e) for s, e, _, _ in headings]
        title_key = normalize_entity(title) if title else ""
        counts: Counter[str] = Counter()
        display: dict[str, tuple[str, bool]] = {}  # (as shown, written in full)
        offsets: dict[str, list[int]] = {}
        mid_sentence: set[str] = set()
        for raw, m in zip(names, merged):
            offsets.setdefault(m.key, []).append(m.start)
            if spans and within_spans(spans, m.start):
                continue  # a heading is shown as the section, not as an entity
            if m.key in _NOT_NAMES or m.key in _STAT_ABBREVIATIONS or len(m.key) < 2:
                continue
            if _is_label(text, raw):
                continue
            counts[m.key] += 1
            # shown in its long form ("Anna Berg", not "Berg"), else as first written
            if m.key not in display or (raw.key == m.key and not display[m.key][1]):
                display[m.key] = (" ".join(raw.text.split()), raw.key == m.key)
            if (
                " " in m.key
                or m.text.isupper()
                or text.startswith(":", m.end)  # a speaker's label
                or not at_sentence_start(text, m.start)
            ):
                mid_sentence.add(m.key)
        ranked = []
        # Counter.most_common keeps first-seen order among equal counts
        for key, _n in counts.most_common():
            # a lone capitalised word seen only where every word is capitalised is no name
            if key not in mid_sentence or key == title_key:
                continue
            shown = display[key][0]
            if title and _contains(title.casefold(), shown):
                continue
            ranked.append((shown, key, offsets[key]))
        return ranked

    def _referents(
        self, document: Document, facts: _Facts, chunk: Chunk
    ) -> dict[str, list[EntityProfile]]:
        """The referents of the pronouns the passage opens with, from the text before it (the
        document's names, found once, are reused)."""
        start, end = chunk.start, chunk.end
        if not start or not _PRONOUN_LOW_RE.search(chunk.text[:_LEAD].lower()):
            return {}
        lo = max(0, start - self.window)
        if lo:
            space = document.text.find(" ", lo, start)
            lo = space + 1 if space >= 0 else lo  # do not start inside a word

        def shifted(mentions: Sequence[Mention], a: int, b: int) -> list[Mention]:
            i, j = bisect_left(facts.starts, a), bisect_left(facts.starts, b)
            return [
                Mention(m.key, m.text, m.kind, m.start - a, m.end - a)
                for m in mentions[i:j]
                if m.end <= b
            ]

        return _resolve(
            document.text[lo:start],
            shifted(facts.names, lo, start),
            shifted(facts.merged, lo, start),
            chunk.text,
            shifted(facts.names, start, end),
        )

    def _context(self, document: Document, facts: _Facts, chunk: Chunk) -> str:
        low = chunk.text.casefold()
        start, end = chunk.start, chunk.end
        parts: list[str] = []

        head: list[str] = []
        if facts.title and not _contains(low, facts.title):
            head.append(_clip(facts.title, 24))
        i = bisect_right(facts.heading_starts, start) - 1
        if i >= 0:
            title_low = facts.title.casefold()
            for part in facts.heading_paths[i]:
                if part.casefold() != title_low and not _contains(low, part):
                    head.append(_clip(part, 12))
        if head:
            parts.append(" > ".join(head))

        if facts.date:
            if not _contains(low, facts.date):
                parts.append(facts.date)
        else:
            shown = [
                text
                for text, _key, offs in facts.dates
                if not _in_span(offs, start, end) and not _contains(low, text)
            ][: self.max_dates]
            if shown:
                parts.append(", ".join(shown))

        said = self._referents(document, facts, chunk) if self.referents else {}
        # a referent the passage names later on adds nothing
        said = {
            w: ents for w, ents in said.items() if not all(_contains(low, e.display) for e in ents)
        }

        if self.max_entities:
            named = {e.key for ents in said.values() for e in ents}
            about: list[str] = []
            for shown_name, key, offs in facts.entities:
                if len(about) >= self.max_entities:
                    break
                if key in named or _in_span(offs, start, end) or _contains(low, shown_name):
                    continue
                if any(_contains(p.casefold(), shown_name) for p in head):
                    continue
                about.append(shown_name)
            if about:
                parts.append("About: " + ", ".join(about))

        by_referent: dict[str, list[str]] = {}
        for word, ents in said.items():
            by_referent.setdefault(_render_referent(ents), []).append(word)
        for referent, words in by_referent.items():
            parts.append(f"{'/'.join(words).capitalize()}: {referent}")

        return _sentences(parts)


def _sentences(parts: Sequence[str]) -> str:
    """Parts as short sentences: "A. B. C." (a part that ends in "?", "!" or "…" keeps it)."""
    out = []
    for p in parts:
        p = p.rstrip(". ")
        out.append(p if p.endswith(("?", "!", "…")) else p + ".")
    return " ".join(out)


def _clip(text: str, max_words: int) -> str:
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words]) + "…"
