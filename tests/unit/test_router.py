"""The router: selective L1 invalidation, L3 escalation to the archive, statistics, readers."""

import threading

import pytest

from pensive_core import Document, Pensive
from pensive_core.errors import PensiveError
from pensive_core.router import exact_needles, missing_needles
from pensive_core.types import Hit
from tests.conftest import HASH_CONFIG, docs_corpus

# refresh off: these tests check which entries a change drops (refresh is tested on its own)
L1_CONFIG = {**HASH_CONFIG, "router": {"l1": True, "l1_refresh": 0}}
# a candidate depth below the corpus size, so the candidate lists are full and a new passage
# must earn its place in them to invalidate anything
SELECTIVE = {**L1_CONFIG, "fusion": {"depth": 2}}


def _filler(n=200):
    """Unrelated notes, so one new document is a small change to the corpus (not a bulk one)."""
    import random

    rng = random.Random(7)
    vocab = [f"{a}{b}" for a in ("zor", "plim", "quax", "vend", "trul", "mosk") for b in "aeiouy"]
    return [
        Document(id=f"filler{i}", text=" ".join(rng.choice(vocab) for _ in range(12)) + ".")
        for i in range(n)
    ]


def _corpus():
    return docs_corpus() + _filler()


def _fresh(p, text, k=5):
    """What L2 answers right now, bypassing the cache."""
    l1, p.components.l1 = p.components.l1, None
    try:
        return [h.chunk_id for h in p.query(text, k=k).hits]
    finally:
        p.components.l1 = l1


def test_unrelated_ingest_keeps_the_entry_and_related_ingest_drops_it(tmp_path):
    with Pensive(tmp_path, config=SELECTIVE) as p:
        p.ingest(_corpus())
        q = "arctic tern migration"
        p.query(q)
        p.ingest([Document(id="opera", text="Verdi composed Aida for the Cairo opera house.")])
        res = p.query(q)
        assert res.tier == "L1"  # an unrelated document cannot change this answer
        assert [h.chunk_id for h in res.hits] == _fresh(p, q)
        p.ingest([Document(id="tern2", text="Arctic tern migration: a new tracking study.")])
        res = p.query(q)
        assert res.tier == "L2" and "tern2" in {h.doc_id for h in res.hits}
        assert p.stats()["l1"]["invalidated"] >= 1


def test_superseding_document_is_never_served_stale(tmp_path):
    with Pensive(tmp_path, config=SELECTIVE) as p:
        p.ingest(_corpus())
        q = "who is the chief executive officer of Acme"
        assert p.query(q, k=1).hits[0].doc_id == "ceo"
        assert p.query(q, k=1).tier == "L1"
        p.ingest(
            [
                Document(
                    id="ceo-2025",
                    text="Acme's chief executive officer is now Jane Doe, who replaced John Smith.",
                )
            ]
        )
        res = p.query(q, k=1)
        assert res.tier != "L1"
        assert [h.chunk_id for h in res.hits] == _fresh(p, q, k=1)


def test_replacing_metadata_of_a_returned_document_invalidates(tmp_path):
    with Pensive(tmp_path, config=SELECTIVE) as p:
        p.ingest(_corpus())
        q = "arctic tern migration"
        assert p.query(q, k=1).hits[0].metadata["topic"] == "bird"
        bird = next(d for d in docs_corpus() if d.id == "bird")
        p.ingest([Document(id="bird", text=bird.text, metadata={"topic": "birds"})])
        res = p.query(q, k=1)
        assert res.tier == "L2" and res.hits[0].metadata["topic"] == "birds"


