"""Query-biased snippets: show the part of a passage that matched, not its first line.

A source file's hard line breaks are not sentence ends here: a line broken at 100 columns is
joined to the next before sentences are found, so a snippet never stops at "Every Monday the"
because the file wrapped there. Paragraph breaks, headings and list items still separate.
"""

from __future__ import annotations

import re

from .chunking import split_sentences
from .tokenize import Tokenizer

__all__ = ["snippet", "join_soft_breaks"]

_TOKENIZER: Tokenizer | None = None
_ELLIPSIS = "…"
# A line that ends a block (blank, a Markdown heading, a table row, a fence) and one that starts
# a block (those, or a list item: a list item's wrapped continuation is joined to it).
_ENDS_BLOCK = re.compile(r"^\s*$|^\s*(?:#{1,6}\s|\||```|~~~)")
_STARTS_BLOCK = re.compile(r"^\s*$|^\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|\||```|~~~)")
_MIN_TAIL = 12  # a clipped sentence tail shorter than this says nothing: stop before it


def join_soft_breaks(text: str) -> str:
    """Replace each line break inside a paragraph by a space (same length, same offsets).

    A break stays after a blank line, a heading, a table row or a fence, and before those or
    a list item.

    Args:
        text: A passage.

    Returns:
        ``text`` with its soft line breaks made spaces.
    """
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i + 1 < len(lines):
            hard = _ENDS_BLOCK.match(line) or _STARTS_BLOCK.match(lines[i + 1])
            out.append("\n" if hard else " ")
    return "".join(out)


def _terms(text: str) -> set[str]:
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = Tokenizer()
    return set(_TOKENIZER.tokenize(text))


def _clip_words(words: list[str], room: int) -> list[str]:
    """The leading words of ``words`` whose joined length fits ``room``."""
    out: list[str] = []
    used = -1
    for w in words:
        if used + 1 + len(w) > room:
            break
        out.append(w)
        used += 1 + len(w)
    return out


def _best_window(words: list[str], terms: set[str], room: int) -> tuple[int, int]:
    """The run of ``words`` fitting ``room`` that holds the most query terms, the matches as
    near its middle as may be (then the earliest)."""
    hits = [i for i, w in enumerate(words) if _terms(w) & terms]
    best, best_key = (0, 1), (-1, 0, 0)
    for i in range(len(words)):
        used, j = len(words[i]), i + 1
        while j < len(words) and used + 1 + len(words[j]) <= room:
            used += 1 + len(words[j])
            j += 1
        inside = [h for h in hits if i <= h < j]
        balance = abs((inside[0] - i) - (j - 1 - inside[-1])) if inside else 0
        key = (len(inside), -balance, -i)
        if key > best_key:
            best, best_key = (i, j), key
    return best


def snippet(text: str, query: str, width: int = 200) -> str:
    """Return the stretch of ``text`` that best matches ``query``, at most ``width`` characters.

    The sentence sharing the most distinct query terms (stemmed, stop words dropped) is the
    anchor; ties go to the earlier sentence. The sentences after it in its paragraph are added
    while they fit, then the words of the next one, clipped at a word with "…". When nothing
    follows in the paragraph, the sentences before it there are added while they fit. An anchor
    longer than ``width`` shows its run of words holding the most query terms. Whitespace and
    line breaks are collapsed; "… " leads when the snippet starts after the passage's start.

    Args:
        text: A passage.
        query: The question it was retrieved for.
        width: Most characters returned, ellipses included (at least 10).

    Returns:
        A single-line excerpt of ``text``; empty for an empty passage.
    """
    width = max(width, 10)
    joined = join_soft_breaks(text)
    spans = split_sentences(joined)
    if not spans:
        return ""
    sentences = [(" ".join(joined[s:e].split()), para) for s, e, para in spans]
    terms = _terms(query)
    scores = [len(terms & _terms(s)) for s, _ in sentences]
    best = max(range(len(spans)), key=lambda i: (scores[i], -i))
    lead = f"{_ELLIPSIS} " if best > 0 else ""
    anchor = sentences[best][0]
    if len(lead) + len(anchor) > width:
        words = anchor.split()
        room = width - len(lead) - 2  # an ellipsis may close either side
        i, j = _best_window(words, terms, room)
        if i > 0 and not lead:
            lead = f"{_ELLIPSIS} "
        tail = _ELLIPSIS if j < len(words) else ""
        return lead + " ".join(words[i:j]) + tail
    first, last, used = best, best, len(lead) + len(anchor)
    tail = ""
    for nxt in range(best + 1, len(sentences)):
        sentence, starts_paragraph = sentences[nxt]
        if starts_paragraph:  # a heading glued to prose reads as nonsense: stay in the paragraph
            break
        if used + 1 + len(sentence) <= width:
            last, used = nxt, used + 1 + len(sentence)
            continue
        part = _clip_words(sentence.split(), width - used - 2)
        if part and len(" ".join(part)) >= _MIN_TAIL:
            tail = " " + " ".join(part) + _ELLIPSIS
        break
    if last == len(sentences) - 1 or sentences[last + 1][1]:
        # nothing follows in the paragraph: the sentences before it in the paragraph, as they fit
        while (
            first > 0
            and not sentences[first][1]
            and used + 1 + len(sentences[first - 1][0]) <= width
        ):
            first -= 1
            used += 1 + len(sentences[first][0])
        lead = f"{_ELLIPSIS} " if first > 0 else ""
    body = " ".join(s for s, _ in sentences[first : last + 1])
    return lead + body + tail
