"""The temporal conformance suite: what every :class:`~pensive_core.temporal.TemporalTables`
must do (statements and dates per document, replaced and removed whole, and the view with
supersession computed), as pytest tests an implementation's own test module inherits.

Written from the embedded SQLite tables (:class:`~pensive_core.temporal.TemporalStore`)
before any other engine's exist, so that one (Postgres, issue 26) is held to the same
behaviour. Views are compared by content with a reference: the SQLite tables on an in-memory
database fed the same calls (record order, not the engines' own row ids, is compared).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ..temporal.statements import RuleStatementExtractor, Statement
from ..temporal.store import TemporalStore, TemporalTables, TemporalView

__all__ = ["TemporalFactory", "TemporalTablesTests", "TaggedStatements", "temporal_contents"]

#: What the ``make_temporal`` fixture returns: opens (or reopens) the tables kept at a folder.
TemporalFactory = Callable[[Path], TemporalTables]

UTC = timezone.utc
RULES = RuleStatementExtractor()

CEO = [
    (
        "ceo-2019",
        "Acme Corp annual report. The CEO of Acme Corp is John Smith.",
        datetime(2019, 4, 1, tzinfo=UTC),
    ),
    (
        "ceo-2022",
        "Press release. Maria Lopez was appointed CEO of Acme Corp, replacing John Smith.",
        datetime(2022, 6, 15, tzinfo=UTC),
    ),
    (
        "rev",
        "Northwind's Q3 2024 revenue was $4.2 million. Correction: Northwind's Q3 2024 revenue "
        "was $4.4 million. The audit closed on 3 March 2025.",
        datetime(2024, 10, 2, tzinfo=UTC),
    ),
    ("moves", "Caroline moved to Lisbon last week. Caroline moved to Porto.", None),
]


def passages(doc_id: str, text: str) -> list[tuple[str, str]]:
    """A document's sentences as its passages, ``(chunk id, text)``."""
    parts = [p.strip() + "." for p in text.split(". ") if p.strip()]
    return [(f"{doc_id}#{i}", p.rstrip(".") + ".") for i, p in enumerate(parts)]


class TaggedStatements:
    """A test extractor: every ``{slot=value}`` in a passage is a statement (``{slot=value!}``
    a correction, ``{slot=value~}`` a change), slot and value taken as written (NUL
    included), valid from the document's time."""

    name = "tagged"

    def extract(self, text: str, reference: datetime | None = None) -> list[Statement]:
        """The tagged statements of ``text``, in order."""
        out = []
        for part in text.split("{")[1:]:
            body = part.split("}", 1)[0]
            slot, _, value = body.partition("=")
            correction, change = value.endswith("!"), value.endswith("~")
            out.append(Statement(slot, value.rstrip("!~"), correction, change, None, body))
        return out


TAGGED = TaggedStatements()


def temporal_contents(view: TemporalView) -> dict[str, Any]:
    """What a view holds, comparable between engines: each statement in record order with
    its passage, slot, value, flags, validity, what supersedes it (by record position) and
    its chain; the chains; each passage's dates."""
    return {
        "rows": [
            (
                r.chunk,
                r.slot,
                r.value,
                r.correction,
                r.change,
                r.t,
                r.valid_to,
                r.superseded_by,
                r.chain,
            )
            for r in view.rows
        ],  # fmt: skip
        "chains": view.chains,
        "chunks": {
            cid: (list(info.statements), sorted(info.dates))
            for cid, info in sorted(view.chunks.items())
        },
        "validity": {cid: view.validity(cid) for cid in sorted(view.chunks)},
        "signature": view.signature(),
    }


def reference_temporal() -> TemporalStore:
    """The SQLite tables on an in-memory database: what every engine's view must equal."""
    return TemporalStore(sqlite3.connect(":memory:", isolation_level=None))