def test_affected_entries_are_answered_again_most_used_first(tmp_path):
    cfg = {**SELECTIVE, "router": {"l1": True, "l1_refresh": 1}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(_corpus())
        hot, cold = "arctic tern migration", "arctic tern nesting"
        for _ in range(3):
            p.query(hot)
        p.query(cold)
        p.ingest([Document(id="tern2", text="Arctic tern migration and nesting: new study.")])
        assert p.stats()["l1"]["refreshed"] == 1
        res = p.query(hot)
        assert res.tier == "L1" and "tern2" in {h.doc_id for h in res.hits}
        assert [h.chunk_id for h in res.hits] == _fresh(p, hot)
        assert p.query(cold).tier == "L2"  # over the refresh budget: dropped


def test_bulk_change_empties_the_cache(tmp_path):
    with Pensive(tmp_path, config=SELECTIVE) as p:
        p.ingest(docs_corpus())
        for q in ("arctic tern", "green tea", "invoice paid"):
            p.query(q)
        assert p.stats()["l1"]["entries"] == 3
        p.ingest([Document(id=f"n{i}", text=f"Note {i} about opera.") for i in range(4)])
        assert p.stats()["l1"]["entries"] == 0  # 4 new of 12 passages: over the bulk fraction


def test_identifier_only_the_archive_holds_escalates_to_l3(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        cold = Document(
            id="ledger-2019",
            text="Ledger for 2019.\n\nOpening balances carried over.\n\n"
            "Invoice INV-1234 was written off after the customer went bankrupt.\n\n"
            "Closing entries follow.",
            metadata={"box": 7},
        )
        report = p.ingest([cold], archive_only=True)
        assert report.added == 1 and report.chunks_embedded == 0
        assert p.stats()["vectors"] == 8  # not embedded
        res = p.query("What happened to invoice INV-1234?", k=3)
        assert res.tier == "L3"
        top = res.hits[0]
        assert top.doc_id == "ledger-2019" and top.sources == {"archive": 1}
        assert "INV-1234 was written off" in top.text
        assert top.metadata == {"box": 7}
        assert res.confidence >= 0.9
        assert p.stats()["l3"]["exact"] == 1
        # the L2 passages follow, and the L3 answer is cached like any other
        assert len(res.hits) == 3
        assert p.query("what happened to invoice inv-1234", k=3).tier == "L1"
        # an identifier L2 already shows is not escalated
        assert p.query("Was invoice INV-4471 paid?").tier == "L2"


def test_archive_only_documents_never_show_in_l2(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        bird = next(d for d in docs_corpus() if d.id == "bird")
        p.ingest([bird], archive_only=True)  # demoted to the archive: out of the indexes
        assert p.stats()["vectors"] == 7
        res = p.query("arctic tern pole to pole migration")
        assert all(h.doc_id != "bird" or h.sources == {"archive": 1} for h in res.hits)
        p.ingest([bird])  # promoted back
        assert p.query("arctic tern pole to pole migration").hits[0].doc_id == "bird"


def test_new_archive_document_invalidates_a_cached_answer_that_lacked_it(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        q = "status of INV-9999"
        assert p.query(q).tier == "L2"  # nowhere: L2's best effort is cached
        assert p.query(q).tier == "L1"
        p.ingest([Document(id="late", text="INV-9999 was paid in full.")], archive_only=True)
        res = p.query(q)
        assert res.tier == "L3" and res.hits[0].doc_id == "late"


def test_low_confidence_escalation_is_configurable(tmp_path):
    cfg = {**HASH_CONFIG, "router": {"l3_below": 1.0}}  # escalate every question
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs_corpus())
        res = p.query("longest migration of any bird")
        assert res.tier == "L3"
        assert any("archive" in h.sources for h in res.hits)
        assert p.stats()["l3"]["low_confidence"] == 1


def test_exact_needles_and_missing():
    assert exact_needles('Was INV-4471 paid in Q3 2024? "net of tax" 7, 10% or 3.5') == [
        "net of tax",
        "inv-4471",
        "q3",
        "2024",
        "3.5",
    ]
    assert exact_needles("Does BRCA1 raise risk in 5 of 10 carriers?") == ["brca1"]
    hits = [Hit("d", "d#1", "Invoice INV-4471 was paid in Q3.", 1.0)]
    assert missing_needles(["inv-4471", "q3", "2024"], hits) == ["2024"]


def test_stats_report_tiers_confidence_and_persist_across_processes(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        for _ in range(3):
            p.query("arctic tern")
        s = p.stats()["queries"]
        assert s["total"] == 3 and s["L1"]["count"] == 2 and s["L2"]["count"] == 1
        assert sum(s["L2"]["confidence"]) == 1 and len(s["L2"]["confidence"]) == 10
        assert s["L1"]["p50_ms"] <= s["L2"]["p50_ms"]
        assert s["L1"]["recent"]["count"] == 2
    with Pensive(tmp_path) as p:  # lifetime figures survive the process
        p.query("arctic tern")
        s = p.stats()["queries"]
        assert s["total"] == 4 and s["L1"]["count"] == 3 and s["L1"]["recent"]["count"] == 1


def test_threads_query_while_one_ingests(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        errors: list[BaseException] = []
        stop = threading.Event()

        def reader():
            try:
                while not stop.is_set():
                    for q in ("arctic tern", "green tea", "Q3 2024 revenue"):
                        assert p.query(q, k=2).hits
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(10):
            p.ingest([Document(id=f"tern{i}", text=f"Arctic tern sighting number {i}.")])
        stop.set()
        for t in threads:
            t.join()
        assert not errors
        assert p.query("arctic tern sighting number 9", k=1).hits[0].doc_id == "tern9"


def test_query_stats_flush_while_another_thread_ingests(tmp_path):
    """Every query flushes its counters to SQLite: never inside the ingest's transaction on the
    same connection (seen as "cannot start a transaction within a transaction")."""
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        p.components.stats.flush_every = 1
        errors: list[BaseException] = []
        stop = threading.Event()

        def reader():
            try:
                while not stop.is_set():
                    p.query("arctic tern", k=2)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for i in range(20):
                p.ingest([Document(id=f"tern{i}", text=f"Arctic tern sighting number {i}.")])
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors
        assert p.stats()["queries"]


def test_one_writer_at_a_time(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        with pytest.raises(PensiveError, match="open for writing"):
            Pensive(tmp_path)
        reader = Pensive(tmp_path, read_only=True)
        assert reader.query("arctic tern", k=1).hits[0].doc_id == "bird"
        with pytest.raises(PensiveError, match="read-only"):
            reader.ingest(docs_corpus())
        with pytest.raises(PensiveError, match="read-only"):
            reader.delete("bird")
        p.ingest([Document(id="tern2", text="Arctic tern chicks fledge in July.")])
        # the reader sees the writer's commit at its next query
        assert "tern2" in {h.doc_id for h in reader.query("arctic tern chicks", k=2).hits}
        reader.close()
    with Pensive(tmp_path) as again:  # the lock went with the writer
        assert again.stats()["documents"] == 9


def test_read_only_needs_an_existing_store(tmp_path):
    from pensive_core.errors import NotFoundError

    with pytest.raises(NotFoundError):
        Pensive(tmp_path / "nothing", read_only=True)
