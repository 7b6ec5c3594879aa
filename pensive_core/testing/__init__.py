"""Conformance suites a user's own plug-in can run, the same ones Pensive's built-ins pass.

Subclass a suite in your own tests and tell it how to build your implementation; pytest
collects every inherited test (see :class:`VectorBackendTests` for an example).

This package needs pytest (``pip install "pensive[testing]"``); nothing else in
``pensive_core`` imports it.
"""

from __future__ import annotations

from ..errors import MissingDependencyError

try:
    import pytest  # noqa: F401  (the suites below are pytest classes)
except ImportError as exc:
    raise MissingDependencyError(
        "pytest", "testing", "pensive_core.testing (the conformance suites)"
    ) from exc

from .archive import ArchiveFactory, DocumentStoreTests
from .backends import DIM, BackendFactory, VectorBackendTests, unit_vectors
from .cache import (
    AnswerCacheTests,
    CacheFactory,
    ContextsFactory,
    ContextStoreTests,
    QueryStatsTests,
    StatsFactory,
)
from .graph import GraphFactory, GraphTablesTests, LearningFactory, LearningTablesTests
from .items import ItemRecordsTests, ItemsFactory, LLMCacheRecordsTests, RecordsFactory
from .memory import CatalogFactory, SessionCatalogTests, TurnsFactory, TurnStoreTests
from .sparse import IndexFactory, SparseIndexTests, reference_scores
from .temporal import TemporalFactory, TemporalTablesTests

__all__ = [
    "AnswerCacheTests",
    "ArchiveFactory",
    "CacheFactory",
    "ContextStoreTests",
    "ContextsFactory",
    "QueryStatsTests",
    "StatsFactory",
    "DIM",
    "BackendFactory",
    "CatalogFactory",
    "DocumentStoreTests",
    "GraphFactory",
    "GraphTablesTests",
    "IndexFactory",
    "ItemRecordsTests",
    "ItemsFactory",
    "LLMCacheRecordsTests",
    "LearningFactory",
    "LearningTablesTests",
    "RecordsFactory",
    "SessionCatalogTests",
    "SparseIndexTests",
    "TemporalFactory",
    "TemporalTablesTests",
    "TurnStoreTests",
    "TurnsFactory",
    "VectorBackendTests",
    "reference_scores",
    "unit_vectors",
]
