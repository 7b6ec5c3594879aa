"""Date and time-span mentions in English text, absolute and relative.

``find_dates`` returns every mention it recognises as a half-open UTC span ``[start, end)``:
"8 May 2023" is ``[2023-05-08, 2023-05-09)``, "May 2023" is the whole month, "1916-1920" runs
from the start of 1916 to the end of 1920. Relative expressions ("yesterday", "last week",
"two weeks ago", "last Friday", "in March") are resolved against the calendar day (UTC) of a
reference date and are returned only when one is given.

It runs on every passage at ingest and on every query, so the work is a handful of precompiled,
backtracking-safe regular expressions, and text with no digit is skipped outright unless a
reference date makes relative words worth looking for.

Choices where English is ambiguous (each pinned by a test):

* Weeks start on Monday. "last week" is the Monday-to-Monday week before the reference's week;
  "N weeks ago" is the whole week containing the day ``7 * N`` days before the reference, and
  "N months ago" / "N years ago" the whole calendar month / year, likewise for "in N ...".
* "last Friday" is the most recent Friday strictly before the reference day; a bare "Friday" or
  "on Friday" the most recent Friday on or before it; "this Friday" the Friday of the reference's
  week; "next Friday" the first Friday strictly after the reference day.
* "last weekend" is the Saturday and Sunday before the reference's week, "next weekend" those of
  the following week.
* A month alone ("in March") is the most recent such month on or before the reference month,
  "last March" strictly before it, "next March" strictly after it. A month alone is read only
  after a word such as "in", "of", "since", "until", "early", "mid"; "May" and "March" must
  also be capitalised there, so "this may help" or "they march" are not dates.
* A day and month without a year ("on 8 May") take the reference's year; in a range the year of
  the other end ("from 8 May to 10 June 2023").
* "2010-11" after a four-digit year with a hyphen is an ISO month when the second part is 01-12;
  otherwise ("1998-99", "2010–11" with an en dash) it is a range of years.
* Two-digit years ("Q3 24", "3Q24", "H1 '24") follow ``strptime``: 00-68 are 20xx, 69-99 19xx;
  "'90s" is the 1990s, "'00s" and "'10s" the 2000s and 2010s.
* "FY2024" is the calendar year 2024. Halves ("H1 2024") have granularity ``"range"``, as do
  weekends, seasons and "earlier this month" (from the period's start to the end of the reference
  day).
* A time of day, an ISO time or a UTC offset does not change the day: "2024-10-02T23:00-05:00"
  is 2 October.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from ..timeutil import ensure_utc

__all__ = ["DateMention", "find_dates", "parse_date", "overlap"]

Granularity = str  # "day" | "week" | "month" | "quarter" | "year" | "decade" | "range"


@dataclass(frozen=True)
class DateMention:
    """One date or time-span mention found in a text.

    Attributes:
        start: First instant of the span (inclusive), tz-aware UTC.
        end: First instant after the span (exclusive), tz-aware UTC.
        span: Character offsets ``(begin, end)`` of the mention in the text.
        text: The matched text, ``text[span[0]:span[1]]``.
        granularity: ``"day"``, ``"week"``, ``"month"``, ``"quarter"``, ``"year"``,
            ``"decade"`` or ``"range"``.
        relative: True when the span was resolved against the reference date.
    """

    start: datetime
    end: datetime
    span: tuple[int, int]
    text: str
    granularity: Granularity
    relative: bool


# --- vocabulary ---------------------------------------------------------------------------------

_MONTH_NUMBER = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9,
    "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12,
    "dec": 12,
}  # fmt: skip
_WEEKDAY_NUMBER = {
    "monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
    "thursday": 3, "thu": 3, "thur": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5,
    "sat": 5, "sunday": 6, "sun": 6,
}  # fmt: skip
_COUNT = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3,
}  # fmt: skip
_ORDINAL = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4}
_ORDINAL.update({"4th": 4, "last": 4, "final": 4})
# Meteorological seasons, northern hemisphere: (first month, number of months).
_SEASON = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

_MONTH = (
    r"(?:(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december)\b|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\b\.?)"
)
_WEEKDAY_FULL = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_WEEKDAY_ABBR = r"(?:mon|tues|tue|wed|thurs|thur|thu|fri|sat|sun)"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?\b"
_YEAR = r"(?:1[1-9]\d\d|20\d\d)(?!\d)"
_DASH = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"  # ASCII hyphen and the Unicode dashes
_COUNT_WORDS = (
    r"(?:\d{1,3}|a\s+couple\s+of|a\s+couple|couple\s+of|a\s+few|few|an|a|one|two|three|four"
    r"|five|six|seven|eight|nine|ten|eleven|twelve)"
)
# Words after a number that make it an amount, not a year ("1500 people", "2000 km").
_UNITS = (
    r"(?:people|persons?|men|women|children|kids|troops|soldiers|employees|workers|students"
    r"|members|residents|inhabitants|households|families|votes?|seats?|cases|deaths|copies"
    r"|pages?|words?|times|units?|items?|pieces?|dollars?|euros?|pounds?|yen|usd|eur|gbp"
    r"|percent|per\s+cent|km|kms|kilometres?|kilometers?|m|metres?|meters?|mi|miles?|ft|feet"
    r"|yards?|inches|cm|mm|kg|kgs|g|grams?|lbs?|oz|tons?|tonnes?|l|ml|litres?|liters?|gallons?"
    r"|acres?|hectares?|ha|sq|square|cubic|mph|km/h|kph|hp|rpm|cc|mhz|ghz|kb|mb|gb|tb|px"
    r"|points?|pts|calories|kcal|years?|months?|weeks?|days?|hours?|minutes?|seconds?)"
)

_D = f"[{_DASH}]"

# --- patterns -----------------------------------------------------------------------------------
# All patterns run on the lower-cased text and start with a literal or a small character set, so
# the regex engine skips quickly to where a match can begin; what must (not) come before a match
# is checked in Python on the few matches, which is much cheaper than a leading look-behind.
# Every quantifier is bounded or repeats a class that cannot also match what follows it, so none
# backtracks more than linearly.


# A four-digit number and what follows it: "2024-10-02T13:45Z", "2024-10", "1916-1920",
# "1998-99" (dash), "1990s" (decade) or a bare year, not an amount ("1500 people", "2019%").
_YEAR_FIRST = re.compile(
    rf"(?P<y>\d{{4}})(?:(?P<dash>[{_DASH}/])(?P<y2>\d{{1,4}})(?:(?P=dash)(?P<d>\d{{1,2}})"
    r"(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?)?"
    rf"(?![\w%/]|[{_DASH}]\d|[.,]\d)|(?P<dec>['’]?s\b)"
    rf"|(?![\w%]|[.,:]\d|{_D}\d|\s*%|\s+{_UNITS}\b))"
)
_SHORT_DECADE = re.compile(r"['’](?P<d2>\d0)s\b")
# Looked for around each month name: the day in front ("8 May", "8th of May", "8-10 May") and
# the year after it ("8 May, 2023").
_MONTH_WORD = re.compile(_MONTH)
_DAY_BEFORE = re.compile(
    rf"(?<![\w.,:/])(?P<d1>{_DAY})(?:\s*(?:{_D}|to|until|till|through)\s*(?P<d2>{_DAY}))?"
    rf"(?:\s+of)?(?:\s*{_D}\s*|\s+)$"
)
_YEAR_AFTER = re.compile(rf"(?:\s*,\s*|{_D}|\s+)(?:of\s+)?(?P<y>{_YEAR})")
# "May 8-10, 2023", "May 8, 2023", "May 8", "May 2023", "March of 2019", or a month alone.
_MONTH_FIRST = re.compile(
    rf"(?P<m>{_MONTH})(?:\s*(?P<d3>{_DAY})\s*(?:{_D}|to|until|till|through)\s*(?P<d4>{_DAY})"
    rf"\s*,?\s*(?P<y3>{_YEAR})|\s*(?:the\s+)?(?P<d>{_DAY})(?!\s*[:.]\d|\s*{_D}\s*\d)"
    rf"(?:\s*,?\s*(?P<y>{_YEAR}))?|\s*,?\s*(?:of\s+)?(?P<y2>{_YEAR}))?"
)
_QUARTER_CODE = re.compile(
    r"(?:(?P<hq>[qh])(?P<n1>[1-4])\s*(?:fy\s*)?['’]?(?P<y1>\d{4}|\d{2})"
    r"|(?P<n2>[1-4])(?P<hq2>[qh])\s*['’]?(?P<y2>\d{4}|\d{2})"
    r"|fy\s*['’]?(?P<y3>\d{4}|\d{2})\s+(?P<hq3>[qh])(?P<n3>[1-4]))(?![\w%]|[.,]\d)"
)
_QUARTER_WORDS = re.compile(
    r"(?:the\s+)?(?P<ord>first|second|third|fourth|1st|2nd|3rd|4th|last|final)\s+"
    r"(?P<unit>quarter|half)\s+(?:of\s+)?(?:(?:the\s+)?(?:fy|fiscal\s+year)\s*)?"
    rf"(?P<y4>{_YEAR})(?![\w%]|[.,]\d)"
)

# Relative expressions (only with a reference date).
_DAY_WORD = re.compile(
    r"(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today"
    r"|tonight|tomorrow|last\s+night)\b"
)
_QUALIFIED = re.compile(
    r"(?:(?P<el>earlier|later)\s+this|(?P<q>last|this|next|previous|coming|past))\s+"
    r"(?:(?P<u>(?:weekend|week|month|year|quarter|spring|summer|fall|autumn|winter)\b)"
    rf"|(?P<w>{_WEEKDAY_FULL}\b|{_WEEKDAY_ABBR}\b\.?)|(?P<m>{_MONTH}))"
)
_WEEKDAY = re.compile(rf"{_WEEKDAY_FULL}\b")
_AGO = re.compile(
    rf"(?P<n>{_COUNT_WORDS})\s+(?P<u>day|week|month|year)s?\s+(?:ago|(?P<now>from\s+now))\b"
)
# "in six months" is a time; "in six months of training" is a duration
_IN_N = re.compile(
    rf"in\s+(?P<n>{_COUNT_WORDS})\s+(?P<u>day|week|month|year)s?\b(?:'?\s+time\b)?(?!\s+of\b)"
)

# Pieces looked for just before or between mentions (searched in a short window ending there).
_PREFIX_WEEKDAY = re.compile(rf"\b(?:{_WEEKDAY_FULL}|{_WEEKDAY_ABBR})\.?\s*,?\s*$")
_PREFIX_TIME = re.compile(
    r"(?<![\w:])\d{1,2}(?:(?::\d{2}){1,2}\s*(?:[ap]\.?\s?m\.?)?|\s*[ap]\.?\s?m\.?)"
    r"\s*(?:on\s+|,\s*)?$"
)
_MONTH_CONTEXT = re.compile(
    r"\b(?:in|of|since|until|till|by|during|from|between|early|late|mid|before|after|through)"
    rf"(?:\s+|\s*{_D}\s*)(?:the\s+month\s+of\s+)?$"
)
_CONNECTOR = re.compile(rf"\s*(?:{_D}|to|until|till|through|thru|and)\s*")
_RANGE_PREFIX = re.compile(r"\b(?:from|between)\s+$")
_QUARTER_HINTS = ("q1", "q2", "q3", "q4", "1q", "2q", "3q", "4q", "h1", "h2", "fy")
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_STEMS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_QUALIFIERS = ("last", "this", "next", "previous", "coming", "past")
_DAY_WORDS = ("the day", "yesterday", "today", "tonight", "tomorrow", "last night")
_QUALIFIER_WORDS = (*_QUALIFIERS, "earlier", "later")


def _scan(pattern: re.Pattern[str], low: str, bad: str = "") -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` not preceded by a letter, digit, ``_`` or a character of ``bad``.

    A match refused for what precedes it does not hide one starting inside it.
    """
    pos = 0
    search = pattern.search
    while True:
        m = search(low, pos)
        if m is None:
            return
        s = m.start()
        prev = low[s - 1] if s else " "
        if prev.isalnum() or prev == "_" or prev in bad:
            pos = s + 1
            continue
        yield m
        pos = m.end() if m.end() > s else s + 1


