"""The statement tables in a real Postgres (started by the ``postgres_dsn`` fixture): the
conformance suite the SQLite tables pass, and attacks (two processes writing at once, a
dropped connection, bad prefixes, prefixes kept apart)."""

from __future__ import annotations

import hashlib
import multiprocessing
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from pensive_core import BackendError, ConfigError
from pensive_core.temporal.pg_store import PostgresTemporalStore
from pensive_core.testing import TemporalTablesTests
from pensive_core.testing.temporal import TAGGED, reference_temporal

pytestmark = pytest.mark.integration

UTC = timezone.utc


def prefix_for(folder) -> str:
    """One set of tables per test folder: tests share the server, never each other's rows."""
    return "t" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


def named(dsn: str, app: str) -> str:
    """The DSN with its own ``application_name`` (to find this connection on the server)."""
    if "://" in dsn:
        return dsn + ("&" if "?" in dsn else "?") + f"application_name={app}"
    return f"{dsn} application_name={app}"


class TestPostgresTemporal(TemporalTablesTests):
    refused_write = BackendError

    @pytest.fixture
    def make_temporal(self, postgres_dsn):
        opened = []

        def make(folder):
            t = PostgresTemporalStore(postgres_dsn, prefix_for(folder))
            opened.append(t)
            return t

        yield make
        for t in opened:
            t.close()


def test_a_bad_prefix_is_refused(postgres_dsn):
    for bad in ("Bad-Prefix", 'x"; DROP TABLE y; --', "", "a" * 41):
        with pytest.raises(ConfigError, match="prefix"):
            PostgresTemporalStore(postgres_dsn, bad)


def test_a_refused_write_says_it_was_rolled_back_whole(postgres_dsn, tmp_path):
    t = PostgresTemporalStore(postgres_dsn, prefix_for(tmp_path))
    t.add_document("a", [("a#0", "{ceo=jane}")], None, TAGGED)
    with pytest.raises(BackendError, match="rolled back whole") as err:
        t.add_document("a", [("a#1", "{ceo=john}"), (None, "{ceo=ann}")], None, TAGGED)
    assert "'a'" in str(err.value)
    assert [(r.chunk, r.value) for r in t.load().rows] == [("a#0", "jane")]
    t.close()


def test_two_prefixes_never_see_each_others_rows(postgres_dsn, tmp_path):
    one = PostgresTemporalStore(postgres_dsn, prefix_for(tmp_path / "one"))
    two = PostgresTemporalStore(postgres_dsn, prefix_for(tmp_path / "two"))
    one.add_document("a", [("a#0", "{ceo=jane}")], None, TAGGED)
    two.add_document("a", [("a#9", "{ceo=john} in May 2020")], None, TAGGED)
    assert one.documents() == {"a": {"a#0"}} and two.documents() == {"a": {"a#9"}}
    assert [r.value for r in one.load().rows] == ["jane"]
    assert one.counts() == {"statements": 1, "dates": 0}
    two.remove_document("a")
    assert one.counts() == {"statements": 1, "dates": 0} and two.load().rows == []
    one.close()
    two.close()


def test_a_dropped_connection_is_survived(postgres_dsn, tmp_path):
    t = PostgresTemporalStore(named(postgres_dsn, "pensive_temporal_kill"), prefix_for(tmp_path))
    t.add_document("a", [("a#0", "{ceo=jane}")], None, TAGGED)

    def kill() -> int:
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            return len(
                c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'pensive_temporal_kill'"
                ).fetchall()
            )

    assert kill() == 1
    t.add_document("b", [("b#0", "{ceo=john~}")], None, TAGGED)  # a write reconnects once
    assert kill() == 1
    view = t.load()  # and so does a read
    assert view.validity("a#0")[2] == "b#0"
    t.close()


