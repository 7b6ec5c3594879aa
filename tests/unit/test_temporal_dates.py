"""Date mentions in text: absolute forms, ranges, relative expressions and what is not a date."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from pensive_core.errors import InputError
from pensive_core.temporal import dates
from pensive_core.temporal.dates import DateMention, find_dates, overlap, parse_date
from tests.conftest import DATA

# Monday 8 May 2023, the first LoCoMo session's date.
REF = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def utc(y, m=1, d=1):
    return datetime(y, m, d, tzinfo=timezone.utc)


def one(text, reference=None):
    """The only mention in ``text``, as (text, start, end, granularity)."""
    found = find_dates(text, reference)
    assert len(found) == 1, found
    m = found[0]
    return m.text, m.start, m.end, m.granularity


def test_public_names():
    assert dates.__all__ == ["DateMention", "find_dates", "parse_date", "overlap"]


def test_mention_fields():
    text = "We met on 8 May 2023 in Paris."
    (m,) = find_dates(text)
    assert m == DateMention(
        start=utc(2023, 5, 8),
        end=utc(2023, 5, 9),
        span=(10, 20),
        text="8 May 2023",
        granularity="day",
        relative=False,
    )
    assert text[m.span[0] : m.span[1]] == m.text
    assert m.start.tzinfo is timezone.utc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-10-02", ("2024-10-02", utc(2024, 10, 2), utc(2024, 10, 3), "day")),
        (
            "at 2024-10-02T13:45:00Z",
            ("2024-10-02T13:45:00Z", utc(2024, 10, 2), utc(2024, 10, 3), "day"),
        ),
        (
            "2024-10-02T23:00-05:00",
            ("2024-10-02T23:00-05:00", utc(2024, 10, 2), utc(2024, 10, 3), "day"),
        ),
        ("2024/10/02", ("2024/10/02", utc(2024, 10, 2), utc(2024, 10, 3), "day")),
        ("2024-10", ("2024-10", utc(2024, 10), utc(2024, 11), "month")),
        ("2010-11", ("2010-11", utc(2010, 11), utc(2010, 12), "month")),
    ],
)
def test_iso(text, expected):
    assert one(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "8 May 2023",
        "8th of May, 2023",
        "May 8, 2023",
        "May 8th 2023",
        "Monday, 8 May 2023",
        "1:56 pm on 8 May, 2023",
        "8-May-2023",
        "may 8 , 2023",
        "MAY 8, 2023",
    ],
)
def test_day_month_year(text):
    assert one(text) == (text, utc(2023, 5, 8), utc(2023, 5, 9), "day")


def test_abbreviated_months():
    assert one("Sept. 3, 2019")[1:] == (utc(2019, 9, 3), utc(2019, 9, 4), "day")
    assert one("Jan 1 , 1985")[1:3] == (utc(1985, 1, 1), utc(1985, 1, 2))
    assert one("on Dec 31 2020")[1] == utc(2020, 12, 31)


def test_invalid_calendar_day_is_not_a_day():
    found = find_dates("31 February 2023")
    assert [(m.text, m.granularity) for m in found] == [("February 2023", "month")]


def test_day_without_year_needs_a_reference():
    assert find_dates("on 8 May we met") == []
    (m,) = find_dates("on 8 May we met", REF)
    assert (m.text, m.start, m.relative) == ("8 May", utc(2023, 5, 8), True)


@pytest.mark.parametrize(
    ("text", "mention", "month"),
    [
        ("in May 2023", "May 2023", utc(2023, 5)),
        ("in March of 2019", "March of 2019", utc(2019, 3)),
        ("Feb 2016", "Feb 2016", utc(2016, 2)),
        ("September, 1990", "September, 1990", utc(1990, 9)),
    ],
)
def test_month_year(text, mention, month):
    m_text, start, end, granularity = one(text)
    assert (m_text, start, granularity) == (mention, month, "month")
    assert end == (month + timedelta(days=32)).replace(day=1)


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("Q3 2024", utc(2024, 7), utc(2024, 10), "quarter"),
        ("Q3 FY2024", utc(2024, 7), utc(2024, 10), "quarter"),
        ("q1 '24", utc(2024, 1), utc(2024, 4), "quarter"),
        ("3Q24", utc(2024, 7), utc(2024, 10), "quarter"),
        ("the third quarter of 2024", utc(2024, 7), utc(2024, 10), "quarter"),
        ("the fourth quarter of fiscal year 2019", utc(2019, 10), utc(2020, 1), "quarter"),
        ("H1 2024", utc(2024, 1), utc(2024, 7), "range"),
        ("the second half of 2021", utc(2021, 7), utc(2022, 1), "range"),
        ("FY2024", utc(2024), utc(2025), "year"),
    ],
)
def test_quarters_halves_fiscal_years(text, start, end, granularity):
    assert one(text)[1:] == (start, end, granularity)


@pytest.mark.parametrize(
    ("text", "year"),
    [
        ("Built in 1794 , it was", 1794),
        ("1916", 1916),
        ("(2019)", 2019),
        ("in 1963 .", 1963),
        ("mid-2019", 2019),
        ("the 2019's election", 2019),
        ("in 1100", 1100),
        ("by 2099", 2099),
    ],
)
def test_bare_years(text, year):
    assert one(text)[1:] == (utc(year), utc(year + 1), "year")


@pytest.mark.parametrize(
    "text",
    [
        "$2000",
        "€ 2000",
        "2,019 votes",
        "1,2019",
        "2019.5",
        "2019%",
        "2019 %",
        "1500 people",
        "2000 km",
        "some 1800 miles away",
        "2000 years ago",
        "1099",
        "2100",
        "12019",
        "call 555-1920",
        "room A2019",
        "the M1919 gun",
        "#2019",
        "3.2019",
    ],
)
def test_numbers_that_are_not_years(text):
    assert find_dates(text) == []


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("the 1990s", utc(1990), utc(2000)),
        ("1990s", utc(1990), utc(2000)),
        ("the 1880's", utc(1880), utc(1890)),
        ("the '90s", utc(1990), utc(2000)),
        ("the ’00s", utc(2000), utc(2010)),
    ],
)
def test_decades(text, start, end):
    assert one(text)[1:] == (start, end, "decade")


def test_year_ending_in_s_that_is_not_a_decade():
    assert find_dates("1995s") == []


@pytest.mark.parametrize(
    ("text", "mention", "start", "end"),
    [
        ("during 1916-1920 , while", "1916-1920", utc(1916), utc(1921)),
        ("1916 – 1920", "1916 – 1920", utc(1916), utc(1921)),
        ("1916 - 1920", "1916 - 1920", utc(1916), utc(1921)),
        ("1916—1920", "1916—1920", utc(1916), utc(1921)),
        ("owned from 1811 to 1827 .", "from 1811 to 1827", utc(1811), utc(1828)),
        ("between 2010 and 2015", "between 2010 and 2015", utc(2010), utc(2016)),
        ("May 2019 - June 2020", "May 2019 - June 2020", utc(2019, 5), utc(2020, 7)),
        ("1998-99", "1998-99", utc(1998), utc(2000)),
        ("1999-00", "1999-00", utc(1999), utc(2001)),
        ("2010–11 season", "2010–11", utc(2010), utc(2012)),
        ("from March to June 2020", "from March to June 2020", utc(2020, 3), utc(2020, 7)),
        ("from November to March 2021", "from November to March 2021", utc(2020, 11), utc(2021, 4)),
        ("1975 to Feb 2016", "1975 to Feb 2016", utc(1975), utc(2016, 3)),
        (
            "( Jan 1 , 1985 – Dec 31 , 1989 )",
            "Jan 1 , 1985 – Dec 31 , 1989",
            utc(1985),
            utc(1990),
        ),
        ("8-10 May 2023", "8-10 May 2023", utc(2023, 5, 8), utc(2023, 5, 11)),
        ("8 to 10 May 2023", "8 to 10 May 2023", utc(2023, 5, 8), utc(2023, 5, 11)),
        ("May 8-10, 2023", "May 8-10, 2023", utc(2023, 5, 8), utc(2023, 5, 11)),
        (
            "from 8 May to 10 June 2023",
            "from 8 May to 10 June 2023",
            utc(2023, 5, 8),
            utc(2023, 6, 11),
        ),
        (
            "from 8 May 2023 to 10 June",
            "from 8 May 2023 to 10 June",
            utc(2023, 5, 8),
            utc(2023, 6, 11),
        ),
        ("1990 until 1995", "1990 until 1995", utc(1990), utc(1996)),
    ],
)
def test_ranges(text, mention, start, end):
    assert one(text) == (mention, start, end, "range")


def test_what_is_not_a_range():
    assert [m.text for m in find_dates("in 2019 and 2020")] == ["2019", "2020"]
    assert [m.text for m in find_dates("1990 , 1995")] == ["1990", "1995"]
    # Backwards is two years, not an empty range.
    assert [m.text for m in find_dates("2020 - 2019")] == ["2020", "2019"]


def test_mentions_are_in_text_order_and_do_not_overlap():
    text = (
        "Newton D . Baker House , built in 1794 , was home of Newton D . Baker during "
        "1916-1920 . After 1963 , Jacqueline Kennedy lived there from 1964 to 1965 ; it was "
        "sold in March 2016 and again on 8 May 2023 ."
    )
    found = find_dates(text)
    assert [m.text for m in found] == [
        "1794",
        "1916-1920",
        "1963",
        "from 1964 to 1965",
        "March 2016",
        "8 May 2023",
    ]
    spans = [m.span for m in found]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert all(text[s:e] == m.text for (s, e), m in zip(spans, found))


def test_no_dates_in_plain_prose():
    text = "This may help you march forward; the second half is harder than the first."
    assert find_dates(text) == []
    assert find_dates(text, REF) == []
    assert find_dates("") == []


# --- relative expressions ------------------------------------------------------------------------


def test_relative_needs_a_reference():
    for text in ("yesterday", "last week", "two weeks ago", "last Friday", "in March"):
        assert find_dates(text) == []


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("yesterday", utc(2023, 5, 7), utc(2023, 5, 8), "day"),
        ("today", utc(2023, 5, 8), utc(2023, 5, 9), "day"),
        ("tonight", utc(2023, 5, 8), utc(2023, 5, 9), "day"),
        ("tomorrow", utc(2023, 5, 9), utc(2023, 5, 10), "day"),
        ("last night", utc(2023, 5, 7), utc(2023, 5, 8), "day"),
        ("the day before yesterday", utc(2023, 5, 6), utc(2023, 5, 7), "day"),
        ("the day after tomorrow", utc(2023, 5, 10), utc(2023, 5, 11), "day"),
        ("last week", utc(2023, 5, 1), utc(2023, 5, 8), "week"),
        ("this week", utc(2023, 5, 8), utc(2023, 5, 15), "week"),
        ("next week", utc(2023, 5, 15), utc(2023, 5, 22), "week"),
        ("last weekend", utc(2023, 5, 6), utc(2023, 5, 8), "range"),
        ("this weekend", utc(2023, 5, 13), utc(2023, 5, 15), "range"),
        ("next weekend", utc(2023, 5, 20), utc(2023, 5, 22), "range"),
        ("last month", utc(2023, 4), utc(2023, 5), "month"),
        ("this month", utc(2023, 5), utc(2023, 6), "month"),
        ("next month", utc(2023, 6), utc(2023, 7), "month"),
        ("last quarter", utc(2023, 1), utc(2023, 4), "quarter"),
        ("last year", utc(2022), utc(2023), "year"),
        ("this year", utc(2023), utc(2024), "year"),
        ("next year", utc(2024), utc(2025), "year"),
        ("2 days ago", utc(2023, 5, 6), utc(2023, 5, 7), "day"),
        ("two weeks ago", utc(2023, 4, 24), utc(2023, 5, 1), "week"),
        ("a week ago", utc(2023, 5, 1), utc(2023, 5, 8), "week"),
        ("a couple of months ago", utc(2023, 3), utc(2023, 4), "month"),
        ("a few years ago", utc(2020), utc(2021), "year"),
        ("few years ago", utc(2020), utc(2021), "year"),
        ("twelve months ago", utc(2022, 5), utc(2022, 6), "month"),
        ("an year ago", utc(2022), utc(2023), "year"),
        ("in 3 days", utc(2023, 5, 11), utc(2023, 5, 12), "day"),
        ("in two weeks", utc(2023, 5, 22), utc(2023, 5, 29), "week"),
        ("in a few days' time", utc(2023, 5, 11), utc(2023, 5, 12), "day"),
        ("3 weeks from now", utc(2023, 5, 29), utc(2023, 6, 5), "week"),
        ("earlier this year", utc(2023), utc(2023, 5, 9), "range"),
        ("earlier this month", utc(2023, 5), utc(2023, 5, 9), "range"),
        ("later this year", utc(2023, 5, 8), utc(2024), "range"),
        ("last summer", utc(2022, 6), utc(2022, 9), "range"),
        ("this summer", utc(2023, 6), utc(2023, 9), "range"),
        ("last winter", utc(2022, 12), utc(2023, 3), "range"),
    ],
)
def test_relative(text, start, end, granularity):
    (m,) = find_dates(text, REF)
    assert (m.text, m.start, m.end, m.granularity, m.relative) == (
        text,
        start,
        end,
        granularity,
        True,
    )


@pytest.mark.parametrize(
    ("text", "mention", "day"),
    [
        ("last Monday", "last Monday", 1),  # strictly before the reference (a Monday)
        ("last Friday.", "last Friday", 5),
        ("last fri", "last fri", 5),
        ("on Friday", "Friday", 5),  # most recent Friday on or before the reference
        ("on Monday", "Monday", 8),
        ("this Friday", "this Friday", 12),  # the Friday of the reference's week
        ("next Friday", "next Friday", 12),  # first Friday strictly after the reference
        ("next Monday", "next Monday", 15),
    ],
)
def test_weekdays(text, mention, day):
    (m,) = find_dates(text, REF)
    assert (m.text, m.start, m.end) == (mention, utc(2023, 5, day), utc(2023, 5, day + 1))


def test_weekday_plural_and_abbreviation_alone_are_not_dates():
    assert find_dates("Mondays are hard", REF) == []
    assert find_dates("we sat in the sun on a wed afternoon", REF) == []


@pytest.mark.parametrize(
    ("text", "mention", "start"),
    [
        ("in March", "March", utc(2023, 3)),
        ("in May", "May", utc(2023, 5)),
        ("in December", "December", utc(2022, 12)),  # most recent December on or before
        ("since mid-March", "March", utc(2023, 3)),
        ("early June", "June", utc(2022, 6)),
        ("last March", "last March", utc(2023, 3)),
        ("last May", "last May", utc(2022, 5)),  # strictly before the reference month
        ("this May", "this May", utc(2023, 5)),
        ("next March", "next March", utc(2024, 3)),
    ],
)
def test_month_alone(text, mention, start):
    (m,) = find_dates(text, REF)
    assert (m.text, m.start, m.granularity, m.relative) == (mention, start, "month", True)


@pytest.mark.parametrize(
    "text",
    [
        "you may go",
        "this may help",
        "in may be",
        "they march on",
        "they will March on",  # no context word in front
        "June said hello",
        "the Jan Smith report",
    ],
)
def test_month_words_that_are_not_dates(text):
    assert find_dates(text, REF) == []


def test_reference_forms():
    # A string, a naive datetime (taken as UTC) and an aware one in another zone give the same day.
    naive = datetime(2023, 5, 8, 23, 30)
    east = datetime(2023, 5, 9, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    for ref in ("2023-05-08", "2023-05-08T23:30:00Z", naive, east):
        (m,) = find_dates("yesterday", ref)
        assert m.start == utc(2023, 5, 7)
    with pytest.raises(InputError):
        find_dates("yesterday", "not a date")


def test_relative_and_absolute_together():
    text = "Yesterday (7 May 2023) I went back to the place we visited two weeks ago."
    found = find_dates(text, REF)
    assert [(m.text, m.relative) for m in found] == [
        ("Yesterday", True),
        ("7 May 2023", False),
        ("two weeks ago", True),
    ]


def test_weekday_before_a_date_is_part_of_it():
    (m,) = find_dates("I went there on Monday, 1 May 2023", REF)
    assert (m.text, m.start, m.relative) == ("Monday, 1 May 2023", utc(2023, 5, 1), False)


# --- parse_date and overlap ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("1:56 pm on 8 May, 2023", utc(2023, 5, 8), utc(2023, 5, 9), "day"),
        ("12:09 am on 13 September, 2023", utc(2023, 9, 13), utc(2023, 9, 14), "day"),
        ("2021", utc(2021), utc(2022), "year"),
        ("March 2019", utc(2019, 3), utc(2019, 4), "month"),
        ("2024-10-02", utc(2024, 10, 2), utc(2024, 10, 3), "day"),
        ("  Q3 2024 ", utc(2024, 7), utc(2024, 10), "quarter"),
        ("1916-1920", utc(1916), utc(1921), "range"),
    ],
)
def test_parse_date(text, start, end, granularity):
    m = parse_date(text)
    assert m is not None
    assert (m.start, m.end, m.granularity) == (start, end, granularity)


def test_parse_date_none_and_relative():
    assert parse_date("no date here") is None
    assert parse_date("") is None
    assert parse_date("yesterday") is None
    m = parse_date("yesterday", REF)
    assert m is not None and m.start == utc(2023, 5, 7) and m.relative


def test_parse_date_picks_the_longest():
    m = parse_date("2021 (revised 3 March 2022)")
    assert m is not None and m.text == "3 March 2022"


def test_overlap():
    a = (utc(2023), utc(2024))
    assert overlap(*a, utc(2023, 5), utc(2023, 6)) == 1.0
    assert overlap(*a, utc(2024), utc(2025)) == 0.0  # touching is disjoint
    assert overlap(*a, utc(2022, 7), utc(2023, 7)) == pytest.approx(181 / 365)
    assert overlap(utc(2023, 5), utc(2023, 6), *a) == pytest.approx(31 / 365)
    assert overlap(*a, utc(2023, 3), utc(2023, 3)) == 1.0  # an instant inside a
    assert overlap(*a, utc(2025), utc(2025)) == 0.0
    assert 0.0 <= overlap(*a, utc(1990), utc(2090)) <= 1.0


def test_pathological_input_is_linear():
    # Long runs of digits, dashes and month-like words must not backtrack; a wrong regex would
    # take seconds here, this returns at once.
    text = ("1" * 5000) + (" - " * 3000) + ("may " * 3000) + ("2019-" * 2000) + ("8 " * 3000)
    find_dates(text, REF)


# --- real data -----------------------------------------------------------------------------------

LOCOMO = DATA / "locomo" / "locomo_dev.json"
TIMEQA = DATA / "timeqa" / "human_annotated_train.json"


def test_every_locomo_session_header_parses():
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not found under {DATA}")
    headers = [
        (key, value)
        for sample in json.loads(LOCOMO.read_text())
        for key, value in sample["conversation"].items()
        if key.endswith("_date_time")
    ]
    assert headers
    for key, header in headers:
        m = parse_date(header)
        assert m is not None, (key, header)
        assert m.granularity == "day" and m.span == (0, len(header)), (key, header)


def test_timeqa_years_are_found():
    if not TIMEQA.exists():
        pytest.skip(f"TimeQA data not found under {DATA}")
    doc = json.loads(TIMEQA.read_text())[0]
    para = doc["paras"][1]
    assert para.startswith("Newton D . Baker House")
    found = [(m.text, m.granularity) for m in find_dates(para)]
    assert ("1794", "year") in found
    assert ("1916-1920", "range") in found
    assert ("1963", "year") in found
