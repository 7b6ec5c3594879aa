"""Conversation memory in a real Postgres (started by the ``postgres_dsn`` fixture): the
session log and session catalog conformance suites the SQLite ones pass, and attacks (two
processes appending to one session, a dropped connection, a bad prefix, two prefixes, a
refused write)."""

from __future__ import annotations

import hashlib
import multiprocessing
from datetime import datetime, timezone

import pytest

from pensive_core import BackendError, ConfigError
from pensive_core.memory.pg_store import PostgresSessionCatalog, PostgresTurnLog
from pensive_core.testing import SessionCatalogTests, TurnStoreTests
from pensive_core.testing.memory import turns_of

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def prefix_for(folder) -> str:
    """One store per test folder: tests share the server, never each other's rows."""
    return "m" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


def tables_of(dsn: str, prefix: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE starts_with(tablename, %s)", (prefix + "_",)
        ).fetchall()
    return sorted(r[0] for r in rows)


class TestPostgresTurnLog(TurnStoreTests):
    @pytest.fixture
    def make_turns(self, postgres_dsn, tmp_path):
        opened = []

        def make(session, read_only=False):
            log = PostgresTurnLog.open(postgres_dsn, prefix_for(tmp_path), "ns", session,
                                       read_only)  # fmt: skip
            opened.append(log)
            return log

        yield make
        for log in opened:
            if log is not None:
                log.close()

    @pytest.fixture
    def store_is_empty(self, postgres_dsn, tmp_path):
        return lambda: tables_of(postgres_dsn, prefix_for(tmp_path)) == []


class TestPostgresSessionCatalog(SessionCatalogTests):
    @pytest.fixture
    def make_catalog(self, postgres_dsn, tmp_path):
        opened = []

        def make(read_only=False):
            c = PostgresSessionCatalog(postgres_dsn, prefix_for(tmp_path), tmp_path / "conv",
                                       read_only=read_only)  # fmt: skip
            opened.append(c)
            return c

        yield make
        for c in opened:
            c.close()

    @pytest.fixture
    def store_is_empty(self, postgres_dsn, tmp_path):
        return lambda: tables_of(postgres_dsn, prefix_for(tmp_path)) == []


def test_a_prefix_that_is_not_an_identifier_is_refused(postgres_dsn, tmp_path):
    for bad in ("Bad-Prefix", 'x"; DROP TABLE y; --', "", "a" * 41, "1abc"):
        with pytest.raises(ConfigError, match="prefix"):
            PostgresTurnLog(postgres_dsn, bad, "ns", "s")
        with pytest.raises(ConfigError, match="prefix"):
            PostgresSessionCatalog(postgres_dsn, bad, tmp_path)


def test_the_longest_prefix_keeps_every_name_whole(postgres_dsn, tmp_path):
    session = prefix_for(tmp_path)  # a server kept between runs has other sessions
    log = PostgresTurnLog(postgres_dsn, "q" * 40, "ns", session)
    log.append(turns_of(2))
    with log.transaction():
        log.add_summary(0, 0, 1, "s", "extractive")
    log.pin("p")
    assert log.counts() == (2, 1, 0, 1) and log.pins() == ["p"]
    catalog = PostgresSessionCatalog(postgres_dsn, "q" * 40, tmp_path)
    assert catalog.register("ns", session, None).session_id == session
    log.delete()
    log.close()
    catalog.close()


def test_two_prefixes_never_see_each_other(postgres_dsn, tmp_path):
    a = PostgresTurnLog(postgres_dsn, prefix_for(tmp_path / "a"), "ns", "s")
    b = PostgresTurnLog(postgres_dsn, prefix_for(tmp_path / "b"), "ns", "s")
    a.append(turns_of(3))
    a.pin("a's pin")
    assert len(b) == 0 and b.pins() == [] and b.last_seq() == -1
    assert [t.seq for t in b.append(turns_of(1))] == [0]
    ca = PostgresSessionCatalog(postgres_dsn, prefix_for(tmp_path / "a"), tmp_path)
    cb = PostgresSessionCatalog(postgres_dsn, prefix_for(tmp_path / "b"), tmp_path)
    ca.register("ns", "s", "u")
    assert cb.get("ns", "s") is None and cb.sessions("ns") == []
    for part in (a, b, ca, cb):
        part.close()


