"""Attacks on several writers sharing one Postgres store (db216f8, 9f9714c): an ingest computes
each batch's contexts and vectors before the store's change lock and commits batch by batch.

Each test pins a defect found by attacking that change, or a property that held under attack
and that no other test pins (kills at chosen points, a cut connection, a failing input).
Handles and processes are synchronised with events; the joins' deadlines only keep a lock held
by mistake from hanging the run, nothing here is timed."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import psycopg
import pytest

from pensive_core import Document, Pensive, PensiveError

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
