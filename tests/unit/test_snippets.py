from pensive_core.snippets import join_soft_breaks, snippet

TEXT = (
    "# Publishing ferry schedules\n\nHarbourline publishes a timetable for four routes. "
    "The night ferry schedule changes with the tide tables, so it goes stale fastest. "
    "Every Monday the planner runs the tide sync.\n\nBank holidays use the Sunday timetable."
)

# the example corpus's paragraph as the file has it: hard-wrapped at 100 columns
WRAPPED = (
    "## Keeping it current\n\n"
    "The night ferry schedule changes with the tide tables, so it goes stale fastest. Every Monday the\n"
    "duty planner runs `harbourline sync-tides`, which pulls the week's tide predictions and shifts the\n"
    "night departures to keep at least 2.4 metres of water under the keel.\n\n"
    "## Holiday timetables\n\nBank holidays use the Sunday timetable."
)


def test_snippet_starts_at_the_matching_sentence():
    out = snippet(TEXT, "why does the night ferry schedule go stale?", width=120)
    assert out.startswith("… The night ferry schedule changes")
    assert len(out) <= 120


def test_snippet_falls_back_to_the_start_and_cuts_to_width():
    out = snippet(TEXT, "zzz unrelated", width=40)
    assert out == "# Publishing ferry schedules"
    long = snippet("word " * 100, "word", width=30)
    assert long == "word word word word word…"  # clipped at a word, the ellipsis inside the width
    assert snippet("", "x") == ""


def test_a_hard_line_break_in_the_file_does_not_end_the_snippet():
    q = "How do I keep the night ferry schedule from going stale?"
    out = snippet(WRAPPED, q, width=200)
    assert "\n" not in out and "  " not in out
    assert out.startswith("… The night ferry schedule changes")
    assert "Every Monday the duty planner runs" in out  # not cut at the file's line end
    assert out.endswith("…") and len(out) <= 200
    assert not out.removesuffix("…").endswith(" ")  # clipped after a whole word
    whole = snippet(WRAPPED, q, width=400)
    assert whole.endswith("under the keel.")  # the paragraph fits: no ellipsis, no heading
    assert "Holiday" not in whole


def test_a_long_anchor_shows_its_words_that_match():
    text = (
        "Intro here. "
        + "filler " * 40
        + "the keel needs water at low tide "
        + "more " * 40
        + "end."
    )
    out = snippet(text, "keel water tide", width=60)
    assert "keel needs water at low tide" in out
    assert out.startswith("… ") and out.endswith("…") and len(out) <= 60


def test_join_soft_breaks_keeps_offsets_and_block_lines():
    text = "# Title\nfirst line\nsecond line\n\n- item one\n- item two\nwrapped tail"
    joined = join_soft_breaks(text)
    assert len(joined) == len(text)
    assert joined == "# Title\nfirst line second line\n\n- item one\n- item two wrapped tail"
