"""The referents of the pronouns a passage opens with, resolved from the text just before it.

Deliberately timid: a pronoun is resolved only when it comes before any name in the passage's
first sentence, and only to a name whose kind (person, organisation, place) the text shows
(:mod:`.profile`); an unresolved pronoun costs nothing, a wrong referent misleads the index.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...chunking import split_sentences
from ...graph.extract import Mention
from .names import find_names, merge_document_aliases
from .outline import find_headings
from .profile import EntityProfile, learn_genders, profile_entities

__all__ = ["leading_referents", "may_open_with_pronoun", "render_referent", "resolve_referents"]

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


def may_open_with_pronoun(passage: str) -> bool:
    """A cheap test, before any name is looked for, of whether a passage could open with a
    pronoun worth resolving.

    Shared: the generator asks it of every passage before it resolves anything.

    Args:
        passage: The passage.

    Returns:
        False when its first 400 characters hold none of the pronouns resolved here.
    """
    return _PRONOUN_LOW_RE.search(passage[:_LEAD].lower()) is not None


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


def resolve_referents(
    preceding: str,
    pre_names: Sequence[Mention],
    merged: Sequence[Mention],
    passage: str,
    passage_names: Sequence[Mention],
) -> dict[str, list[EntityProfile]]:
    """:func:`leading_referents` on names already found (offsets within each text), each
    pronoun's referent as the entities it names.

    Shared: the generator finds a document's names once and passes each passage its share.

    Args:
        preceding: The text before the passage.
        pre_names: Its name mentions, as found.
        merged: The same mentions with aliases merged (within the whole document, where
            there is one: "Downs" is not "Steve Downs" when the document also has a "Diane
            Downs" that the window before the passage happens not to show).
        passage: The passage.
        passage_names: Its name mentions.

    Returns:
        ``{pronoun lowercased: the entities it refers to}`` (two people, or one entity); empty
        when no leading pronoun could be resolved.
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
    if not may_open_with_pronoun(passage) or not preceding.strip():
        return {}
    names = find_names(preceding)
    found = resolve_referents(
        preceding, names, merge_document_aliases(names), passage, find_names(passage)
    )
    return {word: render_referent(ents) for word, ents in found.items()}


def render_referent(entities: Sequence[EntityProfile]) -> str:
    """A referent as shown in a context: ``"Anna Berg"``, ``"Anna Berg and Tomas Lind"``.

    Shared: the generator writes the referents of :func:`resolve_referents` with it.

    Args:
        entities: The entities a pronoun refers to.

    Returns:
        Their display names joined by "and".
    """
    return " and ".join(e.display for e in entities)
