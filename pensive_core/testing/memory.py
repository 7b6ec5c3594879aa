"""The conversation memory conformance suites: what every session log
(:class:`~pensive_core.memory.turns.TurnStore`) and every session catalog
(:class:`~pensive_core.memory.sessions.SessionCatalog`) must do, as pytest tests an
implementation inherits.

Written from the embedded SQLite ones (:class:`~pensive_core.memory.turns.TurnLog`,
:class:`~pensive_core.memory.sessions.SessionRegistry`) before any other engine's existed, so
that one (Postgres, issue 26) is held to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..errors import InputError
from ..memory.sessions import SessionCatalog
from ..memory.turns import Turn, TurnStore, turn_id
from ..timeutil import from_iso

__all__ = ["CatalogFactory", "SessionCatalogTests", "TurnStoreTests", "TurnsFactory"]

#: ``make_turns(session, read_only=False)``: opens (or reopens) one session's log of the
#: test's store; None when ``read_only`` and the session has no log yet.
TurnsFactory = Callable[..., TurnStore | None]
#: ``make_catalog(read_only=False)``: opens (or reopens) the test's store's session catalog.
CatalogFactory = Callable[..., SessionCatalog]

UTC = timezone.utc
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
ODD_TEXT = "nul\x00here \x01\x7f \u200f\u05e9\u05dc\u05d5\u05dd 𝔘𝔫𝔦 'quote\" end"


def turns_of(n: int, start: int = 0) -> list[tuple[str, str, datetime, dict[str, Any]]]:
    """``n`` checked turns (as :func:`~pensive_core.memory.turns.check_turn` returns them),
    a minute apart, alternating speakers."""
    return [
        (
            "user" if i % 2 == 0 else "assistant",
            f"turn number {i}",
            T0 + timedelta(minutes=i),
            {"i": i},
        )
        for i in range(start, start + n)
    ]


def _placed(t: Turn, segment: int, drift: float | None, shift: bool) -> Turn:
    return Turn(t.id, t.seq, t.role, t.text, t.timestamp, t.metadata, segment, drift, shift)


class TurnStoreTests:
    """What every session log must do; subclass it once per implementation and give the
    ``make_turns`` and ``store_is_empty`` fixtures (each test has a store of its own)."""

    @pytest.fixture
    def make_turns(self) -> TurnsFactory:
        """Opens a session's log of the test's store; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_turns` fixture")

    @pytest.fixture
    def store_is_empty(self) -> Callable[[], bool]:
        """Whether the engine holds nothing at all for the test's store (no file, no table);
        every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `store_is_empty` fixture")

    @staticmethod
    def open(make_turns: TurnsFactory, session: str = "s1") -> TurnStore:
        log = make_turns(session)
        assert log is not None
        return log

    def test_an_empty_log(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        assert len(log) == 0 and log.turns() == [] and log.turns(3) == []
        assert log.last_seq() == -1 and log.last_shift() is None
        assert log.segment_start(0) is None and log.segment_spans(0, 9) == []
        assert log.span(0, 9) == [] and log.by_seq([0, 1]) == {} and log.by_seq([]) == {}
        assert log.unindexed() == [] and not log.has_unindexed()
        assert log.open_segment_tail(3) == [] and log.turns_until(T0, 5) == []
        assert log.counts() == (0, 0, 0, 0)
        assert log.summarised_to() == -1 and log.story_so_far() is None
        assert log.block_summaries(-1) == [] and log.shown_summaries() == []
        assert log.summaries_version() == 0 and log.pins() == []
        log.close()

    def test_turns_are_numbered_in_order_from_zero(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        first = log.append(turns_of(3))
        assert [t.seq for t in first] == [0, 1, 2]
        assert [t.id for t in first] == [turn_id(0), turn_id(1), turn_id(2)]
        more = log.append(turns_of(2, start=3))
        assert [t.seq for t in more] == [3, 4] and log.last_seq() == 4 and len(log) == 5
        stored = log.turns()
        assert stored == first + more  # returned as stored: segment 0, no drift, no shift
        assert [t.text for t in stored] == [f"turn number {i}" for i in range(5)]
        assert log.turns(2) == more and log.turns(10) == stored
        assert log.span(1, 3) == stored[1:4] and log.span(4, 99) == stored[4:]
        assert log.by_seq([4, 0, 17, 0]) == {0: stored[0], 4: stored[4]}
        assert log.unindexed() == stored and log.has_unindexed()
        assert log.append([]) == [] and len(log) == 5
        log.close()

    def test_text_metadata_and_times_come_back_exactly(self, make_turns: TurnsFactory) -> None:
        """NUL, control characters, RTL marks and astral characters survive; metadata is the
        same JSON; a time comes back as the same instant, tz-aware UTC, to the microsecond."""
        log = self.open(make_turns)
        meta = {
            "nested": {"a": [1, 2.5, None, True, "ü\x00ß"], "empty": {}},
            "big": 2**53 + 1,
            "neg": -0.125,
            "emoji": "🙂",
            "speaker": "Zoë",
        }
        india = timezone(timedelta(hours=5, minutes=30))
        items = [
            ("Zoë 🙂", ODD_TEXT, datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=india), meta),
            ("user", "year one", datetime(1, 1, 1, tzinfo=UTC), {}),
            ("user", "year 9999", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), {}),
        ]
        log.append(items)
        got = log.turns()
        assert [(t.role, t.text, t.metadata) for t in got] == [(r, x, m) for r, x, _, m in items]
        for t, (_, _, when, _) in zip(got, items, strict=True):
            assert t.timestamp == when and t.timestamp.utcoffset() == timedelta(0)
        assert got[0].timestamp.hour == 18 and got[0].timestamp.microsecond == 999999
        log.close()
        again = self.open(make_turns)
        assert again.turns() == got
        again.close()

    def test_placing_and_indexing_turns(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        turns = log.append(turns_of(5))
        placed = [
            _placed(turns[0], 0, None, False),
            _placed(turns[1], 0, 0.25, False),
            _placed(turns[2], 1, 0.875, True),
            _placed(turns[3], 1, 0.125, False),
        ]
        log.settle(placed)
        assert log.turns()[:4] == placed
        assert log.unindexed() == [turns[4]] and log.has_unindexed()
        assert log.last_shift() == 2
        assert log.segment_start(1) == 2 and log.segment_start(0) == 0
        assert log.segment_start(7) is None
        assert log.segment_spans(0, 4) == [(0, 0, 4), (1, 2, 3)]  # turn 4: segment 0
        assert log.segment_spans(3, 3) == [(1, 3, 3)]
        assert log.counts() == (5, 2, 1, 0)
        # the newest segment's indexed turns only (turn 4 is not indexed yet)
        assert [t.seq for t in log.open_segment_tail(5)] == [2, 3]
        log.settle([_placed(turns[4], 1, 0.5, False)])
        assert [t.seq for t in log.open_segment_tail(2)] == [3, 4]
        assert [t.seq for t in log.open_segment_tail(9)] == [2, 3, 4]
        new = log.append(turns_of(1, start=5))
        assert new[0].segment == 1  # logged in the last segment
        assert log.unindexed() == new
        log.mark_indexed(new)
        assert log.unindexed() == [] and not log.has_unindexed()
        assert log.by_seq([5])[5].drift is None and log.by_seq([5])[5].segment == 1
        log.close()

    def test_turns_until_a_time(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        log.append(turns_of(6))
        cutoff = T0 + timedelta(minutes=3)
        assert [t.seq for t in log.turns_until(cutoff, 2)] == [2, 3]
        assert [t.seq for t in log.turns_until(cutoff, 10)] == [0, 1, 2, 3]
        east = cutoff.astimezone(timezone(timedelta(hours=-7)))  # the same instant
        assert [t.seq for t in log.turns_until(east, 10)] == [0, 1, 2, 3]
        assert log.turns_until(T0 - timedelta(seconds=1), 5) == []
        log.close()

    def test_summaries_blocks_and_the_story_so_far(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        log.append(turns_of(8))
        v0 = log.summaries_version()
        with log.transaction():
            log.add_summary(0, 0, 1, "block one \x00 ü", "extractive")
        v1 = log.summaries_version()
        assert v1 > v0 and log.summarised_to() == 1
        with log.transaction():
            log.add_summary(0, 2, 3, "block two", "llm")
            log.add_summary(1, 4, 5, "block three", "llm")
        v2 = log.summaries_version()
        assert v2 > v1 and log.summarised_to() == 5
        assert log.block_summaries(-1) == [(1, "block one \x00 ü"), (3, "block two"),
                                           (5, "block three")]  # fmt: skip
        assert log.block_summaries(1) == [(3, "block two"), (5, "block three")]
        assert log.story_so_far() is None
        shown = log.shown_summaries()
        assert [(s.start, s.end, s.text, s.level) for s in shown] == [
            (0, 1, "block one \x00 ü", 0), (2, 3, "block two", 0), (4, 5, "block three", 0)
        ]  # fmt: skip
        assert shown[1].began == T0 + timedelta(minutes=2)
        assert shown[1].ended == T0 + timedelta(minutes=3)
        assert shown[1].began.utcoffset() == timedelta(0)
        with log.transaction():
            log.fold_summaries(3, "story to three", "llm")
        v3 = log.summaries_version()
        assert v3 > v2 and log.story_so_far() == (3, "story to three")
        shown = log.shown_summaries()
        assert [(s.start, s.end, s.text, s.level) for s in shown] == [
            (0, 3, "story to three", 1), (4, 5, "block three", 0)
        ]  # fmt: skip
        assert shown[0].began == T0 and shown[0].ended == T0 + timedelta(minutes=3)
        with log.transaction():  # a second fold replaces the first
            log.fold_summaries(5, "story to five", "llm")
        assert log.summaries_version() > v3  # it grows whenever a summary is stored
        assert log.story_so_far() == (5, "story to five")
        assert [s.text for s in log.shown_summaries()] == ["story to five"]
        assert log.block_summaries(5) == [] and log.summarised_to() == 5
        assert log.counts() == (8, 1, 0, 4)  # three blocks and one story so far
        log.close()

    def test_a_failure_inside_a_transaction_stores_nothing(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        kept = log.append(turns_of(2))
        with log.transaction():
            log.add_summary(0, 0, 0, "kept summary", "extractive")
        version = log.summaries_version()
        with pytest.raises(RuntimeError, match="interrupted"), log.transaction():
            log.add_summary(0, 1, 1, "lost summary", "extractive")
            log.fold_summaries(1, "lost story", "llm")
            log.append(turns_of(2, start=2))
            log.settle([_placed(kept[1], 3, 0.5, True)])
            log.mark_indexed(kept)
            log.pin("lost pin")
            raise RuntimeError("interrupted")
        assert log.turns() == kept and log.unindexed() == kept
        assert log.summaries_version() == version and log.summarised_to() == 0
        assert log.story_so_far() is None and log.pins() == []
        assert [s.text for s in log.shown_summaries()] == ["kept summary"]
        with log.transaction():  # and one that ends well keeps all its writes
            log.add_summary(0, 1, 1, "second summary", "extractive")
            added = log.append(turns_of(1, start=2))
        assert [t.seq for t in added] == [2] and log.last_seq() == 2
        assert log.summarised_to() == 1
        log.close()
        again = self.open(make_turns)
        assert again.last_seq() == 2 and again.summarised_to() == 1 and again.pins() == []
        again.close()

    def test_pins(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        a = log.pin("first note")
        b = log.pin(ODD_TEXT)
        c = log.pin("third note")
        assert len({a, b, c}) == 3
        assert log.pins() == ["first note", ODD_TEXT, "third note"]
        assert log.unpin(b) and not log.unpin(b)
        assert not log.unpin(max(a, b, c) + 1000)
        assert log.pins() == ["first note", "third note"]
        assert len(log) == 0  # a pin is not a turn
        log.close()

    def test_everything_persists_across_a_reopen(self, make_turns: TurnsFactory) -> None:
        log = self.open(make_turns)
        turns = log.append(turns_of(4))
        log.settle([_placed(t, 0, 0.5, False) for t in turns[:3]])
        with log.transaction():
            log.add_summary(0, 0, 1, "a summary", "extractive")
        log.pin("remember me")
        before = (log.turns(), log.counts(), log.shown_summaries(), log.summaries_version())
        log.close()
        again = self.open(make_turns)
        assert (again.turns(), again.counts(), again.shown_summaries(),
                again.summaries_version()) == before  # fmt: skip
        assert again.pins() == ["remember me"] and again.unindexed() == [turns[3]]
        assert [t.seq for t in again.append(turns_of(1, start=4))] == [4]
        again.close()
        reader = make_turns("s1", read_only=True)
        assert reader is not None
        assert reader.last_seq() == 4 and reader.pins() == ["remember me"]
        reader.close()

    def test_a_read_only_open_creates_nothing(
        self, make_turns: TurnsFactory, store_is_empty: Callable[[], bool]
    ) -> None:
        assert make_turns("never", read_only=True) is None
        assert store_is_empty()
        self.open(make_turns, "other").close()
        assert make_turns("never", read_only=True) is None  # another session's log is not it

    def test_sessions_never_see_each_other(self, make_turns: TurnsFactory) -> None:
        a, b = self.open(make_turns, "a"), self.open(make_turns, "b")
        a.append(turns_of(3))
        b.append([("user", "only in b", T0, {})])
        with a.transaction():
            a.add_summary(0, 0, 1, "a's summary", "extractive")
        a.pin("a's pin")
        assert [t.seq for t in b.turns()] == [0] and b.turns()[0].text == "only in b"
        assert len(a) == 3 and len(b) == 1
        assert b.summarised_to() == -1 and b.shown_summaries() == [] and b.pins() == []
        assert b.summaries_version() == 0 and b.counts() == (1, 1, 0, 0)
        assert [t.seq for t in b.append(turns_of(1))] == [1]
        assert a.last_seq() == 2
        a.close()
        b.close()


class SessionCatalogTests:
    """What every session catalog must do; subclass it once per implementation and give the
    ``make_catalog`` and ``store_is_empty`` fixtures (each test has a store of its own)."""

    @pytest.fixture
    def make_catalog(self) -> CatalogFactory:
        """Opens the test's store's catalog; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_catalog` fixture")

    @pytest.fixture
    def store_is_empty(self) -> Callable[[], bool]:
        """Whether the engine holds nothing at all for the test's store; every subclass
        overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `store_is_empty` fixture")

    def test_an_empty_catalog(self, make_catalog: CatalogFactory) -> None:
        c = make_catalog()
        assert c.get("ns", "s") is None and c.sessions("ns") == []
        assert c.sessions("ns", user="u") == []
        c.close()

    def test_register_then_get(self, make_catalog: CatalogFactory) -> None:
        c = make_catalog()
        info = c.register("ns", "s1", "alice")
        assert (info.namespace, info.session_id, info.user) == ("ns", "s1", "alice")
        created = from_iso(info.created)
        assert created is not None and created.utcoffset() == timedelta(0)
        assert abs(datetime.now(UTC) - created) < timedelta(minutes=5)
        assert c.get("ns", "s1") == info
        assert c.register("ns", "s1", "alice") == info  # registering again changes nothing
        assert c.register("ns", "s1", None) == info
        other = c.register("ns", "s2", None)
        assert other.user is None and other.folder != info.folder
        assert c.get("ns", "s2") == other and c.get("other-ns", "s1") is None
        c.close()

    def test_a_session_keeps_its_first_user(self, make_catalog: CatalogFactory) -> None:
        c = make_catalog()
        anon = c.register("ns", "s", None)
        owned = c.register("ns", "s", "bob")  # a session without a user takes the first one
        assert owned.user == "bob" and owned.created == anon.created
        assert owned.folder == anon.folder
        assert c.get("ns", "s") == owned
        with pytest.raises(InputError, match="another user"):
            c.register("ns", "s", "eve")
        assert c.get("ns", "s") == owned
        c.close()

    def test_sessions_oldest_first_by_namespace_and_user(
        self, make_catalog: CatalogFactory
    ) -> None:
        c = make_catalog()
        made = [
            c.register("ns", "zeta", "u1"),
            c.register("ns", "alpha", "u2"),
            c.register("ns", "mid", "u1"),
            c.register("elsewhere", "alpha", "u1"),
        ]
        got = c.sessions("ns")
        assert [s.session_id for s in got] == ["zeta", "alpha", "mid"]
        assert got == sorted(made[:3], key=lambda s: (s.created, s.session_id))
        assert [s.session_id for s in c.sessions("ns", user="u1")] == ["zeta", "mid"]
        assert c.sessions("ns", user="nobody") == []
        assert c.sessions("elsewhere") == [made[3]]
        c.close()

    def test_any_name_round_trips(self, make_catalog: CatalogFactory) -> None:
        c = make_catalog()
        names = ["../x", "Zoë 🙂", "a'b\"c", "\u200f\u05e9\u05dc\u05d5\u05dd", "x" * 512]
        for name in names:
            info = c.register(name, name, name)
            assert c.get(name, name) == info and info.user == name
            assert c.sessions(name, user=name) == [info]
        assert len({c.get(n, n).folder for n in names}) == len(names)  # type: ignore[union-attr]
        c.close()

    def test_persists_across_a_reopen(self, make_catalog: CatalogFactory) -> None:
        c = make_catalog()
        a = c.register("ns", "a", "u")
        b = c.register("ns", "b", None)
        c.close()
        again = make_catalog()
        assert again.get("ns", "a") == a and again.sessions("ns") == [a, b]
        again.close()
        reader = make_catalog(read_only=True)
        assert reader.sessions("ns") == [a, b] and reader.get("ns", "b") == b
        reader.close()

    def test_a_read_only_catalog_creates_and_stores_nothing(
        self, make_catalog: CatalogFactory, store_is_empty: Callable[[], bool]
    ) -> None:
        reader = make_catalog(read_only=True)
        assert reader.get("ns", "s") is None and reader.sessions("ns") == []
        info = reader.register("ns", "s", "u")  # told where it would be, nothing written
        assert (info.namespace, info.session_id, info.user) == ("ns", "s", "u")
        assert reader.get("ns", "s") is None
        reader.close()
        assert store_is_empty()
        writer = make_catalog()
        kept = writer.register("ns", "s", None)
        reader = make_catalog(read_only=True)
        assert reader.register("ns", "s", "u") == kept  # the user is not written either
        assert reader.get("ns", "s") == kept
        reader.close()
        writer.close()
