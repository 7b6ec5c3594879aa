"""``pensive_core.testing``: the conformance suite is public, so a user's own ``module:Class``
backend runs the very tests the built-ins pass, and the suite fails a backend that breaks the
contract. The backend below is written the way a user would write one, on the public API only."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from pensive_core.backends import create_backend
from pensive_core.backends.base import check_namespace, check_upsert
from pensive_core.filters import matches
from pensive_core.testing import VectorBackendTests

pytest_plugins = ["pytester"]


class JsonBackend:
    """A user's backend: exact search over a dict per namespace, persisted as one JSON file."""

    name = "json-example"
    kind = "flat"  # exact search

    def __init__(self, folder, dim, options=None):
        self.dim = dim
        self.path = None if folder is None else Path(folder) / "vectors.json"
        self.spaces = {}
        if self.path is not None and self.path.exists():
            saved = json.loads(self.path.read_text())
            self.spaces = {
                ns: {cid: (np.array(v, dtype=np.float32), m) for cid, (v, m) in rows.items()}
                for ns, rows in saved.items()
            }

    def _space(self, namespace):
        return self.spaces.get(check_namespace(namespace), {})

    def upsert(self, ids, vectors, metadata=None, *, namespace=""):
        ids, vecs, metas = check_upsert(ids, vectors, metadata, self.dim, namespace)
        space = self.spaces.setdefault(namespace, {})
        for cid, vec, meta in zip(ids, vecs, metas):
            space[cid] = (vec.copy(), meta)

    def delete(self, ids, *, namespace=""):
        space = self._space(namespace)
        for cid in ids:
            space.pop(cid, None)

    def search(self, vector, k, *, where=None, namespace=""):
        scored = [
            (cid, float(vec @ vector))
            for cid, (vec, meta) in self._space(namespace).items()
            if where is None or matches(where, meta)
        ]
        return sorted(scored, key=lambda hit: -hit[1])[:k]

    def fetch(self, ids, *, namespace=""):
        space = self._space(namespace)
        return {cid: space[cid][0] for cid in ids if cid in space}

    def count(self, *, namespace=""):
        return len(self._space(namespace))

    def ids(self, *, namespace=""):
        return set(self._space(namespace))

    def persist(self):
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # Pensive may pass a new folder
            rows = {
                ns: {cid: (vec.tolist(), meta) for cid, (vec, meta) in space.items()}
                for ns, space in self.spaces.items()
            }
            self.path.write_text(json.dumps(rows))

    def close(self):
        self.persist()


class TestJsonBackend(VectorBackendTests):
    """Named by import path, as in ``[backend] name = "module:Class"``."""

    backend = f"{__name__}:JsonBackend"

    def test_the_store_runs_on_it(self, tmp_path):
        from pensive_core import Pensive
        from tests.conftest import HASH_CONFIG, docs_corpus

        with Pensive(tmp_path, config={**HASH_CONFIG, "backend": {"name": self.backend}}) as p:
            p.ingest(docs_corpus())
            assert p.stats()["vectors"] == 8
            assert p.query("arctic tern migration", k=1).hits[0].doc_id == "bird"
        assert list(tmp_path.rglob("vectors.json"))  # written by this backend, not another
        with Pensive(tmp_path) as p:  # the saved config names the user's class
            assert p.stats()["vectors"] == 8 and p.stats()["backend"] == self.backend


# -- the suite fails what breaks the contract ------------------------------------------------


class SharedNamespaces(JsonBackend):
    """Ignores the namespace: one tenant sees another's vectors."""

    def _space(self, namespace):
        check_namespace(namespace)
        return self.spaces.setdefault("", {})

    def upsert(self, ids, vectors, metadata=None, *, namespace=""):
        super().upsert(ids, vectors, metadata, namespace="")


class Distances(JsonBackend):
    """Returns cosine distances, lower first: not higher-is-better similarities."""

    def search(self, vector, k, *, where=None, namespace=""):
        hits = super().search(vector, len(self._space(namespace)), where=where, namespace=namespace)
        return [(cid, 1.0 - score) for cid, score in hits][:k]


class ForgetsOnReopen(JsonBackend):
    """Persists nothing."""

    def persist(self):
        pass


