"""The archive conformance suite: what every :class:`~pensive_core.archive.DocumentStore` must
do (documents whole, their passages, the store's metadata, the commit protocol's marks and
the full-text search of whole documents), as pytest tests an implementation inherits.

Written from the embedded :class:`~pensive_core.archive.Archive` (SQLite) before any other
engine's archive exists, so that one (Postgres, issue 26) is held to the same behaviour.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ..archive import DocumentStore
from ..types import Chunk, Document

__all__ = ["ArchiveFactory", "DocumentStoreTests", "make_chunks"]

#: What the ``make_archive`` fixture returns: opens (or reopens) the archive kept at a folder.
ArchiveFactory = Callable[[Path], DocumentStore]

UTC = timezone.utc


def make_chunks(doc: Document, size: int = 40) -> list[Chunk]:
    """A document's text cut into passages of about ``size`` characters at spaces, with ids,
    offsets and hashes as the engine gives them (the archive stores, it does not cut)."""
    out: list[Chunk] = []
    start = 0
    text = doc.text
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end)
            end = space if space > start else end
        piece = text[start:end]
        h = hashlib.blake2b(piece.encode("utf-8"), digest_size=8).hexdigest()
        out.append(Chunk(f"{doc.id}#{h}~{len(out)}", doc.id, len(out), piece, start, end, h))
        start = end
    return out


def written(doc: Document, size: int = 40) -> tuple[Document, str, list[Chunk]]:
    """``(document, content hash, passages)`` as :meth:`DocumentStore.write` takes them."""
    return doc, hashlib.sha256(doc.text.encode("utf-8")).hexdigest(), make_chunks(doc, size)


DOCS = [
    Document(
        "inv",
        "Invoice INV-4471 was paid in March by Acme Corporation after two reminders.",
        {"kind": "invoice", "amount": 1200.5, "tags": ["finance", "q1"], "ok": True},
        datetime(2024, 3, 12, 9, 30, tzinfo=UTC),
    ),
    Document(
        "tern",
        "The arctic tern migrates from the Arctic to the Antarctic and back every year.",
        {"kind": "nature", "lang": "en"},
    ),
    Document(
        "tea",
        "Green tea holds catechins, antioxidants studied for their effect on the heart.",
        {"kind": "nature", "note": "ünïcødé ✓"},
        datetime(2021, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ),
]


class DocumentStoreTests:
    """What every archive must do; subclass it once per implementation and give the
    ``make_archive`` fixture: ``make_archive(folder)`` opens (or reopens) the archive kept at
    ``folder`` (each test has its own ``tmp_path``; the data-version test opens it twice at
    once, as a writer and a second connection)."""

    @pytest.fixture
    def make_archive(self) -> ArchiveFactory:
        """The factory each test opens the archive with; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_archive` fixture")

    @staticmethod
    def filled(a: DocumentStore) -> DocumentStore:
        a.write([written(d) for d in DOCS])
        a.mark_indexed(True)
        return a

    def test_empty(self, make_archive: ArchiveFactory, tmp_path: Path) -> None:
        a = make_archive(tmp_path)
        assert a.counts() == (0, 0)
        assert a.document("nothing") is None and a.fingerprint("nothing") is None
        assert a.chunks(["nothing#1"]) == {} and a.chunk_ids("nothing") == []
        assert a.unindexed() == [] and a.commit_number() == 0 and not a.is_dirty()
        assert a.get_meta("anything") is None
        assert a.search_documents((), (), ["tern"], 5) == []
        assert a.index_chunks() == {} and a.indexed_passage_count() == 0

    def test_documents_come_back_whole(self, make_archive: ArchiveFactory, tmp_path: Path) -> None:
        a = self.filled(make_archive(tmp_path))
        for d in DOCS:
            got = a.document(d.id)
            assert got is not None
            assert (got.id, got.text, dict(got.metadata)) == (d.id, d.text, dict(d.metadata))
            assert got.timestamp == d.timestamp  # the same instant (a zone may be normalised)
        n_chunks = sum(len(make_chunks(d)) for d in DOCS)
        assert a.counts() == (len(DOCS), n_chunks)

    def test_passages_in_order_with_their_document(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        a = make_archive(tmp_path)
        doc = DOCS[0]
        chunks = make_chunks(doc)
        a.write([written(doc)], contexts={chunks[0].id: "From Acme's ledger."})
        a.mark_indexed(True)
        assert a.chunk_ids(doc.id) == [c.id for c in chunks]
        assert a.doc_chunks(doc.id) == [(c.id, c.ordinal, c.text) for c in chunks]
        got = a.chunks([chunks[1].id, chunks[0].id, "nothing"])
        assert set(got) == {chunks[0].id, chunks[1].id}
        first = got[chunks[0].id]
        assert (first.doc_id, first.ordinal, first.text) == (doc.id, 0, chunks[0].text)
        assert first.metadata == dict(doc.metadata) and first.timestamp == doc.timestamp
        assert first.context == "From Acme's ledger." and got[chunks[1].id].context == ""
        assert not first.pending and not first.archive_only
        assert a.contexts(doc.id)[chunks[0].id] == "From Acme's ledger."
        spans = a.neighbours(doc.id, 1, 1)
        assert [o for o, _, _ in spans] == [0, 1, 2][: len(chunks)]
        assert all(doc.text[s:e] == chunks[o].text for o, s, e in spans)

    def test_pending_until_marked_indexed(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        a = make_archive(tmp_path)
        a.write([written(d) for d in DOCS[:2]])
        assert sorted(a.unindexed()) == ["inv", "tern"]
        cid = a.chunk_ids("tern")[0]
        assert a.chunks([cid])[cid].pending
        assert a.search_documents((), (), ["tern"], 5) == []  # not committed: not searched
        assert {v[1] for v in a.index_chunks().values()} == {0}
        assert a.mark_indexed(True, ["tern"]) == 1  # only the documents the change wrote
        assert a.unindexed() == ["inv"]
        assert [d for d, _ in a.search_documents((), (), ["tern"], 5)] == ["tern"]
        assert a.mark_indexed(False, synced=["graph_synced"]) == 1  # the commit number stays
        assert a.unindexed() == [] and a.commit_number() == 1
        assert a.get_meta("graph_synced") == 1  # set in the same transaction
        a.mark_pending(["inv"])
        assert a.unindexed() == ["inv"]
        fp = a.fingerprint("inv")
        assert fp is not None and fp[0] == written(DOCS[0])[1] and fp[3] == 0
        assert json.loads(fp[1]) == dict(DOCS[0].metadata)

    def test_replace_and_delete(self, make_archive: ArchiveFactory, tmp_path: Path) -> None:
        a = self.filled(make_archive(tmp_path))
        old = a.chunk_ids("tern")
        new = Document("tern", "Terns are seabirds; this note replaces the old one entirely.")
        a.write([written(new)])
        a.mark_indexed(True)
        assert not set(old) & set(a.chunk_ids("tern"))
        assert a.chunks(old) == {}
        assert a.search_documents((), (), ["antarctic"], 5) == []
        assert [d for d, _ in a.search_documents((), (), ["seabirds"], 5)] == ["tern"]
        gone = a.delete("tea")
        assert gone and a.chunks(gone) == {} and a.document("tea") is None
        assert a.search_documents((), (), ["catechins"], 5) == []
        assert a.delete("never-there") == []
        assert a.counts()[0] == len(DOCS) - 1

    def test_full_text_search(self, make_archive: ArchiveFactory, tmp_path: Path) -> None:
        a = self.filled(make_archive(tmp_path))
        assert [d for d, _ in a.search_documents(["INV-4471"], (), (), 5)] == ["inv"]
        assert [d for d, _ in a.search_documents(["INV-4471"], (), ["paid"], 5)] == ["inv"]
        assert a.search_documents(["INV-4471"], (), ["antarctic"], 5) == []
        assert a.search_documents(["INV-4471", "catechins"], (), (), 5) == []
        found = a.search_documents((), ["INV-4471", "catechins"], (), 5)
        assert {d for d, _ in found} == {"inv", "tea"}
        both = a.search_documents((), (), ["arctic", "tea", "acme"], 5)
        assert {d for d, _ in both} == {"inv", "tern", "tea"}
        scores = [s for _, s in both]
        assert scores == sorted(scores, reverse=True)
        assert len(a.search_documents((), (), ["arctic", "tea", "acme"], 2)) == 2
        assert a.search_documents(['"tern" OR acme'], (), (), 5) == []  # a phrase, not syntax
        assert a.search_documents((), (), (), 5) == []

    def test_full_text_search_reads_words_and_numbers_whatever_joins_them(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        # a question writes "1945-1949" where the document has an en dash (HotpotQA's "Dick
        # Humbert": "(1941, 1945–1949)"), or "COVID-19" where it has a space; a phrase is its
        # words and numbers in order, whatever stands between them
        docs = [
            Document("humbert", "He played for the Philadelphia Eagles (1941, 1945–1949)."),
            Document("virus", "Cases of COVID 19 rose in the spring of 2020."),
            Document("ship", "The order INV-4471 shipped on 1941-03-02 by sea."),
        ]
        a = make_archive(tmp_path)
        a.write([written(d) for d in docs])
        a.mark_indexed(True)

        def found(*needles: str) -> list[str]:
            return [d for d, _ in a.search_documents(needles, (), ["played", "rose", "sea"], 5)]

        assert found("1945-1949") == ["humbert"]
        assert found("1945–1949") == ["humbert"]
        assert found("covid-19") == ["virus"]
        assert found("inv 4471") == ["ship"]
        assert found("inv–4471", "1941-03-02") == ["ship"]
        assert found("1941") == ["humbert", "ship"] or found("1941") == ["ship", "humbert"]
        assert found("1945-1941") == []  # the words in their order, next to each other
        assert found("covid-2020") == []

    def test_full_text_search_ranks_by_the_words_asked(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        # L3 escalation asks for documents holding a missing needle, ranked by the question's
        # words, which hold the needle too: the document naming more of them comes first
        # (HotpotQA: "Little Caesars and Pizza Hut were founded in the 1950s ...")
        docs = [
            Document("aardvarks", "Aardvarks were first filmed in the 1950s in the park."),
            Document("pizza-hut", "Pizza Hut was founded in the 1950s; it was the first pizza "
                     "chain to serve Wichita."),
            Document("elsewhere", "Little Caesars serves pizza; founded in 1959 by a couple."),
        ]  # fmt: skip
        a = make_archive(tmp_path)
        a.write([written(d) for d in docs])
        a.mark_indexed(True)
        words = ["little", "caesars", "pizza", "hut", "founded", "1950s", "first", "serve"]
        found = a.search_documents(["1950s"], (), words, 5)
        assert [d for d, _ in found] == ["pizza-hut", "aardvarks"]
        assert found[0][1] > found[1][1]

    def test_archive_only_documents_stay_out_of_the_indexes(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        a = self.filled(make_archive(tmp_path))
        extra = Document("big", "An archived report held for verification only.")
        a.write([written(extra)], archive_only=True)
        assert "big" not in {v[0] for v in a.index_chunks().values()}
        assert "big" not in a.indexed_documents() and "big" not in a.unindexed()
        cid = a.chunk_ids("big")[0]
        assert a.chunks([cid])[cid].archive_only
        assert a.indexed_passage_count() == sum(len(make_chunks(d)) for d in DOCS)
        rows = a.indexed_passages()
        assert {r[1] for r in rows} == {d.id for d in DOCS}

    def test_metadata_transactions_and_marks(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        a = make_archive(tmp_path)
        a.set_meta("config", {"a": [1, 2, {"b": None}], "c": "ü"})
        assert a.get_meta("config") == {"a": [1, 2, {"b": None}], "c": "ü"}
        with pytest.raises(RuntimeError), a.transaction():
            a.set_meta("half", 1)
            raise RuntimeError("interrupted")
        assert a.get_meta("half") is None  # rolled back whole
        a.mark_dirty()
        assert a.is_dirty()
        a.mark_indexed(False)
        assert not a.is_dirty()

    def test_filter_rows(self, make_archive: ArchiveFactory, tmp_path: Path) -> None:
        a = self.filled(make_archive(tmp_path))
        ids, metas, passages = a.filter_rows()
        assert dict(zip(ids, metas, strict=True)) == {d.id: dict(d.metadata) for d in DOCS}
        assert {doc for _, doc in passages} == {d.id for d in DOCS}
        assert len(passages) == sum(len(make_chunks(d)) for d in DOCS)

    def test_persists_across_a_reopen(self, make_archive: ArchiveFactory, tmp_path: Path) -> None:
        a = self.filled(make_archive(tmp_path))
        a.set_meta("k", 7)
        before = (a.counts(), a.commit_number(), a.chunk_ids("inv"))
        a.close()
        b = make_archive(tmp_path)
        assert (b.counts(), b.commit_number(), b.chunk_ids("inv")) == before
        assert b.get_meta("k") == 7 and b.document("tea") is not None
        assert [d for d, _ in b.search_documents((), (), ["tern"], 5)] == ["tern"]
        b.close()

    def test_data_version_moves_when_another_connection_commits(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        writer = self.filled(make_archive(tmp_path))
        other = make_archive(tmp_path)
        v0 = other.data_version()
        assert other.data_version() == v0  # nothing committed: it stays
        writer.write([written(Document("late", "A late note about terns."))])
        writer.mark_indexed(True)
        assert other.data_version() != v0
        assert other.commit_number() == writer.commit_number()
        other.close()
        writer.close()

    def test_any_text_comes_back_exactly(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        """NUL, control characters, RTL marks and astral characters survive the round trip
        (the engine accepts any text that encodes as UTF-8)."""
        a = make_archive(tmp_path)
        odd = Document("odd", "nul\x00here \x01\x7f \u200f\u05e9\u05dc\u05d5\u05dd 𝔘𝔫𝔦 end word",
                       {"k": "v\x00w"})  # fmt: skip
        chunks = make_chunks(odd, size=12)
        a.write([written(odd, size=12)], contexts={chunks[0].id: "ctx\x00nul"})
        a.mark_indexed(True)
        got = a.document("odd")
        assert got is not None and got.text == odd.text and dict(got.metadata) == {"k": "v\x00w"}
        assert [t for _, _, t in a.doc_chunks("odd")] == [c.text for c in chunks]
        assert a.contexts("odd")[chunks[0].id] == "ctx\x00nul"
        assert [d for d, _ in a.search_documents((), (), ["word"], 5)] == ["odd"]

    def test_damaged_documents_is_empty_on_a_sound_archive(
        self, make_archive: ArchiveFactory, tmp_path: Path
    ) -> None:
        assert self.filled(make_archive(tmp_path)).damaged_documents() == []
