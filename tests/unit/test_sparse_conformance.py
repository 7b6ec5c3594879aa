"""The sparse index conformance suite on the embedded BM25 segments."""

import pytest

from pensive_core.sparse import BM25Index
from pensive_core.testing import SparseIndexTests


class TestBM25Segments(SparseIndexTests):
    @pytest.fixture
    def make_index(self):
        return lambda folder, cfg: BM25Index(folder / "bm25", cfg)
