"""Attacks on several writers sharing one Postgres store (db216f8, 9f9714c): an ingest computes
each batch's contexts and vectors before the store's change lock and commits batch by batch.

Each test pins a defect found by attacking that change, or a property that held under attack
and that no other test pins (kills at chosen points, a cut connection, a failing input).
Handles and processes are synchronised with events; the joins' deadlines only keep a lock held
by mistake from hanging the run, nothing here is timed."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import threading
from typing import Any

import psycopg
import pytest

from pensive_core import Document, Pensive, PensiveError
from tests.integration.test_postgres_writers import in_thread

pytestmark = pytest.mark.integration

HASH = {"embedder": {"name": "hash", "dim": 64}}


def pg_cfg(dsn: str, node: str) -> dict[str, Any]:
    schema = "x" + hashlib.blake2b(node.encode(), digest_size=6).hexdigest()
    return {**HASH, "storage": {"engine": "postgres", "dsn": dsn, "schema_name": schema}}


@pytest.fixture
def cfg(postgres_dsn, request):
    return pg_cfg(postgres_dsn, request.node.nodeid)


def notes(n: int, tag: str = "") -> list[Document]:
    return [
        Document(f"d{i}", f"Note {i}{tag}: the lighthouse keeper logged storm number {i}.")
        for i in range(n)
    ]


def level(p: Pensive) -> tuple[int, int, int, bool, int]:
    """Documents, passages, vectors; the dirty mark; documents pending."""
    s, archive = p.stats(), p.components.archive
    return s["documents"], s["chunks"], s["vectors"], archive.is_dirty(), len(archive.unindexed())


def client_connections(dsn: str) -> int:
    """Connections to the server other than the one asking."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        ).fetchone()
    return int(row[0])


def held_ahead(p: Pensive, nth: int) -> tuple[threading.Event, threading.Event]:
    """Hold ``p``'s ``nth`` embedding done ahead of the change lock until ``release``
    (``entered`` says it got there)."""
    embedder, storage = p.components.embedder.get(), p.components.storage
    real = embedder.embed
    entered, release = threading.Event(), threading.Event()
    seen = [0]

    def embed(texts: list[str]) -> Any:
        if storage.lock_holder is None:  # ahead of the lock
            seen[0] += 1
            if seen[0] == nth:
                entered.set()
                assert release.wait(120), "never released"
        return real(texts)

    embedder.embed = embed
    return entered, release


def test_a_handle_closed_while_it_ingests_writes_nothing_more(cfg, tmp_path):
    # an ingest no longer holds the handle's lock while it embeds ahead of the change lock,
    # so close() can come between two of its batches: nothing may be written after it
    dsn = cfg["storage"]["dsn"]
    p = Pensive(tmp_path / "a", config=cfg)
    entered, release = held_ahead(p, 2)  # batch 1 committed, batch 2 being embedded
    t, out = in_thread(lambda: p.ingest(notes(600)))
    try:
        assert entered.wait(120)
        p.close()
        with Pensive(tmp_path / "r", config=cfg, read_only=True) as r:
            at_close = (level(r), r.commit_number)
        connections = client_connections(dsn)
    finally:
        release.set()
        t.join(120)
    err = out[0]
    assert isinstance(err, PensiveError) and "closed" in str(err), err
    assert any("first 256 document(s)" in n for n in getattr(err, "__notes__", ())), err
    with Pensive(tmp_path / "r", config=cfg, read_only=True) as r:
        assert (level(r), r.commit_number) == at_close == ((256, 256, 256, False, 0), at_close[1])
    # a closed handle opened no connection again (none left behind, unclosable)
    assert client_connections(dsn) == connections


def test_an_input_that_fails_after_a_batch_keeps_that_batch_and_says_so(cfg, tmp_path):
    def source() -> Any:
        yield from notes(300)
        raise ValueError("the source broke")

    with Pensive(tmp_path / "a", config=cfg) as a, Pensive(tmp_path / "b", config=cfg) as b:
        with pytest.raises(ValueError, match="the source broke") as info:
            a.ingest(source())
        said = " ".join(getattr(info.value, "__notes__", ()))
        assert "first 256 document(s) of this call were committed" in said, said
        # the first batch whole, seen from the other replica; nothing of the second
        assert level(b) == (256, 256, 256, False, 0)
        assert b.query("storm number 200", k=1).hits[0].doc_id == "d200"
        with pytest.raises(PensiveError):
            b.get("d256")


def test_connections_cut_while_an_ingest_embeds_ahead_are_survived(cfg, tmp_path):
    dsn = cfg["storage"]["dsn"]
    with Pensive(tmp_path / "a", config=cfg) as a:
        a.ingest(notes(10))
        embedder, storage = a.components.embedder.get(), a.components.storage
        real = embedder.embed

        def embed(texts: list[str]) -> Any:
            if storage.lock_holder is None:  # ahead of the lock: every session is cut
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
                    )
            return real(texts)

        embedder.embed = embed
        report = a.ingest(notes(300, " revised"))
        del embedder.embed
        assert (report.added, report.updated, report.chunks_embedded) == (290, 10, 300)
        assert level(a) == (300, 300, 300, False, 0)
        assert a.query("storm number 280 revised", k=1).hits[0].doc_id == "d280"


