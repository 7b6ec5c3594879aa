"""The archive in a real Postgres (started by the ``postgres_dsn`` fixture): the archive
conformance suite the SQLite archive passes."""

from __future__ import annotations

import hashlib

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
