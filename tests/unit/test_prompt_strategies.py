"""Prompt strategies, templates and document rendering: the default output unchanged byte for
byte, each strategy's labels and order, templates' slots and errors, the cache-stable prefix
for every strategy and template, and (property tests) the budget and the pins always held."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pensive_core import (
    ConfigError,
    Document,
    InputError,
    Pensive,
    PromptBuilder,
    PromptItem,
    PromptStrategy,
    PromptTemplate,
    load_config,
)
from pensive_core.memory.documents import merge_spans
from pensive_core.memory.strategies import STRATEGIES, Concatenate
from pensive_core.memory.templates import TEMPLATES
from pensive_core.memory.tokens import TokenCounter, token_counter
from pensive_core.types import Hit
from tests.conftest import HASH_CONFIG

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "prompt_builder.json"
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
MARKER = "[…]"


@functools.cache
def cl100k() -> TokenCounter:
    return token_counter()


def fixture() -> dict:
    """The inputs tests/golden/prompt_builder.json was recorded with, by the builder as it was
    before strategies existed (budgets 90, 160, 300, 500, 2000, default options)."""
    long = " ".join(
        f"Sentence {i} talks about the harbour, the ferry schedule and item {i}." for i in range(30)
    )
    retrieved = [
        PromptItem(
            "The ferry to the island leaves at 7:40 every weekday.",
            score=0.9,
            id="a",
            expanded="Timetables changed in May. The ferry to the island leaves at 7:40 every "
            "weekday. On Sundays it does not run.",
        ),
        PromptItem(long, score=0.95, id="b"),
        PromptItem("Tickets cost 4 euros, children travel free.", score=0.5, id="c"),
        PromptItem("Unrelated note about gardening and tomatoes.", score=0.1, id="d"),
    ]
    history = [
        ("user", "Hi, I want to visit the island."),
        ("assistant", "Sure, when?"),
        ("user", "Next Monday morning, early if possible."),
        ("assistant", "Noted."),
    ]
    return dict(
        system="You are a helpful travel assistant.",
        pins=["The user lives in Lisbon."],
        summaries=["Earlier the user asked about ferries and prices. They prefer mornings."],
        retrieved=retrieved,
        history=history,
        query="When does the first ferry leave on Monday?",
    )


# ---- the default is today's output ------------------------------------------------------------


@pytest.mark.parametrize("strategy", [None, "concatenate", Concatenate(), Concatenate])
def test_the_default_and_concatenate_render_exactly_as_before(strategy):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    builder = PromptBuilder(strategy=strategy)
    for budget, text in golden.items():
        built = builder.build(int(budget), **fixture())
        assert built.text == text, budget
        assert built.strategy == "concatenate" and built.template == ""
    assert any(MARKER in t for t in golden.values())  # the fixture clips something


# ---- strategies -------------------------------------------------------------------------------


def test_weighted_labels_by_calibrated_match_else_by_share_of_the_best_score():
    items = [
        PromptItem("Alpha passage.", score=0.2, id="a", match=0.93),
        PromptItem("Beta passage.", score=0.9, id="b", match=0.5),
        PromptItem("Gamma passage.", score=0.1, id="c", match=0.05),
    ]
    text = PromptBuilder(strategy="weighted").build(500, query="q", retrieved=items).text
    # best first by score, labelled by match
    assert "[1] (relevant) Beta passage." in text
    assert "[2] (highly relevant) Alpha passage." in text
    assert "[3] (possibly relevant) Gamma passage." in text
    turns = [PromptItem(f"Turn {i}.", score=s, id=str(i)) for i, s in enumerate([1.0, 0.6, 0.3])]
    text = PromptBuilder().build(500, retrieved=turns, strategy="weighted").text
    assert "[1] (highly relevant) Turn 0." in text
    assert "[2] (relevant) Turn 1." in text
    assert "[3] (possibly relevant) Turn 2." in text


def test_recency_shows_oldest_first_with_age_markers_but_drops_the_weakest():
    items = [
        PromptItem("Newest but weak.", score=0.1, id="n", turns_ago=1, timestamp=T0),
        PromptItem("Oldest and strong.", score=0.9, id="o", turns_ago=30, timestamp=T0),
        PromptItem("Dated passage.", score=0.5, id="d", timestamp=T0 - timedelta(days=400)),
        PromptItem("Timeless passage.", score=0.8, id="t"),
    ]
    built = PromptBuilder(strategy="recency").build(500, retrieved=items)
    body = built.text
    assert body.index("[2023-03-28] Dated") < body.index("[30 turns ago] Oldest")
    assert body.index("[30 turns ago] Oldest") < body.index("[1 turn ago] Newest")
    assert body.index("[1 turn ago] Newest") < body.index("Timeless")
    assert "[1] [2023-03-28] Dated passage." in body
    # under pressure, relevance still decides what goes: the newest is the weakest
    items[0] = PromptItem("Newest but weak. " + "More words. " * 40, score=0.1, id="n", turns_ago=1)
    only = dict(headroom=0.0, retrieved_share=1.0, summaries_share=0.0, history_share=0.0)
    small = PromptBuilder(strategy="recency", min_retrieved=0, **only)
    room = small.build(1000, retrieved=items[1:]).tokens + 5
    tight = small.build(room, retrieved=items)
    assert tight.dropped == ("n",)
    assert tight.included == ("d", "o", "t")  # prompt order is time order


def test_a_line_template_is_a_strategy():
    item = PromptItem("The ferry leaves at 7:40.", score=0.5, id="doc:ferry", timestamp=T0)
    for strategy in ("{rank}. {text} ({id}, {date})", PromptBuilder().strategy):
        PromptBuilder(strategy=strategy)  # both accepted
    text = PromptBuilder(strategy="{rank}. {text} ({id}, {date})").build(200, retrieved=[item])
    assert "1. The ferry leaves at 7:40. (doc:ferry, 2024-05-01)" in text.text
    assert text.strategy == "template"
    assert "[1] The ferry" in PromptBuilder(strategy="template").build(200, retrieved=[item]).text


def test_a_user_strategy_object_or_class_path():
    class Shout(Concatenate):
        name = "shout"

        def line(self, rank, item, body):
            return f"#{rank} {body.upper()}"

    assert isinstance(Shout(), PromptStrategy)
    built = PromptBuilder().build(200, retrieved=["quiet words."], strategy=Shout())
    assert "#1 QUIET WORDS." in built.text and built.strategy == "shout"
    path = "pensive_core.memory.strategies:Weighted"
    assert PromptBuilder(strategy=path).strategy.name == "weighted"


@pytest.mark.parametrize(
    "bad, match",
    [
        ("loudest", "unknown prompt strategy 'loudest'; use one of"),
        ("[{rank}] {body}", r"unknown slot \{body\}"),
        ("[{rank}]", r"no \{text\} slot"),
        ("{text!r}", "format spec or conversion"),
        (object(), "does not implement PromptStrategy"),
        ("no_such_module:Thing", "cannot import module"),
        ("\ud800 {text}", "lone surrogate"),  # would reach the prompt, unencodable
    ],
)
def test_a_bad_strategy_is_a_clear_error_and_changes_nothing(bad, match):
    builder = PromptBuilder()
    with pytest.raises(ConfigError, match=match):
        PromptBuilder(strategy=bad)
    with pytest.raises(InputError, match=match):
        builder.build(300, **fixture(), strategy=bad)
    assert builder.strategy.name == "concatenate"
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert builder.build(300, **fixture()).text == golden["300"]


def test_every_built_in_strategy_is_named_in_the_error():
    with pytest.raises(InputError) as err:
        PromptBuilder().build(100, retrieved=["x."], strategy="nope")
    for name in STRATEGIES:
        assert repr(name) in str(err.value)


# ---- templates --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_built_in_templates_fill_their_slots_within_budget(name):
    built = PromptBuilder(template=name).build(400, **fixture())
    assert built.template == name
    assert built.tokens <= 400 - built.headroom == 360
    assert built.tokens == cl100k().count(built.text)
    assert "When does the first ferry leave on Monday?" in built.text
    assert "The user lives in Lisbon." in built.prefix
    assert "## " not in built.text  # the template's layout, not the section headers
    assert "\n\n\n" not in built.text  # empty slots leave no blank-line runs
    assert built.text.startswith(built.prefix)


def test_research_numbers_its_sources_with_their_ids():
    built = PromptBuilder(template="research").build(2000, **fixture())
    assert "Sources:\n[1] <b> Sentence 0" in built.text
    assert "[2] <a> Timetables changed in May." in built.text
    assert "Cite every claim" in built.text
    weighted = PromptBuilder(template="research", strategy="weighted").build(2000, **fixture())
    assert "[2] <a> (highly relevant) Timetables" in weighted.text


def test_a_template_by_text_and_by_file(tmp_path):
    text = "{system}\nNotes: {pins}\nKnown:\n{context}\nQ: {query}"
    by_text = PromptBuilder(template=text).build(300, **fixture())
    assert by_text.text.startswith("You are a helpful travel assistant.\nNotes: The user")
    assert by_text.text.endswith("Q: When does the first ferry leave on Monday?")
    assert "Next Monday morning" not in by_text.text  # no {history} slot: history not shown
    assert by_text.sections["history"] == 0
    path = tmp_path / "mine.txt"
    path.write_text(text, encoding="utf-8")
    by_file = PromptBuilder(template=str(path)).build(300, **fixture())
    assert by_file.text == by_text.text and by_file.template == "mine.txt"
    assert PromptBuilder(template=PromptTemplate.from_file(path)).build(300, **fixture()).text == (
        by_text.text
    )
    assert "{{" not in PromptBuilder(template="{{json}} {query}").build(50, query="q").text


def test_the_template_text_counts_against_the_budget():
    head = "Read every word of these instructions carefully. " * 30
    built = PromptBuilder(template=head + "{context}\n{query}").build(
        600, **{k: v for k, v in fixture().items() if k in ("retrieved", "query")}
    )
    assert built.tokens <= 540 and head.strip() in built.text
    with pytest.raises(InputError, match="template and query need"):
        PromptBuilder(template=head + "{query}").build(200, query="q")


@pytest.mark.parametrize(
    "bad, match",
    [
        ("Context: {context}", r"no \{query\} slot"),
        ("{query} {contexts}", r"unknown slot \{contexts\}"),
        ("{query} {0}", r"unknown slot \{0\}"),
        ("{query:>10}", "format spec"),
        ("{query", "not a valid template"),
        ("no-such-template-or-file", "unknown prompt template"),
        (42, "template must be"),
        ("\udc80 {query}", "lone surrogate"),  # would reach the prompt, unencodable
    ],
)
def test_a_bad_template_is_a_clear_error_and_changes_nothing(bad, match):
    builder = PromptBuilder(template="qa")
    before = builder.build(400, **fixture()).text
    with pytest.raises(ConfigError, match=match):
        PromptBuilder(template=bad)
    with pytest.raises(InputError, match=match):
        builder.build(400, **fixture(), template=bad)
    assert builder.build(400, **fixture()).text == before


def test_a_template_that_would_hide_pins_or_the_system_prompt_is_refused():
    with pytest.raises(InputError, match=r"no \{pins\} slot"):
        PromptBuilder(template="{context} {query}").build(300, **{**fixture(), "system": ""})
    with pytest.raises(InputError, match=r"no \{system\} slot"):
        PromptBuilder(template="{pins} {query}").build(300, system="Be terse.", query="q")
    pinned = PromptItem("Keep me.", pinned=True)
    with pytest.raises(InputError, match=r"no \{context\} or \{sources\} slot"):
        PromptBuilder(template="{query}").build(300, query="q", retrieved=[pinned])


# ---- the cache-stable prefix ------------------------------------------------------------------

TEMPLATE_CHOICES = [None, *sorted(TEMPLATES), "{system}\n{summary}\n{query}\n{context}\n{pins}"]


@pytest.mark.parametrize("template", TEMPLATE_CHOICES)
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_prefix_is_byte_identical_across_turns(strategy, template):
    builder = PromptBuilder(strategy=strategy, template=template)
    base = fixture()
    prefixes = set()
    for turn in range(4):
        inputs = dict(base)
        inputs["query"] = f"Turn {turn}: " + "and what about the return trip? " * turn
        inputs["retrieved"] = [
            PromptItem(
                f"Passage {turn}-{i} about boats. " * (1 + (i + turn) % 5),
                score=1.0 / (i + 1),
                id=f"{turn}-{i}",
                turns_ago=i * 3 + turn,
                match=(i * 0.37 + turn * 0.11) % 1.0,
            )
            for i in range(2 + turn)
        ]
        inputs["history"] = base["history"][: turn + 1] + [("user", "more " * turn * 9)]
        for budget in (700,):
            built = builder.build(budget, **inputs)
            assert built.text.startswith(built.prefix)
            prefixes.add(built.prefix)
    assert len(prefixes) == 1
    (prefix,) = prefixes
    assert "The user lives in Lisbon." in prefix or template == TEMPLATE_CHOICES[-1]


# ---- property tests: the budget, the pins -----------------------------------------------------

_WORDS = st.sampled_from(
    "alpha beta gamma delta Paris capital France the is of 42 émigré 数据 <|endoftext|> "
    "{query} }{ xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".split()
)
_SENTENCE = st.lists(_WORDS, min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".")
_PASSAGE = st.lists(_SENTENCE, min_size=1, max_size=6).map(" ".join)


@st.composite
def _retrieved(draw: st.DrawFn) -> PromptItem:
    text = draw(_PASSAGE)
    expanded = None
    if draw(st.booleans()):
        expanded = draw(_PASSAGE) + " " + text + " " + draw(_PASSAGE)
    return PromptItem(
        text,
        score=draw(st.floats(0, 1)),
        pinned=draw(st.integers(0, 9)) == 0,
        expanded=expanded,
        match=draw(st.one_of(st.none(), st.floats(0, 1))),
        turns_ago=draw(st.one_of(st.none(), st.integers(0, 500))),
        timestamp=draw(st.one_of(st.none(), st.just(T0), st.just(T0 - timedelta(days=9)))),
    )


@settings(
    max_examples=80,
    deadline=None,
    database=None,  # nothing written into the working directory
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    budget=st.integers(1, 2500),
    query=_SENTENCE,
    system=st.one_of(st.just(""), _SENTENCE),
    pins=st.lists(_SENTENCE, max_size=3),
    summaries=st.lists(_PASSAGE, max_size=3),
    retrieved=st.lists(_retrieved(), max_size=8),
    history=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _PASSAGE), max_size=10),
    strategy=st.sampled_from([*sorted(STRATEGIES), "{rank}) {label}: {text} [{date}]"]),
    template=st.sampled_from(TEMPLATE_CHOICES),
)
def test_no_strategy_or_template_ever_exceeds_the_budget_or_drops_a_pin(
    budget, query, system, pins, summaries, retrieved, history, strategy, template
):
    builder = PromptBuilder(strategy=strategy, template=template)
    if template is not None and "{system}" not in (TEMPLATES.get(template) or template):
        system = ""
    kwargs = dict(query=query, system=system, pins=pins)
    try:
        built = builder.build(
            budget, summaries=summaries, retrieved=retrieved, history=history, **kwargs
        )
    except InputError:
        # only ever because what may never be cut (system, pins, pinned items, the template's
        # own text and the query) does not fit alone: the behaviour kept from before
        fixed = [it for it in retrieved if it.pinned]
        with pytest.raises(InputError, match="never dropped or clipped"):
            builder.build(budget, retrieved=fixed, **kwargs)
        return
    assert built.tokens <= budget - built.headroom
    assert built.tokens == cl100k().count(built.text)
    assert built.text.startswith(built.prefix)
    for pin in pins:
        assert pin in (built.text if template == TEMPLATE_CHOICES[-1] else built.prefix)
    for item in retrieved:
        if item.pinned:
            assert item.text in built.text


# ---- documents: whole when small, matched passages merged when large ---------------------------


def test_merge_spans_merges_touching_windows_and_marks_every_cut():
    text = "A0. A1. A2. A3. A4. A5. A6."
    at = {s: text.index(s) for s in ("A0.", "A1.", "A2.", "A3.", "A4.", "A5.", "A6.")}
    span = lambda a, z: (at[a], at[z] + 3)  # noqa: E731
    assert merge_spans(text, [span("A1.", "A2."), span("A2.", "A3.")]) == "[…] A1. A2. A3. […]"
    assert merge_spans(text, [span("A4.", "A5."), span("A1.", "A1.")]) == "[…] A1. […] A4. A5. […]"
    assert merge_spans(text, [span("A0.", "A1."), span("A2.", "A6.")]) == text  # touching
    assert merge_spans(text, []) == ""


def _long_document() -> str:
    paras = [
        f"Paragraph {i} is about the weather in town number {i} and nothing else at all. "
        + "It rained, it shone, the wind turned. " * 6
        for i in range(40)
    ]
    paras[23] = "The lighthouse keeper's password is 'saltwater-9931'. " + paras[23]
    return "\n\n".join(paras)


def test_a_session_shows_a_small_document_whole_and_a_large_one_as_merged_passages(tmp_path):
    cfg = {**HASH_CONFIG, "memory": {"document_whole_tokens": 120}}
    with Pensive(tmp_path / "s", cfg) as p:
        small = "The menu: soup on Mondays. Fish on Fridays. Dessert is always flan."
        p.ingest([Document(id="menu", text=small), Document(id="log", text=_long_document())])
        chat = p.conversation("c")
        chat.add("user", "hello", timestamp=T0)
        built = chat.build("what is on the menu on fridays?", 3000, documents_k=1)
        assert small in built.text and "doc:menu" in built.included
        built = chat.build("lighthouse keeper password saltwater-9931", 3000, documents_k=2)
        assert "saltwater-9931" in built.text and "doc:log" in built.included
        assert f"] {MARKER} " in built.text  # the document is cut, and the cut is marked
        assert "Paragraph 0 " not in built.text  # and not to its head
        assert built.included.count("doc:log") == 1  # one item per document


# ---- through Conversation and config -----------------------------------------------------------


def test_conversation_build_takes_a_strategy_and_template_and_bad_ones_change_nothing(tmp_path):
    with Pensive(tmp_path / "s", HASH_CONFIG) as p:
        chat = p.conversation("c")
        for i in range(12):
            chat.add("user", f"Note {i}: the ferry number {i} leaves at {i}:15.", timestamp=T0)
        built = chat.build("when does ferry 2 leave?", 2000, strategy="recency", template="qa")
        assert built.strategy == "recency" and built.template == "qa"
        assert "turns ago]" in built.text and "Question: when does ferry 2 leave?" in built.text
        before = (len(chat), chat.stats())
        for kwargs, match in [
            ({"strategy": "nope"}, "unknown prompt strategy"),
            ({"template": "Context: {context}"}, r"no \{query\} slot"),
            ({"template": "{query} {nope}"}, r"unknown slot \{nope\}"),
        ]:
            with pytest.raises(InputError, match=match):
                chat.build("when does ferry 2 leave?", 2000, **kwargs)
        assert (len(chat), chat.stats()) == before
        assert (
            chat.context("when does ferry 2 leave?", 2000, strategy="weighted").count("relevant)")
            >= 1
        )


def test_config_selects_strategy_and_template_and_rejects_bad_ones(tmp_path):
    cfg = {**HASH_CONFIG, "memory": {"prompt_strategy": "weighted", "prompt_template": "research"}}
    with Pensive(tmp_path / "s", cfg) as p:
        chat = p.conversation("c")
        chat.add("user", "The ferry leaves at 7:40.", timestamp=T0)
        chat.add("assistant", "Noted.", timestamp=T0)
        built = chat.build("ferry?", 1000)
        assert (built.strategy, built.template) == ("weighted", "research")
    for memory, match in [
        ({"prompt_strategy": "nope"}, "unknown prompt strategy 'nope'"),
        ({"prompt_template": "{context}"}, r"no \{query\} slot"),
        ({"prompt_template": "missing-file.txt"}, "unknown prompt template"),
    ]:
        with pytest.raises(ConfigError, match=match):
            load_config({"memory": memory})


def test_hits_bring_their_match_and_time_to_the_strategies():
    hit = Hit("d", "d#0", "Passage text.", 0.4, {}, T0, match=0.95)
    built = PromptBuilder(strategy="weighted").build(200, retrieved=[hit])
    assert "(highly relevant) Passage text." in built.text
    built = PromptBuilder(strategy="recency").build(200, retrieved=[hit])
    assert "[2024-05-01] Passage text." in built.text
