"""The archive in a real Postgres (started by the ``postgres_dsn`` fixture): the archive
conformance suite the SQLite archive passes."""

from __future__ import annotations

import hashlib
import multiprocessing

import pytest

from pensive_core import BackendError, ConfigError
from pensive_core.storage.pg_archive import PostgresArchive
from pensive_core.testing import DocumentStoreTests
from pensive_core.testing.archive import written
from pensive_core.types import Chunk, Document

pytestmark = pytest.mark.integration


def prefix_for(folder) -> str:
    """One archive per test folder: tests share the server, never each other's rows."""
    return "a" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


class TestPostgresArchive(DocumentStoreTests):
    @pytest.fixture
    def make_archive(self, postgres_dsn):
        opened = []

        def make(folder):
            a = PostgresArchive(postgres_dsn, prefix_for(folder))
            opened.append(a)
            return a

        yield make
        for a in opened:
            a.close()


def test_a_bad_prefix_is_refused(postgres_dsn):
    with pytest.raises(ConfigError, match="prefix"):
        PostgresArchive(postgres_dsn, "Bad-Prefix")


def test_a_refused_write_is_a_backend_error_and_stores_nothing(postgres_dsn, tmp_path):
    a = PostgresArchive(postgres_dsn, prefix_for(tmp_path))
    a.write([written(Document("keep", "kept words"))])
    stray = Chunk("stray", "no-such-document", 0, "t", 0, 1, "h")  # breaks the foreign key
    with pytest.raises(BackendError, match="rolled back whole"):
        a.write([written(Document("good", "good words")), (Document("x", "x"), "h", [stray])])
    assert a.counts() == (1, 1) and a.document("good") is None
    with pytest.raises(BackendError):
        a.set_meta("n", float("nan"))  # JSON has no NaN
    assert a.get_meta("n") is None
    a.close()


def _writer(dsn, prefix, i):
    a = PostgresArchive(dsn, prefix)
    for r in range(20):
        a.write([written(Document("same", f"writer {i} round {r} " + "word " * 40))])
    a.close()


def test_two_processes_writing_one_document_both_succeed_and_one_version_stays_whole(
    postgres_dsn, tmp_path
):
    prefix = prefix_for(tmp_path)
    PostgresArchive(postgres_dsn, prefix).close()  # tables made once
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(postgres_dsn, prefix, i)) for i in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    a = PostgresArchive(postgres_dsn, prefix)
    doc = a.document("same")
    assert doc is not None and doc.text.startswith("writer ") and " round 19 " in doc.text
    spans = a.neighbours("same", 0, 10**6)
    assert [t for _, _, t in a.doc_chunks("same")] == [doc.text[s:e] for _, s, e in spans]
    assert "".join(t for _, _, t in a.doc_chunks("same")) == doc.text
    a.close()


def test_a_second_writer_of_one_document_waits_for_the_first_and_then_wins_whole(
    postgres_dsn, tmp_path
):
    """Deterministic: the first writer holds the document's row in an open transaction."""
    import threading
    import time

    prefix = prefix_for(tmp_path)
    first, second = PostgresArchive(postgres_dsn, prefix), PostgresArchive(postgres_dsn, prefix)
    first.write([written(Document("same", "version zero of the note"))])
    errors: list[BaseException] = []

    def later() -> None:
        try:
            second.write([written(Document("same", "version two, written while one was open"))])
        except BaseException as exc:  # reported below
            errors.append(exc)

    with first.transaction():
        first.write([written(Document("same", "version one of the note"))])
        t = threading.Thread(target=later)
        t.start()
        time.sleep(0.5)
        assert t.is_alive()  # queued on the document's row
    t.join(20)
    assert not errors and not t.is_alive()
    doc = first.document("same")
    assert doc is not None and doc.text == "version two, written while one was open"
    assert "".join(t for _, _, t in first.doc_chunks("same")) == doc.text
    first.close()
    second.close()