def _docs(worker: int, n: int) -> list[tuple[str, list[tuple[str, str]], datetime]]:
    """Documents of one worker: a slot every worker fills (at times no two documents share,
    so supersession does not hang on which process recorded first) and one of its own."""
    base = datetime(2020, 1, 1, tzinfo=UTC)
    return [
        (
            f"w{worker}-{i}",
            [
                (f"w{worker}-{i}#0", f"{{ceo acme=v{worker}x{i}}} on 2 May 2021"),
                (f"w{worker}-{i}#1", f"{{own{worker}=x{i}}}"),
            ],
            base + timedelta(days=2 * i + worker),
        )
        for i in range(n)
    ]


def _temporal_writer(dsn: str, prefix: str, worker: int, n: int, start) -> None:
    t = PostgresTemporalStore(dsn, prefix)
    docs = _docs(worker, n)
    start.wait(60)  # both processes connected: they write at the same moment
    for doc_id, ps, ts in docs:
        t.add_document(doc_id, ps, ts, TAGGED)
    for doc_id, ps, ts in docs[::4]:
        t.add_document(doc_id, ps[:1], ts, TAGGED)
    for doc_id, _, _ in docs[1::4]:
        t.remove_document(doc_id)
    t.close()


def test_two_processes_writing_different_documents_at_once_give_the_exact_tables(
    postgres_dsn, tmp_path
):
    prefix = prefix_for(tmp_path)
    PostgresTemporalStore(postgres_dsn, prefix).close()  # tables made once
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    n = 60
    procs = [
        ctx.Process(target=_temporal_writer, args=(postgres_dsn, prefix, w, n, start))
        for w in (1, 2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    ref = reference_temporal()
    for w in (1, 2):
        docs = _docs(w, n)
        for doc_id, ps, ts in docs:
            ref.add_document(doc_id, ps, ts, TAGGED)
        for doc_id, ps, ts in docs[::4]:
            ref.add_document(doc_id, ps[:1], ts, TAGGED)
        for doc_id, _, _ in docs[1::4]:
            ref.remove_document(doc_id)
    t = PostgresTemporalStore(postgres_dsn, prefix)
    assert t.counts() == ref.counts() and t.documents() == ref.documents()
    got, want = t.load(), ref.load()

    def rows(view):
        return sorted((r.chunk, r.slot, r.value, r.t, r.valid_to) for r in view.rows)

    assert rows(got) == rows(want)
    assert {c: got.validity(c) for c in got.chunks} == {c: want.validity(c) for c in want.chunks}
    assert {c: sorted(got.dates_of(c)) for c in got.chunks} == {
        c: sorted(want.dates_of(c)) for c in want.chunks
    }
    t.close()


def test_load_of_tens_of_thousands_of_statements(postgres_dsn, tmp_path):
    """20,000 statements load in one snapshot, two SELECTs."""
    import time

    t = PostgresTemporalStore(postgres_dsn, prefix_for(tmp_path))
    for d in range(40):
        ps = [(f"d{d}#{i}", f"{{slot{i % 97}=v{d}}}") for i in range(500)]
        t.add_document(f"d{d}", ps, datetime(2000 + d % 20, 1, 1, tzinfo=UTC), TAGGED)
    statements: list[str] = []
    conn = t.connection.conn
    original = conn.execute

    def counting(query, *args, **kwargs):
        statements.append(str(query))
        return original(query, *args, **kwargs)

    conn.execute = counting
    t0 = time.perf_counter()
    view = t.load()
    took = time.perf_counter() - t0
    conn.execute = original
    assert len(view.rows) == 20_000 and len(view.chains) == 97
    assert len(statements) == 3  # the snapshot setting and two SELECTs
    assert took < 30  # a loose guard against per-row queries, not a benchmark
    t.close()


def test_opening_the_store_does_not_wait_for_a_writer(postgres_dsn, tmp_path):
    """Opening takes no table lock once the tables exist (``CREATE INDEX IF NOT EXISTS``
    on every open queued behind a writer's transaction)."""
    import threading

    prefix = prefix_for(tmp_path)
    PostgresTemporalStore(postgres_dsn, prefix).close()
    opened: list[object] = []
    with psycopg.connect(postgres_dsn) as writer:  # a transaction left open on each table
        for table in ("temporal_statements", "temporal_dates", "temporal_chunks"):
            writer.execute(f'LOCK TABLE "{prefix}_{table}" IN ROW EXCLUSIVE MODE')
        t = threading.Thread(
            target=lambda: opened.append(PostgresTemporalStore(postgres_dsn, prefix)), daemon=True
        )
        t.start()
        t.join(15)
        assert not t.is_alive() and len(opened) == 1
        writer.rollback()


def test_writers_queue_per_document_and_no_lock_is_global(postgres_dsn, tmp_path):
    """A write of a document waits while that document's lock is held; another does not."""
    import threading

    prefix = prefix_for(tmp_path)
    t = PostgresTemporalStore(postgres_dsn, prefix)
    t.add_document("same", [("same#0", "{ceo=jane}")], None, TAGGED)
    done: list[str] = []
    with psycopg.connect(postgres_dsn) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"pensive_temporal:{prefix}:same",),
        )

        def write(doc: str) -> None:
            # a replica of its own (in one process, stores on one DSN share a connection)
            other = PostgresTemporalStore(named(postgres_dsn, f"pensive_writer_{doc}"), prefix)
            other.add_document(doc, [(f"{doc}#1", "{ceo=john}")], None, TAGGED)
            other.close()
            done.append(doc)

        same = threading.Thread(target=write, args=("same",), daemon=True)
        same.start()
        elsewhere = threading.Thread(target=write, args=("other",), daemon=True)
        elsewhere.start()
        elsewhere.join(15)
        assert done == ["other"] and same.is_alive()
        holder.rollback()
    same.join(15)
    assert done == ["other", "same"]
    assert t.documents() == {"same": {"same#1"}, "other": {"other#1"}}
    t.close()