def _ingest_held(cfg: dict[str, Any], folder: str, where: str, ready: Any) -> None:
    """Ingest 600 notes (three batches) and stop for good at ``where`` in the second batch:
    ``ahead`` embedding before the change lock, ``locked`` under it with its documents
    written (pending), before its commit."""
    from pensive_core import hooks

    p = Pensive(folder, config=cfg)
    embedder, storage = p.components.embedder.get(), p.components.storage
    real = embedder.embed
    batch = [0]

    def embed(texts: list[str]) -> Any:
        if where == "ahead" and storage.lock_holder is None and batch[0] == 1:
            ready.set()
            threading.Event().wait()  # killed here
        return real(texts)

    def listen(point: str, event: str) -> None:
        if point == "ingest-batch" and event == "exit":
            batch[0] += 1
        if where == "locked" and point == "commit" and event == "enter" and batch[0] == 2:
            ready.set()
            threading.Event().wait()  # killed here

    embedder.embed = embed
    hooks.add_listener(listen)
    p.ingest(notes(600))


@pytest.mark.parametrize("where", ["ahead", "locked"])
def test_a_replica_killed_between_its_batches_loses_no_committed_batch(cfg, tmp_path, where):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_ingest_held, args=(cfg, str(tmp_path / "dead"), where, ready))
    proc.start()
    try:
        assert ready.wait(180), "the replica never got there"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(60)
    with Pensive(tmp_path / "r", config=cfg, read_only=True) as r:
        # ahead of the lock nothing of batch 2 was written; under it, all of it, pending
        assert len(r.components.archive.unindexed()) == (0 if where == "ahead" else 256)
        assert r.components.archive.is_dirty() == (where == "locked")
        assert level(r)[2] >= 256 and r.query("storm number 100", k=1).hits[0].doc_id == "d100"
    with Pensive(tmp_path / "alive", config=cfg) as b:
        b.ingest([Document("after", "Written after the kill by another replica.")])
        done = 256 if where == "ahead" else 512  # the second batch finished from the archive
        assert level(b) == (done + 1, done + 1, done + 1, False, 0)
        assert b.query("storm number 100", k=1).hits[0].doc_id == "d100"
        if where == "locked":
            assert b.query("storm number 500", k=1).hits[0].doc_id == "d500"


def _recover_held(cfg: dict[str, Any], folder: str, ready: Any) -> None:
    """Open the store (its recovery runs under the change lock) and stop for good in the
    recovery's second batch."""
    from pensive_core import hooks

    seen = [0]

    def listen(point: str, event: str) -> None:
        if point == "ingest-batch" and event == "enter":
            seen[0] += 1
            if seen[0] == 2:
                ready.set()
                threading.Event().wait()  # killed here

    hooks.add_listener(listen)
    Pensive(folder, config=cfg)


def test_a_replica_killed_during_a_recovery_leaves_it_to_the_next(cfg, tmp_path):
    docs = notes(300)
    a = Pensive(tmp_path / "a", config=cfg)  # open to the end: closing it would recover
    try:
        a.ingest(docs)
        archive = a.components.archive  # the state a writer killed mid-change leaves
        archive.mark_dirty()
        archive.mark_pending({d.id for d in docs})
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        proc = ctx.Process(target=_recover_held, args=(cfg, str(tmp_path / "dead"), ready))
        proc.start()
        try:
            assert ready.wait(180), "the recovery never got there"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(60)
        # its first batch was never committed alone: all still pending, the mark still set
        assert archive.is_dirty() and len(archive.unindexed()) == 300
        with Pensive(tmp_path / "b", config=cfg) as b:
            b.delete("d0")
            assert level(b) == (299, 299, 299, False, 0)
            assert b.query("storm number 280", k=1).hits[0].doc_id == "d280"
    finally:
        a.close()


def test_a_fresh_handle_loads_its_embedder_under_its_lock(cfg, tmp_path, monkeypatch):
    # the first use of the embedder saves its name and dimension through the archive's one
    # connection; an ingest now asks for it ahead of the lock, so two ingests (or an ingest
    # and a query) meeting a fresh handle wrote that at once: psycopg's "transaction commit at
    # the wrong nesting level", and both ingests failed
    import pensive_core.components as components_module

    real = components_module.create_embedder
    entered, release = threading.Event(), threading.Event()

    def create(config: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            entered.set()
            assert release.wait(120), "never released"
        return real(config)

    monkeypatch.setattr(components_module, "create_embedder", create)
    with Pensive(tmp_path / "a", config=cfg) as p:
        t, out = in_thread(lambda: p.ingest(notes(3)))
        try:
            assert entered.wait(120)
            free = p.components.lock.acquire(blocking=False)  # (another thread's view)
            if free:
                p.components.lock.release()
        finally:
            release.set()
            t.join(120)
        assert not free, "the embedder was loaded outside the handle's lock"
        assert out[0].added == 3
        assert p.components.archive.get_meta("embedder") == {"name": "hash-64", "dim": 64}