def test_the_same_session_id_in_two_namespaces_is_two_logs(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    one = PostgresTurnLog(postgres_dsn, prefix, "ns1", "same")
    two = PostgresTurnLog(postgres_dsn, prefix, "ns2", "same")
    one.append(turns_of(2))
    assert len(two) == 0 and [t.seq for t in two.append(turns_of(1))] == [0]
    one.close()
    two.close()


def _appender(dsn, prefix, worker, rounds, per_round):
    log = PostgresTurnLog(dsn, prefix, "ns", "shared")
    for r in range(rounds):
        log.append(
            [("user", f"worker {worker} round {r} turn {i}", T0, {"w": worker, "r": r, "i": i})
             for i in range(per_round)]
        )  # fmt: skip
    log.close()


def test_two_processes_appending_to_one_session_store_every_turn_once_in_order(
    postgres_dsn, tmp_path
):
    prefix = prefix_for(tmp_path)
    PostgresTurnLog(postgres_dsn, prefix, "ns", "shared").close()  # tables made once
    ctx = multiprocessing.get_context("spawn")
    rounds, per_round = 25, 3
    procs = [
        ctx.Process(target=_appender, args=(postgres_dsn, prefix, w, rounds, per_round))
        for w in (1, 2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0]  # no duplicate key reached either writer
    log = PostgresTurnLog(postgres_dsn, prefix, "ns", "shared")
    turns = log.turns()
    n = 2 * rounds * per_round
    assert [t.seq for t in turns] == list(range(n))  # unique and gap-free
    assert len({t.text for t in turns}) == n  # every turn stored once
    for w in (1, 2):  # each append's turns stay together and in order
        mine = [t for t in turns if t.metadata["w"] == w]
        assert [(t.metadata["r"], t.metadata["i"]) for t in mine] == [
            (r, i) for r in range(rounds) for i in range(per_round)
        ]
        for r in range(rounds):
            seqs = [t.seq for t in mine if t.metadata["r"] == r]
            assert seqs == list(range(seqs[0], seqs[0] + per_round))
    log.close()


def test_a_second_appender_waits_for_the_first_and_numbers_after_it(postgres_dsn, tmp_path):
    """Deterministic: the first writer holds the session's row in an open transaction."""
    import threading
    import time

    prefix = prefix_for(tmp_path)
    first = PostgresTurnLog(postgres_dsn, prefix, "ns", "s")
    second = PostgresTurnLog(postgres_dsn, prefix, "ns", "s")
    got: list = []
    errors: list[BaseException] = []

    def later() -> None:
        try:
            got.extend(second.append(turns_of(2, start=10)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    with first.transaction():
        first.append(turns_of(3))
        t = threading.Thread(target=later)
        t.start()
        time.sleep(0.5)
        assert t.is_alive()  # queued on the session's row
    t.join(20)
    assert not errors and [x.seq for x in got] == [3, 4]
    assert [x.text for x in first.turns()] == [f"turn number {i}" for i in (0, 1, 2, 10, 11)]
    first.close()
    second.close()


def _backend_pid(log) -> int:
    return log.tables.pg.conn.info.backend_pid


def test_a_dropped_connection_is_survived(postgres_dsn, tmp_path):
    import psycopg

    prefix = prefix_for(tmp_path)
    log = PostgresTurnLog(postgres_dsn, prefix, "ns", "s")
    catalog = PostgresSessionCatalog(postgres_dsn, prefix, tmp_path)
    log.append(turns_of(2))
    catalog.register("ns", "s", "u")
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        for part in (log, catalog):
            pid = part.tables.pg.conn.info.backend_pid
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert [t.seq for t in log.append(turns_of(1, start=2))] == [2]  # reconnected, run once
    assert len(log) == 3 and log.pins() == []
    assert catalog.get("ns", "s").user == "u"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:  # now in a transaction
        admin.execute("SELECT pg_terminate_backend(%s)", (_backend_pid(log),))
    with log.transaction():  # a connection dropped before the block: reopened at its start
        log.add_summary(0, 0, 1, "kept", "extractive")
    assert log.summarised_to() == 1
    with pytest.raises(BackendError, match="rolled back whole"), log.transaction():
        log.pin("lost")
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (_backend_pid(log),))
        log.add_summary(0, 2, 2, "lost", "extractive")
    assert log.pins() == [] and log.summarised_to() == 1  # and the next call reconnects
    log.close()
    catalog.close()


def test_a_refused_write_stores_nothing(postgres_dsn, tmp_path):
    log = PostgresTurnLog(postgres_dsn, prefix_for(tmp_path), "ns", "s")
    log.append(turns_of(1))
    bad = [("user", "fine", T0, {}), ("role\x00nul", "refused: a text column holds no NUL",
                                    T0, {})]  # fmt: skip
    with pytest.raises(BackendError, match="rolled back whole"):
        log.append(bad)
    assert len(log) == 1 and log.last_seq() == 0
    with pytest.raises(BackendError, match="rolled back whole"), log.transaction():
        log.pin("lost")
        log.add_summary(0, 0, 0, "lost", "x\x00y")  # a method with NUL: refused
    assert log.pins() == [] and log.summarised_to() == -1
    assert [t.seq for t in log.append(turns_of(1, start=1))] == [1]  # no gap left behind
    log.close()


def test_a_reader_cannot_write(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    PostgresTurnLog(postgres_dsn, prefix, "ns", "s").close()
    reader = PostgresTurnLog.open(postgres_dsn, prefix, "ns", "s", read_only=True)
    assert reader is not None
    with pytest.raises(BackendError):
        reader.append(turns_of(1))
    assert len(reader) == 0
    reader.close()


def test_delete_forgets_one_session_only(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    a = PostgresTurnLog(postgres_dsn, prefix, "ns", "a")
    b = PostgresTurnLog(postgres_dsn, prefix, "ns", "b")
    for log in (a, b):
        log.append(turns_of(2))
        log.pin("note")
        with log.transaction():
            log.add_summary(0, 0, 1, "s", "extractive")
    a.delete()
    assert len(a) == 0 and a.pins() == [] and a.summarised_to() == -1
    assert PostgresTurnLog.open(postgres_dsn, prefix, "ns", "a", read_only=True) is None
    assert len(b) == 2 and b.pins() == ["note"] and b.summarised_to() == 1
    assert [t.seq for t in a.append(turns_of(1))] == [0]
    a.delete()  # every write makes the log again, not only an append
    a.pin("after delete")
    with a.transaction():
        a.fold_summaries(0, "story", "llm")
    assert a.pins() == ["after delete"] and a.story_so_far() == (0, "story")
    a.close()
    b.close()


def _registrar(dsn, prefix, root, worker, out):
    c = PostgresSessionCatalog(dsn, prefix, root)
    got = []
    for i in range(20):
        info = c.register("ns", f"s{i}", None if worker == 1 else "owner")
        got.append((info.session_id, info.created, str(info.folder)))
    c.close()
    out.put(got)


def test_two_processes_registering_the_same_sessions_get_one_registration(postgres_dsn, tmp_path):
    """Tables not made beforehand: both processes make them at once too."""
    prefix = prefix_for(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_registrar, args=(postgres_dsn, prefix, tmp_path, w, out))
        for w in (1, 2)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert results[0] == results[1]  # the same creation time and folder for each session
    c = PostgresSessionCatalog(postgres_dsn, prefix, tmp_path)
    stored = c.sessions("ns")
    assert len(stored) == 20 and {s.user for s in stored} == {"owner"}
    c.close()
