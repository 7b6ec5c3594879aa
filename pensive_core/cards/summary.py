"""Per-document extractive summaries: the lead sentences.

Lead sentences, not centroid- or TF-IDF-scored ones: the documents Pensive holds (encyclopedic
paragraphs, abstracts, notes) say what they are about first, and the lead is stable (a new
document elsewhere never changes another's summary, so a summary changes only with its own
document).
"""

from __future__ import annotations

import re

__all__ = ["summarize"]

_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"“'(\[]?[A-Z0-9])")
# a period after these is not a sentence's end ("U.S. Army", "Dr. Smith", "e.g. this")
_ABBREV = frozenset(
    "mr mrs ms dr st jr sr prof inc co corp ltd vs etc e.g i.e no fig al gen col capt lt sgt "
    "rev hon mt ft jan feb mar apr jun jul aug sep sept oct nov dec".split()
)


def _sentences(text: str) -> list[str]:
    out, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start : m.start()].rstrip("\"'”’)]").rstrip(".!?")
        word = before.rsplit(None, 1)[-1].casefold() if before.split() else ""
        if word in _ABBREV or "." in word or len(word) == 1:
            continue  # an abbreviation ("U.S."), a title or an initial: not an end
        out.append(text[start : m.start()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def summarize(text: str, title: str | None = None, sentences: int = 2, max_chars: int = 400) -> str:
    """A document's lead sentences (at most ``sentences``, cut to ``max_chars``).

    Args:
        text: The document's text.
        title: Its title: a first line that only repeats it is skipped.
        sentences: How many lead sentences.
        max_chars: The longest summary; a longer first sentence is cut at a word, with "…".

    Returns:
        The summary ("" for a blank text).
    """
    body = text.strip()
    first, _, rest = body.partition("\n")
    if title and rest and first.strip().casefold() == title.strip().casefold():
        body = rest.strip()
    body = re.sub(r"\s+", " ", body)
    out: list[str] = []
    for s in _sentences(body):
        if out and len(" ".join([*out, s])) > max_chars:
            break
        out.append(s)
        if len(out) >= sentences:
            break
    summary = " ".join(out)
    if len(summary) > max_chars:
        summary = summary[:max_chars].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return summary
