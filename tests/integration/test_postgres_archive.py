"""The archive in a real Postgres (started by the ``postgres_dsn`` fixture): the archive
conformance suite the SQLite archive passes."""

from __future__ import annotations

import hashlib

import pytest

from pensive_core import ConfigError
from pensive_core.storage.pg_archive import PostgresArchive
from pensive_core.testing import DocumentStoreTests

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
