"""The heuristic context generator: what a document says about all of its passages, found
once per document (title, heading paths, dates, principal entities, name mentions), and each
passage's context written from it, leaving out what the passage already says.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ...graph.extract import Mention, normalize_entity
from ...temporal.dates import DateMention, find_dates
from ...types import Chunk, Document
from ..base import ContextRequest
from .names import at_sentence_start, find_names, merge_document_aliases
from .outline import document_title, find_headings, heading_paths, within_spans
from .profile import EntityProfile
from .referents import may_open_with_pronoun, render_referent, resolve_referents

__all__ = ["HeuristicContextGenerator"]

_VERSION = "heuristic-v1"

# --- principal entities -----------------------------------------------------------------------

# single capitalised words that open sentences or name calendar units, not entities
_NOT_NAMES = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december i""".split()
)
# statistical abbreviations: frequent in abstracts, never what a question is about
_STAT_ABBREVIATIONS = frozenset("ci or hr rr sd se sem iqr auc roc ns vs aor ors hrs rrs".split())
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
        if not start or not may_open_with_pronoun(chunk.text):
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

        return resolve_referents(
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
            by_referent.setdefault(render_referent(ents), []).append(word)
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
