"""The archive conformance suite on the embedded SQLite archive."""

import pytest

from pensive_core.archive import Archive
from pensive_core.testing import DocumentStoreTests


class TestSQLiteArchive(DocumentStoreTests):
    @pytest.fixture
    def make_archive(self):
        opened = []

        def make(folder):
            a = Archive(folder / "pensive.sqlite")
            opened.append(a)
            return a

        yield make
        for a in opened:
            a.close()
