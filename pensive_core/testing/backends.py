"""The vector backend conformance suite: what every :class:`~pensive_core.backends.VectorBackend`
must do, as pytest tests a backend's own test module inherits.

Pensive runs this suite on each of its backends (FAISS in every index kind, memory, Chroma
embedded and on a server, Pinecone and Weaviate); a user's ``"module:Class"`` backend runs the
same tests by subclassing :class:`VectorBackendTests`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from ..backends import VectorBackend, create_backend
from ..errors import InputError
from ..filters import matches, parse_filter

__all__ = ["DIM", "BackendFactory", "VectorBackendTests", "unit_vectors"]

#: The vector dimension the suite uses unless a subclass sets ``dim``.
DIM = 16

#: What the ``make_backend`` fixture returns: opens (or reopens) the backend on a folder.
BackendFactory = Callable[[Path], VectorBackend]


def unit_vectors(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    """Random unit vectors, one per row.

    Args:
        rng: The random generator (seed it, so a failure reproduces).
        n: How many vectors.
        dim: Their dimension.

    Returns:
        A float32 array of shape ``(n, dim)`` whose rows have norm 1.
    """
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class VectorBackendTests:
    """What every vector backend must do; subclass it once per backend.

    The tests cover the empty store, upsert (idempotent, replacing vectors and metadata, a
    repeated id), delete (unknown ids included), fetch, ``k`` past the store's size,
    higher-is-better cosine scores in order, every filter operator, namespace isolation,
    persistence across a reopen, and refusal of bad arguments with
    :class:`~pensive_core.errors.InputError`. Each test opens the backend through the
    ``make_backend`` fixture, on that test's own ``tmp_path``; the persistence test opens it
    twice on the same folder, so the factory must reopen what an earlier instance persisted.

    A backend that ``create_backend`` can open (a registry name or ``"module:Class"`` whose
    class takes ``folder``, ``dim`` and ``options``) needs only the ``backend`` attribute
    (and ``options`` when it takes any). Anything else (a server to start, a collection per
    test, clean-up afterwards) overrides the ``make_backend`` fixture, which may take other
    fixtures and may ``yield`` to clean up. A backend on an eventually consistent service
    overrides :meth:`settle`. Pytest collects only classes named ``Test*``, so this base is
    never run by itself.

    A backend that checks its arguments with :func:`pensive_core.backends.base.check_upsert`
    and :func:`~pensive_core.backends.base.check_namespace`, as the built-ins do, passes the
    refusal test and treats a repeated id the same way.

    Example:
        A user's backend named by its import path::

            # tests/test_my_backend.py
            import pytest

            from my_package.vectors import MyBackend
            from pensive_core.testing import VectorBackendTests


            class TestMyBackend(VectorBackendTests):
                backend = "my_package.vectors:MyBackend"


            class TestMyBackendOnAServer(VectorBackendTests):
                @pytest.fixture
                def make_backend(self, my_server):
                    opened = []

                    def make(folder):
                        b = MyBackend(folder, self.dim, {"url": my_server.url})
                        opened.append(b)
                        return b

                    yield make
                    for b in opened:
                        b.close()

        Backend-specific tests go in the subclass beside the inherited ones.

    Attributes:
        backend: A registry name (``"faiss"``) or ``"module.path:Class"``, opened by the
            default ``make_backend`` through :func:`~pensive_core.backends.create_backend`.
        options: The ``options`` passed to the backend's constructor.
        dim: The vector dimension every test uses.
    """

    backend: ClassVar[str] = ""
    options: ClassVar[Any] = None
    dim: ClassVar[int] = DIM

    @pytest.fixture
    def make_backend(self) -> BackendFactory:
        """The factory each test opens the backend with: ``make_backend(folder)``.

        Override it (as a pytest fixture of the same name) when ``backend`` and ``options``
        are not enough.

        Returns:
            A callable that opens the backend on a folder, reopening what is persisted there.
        """
        if not self.backend:
            pytest.fail(
                f"{type(self).__name__} sets no `backend`: set it to a registry name or "
                "'module.path:Class', or override the `make_backend` fixture"
            )

        def make(folder: Path) -> VectorBackend:
            return create_backend(self.backend, folder, self.dim, self.options)

        return make

    def settle(
        self, backend: VectorBackend, namespace: str = "", expect: int | None = None
    ) -> None:
        """Wait until the backend's reads reflect its writes; a no-op for local backends.

        The tests call it after writing and before reading. A backend on an eventually
        consistent service overrides it (for example, poll ``count`` until it equals
        ``expect``).

        Args:
            backend: The backend just written to.
            namespace: The namespace written to.
            expect: The count the namespace should reach, when the test knows it.
        """

    def test_protocol(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """The backend implements :class:`~pensive_core.backends.VectorBackend`."""
        assert isinstance(make_backend(tmp_path), VectorBackend)

    def test_kind_and_ids(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """``kind`` names the index (``"flat"`` only for exact search); ``ids`` lists exactly
        the namespace's ids, or is None for a backend that cannot list them."""
        b = make_backend(tmp_path)
        assert isinstance(b.kind, str) and b.kind
        vecs = unit_vectors(np.random.default_rng(5), 3, self.dim)
        b.upsert(["a", "b", "c"], vecs, namespace="one")
        b.upsert(["z"], vecs[:1], namespace="two")
        b.delete(["b"], namespace="one")
        self.settle(b, "one", expect=2)
        listed = b.ids(namespace="one")
        if listed is not None:
            assert listed == {"a", "c"}
            assert b.ids(namespace="two") == {"z"}
            assert b.ids(namespace="none-here") == set()

    def test_empty_store(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """A new store counts 0, finds nothing, fetches nothing, and deletes without error."""
        b = make_backend(tmp_path)
        assert b.count() == 0
        assert b.search(unit_vectors(np.random.default_rng(0), 1, self.dim)[0], 5) == []
        assert b.fetch(["nothing"]) == {}
        b.delete(["nothing"])  # deleting from an empty store is fine

    def test_search_finds_exact_vector_first(
        self, make_backend: BackendFactory, tmp_path: Path
    ) -> None:
        """A stored vector is its own best match; scores are cosine similarities, best first."""
        rng = np.random.default_rng(1)
        vecs = unit_vectors(rng, 50, self.dim)
        b = make_backend(tmp_path)
        b.upsert([f"id{i}" for i in range(50)], vecs)
        self.settle(b, expect=50)
        res = b.search(vecs[17], 5)
        assert res[0][0] == "id17" and res[0][1] == pytest.approx(1.0, abs=1e-4)
        assert [s for _, s in res] == sorted((s for _, s in res), reverse=True)
        assert len(res) == 5
        # higher is better, and the score is the cosine similarity
        for cid, score in res:
            j = int(cid[2:])
            assert score == pytest.approx(float(vecs[j] @ vecs[17]), abs=1e-3)

    def test_upsert_is_idempotent_and_replaces(
        self, make_backend: BackendFactory, tmp_path: Path
    ) -> None:
        """Upserting an id again replaces its vector instead of adding one."""
        rng = np.random.default_rng(2)
        vecs = unit_vectors(rng, 10, self.dim)
        b = make_backend(tmp_path)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        self.settle(b, expect=10)
        assert b.count() == 10
        b.upsert(["id3"], vecs[7:8])
        self.settle(b, expect=10)
        assert b.count() == 10
        top = b.search(vecs[7], 2)
        assert {cid for cid, _ in top} == {"id3", "id7"}

    def test_delete_including_missing_ids(
        self, make_backend: BackendFactory, tmp_path: Path
    ) -> None:
        """Deleted ids are gone from count, search and fetch; unknown ids are ignored."""
        rng = np.random.default_rng(3)
        vecs = unit_vectors(rng, 10, self.dim)
        b = make_backend(tmp_path)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        b.delete(["id4", "never-stored"])
        self.settle(b, expect=9)
        assert b.count() == 9
        assert all(cid != "id4" for cid, _ in b.search(vecs[4], 10))
        assert b.fetch(["id4"]) == {}

    def test_persist_and_reload(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """What was persisted (vectors, metadata, namespaces, deletes) is there on reopening."""
        rng = np.random.default_rng(4)
        vecs = unit_vectors(rng, 30, self.dim)
        b = make_backend(tmp_path)
        meta = [{"color": ("red", "blue")[i % 2], "n": i} for i in range(30)]
        b.upsert([f"id{i}" for i in range(30)], vecs, meta)
        b.upsert(["x1", "x2"], vecs[:2], [{"color": "red"}] * 2, namespace="other")
        b.delete(["id0"])
        b.persist()
        self.settle(b, expect=29)
        before = b.search(vecs[5], 5)
        b.close()
        again = make_backend(tmp_path)
        self.settle(again, expect=29)
        assert again.count() == 29 and again.count(namespace="other") == 2
        after = again.search(vecs[5], 5)
        assert [c for c, _ in after] == [c for c, _ in before]
        assert [s for _, s in after] == pytest.approx([s for _, s in before], abs=1e-5)
        red = again.search(vecs[5], 30, where=parse_filter({"color": "red"}))
        assert {c for c, _ in red} == {f"id{i}" for i in range(2, 30, 2)}

    def test_fetch(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """Fetch returns the stored vectors of the ids it knows and leaves the others out."""
        vecs = unit_vectors(np.random.default_rng(7), 3, self.dim)
        b = make_backend(tmp_path)
        b.upsert(["a", "b", "c"], vecs)
        self.settle(b, expect=3)
        got = b.fetch(["c", "zz", "a"])
        assert set(got) == {"a", "c"}
        np.testing.assert_allclose(got["c"], vecs[2], atol=1e-6)

    def test_k_larger_than_store(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """Asking for more hits than are stored returns every stored vector."""
        b = make_backend(tmp_path)
        vecs = unit_vectors(np.random.default_rng(5), 3, self.dim)
        b.upsert(["a", "b", "c"], vecs)
        self.settle(b, expect=3)
        assert len(b.search(vecs[0], 100)) == 3

    def test_metadata_filters(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """Every filter operator selects exactly what :func:`~pensive_core.filters.matches`
        selects, in exact score order."""
        rng = np.random.default_rng(9)
        n = 40
        vecs = unit_vectors(rng, n, self.dim)
        colors = ("red", "green", "blue", "amber")
        meta = [
            {"color": colors[i % 4], "n": i, "even": i % 2 == 0, "w": i / 4, "doc_id": f"d{i // 3}"}
            for i in range(n)
        ]
        del meta[5]["color"]  # a record without the field matches no comparison on it
        ids = [f"id{i}" for i in range(n)]
        b = make_backend(tmp_path)
        b.upsert(ids, vecs, meta)
        self.settle(b, expect=n)
        cases: list[dict[str, Any]] = [
            {"color": "red"},
            {"color": {"$ne": "red"}},
            {"color": {"$in": ["green", "blue"]}},
            {"color": {"$nin": ["green", "blue"]}},
            {"n": {"$gte": 10, "$lt": 20}},
            {"n": {"$gt": 35}},
            {"n": {"$lte": 3}},
            {"w": {"$gt": 2.5}},
            {"even": True},
            {"n": 7},
            {"doc_id": "d4"},
            {"$or": [{"color": "amber"}, {"n": {"$lt": 2}}]},
            {"$and": [{"even": False}, {"color": {"$in": ["green", "amber"]}}]},
            {"color": "red", "even": True, "n": {"$gt": 20}},
            {"color": "violet"},
        ]
        for spec in cases:
            where = parse_filter(spec)
            want = {ids[i] for i in range(n) if matches(where, meta[i])}
            got = b.search(vecs[0], n, where=where)
            assert {c for c, _ in got} == want, spec
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
            top = b.search(vecs[12], 3, where=where)
            exact = sorted(want, key=lambda c: -float(vecs[int(c[2:])] @ vecs[12]))[:3]
            assert [c for c, _ in top] == exact, spec

    def test_upsert_replaces_metadata(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """An upsert replaces an id's metadata whole (no merge with the old keys)."""
        vecs = unit_vectors(np.random.default_rng(10), 4, self.dim)
        b = make_backend(tmp_path)
        b.upsert(list("abcd"), vecs, [{"tag": "old", "extra": 1}] * 4)
        b.upsert(["b"], vecs[1:2], [{"tag": "new"}])
        b.upsert(["c"], vecs[2:3])  # no metadata: the old metadata goes too
        self.settle(b, expect=4)
        assert {c for c, _ in b.search(vecs[0], 4, where=parse_filter({"extra": 1}))} == {"a", "d"}
        assert {c for c, _ in b.search(vecs[1], 4, where=parse_filter({"tag": "old"}))} == set("ad")
        assert [c for c, _ in b.search(vecs[0], 4, where=parse_filter({"tag": "new"}))] == ["b"]

    def test_namespace_isolation(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """Nothing stored in one namespace is searched, counted, fetched or deleted through
        another."""
        rng = np.random.default_rng(11)
        va, vb = unit_vectors(rng, 6, self.dim), unit_vectors(rng, 6, self.dim)
        ids = [f"id{i}" for i in range(6)]
        b = make_backend(tmp_path)
        b.upsert(ids, va, [{"t": "a"}] * 6, namespace="tenant-a")
        b.upsert(ids[:4], vb[:4], [{"t": "b"}] * 4, namespace="tenant-b")
        self.settle(b, "tenant-a", expect=6)
        self.settle(b, "tenant-b", expect=4)
        assert b.count() == 0
        assert (b.count(namespace="tenant-a"), b.count(namespace="tenant-b")) == (6, 4)
        assert b.search(va[0], 3) == []
        hit = b.search(vb[2], 1, namespace="tenant-b")[0]
        assert hit[0] == "id2" and hit[1] == pytest.approx(1.0, abs=1e-4)
        assert b.search(vb[2], 1, namespace="tenant-a")[0][1] < 0.99
        assert {c for c, _ in b.search(va[0], 10, namespace="tenant-b")} == set(ids[:4])
        np.testing.assert_allclose(b.fetch(["id1"], namespace="tenant-b")["id1"], vb[1], atol=1e-6)
        assert b.fetch(["id5"], namespace="tenant-b") == {}
        b.delete(["id0", "id1"], namespace="tenant-a")
        self.settle(b, "tenant-a", expect=4)
        assert (b.count(namespace="tenant-a"), b.count(namespace="tenant-b")) == (4, 4)
        assert "id0" in b.fetch(["id0"], namespace="tenant-b")
        where = parse_filter({"t": "a"})
        assert b.search(va[3], 5, where=where, namespace="tenant-b") == []

    def test_a_repeated_id_in_one_upsert_keeps_the_last(
        self, make_backend: BackendFactory, tmp_path: Path
    ) -> None:
        """An id repeated within one upsert keeps its last vector and metadata."""
        vecs = unit_vectors(np.random.default_rng(13), 3, self.dim)
        b = make_backend(tmp_path)
        b.upsert(["a", "b", "a"], vecs, [{"v": 1}, {"v": 2}, {"v": 3}])
        self.settle(b, expect=2)
        assert b.count() == 2
        hit = b.search(vecs[2], 1, where=parse_filter({"v": 3}))
        assert hit[0][0] == "a" and hit[0][1] == pytest.approx(1.0, abs=1e-4)
        assert b.search(vecs[0], 2, where=parse_filter({"v": 1})) == []

    def test_bad_arguments_are_refused(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """Bad namespaces, shapes and metadata lengths raise ``InputError`` and store nothing."""
        b = make_backend(tmp_path)
        vecs = unit_vectors(np.random.default_rng(12), 2, self.dim)
        with pytest.raises(InputError, match="namespace"):
            b.upsert(["a"], vecs[:1], namespace="no spaces/here")
        with pytest.raises(InputError, match="shape"):
            b.upsert(["a", "b"], vecs[:1])
        with pytest.raises(InputError, match="metadata"):
            b.upsert(["a", "b"], vecs, [{}])
        with pytest.raises(InputError, match="namespace"):
            b.search(vecs[0], 3, namespace="x" * 80)
        assert b.count() == 0
