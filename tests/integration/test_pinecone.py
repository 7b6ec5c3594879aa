"""The Pinecone backend: the conformance suite against a loopback fake of the service (and
against the real service when ``PINECONE_API_KEY`` is set), plus retries, errors, batching,
index creation and a whole store on Pinecone."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid

import numpy as np
import pytest

from benchmarks.backends import free_port
from pensive_core.backends import create_backend
from pensive_core.backends.pinecone import PineconeBackend, pinecone_filter
from pensive_core.config import PineconeConfig
from pensive_core.errors import BackendError, ConfigError, InputError, MissingDependencyError
from pensive_core.filters import parse_filter
from pensive_core.testing import DIM, VectorBackendTests
from pensive_core.testing import unit_vectors as unit
from tests.fakes.pinecone_fake import serve_pinecone_fake

pytest.importorskip("pinecone")

pytestmark = pytest.mark.integration

KEY_ENV = "PINECONE_FAKE_API_KEY"  # not PINECONE_API_KEY: never shadow a real key


def fake_options(url: str, **kw) -> PineconeConfig:
    """Options for the fake: its host, a test key variable, fast backoff."""
    return PineconeConfig(**{"host": url, "api_key_env": KEY_ENV, "backoff_s": 0.01, **kw})


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")
    with serve_pinecone_fake(DIM) as f:
        yield f


class TestPineconeFake(VectorBackendTests):
    """The whole conformance suite, each test on a fresh fake service."""

    @pytest.fixture
    def make_backend(self, fake):
        opened = []

        def make(folder):
            b = create_backend("pinecone", folder, DIM, fake_options(fake.url))
            opened.append(b)
            return b

        yield make
        for b in opened:
            b.close()

    def test_other_dimension_is_refused(self, make_backend, fake, tmp_path):
        make_backend(tmp_path).upsert(["a"], unit(np.random.default_rng(8), 1))
        with pytest.raises(ConfigError, match="16-d.*32-d"):
            PineconeBackend(tmp_path, 32, fake_options(fake.url))


class _Prefixed:
    """A backend whose namespaces are all moved under one prefix, so that tests sharing one
    real index never see each other's vectors (``""`` becomes the prefix itself)."""

    def __init__(self, backend: PineconeBackend, prefix: str, used: set[str]) -> None:
        self.inner, self.prefix, self.used = backend, prefix, used
        self.name, self.dim = backend.name, backend.dim

    def _ns(self, namespace: str) -> str:
        ns = f"{self.prefix}-{namespace}" if namespace else self.prefix
        self.used.add(ns)
        return ns

    def upsert(self, ids, vectors, metadata=None, *, namespace=""):
        self.inner.upsert(ids, vectors, metadata, namespace=self._ns(namespace))

    def delete(self, ids, *, namespace=""):
        self.inner.delete(ids, namespace=self._ns(namespace))

    def search(self, vector, k, *, where=None, namespace=""):
        return self.inner.search(vector, k, where=where, namespace=self._ns(namespace))

    def fetch(self, ids, *, namespace=""):
        return self.inner.fetch(ids, namespace=self._ns(namespace))

    def count(self, *, namespace=""):
        return self.inner.count(namespace=self._ns(namespace))

    def persist(self):
        self.inner.persist()

    def close(self):
        self.inner.close()


@pytest.mark.skipif(
    not os.environ.get("PINECONE_API_KEY"),
    reason="PINECONE_API_KEY is not set: the real-service suite needs a Pinecone API key "
    "(and uses the index named by PINECONE_INDEX, default 'pensive-test', 16-d cosine)",
)
class TestPineconeReal(VectorBackendTests):
    """The conformance suite against the real service, one fresh namespace prefix per test.

    Pinecone is eventually consistent, so ``settle`` waits for counts to reach the expected
    value and then a short grace period (``PINECONE_SETTLE_S``, default 2 s) for queries.
    """

    @pytest.fixture
    def make_backend(self):
        options = PineconeConfig(
            index=os.environ.get("PINECONE_INDEX", "pensive-test"), backoff_s=1.0
        )
        prefix = "t" + uuid.uuid4().hex[:12]
        used: set[str] = set()

        def make(folder):
            return _Prefixed(PineconeBackend(folder, DIM, options), prefix, used)

        yield make
        cleanup = PineconeBackend(None, DIM, options)
        for ns in used:
            with contextlib.suppress(Exception):  # the namespace may never have been written
                cleanup.index.delete(delete_all=True, namespace=ns)
        cleanup.close()

    def settle(self, backend, namespace="", expect=None):
        if expect is not None:
            deadline = time.monotonic() + 120
            while backend.count(namespace=namespace) != expect:
                if time.monotonic() > deadline:
                    raise AssertionError(f"count({namespace!r}) never reached {expect}")
                time.sleep(1.0)
        time.sleep(float(os.environ.get("PINECONE_SETTLE_S", "2")))


