"""One rendering of a conversation turn (``pensive_core.render_turn``), used by the session
prompt and by both framework adapters: the date, who said it once, the text."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from pensive_core import Hit, Pensive, PromptBuilder, render_turn, render_turns
from pensive_core.memory.render import turn_head
from tests.conftest import HASH_CONFIG

DAY = datetime(2026, 12, 1, 15, 30, tzinfo=timezone.utc)


def _turn(text: str, role: str = "", when: datetime | None = DAY, **meta: str) -> Hit:
    metadata = {"role": role, **meta} if role else dict(meta)
    return Hit("t1", "t1", text, 0.5, metadata, when)


def test_render_turn_writes_the_speaker_once():
    assert render_turn(_turn("Lisbon is lovely.", "assistant")) == (
        "[2026-12-01] assistant: Lisbon is lovely."
    )
    # a speaker (or a message name) says who, instead of the role
    assert render_turn(_turn("Hi", "user", speaker="Caroline")) == "[2026-12-01] Caroline: Hi"
    assert render_turn(_turn("Hi", "user", name="ana")) == "[2026-12-01] ana: Hi"
    # parts that are unknown are left out, never rendered empty
    assert render_turn(_turn("Hi", "user", when=None)) == "user: Hi"
    assert render_turn(_turn("Hi")) == "[2026-12-01] Hi"
    assert render_turn(_turn("Hi", when=None)) == "Hi"
    assert turn_head(_turn("Hi", "assistant")) == "[2026-12-01] assistant"
    assert render_turns([_turn("a", "user"), _turn("b", "assistant")]) == (
        "[2026-12-01] user: a\n[2026-12-01] assistant: b"
    )


def test_context_renders_each_recent_turn_once(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        chat = p.conversation("s1")
        chat.add("user", "I moved to Lisbon last week.", timestamp=DAY)
        chat.add("assistant", "Lisbon is lovely in spring.", timestamp=DAY)
        text = chat.context("Where do I live?", 400)
        history = text.split("## Conversation\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert history == [
            "[2026-12-01] user: I moved to Lisbon last week.",
            "[2026-12-01] assistant: Lisbon is lovely in spring.",
        ]
        # no line names its speaker twice ("assistant: [2026-12-01] assistant: ...")
        assert not re.search(r"(user|assistant): \[\d{4}-\d\d-\d\d\] (user|assistant):", text)
        assert text.rstrip().endswith("## Question\nWhere do I live?")
        # a framework's memory block shows the user's message itself: the query is left out
        quiet = chat.build("Where do I live?", 400, show_query=False)
        assert "## Question" not in quiet.text and "Where do I live?" not in quiet.text
        assert "[2026-12-01] user: I moved to Lisbon last week." in quiet.text
        assert quiet.sections["query"] == 0


def test_history_head_survives_clipping():
    filler = " ".join(f"Filler sentence {i} says nothing at all." for i in range(40))
    long = f"{filler} The arctic tern migrates from pole to pole. {filler}"
    built = PromptBuilder(lambda s: len(s.split())).build(
        90,
        query="arctic tern",
        history=[("[2026-12-01] user", long)],
    )
    line = built.text.split("## Conversation\n", 1)[1].splitlines()[0]
    assert line.startswith("[2026-12-01] user: ")  # the head is kept whole, the text clipped
    assert "arctic tern migrates" in line and "[…]" in line
