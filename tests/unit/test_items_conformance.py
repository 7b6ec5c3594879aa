"""The item table and LLM cache row conformance suites on the embedded SQLite ones."""

import pytest

from pensive_core.item_table import ItemTable
from pensive_core.llm_cache import SQLiteLLMCacheRecords
from pensive_core.testing import ItemRecordsTests, LLMCacheRecordsTests


class TestSQLiteItemTable(ItemRecordsTests):
    @pytest.fixture
    def make_items(self, tmp_path):
        return lambda: ItemTable(tmp_path / "items.sqlite")


class TestSQLiteLLMCacheRecords(LLMCacheRecordsTests):
    @pytest.fixture
    def make_records(self, tmp_path):
        return lambda: SQLiteLLMCacheRecords(tmp_path / "llm_cache.sqlite")