class MergesMetadata(JsonBackend):
    """Merges new metadata into the old instead of replacing it."""

    def upsert(self, ids, vectors, metadata=None, *, namespace=""):
        space = self.spaces.get(namespace, {})
        metadata = [
            {**space.get(cid, (None, {}))[1], **m}
            for cid, m in zip(ids, metadata or [{} for _ in ids])
        ]
        super().upsert(ids, vectors, metadata, namespace=namespace)


@pytest.mark.parametrize(
    "broken, test_name",
    [
        (SharedNamespaces, "test_namespace_isolation"),
        (Distances, "test_search_finds_exact_vector_first"),
        (ForgetsOnReopen, "test_persist_and_reload"),
        (MergesMetadata, "test_upsert_replaces_metadata"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_the_suite_fails_a_backend_that_breaks_the_contract(broken, test_name, tmp_path):
    suite = TestJsonBackend()
    run = getattr(suite, test_name)
    run(lambda folder: JsonBackend(folder, suite.dim), tmp_path / "sound")  # the control passes
    with pytest.raises(AssertionError):
        run(lambda folder: broken(folder, suite.dim), tmp_path / "broken")


def test_the_user_backend_resolves_like_any_other(tmp_path):
    b = create_backend(f"{__name__}:JsonBackend", tmp_path, 8)
    assert isinstance(b, JsonBackend) and b.dim == 8


# -- from a user's own test file -------------------------------------------------------------

USER_TESTS = """
import pytest

from pensive_core.testing import VectorBackendTests


class TestMemoryAsAUserWouldRunIt(VectorBackendTests):
    backend = "memory"


class TestForgotToSayWhich(VectorBackendTests):
    pass
"""


def test_a_user_test_file_collects_the_whole_suite(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:asyncio")
    n = sum(1 for name in dir(VectorBackendTests) if name.startswith("test_"))
    assert n >= 13
    result.assert_outcomes(passed=n, errors=n)  # every test of the class with no backend errs
    result.stdout.fnmatch_lines(["*TestForgotToSayWhich sets no `backend`*"])


# -- the package's own surface ---------------------------------------------------------------


def test_public_names_are_pinned():
    import pensive_core.testing as testing

    assert set(testing.__all__) == {
        "AnswerCacheTests",
        "ArchiveFactory",
        "CacheFactory",
        "ContextStoreTests",
        "ContextsFactory",
        "QueryStatsTests",
        "StatsFactory",
        "DIM",
        "DocumentStoreTests",
        "BackendFactory",
        "GraphFactory",
        "GraphTablesTests",
        "IndexFactory",
        "LearningFactory",
        "LearningTablesTests",
        "SparseIndexTests",
        "TemporalFactory",
        "TemporalTablesTests",
        "VectorBackendTests",
        "reference_scores",
        "unit_vectors",
        "CatalogFactory",
        "ItemRecordsTests",
        "ItemsFactory",
        "LLMCacheRecordsTests",
        "RecordsFactory",
        "SessionCatalogTests",
        "TurnStoreTests",
        "TurnsFactory",
    }
    for name in testing.__all__:
        assert getattr(testing, name) is not None
    assert not [n for n in dir(VectorBackendTests) if n.startswith("Test")]
    assert not [n for n in dir(testing.SparseIndexTests) if n.startswith("Test")]
    assert not [n for n in dir(testing.DocumentStoreTests) if n.startswith("Test")]
    for suite in ("TurnStoreTests", "SessionCatalogTests", "ItemRecordsTests",
                  "LLMCacheRecordsTests", "GraphTablesTests", "LearningTablesTests",
                  "TemporalTablesTests", "AnswerCacheTests", "QueryStatsTests",
                  "ContextStoreTests"):  # fmt: skip
        assert not [n for n in dir(getattr(testing, suite)) if n.startswith("Test")]


def test_without_pytest_the_testing_package_names_its_extra(monkeypatch):
    from pensive_core import MissingDependencyError

    for name in [
        m
        for m in sys.modules
        if m == "pensive_core.testing" or m.startswith("pensive_core.testing.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pytest", None)  # import fails as if not installed
    with pytest.raises(MissingDependencyError, match=r'pip install "pensive\[testing\]"') as info:
        importlib.import_module("pensive_core.testing")
    assert info.value.extra == "testing"