# -- retries and errors ---------------------------------------------------------------------


def test_transient_errors_are_retried(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url, retries=3))
    vecs = unit(np.random.default_rng(0), 3)
    fake.fail_next(2, status=503)
    b.upsert(list("abc"), vecs)
    assert [r.status for r in fake.calls("/vectors/upsert")] == [503, 503, 200]
    fake.fail_next(1, status=429, message="Too many requests", retry_after=0.05)
    assert b.search(vecs[0], 1)[0][0] == "a"
    assert [r.status for r in fake.calls("/query")] == [429, 200]
    fake.fail_next(1, status=None)  # the connection drops without an answer
    assert b.count() == 3
    b.close()


def test_retries_are_bounded(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url, retries=2))
    fake.fail_next(10, status=500, message="internal trouble")
    with pytest.raises(BackendError, match="after 3 attempts.*internal trouble"):
        b.fetch(["a"])
    assert len(fake.calls("/vectors/fetch")) == 3  # one try and two retries, no SDK retries


def test_client_errors_are_not_retried(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url, retries=3))
    vecs = unit(np.random.default_rng(1), 2)
    fake.fail_next(1, status=400, message="the request was malformed somehow")
    with pytest.raises(BackendError, match="malformed somehow") as err:
        b.search(vecs[0], 3)
    assert fake.url.removeprefix("http://") in str(err.value)
    assert len(fake.calls("/query")) == 1
    # a 400 the service itself decides on: metadata over Pinecone's 40 KB per record
    with pytest.raises(BackendError, match="Metadata size exceeds"):
        b.upsert(["big"], vecs[:1], [{"text": "x" * 50_000}])
    assert len(fake.calls("/vectors/upsert")) == 1


def test_unreachable_host_names_the_address(monkeypatch):
    port = free_port()
    monkeypatch.setenv(KEY_ENV, "fake-key")
    opts = fake_options(f"http://127.0.0.1:{port}", retries=2, timeout_s=2.0)
    start = time.monotonic()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}") as err:
        PineconeBackend(None, DIM, opts)
    assert time.monotonic() - start < 5
    assert "3 time(s)" in str(err.value)


def test_missing_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pinecone", None)  # `import pinecone` now fails
    with pytest.raises(MissingDependencyError, match=r"pensive\[pinecone\]"):
        create_backend("pinecone", tmp_path, DIM, PineconeConfig(host="http://127.0.0.1:1"))


def test_missing_api_key(monkeypatch, fake):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=KEY_ENV):
        PineconeBackend(None, DIM, fake_options(fake.url))
    assert fake.requests == []


def test_dimension_mismatch(fake):
    with pytest.raises(ConfigError, match="16-d.*64-d"):
        PineconeBackend(None, 64, fake_options(fake.url))


# -- batching and ids -----------------------------------------------------------------------


def test_requests_are_split_into_batches(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url, batch_size=7))
    ids = [f"id{i}" for i in range(50)]
    vecs = unit(np.random.default_rng(2), 50)
    b.upsert(ids, vecs, [{"n": i} for i in range(50)])
    sizes = [len(r.body["vectors"]) for r in fake.calls("/vectors/upsert")]
    assert sizes == [7] * 7 + [1]
    got = b.fetch(ids)
    assert len(got) == 50 and len(fake.calls("/vectors/fetch")) == 8
    np.testing.assert_allclose(got["id33"], vecs[33], atol=1e-6)
    b.delete(ids)
    assert [len(r.body["ids"]) for r in fake.calls("/vectors/delete")] == [7] * 7 + [1]
    assert b.count() == 0


def test_upserts_stay_under_the_request_size_limit(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")
    dim = 1536
    with serve_pinecone_fake(dim) as fake:
        b = PineconeBackend(None, dim, fake_options(fake.url, batch_size=1000))
        vecs = np.random.default_rng(3).normal(size=(120, dim)).astype(np.float32)
        b.upsert([f"v{i}" for i in range(120)], vecs)  # one request would be ~2.4 MB
        calls = fake.calls("/vectors/upsert")
        assert len(calls) > 1 and all(r.status == 200 for r in calls)
        assert b.count() == 120


def test_fetch_keeps_urls_short(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url, batch_size=1000))
    ids = [f"{i:03d}" + "x" * 400 for i in range(60)]
    b.upsert(ids, unit(np.random.default_rng(4), 60))
    assert len(b.fetch(ids)) == 60
    assert len(fake.calls("/vectors/fetch")) > 1