def _at(low: str, words: tuple[str, ...], pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` starting where one of ``words`` starts a word.

    Finding the words with ``str.find`` and matching only there is several times faster than
    letting the regex engine try every position.
    """
    find, match = low.find, pattern.match
    for word in words:
        i = find(word)
        while i >= 0:
            if not i or not (low[i - 1].isalnum() or low[i - 1] == "_"):
                m = match(low, i)
                if m is not None:
                    yield m
            i = find(word, i + 1)


# --- internal representation --------------------------------------------------------------------


class _Atom:
    """A candidate mention: resolved dates, or a month/day still waiting for a year."""

    __slots__ = ("s", "e", "lo", "hi", "gran", "rel", "month", "day", "qual")

    def __init__(
        self,
        s: int,
        e: int,
        lo: date | None,
        hi: date | None,
        gran: str,
        rel: bool = False,
        month: int = 0,
        day: int = 0,
        qual: str = "",
    ) -> None:
        self.s, self.e, self.lo, self.hi, self.gran, self.rel = s, e, lo, hi, gran, rel
        self.month, self.day, self.qual = month, day, qual


def _add_months(year: int, month: int, k: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + k
    return index // 12, index % 12 + 1


def _month_span(year: int, month: int, count: int = 1) -> tuple[date, date]:
    y2, m2 = _add_months(year, month, count)
    return date(year, month, 1), date(y2, m2, 1)


def _year_span(year: int, count: int = 1) -> tuple[date, date]:
    return date(year, 1, 1), date(year + count, 1, 1)


def _day(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _two_digit_year(text: str) -> int:
    value = int(text)
    if len(text) == 4:
        return value
    return 2000 + value if value <= 68 else 1900 + value


def _month_of(token: str) -> int:
    return _MONTH_NUMBER[token.lower().rstrip(".")]


def _int(token: str) -> int:
    return int(token.rstrip("stndrhSTNDRH"))


def _valid_year(year: int) -> bool:
    return 1 <= year <= 9998


# --- absolute patterns --------------------------------------------------------------------------


def _year_first_ok(low: str, s: int) -> int | None:
    """Where a four-digit match really begins (``FY`` included), or None when it is not a date."""
    if s == 0:
        return s
    prev = low[s - 1]
    if prev == "y" and low[max(0, s - 2) : s] == "fy":
        return s - 2 if s < 3 or not low[s - 3].isalnum() else None
    if prev.isalnum() or prev in "_$€£¥#@+":
        return None
    before = low[s - 2] if s >= 2 else " "
    if prev in ".,:/" + _DASH and before.isdigit():
        return None  # "2,019", "3.2019", "555-1920"
    if prev == " " and before in "$€£¥":
        return None  # "$ 2000"
    if prev == " " and before == "y" and low[max(0, s - 3) : s - 1] == "fy":
        return s - 3 if s < 4 or not low[s - 4].isalnum() else None
    return s


def _absolute(text: str, low: str, has_digit: bool) -> list[_Atom]:
    atoms: list[_Atom] = []
    add = atoms.append
    for word in _at(low, _MONTH_STEMS, _MONTH_WORD):
        _around_month(text, low, word, atoms)
    if not has_digit:
        return atoms  # only months alone, for a reference to resolve

    for m in _YEAR_FIRST.finditer(low):
        start = _year_first_ok(low, m.start())
        if start is None:
            continue
        y1 = int(m["y"])
        if m["dash"]:
            _dashed(m, start, y1, atoms)
        elif m["dec"]:
            if y1 % 10 == 0 and 1100 <= y1 <= 2090:
                add(_Atom(start, m.end(), *_year_span(y1, 10), "decade"))
            elif m["dec"][0] != "s" and 1100 <= y1 <= 2099:  # "2019's election"
                add(_Atom(start, m.start("dec"), *_year_span(y1), "year"))
        elif 1100 <= y1 <= 2099:
            add(_Atom(start, m.end(), *_year_span(y1), "year"))

    if "0s" in low:
        for m in _scan(_SHORT_DECADE, low, "$€£¥.,"):
            tens = int(m["d2"])
            first = 2000 + tens if tens <= 10 else 1900 + tens
            add(_Atom(m.start(), m.end(), *_year_span(first, 10), "decade"))

    if any(hint in low for hint in _QUARTER_HINTS):
        for m in _scan(_QUARTER_CODE, low):
            _quarter(m, atoms)
    if "quarter" in low or "half" in low:
        for m in _scan(_QUARTER_WORDS, low):
            _quarter(m, atoms)
    return atoms


def _dashed(m: re.Match[str], start: int, y1: int, atoms: list[_Atom]) -> None:
    second = m["y2"]
    if m["d"]:  # ISO date, with or without a time
        d = _day(y1, int(second), int(m["d"])) if len(second) <= 2 else None
        if d is not None and _valid_year(y1):
            atoms.append(_Atom(start, m.end(), d, d + timedelta(days=1), "day"))
        return
    if not 1100 <= y1 <= 2099 or len(second) not in (2, 4):
        return
    if len(second) == 2 and m["dash"] in "-/" and 1 <= int(second) <= 12:
        atoms.append(_Atom(start, m.end(), *_month_span(y1, int(second)), "month"))
        return
    if len(second) == 2:
        y2 = y1 // 100 * 100 + int(second)
        if y2 <= y1:
            y2 += 100
    else:
        y2 = int(second)
    if y1 < y2 <= 2099:
        # Two years; assembly joins them into one range through the dash between them.
        atoms.append(_Atom(start, m.start("y2") - 1, *_year_span(y1), "year"))
        atoms.append(_Atom(m.start("y2"), m.end(), *_year_span(y2), "year"))


def _day_range(
    s: int, e: int, month: int, first: str, last: str, year: str, atoms: list[_Atom]
) -> None:
    lo, hi = _day(int(year), month, _int(first)), _day(int(year), month, _int(last))
    if lo is not None and hi is not None and lo < hi:
        atoms.append(_Atom(s, e, lo, hi + timedelta(days=1), "range"))


def _around_month(text: str, low: str, word: re.Match[str], atoms: list[_Atom]) -> None:
    """The dates built on one month name: "8 May 2023", "May 8, 2023", "May 2023", "May"."""
    s, e = word.span()
    month = _month_of(word[0])
    dated = False
    after = _MONTH_FIRST.match(low, s)
    if after is not None and after["d3"]:
        _day_range(s, after.end(), month, after["d3"], after["d4"], after["y3"], atoms)
        dated = True
    elif after is not None and after["d"]:
        _day_month(low, s, after.end(), month, after["d"], after["y"], atoms)
        dated = True
    elif after is not None and after["y2"]:
        atoms.append(_Atom(s, after.end(), *_month_span(int(after["y2"]), month), "month"))
        dated = True
    before = _DAY_BEFORE.search(low, max(0, s - 24), s)
    if before is not None:
        year = _YEAR_AFTER.match(low, e)
        end = year.end() if year is not None else e
        if before["d2"] and year is not None:
            _day_range(before.start(), end, month, before["d1"], before["d2"], year["y"], atoms)
        elif before["d2"]:  # "8-10 May" without a year: keep the last day, which has the month
            _day_month(low, before.start("d2"), end, month, before["d2"], None, atoms)
        else:
            _day_month(low, before.start(), end, month, before["d1"], year and year["y"], atoms)
    elif not dated:
        _month_alone(text, low, s, e, atoms)


def _day_month(
    low: str, start: int, end: int, month: int, day_text: str, year: str | None, atoms: list[_Atom]
) -> None:
    day = _int(day_text)
    # A weekday and a time of day in front belong to the mention ("1:56 pm on Monday, 8 May").
    before = _PREFIX_WEEKDAY.search(low, max(0, start - 12), start)
    if before is not None:
        start = before.start()
    before = _PREFIX_TIME.search(low, max(0, start - 16), start)
    if before is not None:
        start = before.start()
    if year is None:
        if _day(2000, month, day) is not None:  # 2000 is a leap year: 29 February may stand
            atoms.append(_Atom(start, end, None, None, "day", month=month, day=day))
        return
    d = _day(int(year), month, day)
    if d is not None:
        atoms.append(_Atom(start, end, d, d + timedelta(days=1), "day"))


def _month_alone(text: str, low: str, s: int, e: int, atoms: list[_Atom]) -> None:
    """A month without day or year, kept only after a word such as "in" or "since"."""
    word = text[s:e]
    # "you may go", "they march": the verbs are lower case, the months capitalised.
    if word.lower() in ("may", "march") and not word[0].isupper():
        return
    if _MONTH_CONTEXT.search(low, max(0, s - 30), s) is None:
        return
    atoms.append(_Atom(s, e, None, None, "month", month=_month_of(word)))


def _quarter(m: re.Match[str], atoms: list[_Atom]) -> None:
    groups = m.groupdict()
    if groups.get("ord"):
        unit = "q" if m["unit"] == "quarter" else "h"
        number = _ORDINAL[m["ord"]]
        if unit == "h":
            number = 2 if number >= 2 else 1
        year = int(m["y4"])
    else:
        unit = m["hq"] or m["hq2"] or m["hq3"]
        number = int(m["n1"] or m["n2"] or m["n3"])
        year = _two_digit_year(m["y1"] or m["y2"] or m["y3"])
        if unit == "h" and number > 2:
            return
    if not 1100 <= year <= 2099:
        return
    months = 3 if unit == "q" else 6
    lo, hi = _month_span(year, (number - 1) * months + 1, months)
    atoms.append(_Atom(m.start(), m.end(), lo, hi, "quarter" if unit == "q" else "range"))


# --- relative patterns --------------------------------------------------------------------------


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _count(token: str) -> int:
    words = token.split()
    if words[0].isdigit():
        return int(words[0])
    return _COUNT[words[1] if words[0] == "a" and len(words) > 1 else words[0]]


def _shifted(ref: date, unit: str, count: int) -> tuple[date, date]:
    """The whole day, week, month or year ``count`` units away from the reference."""
    if unit == "day":
        d = ref + timedelta(days=count)
        return d, d + timedelta(days=1)
    if unit == "week":
        lo = _week_start(ref + timedelta(days=7 * count))
        return lo, lo + timedelta(days=7)
    if unit == "month":
        return _month_span(*_add_months(ref.year, ref.month, count))
    return _year_span(ref.year + count)


def _off_calendar() -> contextlib.AbstractContextManager[None]:
    """Skip a relative date that falls outside years 1 to 9999, where ``date`` cannot go
    ("tomorrow" against 31 December 9999, "999 years ago" against 2024)."""
    return contextlib.suppress(OverflowError, ValueError)


def _relative(text: str, low: str, ref: date) -> list[_Atom]:
    atoms: list[_Atom] = []
    add = atoms.append
    one = timedelta(days=1)

    for m in _at(low, _DAY_WORDS, _DAY_WORD):
        word = " ".join(m[0].split())
        shift = {
            "the day before yesterday": -2,
            "yesterday": -1,
            "last night": -1,
            "tomorrow": 1,
            "the day after tomorrow": 2,
        }.get(word, 0)
        with _off_calendar():
            d = ref + timedelta(days=shift)
            add(_Atom(m.start(), m.end(), d, d + one, "day", rel=True))

    for m in _at(low, _QUALIFIER_WORDS, _QUALIFIED):
        with _off_calendar():
            _qualified(text, m, ref, atoms)

    if "day" in low:
        for m in _at(low, _WEEKDAY_NAMES, _WEEKDAY):
            with _off_calendar():
                d = ref - timedelta(days=(ref.weekday() - _WEEKDAY_NUMBER[m[0]]) % 7)
                add(_Atom(m.start(), m.end(), d, d + one, "day", rel=True))

    if "ago" in low or "from now" in low:
        for m in _scan(_AGO, low):
            count = _count(m["n"]) * (1 if m["now"] else -1)
            unit = m["u"]
            with _off_calendar():
                add(_Atom(m.start(), m.end(), *_shifted(ref, unit, count), unit, rel=True))
    for m in _scan(_IN_N, low):
        unit = m["u"]
        with _off_calendar():
            add(_Atom(m.start(), m.end(), *_shifted(ref, unit, _count(m["n"])), unit, rel=True))
    return atoms


def _qualified(text: str, m: re.Match[str], ref: date, atoms: list[_Atom]) -> None:
    """ "last week", "earlier this year", "next Friday", "last March"."""
    qual = m["q"] or ""
    if m["u"]:
        if qual == "past":
            return  # "the past year" is the last twelve months, not a calendar year
        span = _period(m, ref)
        if span is not None:
            atoms.append(_Atom(m.start(), m.end(), span[0], span[1], span[2], rel=True))
    elif m["w"]:
        target = _WEEKDAY_NUMBER[m["w"].rstrip(".")]
        if qual in ("last", "past", "previous"):
            d = ref - timedelta(days=(ref.weekday() - target) % 7 or 7)
        elif qual in ("next", "coming"):
            d = ref + timedelta(days=(target - ref.weekday()) % 7 or 7)
        elif qual == "this":
            d = _week_start(ref) + timedelta(days=target)
        else:
            return
        atoms.append(_Atom(m.start(), m.end(), d, d + timedelta(days=1), "day", rel=True))
    elif m["m"] and qual in ("last", "this", "next"):
        word = text[m.start("m") : m.end("m")]
        if word.lower() in ("may", "march") and not word[0].isupper():
            return
        month = _month_of(word)
        atoms.append(_Atom(m.start(), m.end(), None, None, "month", month=month, qual=qual))


def _period(m: re.Match[str], ref: date) -> tuple[date, date, str] | None:
    unit = m["u"]
    if m["el"]:
        if unit == "week":
            lo = _week_start(ref)
        elif unit == "month":
            lo = ref.replace(day=1)
        elif unit == "year":
            lo = date(ref.year, 1, 1)
        else:
            return None
        end_of = {"week": lo + timedelta(days=7), "month": _month_span(ref.year, ref.month)[1]}
        if m["el"] == "earlier":
            return lo, ref + timedelta(days=1), "range"
        return ref, end_of.get(unit, date(ref.year + 1, 1, 1)), "range"
    step = {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[m["q"]]
    if unit == "week":
        lo = _week_start(ref) + timedelta(days=7 * step)
        return lo, lo + timedelta(days=7), "week"
    if unit == "weekend":
        lo = _week_start(ref) + timedelta(days=7 * step + 5)
        return lo, lo + timedelta(days=2), "range"
    if unit == "month":
        return (*_month_span(*_add_months(ref.year, ref.month, step)), "month")
    if unit == "quarter":
        first = (ref.month - 1) // 3 * 3 + 1
        return (*_month_span(*_add_months(ref.year, first, 3 * step), 3), "quarter")
    if unit == "year":
        return (*_year_span(ref.year + step), "year")
    # Seasons: "this summer" is the reference year's; "last" / "next" the one before / after it,
    # skipping a season the reference day is in.
    first_month = _SEASON[unit]
    year = ref.year - 1 if unit == "winter" and ref.month < 3 else ref.year
    lo, hi = _month_span(year, first_month, 3)
    if step < 0:
        while hi > ref or lo <= ref < hi:
            year -= 1
            lo, hi = _month_span(year, first_month, 3)
    elif step > 0:
        while lo <= ref:
            year += 1
            lo, hi = _month_span(year, first_month, 3)
    return lo, hi, "range"


def _resolve_partial(atom: _Atom, ref: date) -> bool:
    """Give a month or day-and-month its year from the reference; False when it has none."""
    with _off_calendar():
        return _resolve_partial_in(atom, ref)
    return False  # the month falls outside the calendar


def _resolve_partial_in(atom: _Atom, ref: date) -> bool:
    if atom.day:
        d = _day(ref.year, atom.month, atom.day)
        if d is None:
            return False
        atom.lo, atom.hi = d, d + timedelta(days=1)
    else:
        month, year = atom.month, ref.year
        if atom.qual == "last":
            year = ref.year if month < ref.month else ref.year - 1
        elif atom.qual == "next":
            year = ref.year if month > ref.month else ref.year + 1
        elif atom.qual != "this" and month > ref.month:
            year -= 1
        atom.lo, atom.hi = _month_span(year, month)
    atom.rel = True
    return True


# --- assembly -----------------------------------------------------------------------------------


def _longest_first(atoms: list[_Atom]) -> list[_Atom]:
    """Keep non-overlapping atoms, longer ones first, and return them in text order."""
    kept: list[_Atom] = []
    for atom in sorted(atoms, key=lambda a: (a.s - a.e, a.s)):
        if all(atom.e <= k.s or atom.s >= k.e for k in kept):
            kept.append(atom)
    kept.sort(key=lambda a: a.s)
    return kept


def _joins(text: str, a: _Atom, b: _Atom) -> int | None:
    """Where a range from ``a`` to ``b`` begins in the text, or None when they are not one."""
    between = _CONNECTOR.fullmatch(text, a.e, b.s)
    if between is None:
        return None
    prefix = _RANGE_PREFIX.search(text, max(0, a.s - 10), a.s)
    if "and" in between[0] and (prefix is None or prefix[0][0] != "b"):
        return None  # "2019 and 2020" are two years; "between 2019 and 2020" is one range
    return prefix.start() if prefix is not None else a.s


def _fill(atom: _Atom, anchor: date, after: bool) -> bool:
    """Give a month or day-and-month the year that puts it next to ``anchor`` in a range."""
    with _off_calendar():
        return _fill_in(atom, anchor, after)
    return False  # the year falls outside the calendar


def _fill_in(atom: _Atom, anchor: date, after: bool) -> bool:
    year = anchor.year
    first = _day(year, atom.month, atom.day or 1)
    if first is not None and after and first < anchor:
        year += 1
    elif first is not None and not after and first > anchor:
        year -= 1
    first = _day(year, atom.month, atom.day or 1)
    if first is None:
        return False
    atom.hi = first + timedelta(days=1) if atom.day else _month_span(year, atom.month)[1]
    atom.lo = first  # after ``hi``, which may fall off the calendar
    return True


def _assemble(text: str, atoms: list[_Atom], ref: date | None) -> list[_Atom]:
    atoms = _longest_first(atoms)
    out: list[_Atom] = []
    i = 0
    while i < len(atoms):
        a = atoms[i]
        b = atoms[i + 1] if i + 1 < len(atoms) else None
        begin = _joins(text, a, b) if b is not None else None
        if begin is not None and a.lo is None and b.lo is not None:  # type: ignore[union-attr]
            # "from March to June 2020": the open end takes the year of the closed one.
            _fill(a, b.lo, after=False)  # type: ignore[union-attr,arg-type]
        if a.lo is None and not (ref is not None and _resolve_partial(a, ref)):
            i += 1
            continue
        if begin is not None and b is not None and b.lo is None:
            _fill(b, a.lo, after=True)  # type: ignore[arg-type]
        if begin is not None and b is not None and b.lo is not None and a.lo < b.hi:  # type: ignore[operator]
            out.append(_Atom(begin, b.e, a.lo, b.hi, "range", rel=a.rel or b.rel))
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _midnight(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=timezone.utc)


def _reference_day(reference: datetime | str | None) -> date | None:
    ref = ensure_utc(reference)
    return None if ref is None else ref.date()


def find_dates(text: str, reference: datetime | str | None = None) -> list[DateMention]:
    """Find the date and time-span mentions in a text.

    Args:
        text: Any English text.
        reference: The date relative expressions are resolved against ("yesterday" in a chat
            turn means the day before the session's date): a datetime (naive taken as UTC) or an
            ISO-8601 string. Its calendar day in UTC is used. Without it, relative expressions,
            months alone and days without a year are not returned.

    Returns:
        All mentions, in text order and non-overlapping (the longest match wins; a range such as
        "from 1811 to 1827" is one mention).

    Raises:
        InputError: If ``reference`` cannot be read as a date.
    """
    ref = _reference_day(reference)
    has_digit = any(digit in text for digit in "0123456789")  # ten str scans beat one regex
    if not has_digit and ref is None:
        return []  # every absolute pattern has a digit in it
    low = text.lower()
    if len(low) != len(text):  # a few characters lower-case to two; keep offsets aligned
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    atoms = _absolute(text, low, has_digit)
    if ref is not None:
        atoms.extend(_relative(text, low, ref))
    if not atoms:
        return []
    mentions = []
    for a in _assemble(low, atoms, ref):
        assert a.lo is not None and a.hi is not None
        mentions.append(
            DateMention(
                start=_midnight(a.lo),
                end=_midnight(a.hi),
                span=(a.s, a.e),
                text=text[a.s : a.e],
                granularity=a.gran,
                relative=a.rel,
            )
        )
    return mentions


def parse_date(text: str, reference: datetime | str | None = None) -> DateMention | None:
    """Read the single date a short string names.

    Meant for headers and metadata fields: a LoCoMo session header "1:56 pm on 8 May, 2023",
    "2021", "March 2019", "2024-10-02", "Q3 2024", "1916-1920".

    Args:
        text: A short string naming one date or span.
        reference: As for ``find_dates``; needed for relative strings such as "yesterday".

    Returns:
        The longest mention in the string (the first of equal ones), or None when there is none.

    Raises:
        InputError: If ``reference`` cannot be read as a date.
    """
    mentions = find_dates(text.strip(), reference)
    if not mentions:
        return None
    return max(mentions, key=lambda m: m.span[1] - m.span[0])


def overlap(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> float:
    """Return the fraction of span b that span a covers.

    Spans are half-open ``[start, end)``; a zero-length b counts as covered when it lies inside a.

    Args:
        a_start: Start of the covering span.
        a_end: End of the covering span (exclusive).
        b_start: Start of the covered span.
        b_end: End of the covered span (exclusive).

    Returns:
        A fraction in ``[0, 1]``: 0 when the spans are disjoint, 1 when a contains b.
    """
    if b_end <= b_start:
        return 1.0 if a_start <= b_start < a_end else 0.0
    shared = min(a_end, b_end) - max(a_start, b_start)
    if shared <= timedelta(0):
        return 0.0
    return min(1.0, shared / (b_end - b_start))
