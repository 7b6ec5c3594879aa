"""A document's outline: its markdown headings, the heading path in effect at each offset, and
its title.

Shared by the modules of the heuristic generator: the generator shows a passage's title and
section and leaves names in headings out of the principal entities; the pronoun resolver and the
entity profile leave headings out of the sentences they read. A heading is
``(start, end, level, text)``: its line's offsets in the text, 1 for ``#``, and its text without
markup.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import PurePosixPath

from ...types import Document

__all__ = ["document_title", "find_headings", "heading_paths", "within_spans"]

_ATX_RE = re.compile(r" {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_RE = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_FENCE_RE = re.compile(r" {0,3}(```|~~~)")
_BLOCK_START_RE = re.compile(r" {0,3}(?:[-*+>|]|\d+[.)])(?:\s|$)")
_MARKUP_RE = re.compile(r"\[([^\]]*)\]\([^)]*\)|[*_`]+")


def _clean(text: str) -> str:
    """Heading or title text without markdown emphasis and link targets, spaces collapsed."""
    return " ".join(_MARKUP_RE.sub(lambda m: m.group(1) or "", text).split()).strip(" :-")


def find_headings(text: str) -> list[tuple[int, int, int, str]]:
    """The markdown headings of a text: ``(start, end, level, text)``, in order.

    ATX headings (``## Results``) and setext headings (a line underlined with ``===`` or
    ``---``) outside fenced code. A setext heading must be a single line after a blank line (or
    the start), so a paragraph followed by a ``---`` rule is not taken for one.

    Args:
        text: The text (a whole document, or the window before a passage).

    Returns:
        The headings, in order; empty when the text has none.
    """
    if "#" not in text and "==" not in text and "--" not in text:
        return []  # the common case for plain prose: no line can be a heading
    out: list[tuple[int, int, int, str]] = []
    lines = text.split("\n")
    starts = [0] * len(lines)
    pos = 0
    for i, line in enumerate(lines):
        starts[i] = pos
        pos += len(line) + 1
    first = 0
    if lines and lines[0].strip() == "---":  # YAML front matter is not a setext heading
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                first = j + 1
                break
    fenced = False
    for i in range(first, len(lines)):
        line = lines[i]
        if _FENCE_RE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        atx = _ATX_RE.match(line)
        if atx:
            title = _clean(atx.group(2))
            if title:
                out.append((starts[i], starts[i] + len(line), len(atx.group(1)), title))
            continue
        if (
            i + 1 < len(lines)
            and (i == first or not lines[i - 1].strip())
            and len(line) <= 120
            and not _BLOCK_START_RE.match(line)
        ):
            under = _SETEXT_RE.match(lines[i + 1])
            if under and len(under.group(1)) >= 2:
                title = _clean(line)
                if title:
                    level = 1 if under.group(1)[0] == "=" else 2
                    out.append((starts[i], starts[i] + len(line), level, title))
    return out


def heading_paths(
    headings: Sequence[tuple[int, int, int, str]],
) -> tuple[list[int], list[tuple[str, ...]]]:
    """For each heading, its start and the path of headings in effect from there on.

    Args:
        headings: Headings as :func:`find_headings` gives them, in order.

    Returns:
        ``(starts, paths)``: the heading starts (sorted, for bisection) and, for each, the titles
        from the top level down to it (``("Results", "Revenue")``).
    """
    positions: list[int] = []
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    for start, _end, level, title in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        positions.append(start)
        paths.append(tuple(t for _, t in stack))
    return positions, paths


def document_title(document: Document, headings: Sequence[tuple[int, int, int, str]]) -> str:
    """The title of a document.

    Args:
        document: The document.
        headings: Its headings, as :func:`find_headings` gives them.

    Returns:
        ``metadata["title"]``; else its first level-1 heading (or its first heading, when
        nothing comes before it); else the words of the file name in ``metadata["source"]`` or
        ``metadata["path"]``, when it has letters; else ``""``.
    """
    meta = document.metadata.get("title")
    if isinstance(meta, str) and meta.strip():
        return " ".join(meta.split())
    if headings:
        top = next((h for h in headings if h[2] == 1), None)
        # a lower-level heading is the title only when nothing precedes it
        if top is None and not document.text[: headings[0][0]].strip():
            top = headings[0]
        if top is not None:
            return top[3]
    for field in ("source", "path"):
        value = document.metadata.get(field)
        if isinstance(value, str) and value.strip():
            stem = PurePosixPath(value.strip().replace("\\", "/").rstrip("/")).stem
            words = " ".join(re.sub(r"[_\-]+", " ", stem).split())
            if any(c.isalpha() for c in words):  # "4983.txt" names nothing
                return words
    return ""


def within_spans(spans: Sequence[tuple[int, int]], pos: int) -> bool:
    """Whether ``pos`` falls in one of these sorted, disjoint spans.

    Shared: the generator and the entity profile use it to skip names inside headings.

    Args:
        spans: ``(start, end)`` pairs, sorted and disjoint (end excluded).
        pos: An offset in the same text.

    Returns:
        True when some span holds ``pos``.
    """
    i = bisect_right(spans, (pos, sys.maxsize)) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]
