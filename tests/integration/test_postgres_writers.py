"""Several writers on one Postgres store: an ingest computes its contexts and vectors before
it takes the store's change lock, so another replica's change goes through while it embeds,
and under the lock it plans again against what the other replica committed meanwhile.

Two handles on one store, each with its own connections, stand for two replicas (the change
lock is a Postgres session lock: two handles exclude each other as two processes do). The
thread joins have deadlines only so that a lock held by mistake fails the test instead of
hanging it; nothing here is timed."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pensive_core import Document, Pensive
from tests.conftest import docs_corpus

pytestmark = pytest.mark.integration

HASH = {"embedder": {"name": "hash", "dim": 64}}
HERON = "The grey heron stands still in shallow water, waiting for fish."


@pytest.fixture
def pair(postgres_dsn, request, tmp_path):
    schema = "w" + hashlib.blake2b(request.node.nodeid.encode(), digest_size=6).hexdigest()
    cfg = {**HASH, "storage": {"engine": "postgres", "dsn": postgres_dsn, "schema_name": schema}}
    a = Pensive(tmp_path / "replica-a", config=cfg)
    b = Pensive(tmp_path / "replica-b", config=cfg)
    yield a, b
    a.close()
    b.close()


@contextmanager
def held_in_embedding(p: Pensive, word: str) -> Iterator[tuple[threading.Event, threading.Event]]:
    """While ``p``'s embedder is asked for a text holding ``word``, it waits for ``release``
    (``entered`` says it got there)."""
    embedder = p.components.embedder.get()
    real = embedder.embed
    entered, release = threading.Event(), threading.Event()

    def embed(texts: list[str]) -> Any:
        if any(word in t for t in texts):
            entered.set()
            assert release.wait(120), "never released"
        return real(texts)

    embedder.embed = embed
    try:
        yield entered, release
    finally:
        release.set()
        del embedder.embed


def in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def level(p: Pensive) -> tuple[int, int, int]:
    s = p.stats()
    return s["documents"], s["chunks"], s["vectors"]


def test_another_replica_commits_while_one_embeds(pair):
    a, b = pair
    a.ingest(docs_corpus())
    with held_in_embedding(a, "heron") as (entered, release):
        ta, out_a = in_thread(lambda: a.ingest([Document("heron", HERON)]))
        assert entered.wait(60)
        # a is embedding: it holds no change lock, so b's change goes through meanwhile
        assert a.components.storage.lock_holder is None
        tb, out_b = in_thread(
            lambda: b.ingest([Document("swift", "Common swifts sleep on the wing for months.")])
        )
        tb.join(60)
        done_while_a_embedded = not tb.is_alive()
        release.set()
        ta.join(60)
        tb.join(60)
    assert done_while_a_embedded, "b's change waited for a's embedding"
    report = out_a[0]
    assert not isinstance(report, BaseException), report
    assert (report.added, report.chunks_embedded) == (1, 1)
    assert not isinstance(out_b[0], BaseException), out_b[0]
    for p in (a, b):  # both changes committed, seen from both replicas
        assert p.query("grey heron waiting for fish", k=1).hits[0].doc_id == "heron"
        assert p.query("swifts sleep on the wing", k=1).hits[0].doc_id == "swift"
        assert level(p) == (10, 10, 10)


def test_a_document_another_replica_replaced_meanwhile_is_planned_again(pair):
    a, b = pair
    a.ingest(docs_corpus())
    with held_in_embedding(a, "heron") as (entered, release):
        ta, out_a = in_thread(lambda: a.ingest([Document("bird", HERON)]))
        assert entered.wait(60)
        b.ingest([Document("bird", "Barn owls hunt by sound alone in complete darkness.")])
        release.set()
        ta.join(60)
    report = out_a[0]
    assert not isinstance(report, BaseException), report
    # under the lock a found b's version stored: its own replaces it (the last change wins)
    assert (report.added, report.updated) == (0, 1)
    for p in (a, b):
        assert p.get("bird").text == HERON
        hits = p.query("barn owls hunt by sound", k=10).hits
        assert all("owls" not in h.text for h in hits)
        assert p.query("grey heron waiting for fish", k=1).hits[0].doc_id == "bird"
        assert level(p) == (8, 8, 8)


def test_a_document_deleted_meanwhile_is_indexed_under_the_lock(pair):
    a, b = pair
    corpus = docs_corpus()
    a.ingest(corpus)
    tea = next(d for d in corpus if d.id == "tea")
    with held_in_embedding(a, "heron") as (entered, release):
        # ahead of the lock "tea" is unchanged (nothing to embed); b deletes it meanwhile
        ta, out_a = in_thread(lambda: a.ingest([tea, Document("heron", HERON)]))
        assert entered.wait(60)
        b.delete("tea")
        release.set()
        ta.join(60)
    report = out_a[0]
    assert not isinstance(report, BaseException), report
    assert (report.added, report.unchanged, report.chunks_embedded) == (2, 0, 2)
    for p in (a, b):
        assert p.get("tea").text == tea.text
        assert p.query("green tea catechins", k=1).hits[0].doc_id == "tea"
        assert level(p) == (9, 9, 9)


def test_ingests_from_two_replicas_at_once_keep_every_document(pair, tmp_path):
    a, b = pair
    docs = [Document(f"d{i}", f"Note {i}: the lighthouse keeper logged storm number {i}.")
            for i in range(40)]  # fmt: skip
    # overlapping halves: the shared ten are written by both, once each, whole
    ta, out_a = in_thread(lambda: [a.ingest([d]) for d in docs[:25]])
    tb, out_b = in_thread(lambda: [b.ingest([d]) for d in docs[15:]])
    ta.join(300)
    tb.join(300)
    for out in (out_a, out_b):
        assert not isinstance(out[0], BaseException), out[0]
    reports = out_a[0] + out_b[0]
    # each overlapping document was added by one replica and found unchanged by the other
    assert sum(r.added for r in reports) == 40
    assert sum(r.unchanged for r in reports) == 10
    for p in (a, b):
        assert level(p) == (40, 40, 40)
        assert p.query("storm number 33", k=1).hits[0].doc_id == "d33"
    # the statistics stayed exact: the same scores as one writer's embedded store
    with Pensive(tmp_path / "one-writer", config={**HASH, "router": {"l1": False}}) as one:
        one.ingest(docs)
        for q in ("storm number 7", "lighthouse keeper logged", "note 21"):
            want, got = one.query(q, k=5).hits, b.query(q, k=5).hits
            assert [h.chunk_id for h in want] == [h.chunk_id for h in got], q
            assert [h.score for h in want] == pytest.approx([h.score for h in got], abs=1e-4)


def test_llm_contexts_made_ahead_are_neither_asked_for_twice_nor_counted_twice(
    postgres_dsn, tmp_path
):
    from tests.unit.test_context_engine import CountingLLM, story

    docs = [story(), Document("b", "Short note about budgets.\n\nAnd a second one.")]
    llm_cfg = {**HASH, "context": {"generator": "llm"}}
    reports, calls, answers = [], [], []
    for cfg in (
        llm_cfg,
        {**llm_cfg, "storage": {"engine": "postgres", "dsn": postgres_dsn, "schema_name": "wllm"}},
    ):
        llm = CountingLLM()
        with Pensive(tmp_path / str(len(reports)), config=cfg, llm=llm) as p:
            reports.append(p.ingest(docs))
            calls.append(llm.calls)
            answers.append([(h.chunk_id, h.metadata["context"]) for h in p.query("situated").hits])
    emb, pg = reports
    assert calls[0] == calls[1] == pg.llm_calls > 0  # the change under the lock asked nothing
    assert (pg.contexts, pg.contexts_cached, pg.chunks_embedded) == (
        emb.contexts, emb.contexts_cached, emb.chunks_embedded)  # fmt: skip
    assert answers[0] == answers[1]


def test_a_recovery_of_many_documents_is_one_change(pair):
    a, b = pair
    docs = [Document(f"n{i}", f"Harbour note {i}: tide gauge reading number {i}.")
            for i in range(300)]  # fmt: skip
    a.ingest(docs)  # (two batches: two commits on this engine)
    # the state a writer killed mid-change leaves: every document pending, the change marked
    archive = a.components.archive
    archive.mark_dirty()
    archive.mark_pending({d.id for d in docs})
    before = a.commit_number  # (b has not looked yet)
    b.delete("n0")  # b's change finds the mark and finishes the change first
    # one commit for the recovery (all 300 re-indexed: never a commit clearing the mark while
    # documents it had not reached were pending), one for the delete
    assert b.commit_number == before + 2
    assert not archive.unindexed()
    assert level(a) == level(b) == (299, 299, 299)
    assert b.query("tide gauge reading number 250", k=1).hits[0].doc_id == "n250"


def test_a_store_costs_two_connections_and_a_session_five(postgres_dsn, tmp_path):
    import psycopg

    app = "pensive_count"
    dsn = postgres_dsn + ("&" if "?" in postgres_dsn else "?") + f"application_name={app}"

    def connections() -> int:
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            return c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
            ).fetchone()[0]

    cfg = {**HASH, "storage": {"engine": "postgres", "dsn": dsn, "schema_name": "wcount"}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest(docs_corpus())
        p.query("green tea", k=3)
        # every part of the store shares one connection; the change lock has its own
        assert connections() == 2
        for i in range(3):
            chat = p.conversation(f"s{i}")
            chat.add("user", f"I moved to Lisbon, note {i}")
            chat.recall("where do I live?")
        # a session: its log (its own: a summary may be written inside its transaction)
        # and its two stores (one shared connection and a change lock each)
        assert connections() <= 2 + 3 * 5
    assert connections() == 0


def test_a_part_joining_a_connection_the_server_cut_opens_it_again(postgres_dsn):
    import psycopg

    from pensive_core.storage.pg import PgConnection

    app = "pensive_cut_join"
    dsn = postgres_dsn + ("&" if "?" in postgres_dsn else "?") + f"application_name={app}"
    first = PgConnection(dsn, "the first part")
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        cut = c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        ).fetchall()
    assert len(cut) == 1  # the parts share one connection, and the server cut it
    ran: list[int] = []
    # a later part's setup meets the cut connection first: it is opened again, not an error
    second = PgConnection(dsn, "the second part",
                          setup=lambda c: ran.append(c.execute("SELECT 1").fetchone()[0]))  # fmt: skip
    assert ran == [1]
    assert first.run("read", lambda c: c.execute("SELECT 2").fetchone()[0]) == 2
    first.close()
    second.close()
