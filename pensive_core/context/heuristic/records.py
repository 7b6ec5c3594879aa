"""Whether a document is records (rows of fields) rather than prose.

The engine reads it to choose the generator for a document when ``[context] records`` names one
other than the prose documents' own.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Sequence

from ...types import Document

__all__ = ["is_records"]

_KV_RE = re.compile(r"([^:\s][^:]{0,39}?)\s*:\s*(.*)")
_SENTENCE_END = (".", "!", "?", "…")


def is_records(document: Document) -> bool:
    """Whether a document is records (rows of fields) rather than prose.

    ``metadata["doc_type"]`` decides when it is ``"records"`` or ``"prose"``. Otherwise a
    document is records when its whole text is a JSON object or array, or when it has at least
    three non-empty lines and at least 80% of them are ``key: value`` lines with a short value
    (60 characters at most, not a sentence), JSON objects, or rows split by tabs, ``|`` or
    commas into a consistent number of fields. A chat transcript ("Anna: I finally told him
    ...") is prose: its values are sentences.

    Args:
        document: The document.

    Returns:
        True for records, False for prose.
    """
    kind = document.metadata.get("doc_type")
    if kind in ("records", "prose"):
        return bool(kind == "records")
    return _looks_like_records(document.text)


def _looks_like_records(text: str) -> bool:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            if isinstance(json.loads(stripped), (dict, list)):
                return True
        except ValueError:
            pass
    lines = [line.strip() for line in stripped.splitlines() if line.strip()][:500]
    if len(lines) < 3:
        return False
    fielded = [_is_field_line(line) for line in lines]
    best = sum(fielded)
    for delim in ("\t", "|", ","):
        rows = _rows(lines, delim)
        if rows is not None:
            best = max(best, sum(f or r for f, r in zip(fielded, rows)))
    return best >= 0.8 * len(lines)


def _is_field_line(line: str) -> bool:
    """A ``key: value`` line with a short, non-sentence value, or a JSON object on one line."""
    if line.startswith("{") and line.endswith("}"):
        try:
            return isinstance(json.loads(line), dict)
        except ValueError:
            return False
    m = _KV_RE.fullmatch(line)
    if not m or len(m.group(1).split()) > 4 or m.group(1).casefold() in ("http", "https"):
        return False
    value = m.group(2).strip()
    # a chat turn is a sentence ("Anna: Fine, thanks."); a field's value rarely is
    sentence = len(value.split()) >= 6 or value.endswith(_SENTENCE_END)
    return len(value) <= 60 and not sentence


def _rows(lines: Sequence[str], delim: str) -> list[bool] | None:
    """Which lines are rows of the most common field count (two or more) for ``delim``."""
    if delim == ",":
        fields = [next(csv.reader([line]), []) for line in lines]
    elif delim == "|":
        fields = [line.strip("|").split("|") for line in lines]
    else:
        fields = [line.split(delim) for line in lines]
    counts = Counter(len(f) for f in fields if len(f) >= 2)
    if not counts:
        return None
    width = counts.most_common(1)[0][0]
    rows = [len(f) == width for f in fields]
    if delim in (",", "|"):
        # prose has commas too: a row's fields are short, mostly a few words
        cells = [c.strip() for f, r in zip(fields, rows) if r for c in f]
        short = sum(1 for c in cells if len(c.split()) <= 4 and not c.endswith("."))
        if short < 0.8 * len(cells):
            return None
    return rows