def test_ids_pinecone_cannot_store_round_trip(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url))
    ids = ["café#1", "ü" * 100, "~b64:literal", "plain"]
    vecs = unit(np.random.default_rng(5), 4)
    b.upsert(ids, vecs)
    stored = set(fake.indexes["pensive"].namespaces[""])
    assert "plain" in stored and all(s.isascii() for s in stored)
    assert set(b.fetch(ids)) == set(ids)
    assert [b.search(v, 1)[0][0] for v in vecs] == ids
    b.delete(["café#1"])
    assert b.count() == 3
    with pytest.raises(InputError, match="too long"):
        b.upsert(["é" * 400], vecs[:1])


def test_filter_translation_guards_missing_fields():
    assert pinecone_filter(parse_filter({"c": {"$ne": "red"}})) == {
        "$and": [{"c": {"$exists": True}}, {"c": {"$ne": "red"}}]
    }
    assert pinecone_filter(parse_filter({"c": {"$in": ["a", True]}})) == {
        "$or": [{"c": {"$in": ["a"]}}, {"c": {"$eq": True}}]
    }
    assert pinecone_filter(parse_filter({"c": {"$nin": [False]}})) == {
        "$and": [{"c": {"$exists": True}}, {"c": {"$ne": False}}]
    }
    assert pinecone_filter(parse_filter({"n": {"$gte": 2}})) == {"n": {"$gte": 2}}


def test_boolean_membership_filters(fake):
    b = PineconeBackend(None, DIM, fake_options(fake.url))
    vecs = unit(np.random.default_rng(6), 4)
    b.upsert(list("abcd"), vecs, [{"f": True}, {"f": False}, {"f": "yes"}, {}])
    hits = b.search(vecs[0], 4, where=parse_filter({"f": {"$in": [True, "yes"]}}))
    assert {c for c, _ in hits} == {"a", "c"}
    hits = b.search(vecs[0], 4, where=parse_filter({"f": {"$nin": [True, "yes"]}}))
    assert {c for c, _ in hits} == {"b"}


# -- the control plane ----------------------------------------------------------------------


def test_index_is_found_or_created_by_name(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")
    with serve_pinecone_fake(dimension=None) as fake:
        monkeypatch.setenv("PINECONE_CONTROLLER_HOST", fake.url)
        opts = PineconeConfig(
            index="pensive-ci", api_key_env=KEY_ENV, region="eu-west-1", backoff_s=0.01
        )
        missing = opts.model_copy(update={"create": False})
        with pytest.raises(ConfigError, match="pensive-ci"):
            PineconeBackend(None, DIM, missing)
        b = PineconeBackend(None, DIM, opts)
        created = fake.indexes["pensive-ci"]
        assert (created.dimension, created.metric, created.region) == (DIM, "cosine", "eu-west-1")
        assert b.address == created.host
        vecs = unit(np.random.default_rng(7), 3)
        b.upsert(list("abc"), vecs)
        b.close()
        again = PineconeBackend(None, DIM, opts)  # found now: not created twice
        assert again.search(vecs[2], 1)[0][0] == "c"
        assert len(fake.calls("/indexes", "POST")) == 1
        with pytest.raises(ConfigError, match="16-d"):
            PineconeBackend(None, 8, opts)


# -- a whole store --------------------------------------------------------------------------


def test_hybrid_store_on_pinecone(tmp_path, monkeypatch):
    """The same code on Pinecone: config alone switches the backend."""
    from pensive_core import Pensive
    from tests.conftest import HASH_CONFIG, docs_corpus

    monkeypatch.setenv("PINECONE_API_KEY", "fake-key")
    with serve_pinecone_fake(HASH_CONFIG["embedder"]["dim"]) as fake:
        cfg = {**HASH_CONFIG, "backend": {"name": "pinecone", "pinecone": {"host": fake.url}}}
        with Pensive(tmp_path, config=cfg) as p:
            p.ingest(docs_corpus())
            assert p.stats()["vectors"] == 8 and p.stats()["backend"] == "pinecone"
            res = p.query("Was invoice INV-4471 paid?", k=2)
            assert res.hits[0].doc_id == "inv" and "dense" in res.hits[0].sources
            p.delete("inv")
            assert p.stats()["vectors"] == 7
        with Pensive(tmp_path) as p:  # reopened from the saved config: still Pinecone
            assert p.stats()["vectors"] == 7 and p.stats()["backend"] == "pinecone"
        assert fake.calls("/vectors/upsert") and fake.calls("/query")