def _version(doc: str, worker: int, rnd: int) -> list[tuple[str, str]]:
    """What ``worker`` writes as ``doc`` in round ``rnd`` (its passage ids say which)."""
    return [
        (f"{doc}#w{worker}r{rnd}#{i}", f"{{{doc} ceo=w{worker}r{rnd}}} on {1 + i} May 2021")
        for i in range(1 + (worker + rnd) % 3)
    ]


def _same_docs_writer(dsn: str, prefix: str, worker: int, start) -> None:
    import random

    t = PostgresTemporalStore(dsn, prefix)
    rng = random.Random(worker)
    docs = [f"s{i}" for i in range(8)]
    start.wait(60)
    for rnd in range(12):
        rng.shuffle(docs)
        for doc in docs:
            if rng.random() < 0.15:
                t.remove_document(doc)
            else:
                t.add_document(doc, _version(doc, worker, rnd), None, TAGGED)
    t.close()


def test_two_processes_writing_the_same_documents_leave_each_one_version_whole(
    postgres_dsn, tmp_path
):
    prefix = prefix_for(tmp_path)
    PostgresTemporalStore(postgres_dsn, prefix).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [
        ctx.Process(target=_same_docs_writer, args=(postgres_dsn, prefix, w, start)) for w in (1, 2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    t = PostgresTemporalStore(postgres_dsn, prefix)
    ref = reference_temporal()
    for doc, chunk_ids in sorted(t.documents().items()):
        versions = {cid.split("#")[1] for cid in chunk_ids}
        assert len(versions) == 1, (doc, chunk_ids)  # one writer's version, whole
        worker, rnd = (int(x) for x in versions.pop()[1:].split("r"))
        ps = _version(doc, worker, rnd)
        assert {c for c, _ in ps} == chunk_ids
        ref.add_document(doc, ps, None, TAGGED)
    assert t.counts() == ref.counts()
    got, want = t.load(), ref.load()
    assert sorted((r.chunk, r.slot, r.value) for r in got.rows) == sorted(
        (r.chunk, r.slot, r.value) for r in want.rows
    )
    assert {c: sorted(got.dates_of(c)) for c in got.chunks} == {
        c: sorted(want.dates_of(c)) for c in want.chunks
    }
    t.close()