class TemporalTablesTests:
    """What every statement store must do; subclass it once per implementation and give the
    ``make_temporal`` fixture: ``make_temporal(folder)`` opens (or reopens) the tables kept at
    ``folder`` (each test has its own ``tmp_path``; some open it twice at once, as a writer
    and a reader).

    Attributes:
        refused_write: The error a write the store refuses raises (a passage id of None).
    """

    refused_write: type[BaseException] | tuple[type[BaseException], ...] = Exception

    @pytest.fixture
    def make_temporal(self) -> TemporalFactory:
        """The factory each test opens the tables with; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_temporal` fixture")

    @staticmethod
    def fill(*stores: Any) -> None:
        for doc_id, text, ts in CEO:
            for s in stores:
                s.add_document(doc_id, passages(doc_id, text), ts, RULES)

    def test_empty(self, make_temporal: TemporalFactory, tmp_path: Path) -> None:
        t = make_temporal(tmp_path)
        assert t.counts() == {"statements": 0, "dates": 0}
        assert t.documents() == {}
        view = t.load()
        assert view.rows == [] and view.chains == [] and view.chunks == {}
        assert view.validity("x") == (None, None, None) and view.signature() == {}
        t.remove_document("never-there")
        assert t.counts() == {"statements": 0, "dates": 0}

    def test_add_counts_documents_and_view(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        t, ref = make_temporal(tmp_path), reference_temporal()
        self.fill(t, ref)
        assert t.counts() == ref.counts() and t.counts()["statements"] >= 4
        assert t.documents() == ref.documents()
        assert t.documents()["ceo-2019"] == {"ceo-2019#0", "ceo-2019#1"}
        view = t.load()
        assert temporal_contents(view) == temporal_contents(ref.load())
        _, until, by = view.validity("ceo-2019#1")
        assert until == datetime(2022, 6, 15, tzinfo=UTC) and by == "ceo-2022#1"
        assert view.validity("ceo-2022#1")[2] is None
        assert view.dates_of("rev#2")  # "3 March 2025"

    def test_replace_and_remove(self, make_temporal: TemporalFactory, tmp_path: Path) -> None:
        t, ref = make_temporal(tmp_path), reference_temporal()
        self.fill(t, ref)
        for s in (t, ref):
            s.remove_document("ceo-2022")
        assert "ceo-2022" not in t.documents()
        view = t.load()
        assert temporal_contents(view) == temporal_contents(ref.load())
        assert view.validity("ceo-2019#1")[2] is None  # nothing supersedes it any more
        later = [("ceo-2019#1", "The CEO of Acme Corp is Ana Diaz.")]
        for s in (t, ref):
            s.add_document("ceo-2019", later, datetime(2023, 1, 1, tzinfo=UTC), RULES)
        assert t.counts() == ref.counts() and t.documents() == ref.documents()
        assert temporal_contents(t.load()) == temporal_contents(ref.load())
        for s in (t, ref):
            s.add_document("ceo-2019", [], None, RULES)  # no passages: nothing left of it
        assert "ceo-2019" not in t.documents()
        assert temporal_contents(t.load()) == temporal_contents(ref.load())

    def test_record_order_breaks_ties_and_undated_changes_supersede(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        t, ref = make_temporal(tmp_path), reference_temporal()
        day = datetime(2024, 1, 1, tzinfo=UTC)
        for s in (t, ref):
            s.add_document("x", [("x#0", "{hq=berlin}")], day, TAGGED)
            s.add_document("y", [("y#0", "{hq=paris}")], day, TAGGED)  # same time: later record
            s.add_document("u", [("u#0", "{home=oslo}")], None, TAGGED)
            s.add_document("v", [("v#0", "{home=rome~}")], None, TAGGED)
            s.add_document("x", [("x#0", "{hq=berlin}")], day, TAGGED)  # re-recorded: newest
        view = t.load()
        assert temporal_contents(view) == temporal_contents(ref.load())
        assert view.validity("y#0")[2] == "x#0" and view.validity("u#0")[2] == "v#0"

    def test_relative_dates_follow_the_flag(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        t, ref = make_temporal(tmp_path), reference_temporal()
        text = [("r#0", "Caroline moved to Lisbon last week.")]
        ts = datetime(2023, 5, 8, tzinfo=UTC)
        for s in (t, ref):
            s.add_document("r", text, ts, RULES, relative=True)
            s.add_document("q", [("q#0", text[0][1])], ts, RULES, relative=False)
        assert temporal_contents(t.load()) == temporal_contents(ref.load())
        assert t.load().dates_of("r#0") and t.counts() == ref.counts()

    def test_persists_across_a_reopen(self, make_temporal: TemporalFactory, tmp_path: Path) -> None:
        t = make_temporal(tmp_path)
        self.fill(t)
        before = (temporal_contents(t.load()), t.counts(), t.documents())
        close = getattr(t, "close", None)
        if close is not None:
            close()
        again = make_temporal(tmp_path)
        assert (temporal_contents(again.load()), again.counts(), again.documents()) == before

    def test_a_reader_sees_a_writers_commit(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        writer, reader = make_temporal(tmp_path), make_temporal(tmp_path)
        assert reader.load().rows == []
        self.fill(writer)
        assert temporal_contents(reader.load()) == temporal_contents(writer.load())
        writer.remove_document("ceo-2022")
        assert reader.load().validity("ceo-2019#1")[2] is None
        assert reader.counts() == writer.counts()

    def test_any_text_in_statements_comes_back_exactly(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        t, ref = make_temporal(tmp_path), reference_temporal()
        odd = [
            ("odd#0", "{ceo\x00acme=maría\x00lópez}"),
            ("odd#1", "{ceo\x00acme=שלום 𝔘𝔫𝔦!}"),
            ("odd#2", "{ünï ✓='; DROP TABLE x; --=\t~}"),
        ]
        for s in (t, ref):
            s.add_document("odd", odd, datetime(2024, 1, 1, tzinfo=UTC), TAGGED)
        view = t.load()
        assert temporal_contents(view) == temporal_contents(ref.load())
        assert [(r.slot, r.value) for r in view.rows] == [
            ("ceo\x00acme", "maría\x00lópez"),
            ("ceo\x00acme", "שלום 𝔘𝔫𝔦"),
            ("ünï ✓", "'; DROP TABLE x; --=\t"),
        ]
        assert view.validity("odd#0")[2] == "odd#1"  # the correction wins the tie

    def test_a_refused_write_stores_nothing(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        t = make_temporal(tmp_path)
        self.fill(t)
        before = (temporal_contents(t.load()), t.counts(), t.documents())
        broken: list[Any] = [("rev#0", "{revenue=5}"), (None, "{revenue=6}")]
        with pytest.raises(self.refused_write):
            t.add_document("rev", broken, datetime(2025, 1, 1, tzinfo=UTC), TAGGED)
        assert (temporal_contents(t.load()), t.counts(), t.documents()) == before
        t.add_document("rev", broken[:1], None, TAGGED)  # the store still writes
        assert t.documents()["rev"] == {"rev#0"}

    def test_load_of_many_passages_equals_the_reference(
        self, make_temporal: TemporalFactory, tmp_path: Path
    ) -> None:
        t, ref = make_temporal(tmp_path), reference_temporal()
        for d in range(30):
            ts = datetime(2020 + d % 5, 1 + d % 12, 1, tzinfo=UTC)
            ps = [(f"d{d}#{i}", f"{{slot{i % 17}=v{d % 3}}} {{s{d}=x}}") for i in range(30)]
            for s in (t, ref):
                s.add_document(f"d{d}", ps, ts, TAGGED)
        for s in (t, ref):
            s.remove_document("d4")
        view = t.load()
        assert len(view.rows) == 29 * 30 * 2
        assert temporal_contents(view) == temporal_contents(ref.load())
