from pensive_core.snippets import snippet

TEXT = (
    "# Publishing ferry schedules\n\nHarbourline publishes a timetable for four routes. "
    "The night ferry schedule changes with the tide tables, so it goes stale fastest. "
    "Every Monday the planner runs the tide sync.\n\nBank holidays use the Sunday timetable."
)


def test_snippet_starts_at_the_matching_sentence():
    out = snippet(TEXT, "why does the night ferry schedule go stale?", width=120)
    assert out.startswith("… The night ferry schedule changes")
    assert len(out) <= 122


def test_snippet_falls_back_to_the_start_and_cuts_to_width():
    out = snippet(TEXT, "zzz unrelated", width=40)
    assert out == "# Publishing ferry schedules"
    long = snippet("word " * 100, "word", width=30)
    assert long.endswith("…") and len(long) == 30
    assert snippet("", "x") == ""
