"""Name mentions in a text: found by the rule-based extractor, cleaned of what it takes along
in chat and dialogue, and their aliases merged within a document.

Shared by the modules of the heuristic generator: the generator finds a document's names once
and ranks its principal entities from them; the pronoun resolver reads the names before a
passage from that same list, and the entity profile asks whether a name's capital is only the
sentence's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...graph.extract import Mention, RuleExtractor, merge_aliases, normalize_entity
from ...temporal.dates import DateMention, find_dates

__all__ = ["at_sentence_start", "find_names", "merge_document_aliases"]

# words that open a line of dialogue before a name ("Hey Mel", "Thanks, Caroline")
_INTERJECTIONS = frozenset(
    """hey hi hello dear thanks thank oh wow yes yeah yep ok okay congrats congratulations
    sorry please bye goodbye good great nice well aww haha lol omg""".split()
)
# "Mel. Relaxing", "Deng Xi. Professor Li": the extractor keeps a short word's full stop as an
# abbreviation's; only an initial or one of these is one inside a name ("J. Smith", "St. Ives")
_SENTENCE_IN_NAME_RE = re.compile(r"\b([A-Z][a-z]+)\.\s")
_NAME_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st mt ft jr sr gen col capt lt sgt rev hon co inc ltd corp bros".split()
)
# anchored at word starts: unanchored, the engine rescans every word from each of its letters
_DIGIT_TOKEN_RE = re.compile(r"(?<![\w-])[\w-]*\d[\w-]*")
_BLOCK = 2000  # characters per call of the extractor (see _blocks)
# a full stop after a lowercase word or a long one: not "Dr." or "J." inside a name
_SAFE_STOP_RE = re.compile(r"(?:\b[a-z]\w*|\w{4,})[.!?]\s")

_EXTRACTOR = RuleExtractor(kinds=("name",))


def find_names(text: str, dates: Sequence[DateMention] | None = None) -> list[Mention]:
    """The name mentions of a text, found by :class:`RuleExtractor` on names alone.

    Dates and tokens with digits are blanked first (same length, so offsets hold): that is
    what the full extractor's masking does for names, at a fraction of the cost of its
    quantity and identifier patterns ("May" in "8 May 2023" and "BRCA" in "BRCA1" are not names).

    Args:
        text: The text.
        dates: The text's date mentions when already found (:func:`find_dates`); found here
            when None.

    Returns:
        The name mentions in text order, offsets within ``text``.
    """
    masked = _DIGIT_TOKEN_RE.sub(lambda m: " " * len(m.group()), text)
    if dates is None:
        dates = find_dates(text)
    if dates:
        chars = list(masked)
        for d in dates:
            s, e = d.span
            chars[s:e] = " " * (e - s)
        masked = "".join(chars)
    out = []
    for lo, hi in _blocks(masked):
        for m in _EXTRACTOR.extract(masked[lo:hi]):
            for t in _trim(m):
                out.append(Mention(t.key, t.text, t.kind, t.start + lo, t.end + lo) if lo else t)
    return out


def _blocks(text: str) -> list[tuple[int, int]]:
    """Spans of about :data:`_BLOCK` characters that no name crosses, cut at line ends (a name
    stays on one line) or, in a very long line, after a sentence's full stop.

    The extractor settles overlapping mentions pairwise, which grows with the square of their
    number; a long book in one call would take minutes.
    """
    spans = []
    lo = 0
    n = len(text)
    while n - lo > _BLOCK:
        cut = text.rfind("\n", lo + _BLOCK // 2, lo + _BLOCK)
        if cut < 0:
            m = _SAFE_STOP_RE.search(text, lo + _BLOCK // 2, lo + 2 * _BLOCK)
            cut = m.end() - 1 if m else text.find(" ", lo + _BLOCK)
            if cut < 0:
                break
        spans.append((lo, cut + 1))
        lo = cut + 1
    spans.append((lo, n))
    return spans


def _trim(m: Mention) -> list[Mention]:
    """A name without what the extractor's capitalisation rule takes along in chat and
    dialogue: a greeting before it ("Hey Mel"), the next sentence after a short word's full stop
    ("Deng Xi. Professor Li" is two names), or no name at all ("I'm", "I've")."""
    pieces = [(m.start, m.text)]
    if ". " in m.text:
        pieces, begin = [], 0
        for cut in _SENTENCE_IN_NAME_RE.finditer(m.text):
            if cut.group(1).casefold() not in _NAME_ABBREVIATIONS:
                pieces.append((m.start + begin, m.text[begin : cut.end(1)]))
                begin = cut.end()
        pieces.append((m.start + begin, m.text[begin:]))
    out = []
    for start, text in pieces:
        if text[:2] in ("I'", "I’"):
            continue
        first, _, rest = text.partition(" ")
        while rest and first.casefold() in _INTERJECTIONS:
            start += len(text) - len(rest)
            text = rest
            first, _, rest = text.partition(" ")
        if first.casefold() in _INTERJECTIONS:
            continue
        if text == m.text:
            out.append(m)
        elif key := normalize_entity(text):
            out.append(Mention(key, text, m.kind, start, start + len(text)))
    return out


def merge_document_aliases(names: Sequence[Mention]) -> list[Mention]:
    """:func:`merge_aliases` over a whole document, asked once per distinct form.

    It compares every short name with every long one; what it decides for a mention depends
    only on its key and whether it is written in capitals, so one of each is enough (a book
    repeats its names thousands of times).

    Args:
        names: A document's name mentions, as :func:`find_names` gives them.

    Returns:
        The same mentions, one for one, each keyed by the entity it is an alias of ("Berg" under
        "anna berg" when the document also says "Anna Berg"); text and offsets unchanged.
    """
    forms: dict[tuple[str, bool], Mention] = {}
    for m in names:
        forms.setdefault((m.key, m.text.isupper() and len(m.text) >= 2), m)
    reps = list(forms.values())
    target = {form: m.key for form, m in zip(forms, merge_aliases(reps))}
    return [
        m
        if (k := target[(m.key, m.text.isupper() and len(m.text) >= 2)]) == m.key
        else Mention(k, m.text, m.kind, m.start, m.end)
        for m in names
    ]


def at_sentence_start(text: str, pos: int) -> bool:
    """Whether a word at ``pos`` opens its sentence, so that its capital letter says nothing.

    Args:
        text: The text.
        pos: Where the word starts.

    Returns:
        True when only spaces, opening quotes, brackets or markdown marks stand between ``pos``
        and the start of the text or the last ``.``, ``!``, ``?``, ``:`` or line break.
    """
    i = pos - 1
    while i >= 0 and text[i] in " \t\"'“‘([*_#>-":
        i -= 1
    return i < 0 or text[i] in ".!?:\n"
