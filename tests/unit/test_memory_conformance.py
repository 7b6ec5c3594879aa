"""The conversation memory conformance suites on the embedded SQLite session log and
session registry."""

import pytest

from pensive_core.memory.sessions import SessionRegistry, session_folder
from pensive_core.memory.turns import TurnLog
from pensive_core.testing import SessionCatalogTests, TurnStoreTests


class TestSQLiteTurnLog(TurnStoreTests):
    @pytest.fixture
    def make_turns(self, tmp_path):
        def make(session, read_only=False):
            return TurnLog.open(session_folder(tmp_path / "store", "ns", session), read_only)

        return make

    @pytest.fixture
    def store_is_empty(self, tmp_path):
        return lambda: not (tmp_path / "store").exists()


class TestSQLiteSessionRegistry(SessionCatalogTests):
    @pytest.fixture
    def make_catalog(self, tmp_path):
        opened = []

        def make(read_only=False):
            c = SessionRegistry(tmp_path / "conversations", read_only=read_only)
            opened.append(c)
            return c

        yield make
        for c in opened:
            c.close()

    @pytest.fixture
    def store_is_empty(self, tmp_path):
        return lambda: not (tmp_path / "conversations").exists()
