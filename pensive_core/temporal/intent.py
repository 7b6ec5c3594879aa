"""What time a question asks about: "as of 2015", "from 1811 to 1827", "before May", "now",
"when did ...", "how has ... changed"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from .dates import find_dates

__all__ = ["TimeIntent", "parse_intent"]


@dataclass(frozen=True)
class TimeIntent:
    """The time a question asks about.

    Args:
        kind: ``as_of`` | ``during`` | ``before`` | ``after`` | ``latest`` | ``when`` |
            ``change`` (see :class:`pensive_core.types.TimeScope`).
        start: Inclusive start of the time asked about, if bounded below.
        end: Exclusive end, if bounded above.
        relative: The time came from a relative phrase ("last year"), so it depends on now.
    """

    kind: str
    start: datetime | None = None
    end: datetime | None = None
    relative: bool = False


_CHANGE = re.compile(
    r"\b(?:how (?:has|have|did|does|do|had) .{1,80}? (?:change|changed|evolve|evolved|develop|"
    r"developed|shift|shifted|grow|grown|moved)|(?:has|have|did|had) .{1,60}? change[ds]?\b|"
    r"what (?:has )?changed|history of|(?<!is )(?<!are )(?<!was )(?<!were )(?<!be )used to|"
    r"previously|formerly|originally|at first|before (?:that|it changed)|over time|"
    r"over the years|what was .{1,60} before\b)",
    re.IGNORECASE,
)
# one cheap look before the real parse: most questions name no time and ask for none
_ANY_CUE = re.compile(
    r"\d|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri|sat|sun|"
    r"yesterday|today|tomorrow|tonight|last|next|this|ago|now|current|latest|recent|present|"
    r"still|nowadays|these days|newest|up to date|when|what (?:year|date|day|month|time)|which|"
    r"how long|on what|in what|chang|evolv|develop|shift|grow|grown|moved|history|used to|"
    r"previous|formerly|originally|at first|over time|over the years|before|earlier|week|month|"
    r"year|quarter|decade|century|spring|summer|autumn|fall|winter|weekend)",
    re.IGNORECASE,
)
_LATEST = re.compile(
    r"\b(?:current(?:ly)?|now|today|latest|most recent(?:ly)?|at present|presently|these days|"
    r"nowadays|still|as it stands|up to date|newest)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(
    r"^\s*(?:when\b|what (?:year|date|day|month|time)\b|which (?:year|date|day|month)\b|"
    r"how long ago\b|on what (?:date|day)\b|in what year\b)",
    re.IGNORECASE,
)
# the word(s) right before a date say how it bounds the question
_BEFORE = re.compile(r"\b(?:before|prior to|until|till|up to|by|earlier than)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|since|following|later than|from)\s*$", re.IGNORECASE)
_AS_OF = re.compile(r"\b(?:as of|as at|at the time of|at)\s*$", re.IGNORECASE)


def parse_intent(text: str, reference: datetime | None = None) -> TimeIntent | None:
    """Read the time a question asks about.

    Args:
        text: The question.
        reference: "Now", for relative phrases ("last year"); None leaves them unread.

    Returns:
        The intent, or None when the question names no time and asks for none.
    """
    if not _ANY_CUE.search(text):
        return None
    change = bool(_CHANGE.search(text))
    found = find_dates(text, reference)
    if found:
        # the last date is usually the question's time ("who led X in 1990", "... as of 2015")
        m = found[-1]
        before = text[: m.span[0]]
        relative = any(d.relative for d in found)
        if (
            m.granularity == "range"
            or len(found) >= 2
            and re.search(r"\b(?:between|from)\b", text[: found[0].span[0]][-12:], re.IGNORECASE)
        ):
            start = min(d.start for d in found) if m.granularity != "range" else m.start
            return TimeIntent("change" if change else "during", start, m.end, relative)
        if _AS_OF.search(before):
            return TimeIntent("as_of", None, m.end, relative)
        if _BEFORE.search(before):
            return TimeIntent("before", None, m.start, relative)
        if _AFTER.search(before):
            return TimeIntent("after", m.start, None, relative)
        return TimeIntent("change" if change else "during", m.start, m.end, relative)
    if change:
        return TimeIntent("change")
    if _WHEN.search(text):
        return TimeIntent("when")
    if _LATEST.search(text):
        return TimeIntent("latest")
    return None
