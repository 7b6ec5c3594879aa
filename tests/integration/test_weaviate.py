"""The Weaviate backend: the conformance suite against a loopback fake (and a real server when
``WEAVIATE_URL`` is set), plus retries, batching, errors and a whole store on it."""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
from urllib.parse import urlparse

import grpc
import numpy as np
import pytest

from benchmarks.backends import free_port
from pensive_core.backends import create_backend
from pensive_core.backends.weaviate import WeaviateBackend
from pensive_core.config import WeaviateConfig
from pensive_core.errors import BackendError, ConfigError, MissingDependencyError
from pensive_core.filters import matches, parse_filter
from pensive_core.testing import DIM, VectorBackendTests
from pensive_core.testing import unit_vectors as unit
from tests.fakes.weaviate_fake import serve_weaviate_fake

pytest.importorskip("weaviate")

pytestmark = pytest.mark.integration


def _collection_for(folder, salt: str = "") -> str:
    """One collection per test folder, so tests sharing a server never see each other."""
    return "T" + hashlib.sha1(f"{folder}{salt}".encode()).hexdigest()[:20]


def _cfg(fake, **kw) -> WeaviateConfig:
    base = {
        "url": fake.url,
        "grpc_port": fake.grpc_port,
        "collection": "Pensive",
        "backoff_s": 0.01,
        "timeout_s": 5.0,
    }
    return WeaviateConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def fake():
    with serve_weaviate_fake() as f:
        yield f


@pytest.fixture(autouse=True)
def _no_weaviate_key(monkeypatch):
    """A developer's WEAVIATE_API_KEY must not leak into the calls to the fake."""
    if "WEAVIATE_URL" not in os.environ:
        monkeypatch.delenv("WEAVIATE_API_KEY", raising=False)


class TestWeaviateFake(VectorBackendTests):
    """The whole conformance suite, through the real client, against the fake."""

    @pytest.fixture
    def make_backend(self, fake):
        opened: list[WeaviateBackend] = []

        def make(folder):
            b = WeaviateBackend(folder, DIM, _cfg(fake, collection=_collection_for(folder)))
            opened.append(b)
            return b

        yield make
        for b in opened:
            b.close()

    def test_other_dimension_is_refused(self, make_backend, fake, tmp_path):
        make_backend(tmp_path).upsert(["a"], unit(np.random.default_rng(8), 1))
        with pytest.raises(ConfigError, match="16-d"):
            WeaviateBackend(tmp_path, 32, _cfg(fake, collection=_collection_for(tmp_path)))

    def test_mixed_value_kinds_and_key_case(self, make_backend, tmp_path):
        """One key holding strings, numbers and booleans; keys differing only in case."""
        vecs = unit(np.random.default_rng(13), 6)
        meta = [
            {"v": "1", "Tag": "x"},
            {"v": 1, "tag": "x"},
            {"v": True, "TAG": "y"},
            {"v": 1.0},
            {"v": "one two"},
            {},
        ]
        ids = [f"id{i}" for i in range(6)]
        b = make_backend(tmp_path)
        b.upsert(ids, vecs, meta)
        cases = [
            {"v": 1},
            {"v": "1"},
            {"v": True},
            {"v": {"$ne": 1}},
            {"v": {"$nin": [1, "1"]}},
            {"v": {"$in": ["1", True]}},
            {"v": {"$gt": 0}},
            {"v": "one"},  # whole-value equality, not word matching
            {"Tag": "x"},
            {"tag": "x"},
            {"TAG": {"$ne": "x"}},
            {"never_stored": {"$ne": 3}},
            {"$or": [{"never_stored": 1}, {"tag": "x"}]},
        ]
        for spec in cases:
            where = parse_filter(spec)
            want = {ids[i] for i in range(6) if matches(where, meta[i])}
            assert {c for c, _ in b.search(vecs[0], 10, where=where)} == want, spec

    def test_upsert_drops_old_keys(self, make_backend, tmp_path):
        vecs = unit(np.random.default_rng(14), 2)
        b = make_backend(tmp_path)
        b.upsert(["a", "b"], vecs, [{"old": 1, "keep": "k"}, {"old": 2}])
        b.upsert(["a"], vecs[:1], [{"keep": "k"}])
        assert [c for c, _ in b.search(vecs[0], 5, where=parse_filter({"old": 1}))] == []
        assert {c for c, _ in b.search(vecs[0], 5, where=parse_filter({"old": {"$gt": 0}}))} == {
            "b"
        }

    def test_repeated_id_in_one_upsert_keeps_the_last(self, make_backend, tmp_path):
        vecs = unit(np.random.default_rng(15), 2)
        b = make_backend(tmp_path)
        b.upsert(["a", "a"], vecs, [{"n": 1}, {"n": 2}])
        assert b.count() == 1
        np.testing.assert_allclose(b.fetch(["a"])["a"], vecs[1], atol=1e-6)
        assert [c for c, _ in b.search(vecs[0], 5, where=parse_filter({"n": 2}))] == ["a"]

    def test_layout_on_the_server(self, make_backend, tmp_path):
        """Tenants per namespace (the default one included), uuid5 ids, the id property."""
        b = make_backend(tmp_path)
        b.upsert(["doc-1"], unit(np.random.default_rng(16), 1), [{"k": "v"}], namespace="ns1")
        b.upsert(["doc-2"], unit(np.random.default_rng(17), 1))
        names = set(b.coll.tenants.get())
        assert names == {"_default", "ns1"}
        objs = b.coll.with_tenant("ns1").query.fetch_objects(limit=5).objects
        assert [o.properties["pensive_id"] for o in objs] == ["doc-1"]
        assert objs[0].uuid == b.coll.with_tenant("ns1").query.fetch_objects().objects[0].uuid
        assert objs[0].properties["m_k_s"] == "v"
        assert str(objs[0].uuid) == str(
            uuid.uuid5(uuid.UUID("6f1c2b1e-6a0e-5d0c-9d3e-70656e736976"), "doc-1")
        )


def _real_settings():
    url = os.environ.get("WEAVIATE_URL")
    if not url:
        return None
    return {"url": url, "grpc_port": int(os.environ.get("WEAVIATE_GRPC_PORT", "50051"))}


@pytest.mark.skipif(
    _real_settings() is None,
    reason="set WEAVIATE_URL (and WEAVIATE_GRPC_PORT, WEAVIATE_API_KEY if needed) to run "
    "the conformance suite against a real Weaviate",
)
class TestWeaviateReal(VectorBackendTests):
    """The same suite against a real server; each test gets its own collection, deleted after."""

    salt = uuid.uuid4().hex

    @pytest.fixture
    def make_backend(self):
        opened: list[WeaviateBackend] = []
        names: set[str] = set()

        def make(folder):
            settings = _real_settings()
            assert settings is not None
            name = _collection_for(folder, self.salt)
            names.add(name)
            b = WeaviateBackend(
                folder, DIM, WeaviateConfig(**settings, collection=name, timeout_s=30.0)
            )
            opened.append(b)
            return b

        yield make
        for b in opened:
            if b.client is not None:
                for name in names:
                    b.client.collections.delete(name)
                break
        for b in opened:
            b.close()

    def settle(self, backend, namespace="", expect=None):
        if expect is None:
            return
        deadline = time.monotonic() + 15
        while backend.count(namespace=namespace) != expect and time.monotonic() < deadline:
            time.sleep(0.2)


# -- retries --------------------------------------------------------------------------------


def test_transient_grpc_failures_are_retried(tmp_path):
    vecs = unit(np.random.default_rng(20), 5)
    with serve_weaviate_fake() as f:
        b = WeaviateBackend(tmp_path, DIM, _cfg(f))
        # RESOURCE_EXHAUSTED is not retried by the client itself: only our retry can save it
        f.fail_grpc(2, grpc.StatusCode.RESOURCE_EXHAUSTED, methods={"BatchObjects"})
        b.upsert(list("abcde"), vecs)
        assert f.grpc_calls("BatchObjects") == [5, 5, 5]
        # the client never retries BatchDelete
        f.fail_grpc(2, grpc.StatusCode.UNAVAILABLE, methods={"BatchDelete"})
        b.delete(["a"])
        assert len(f.grpc_calls("BatchDelete")) == 3
        f.fail_grpc(2, grpc.StatusCode.DEADLINE_EXCEEDED, methods={"Search"})
        assert b.search(vecs[1], 1)[0][0] == "b"
        assert b.count() == 4
        b.close()


def test_transient_rest_failures_are_retried(tmp_path):
    vecs = unit(np.random.default_rng(21), 2)
    with serve_weaviate_fake() as f:
        f.fail_rest(2, 503, path_prefix="/v1/schema")
        b = WeaviateBackend(tmp_path, DIM, _cfg(f))  # opening reads the schema
        f.fail_rest(2, 429, path_prefix="/v1/schema/Pensive/tenants")
        b.upsert(["a", "b"], vecs, [{"x": 1}, {"x": 2}], namespace="ns")
        assert b.count(namespace="ns") == 2
        b.close()


def test_client_errors_are_not_retried(tmp_path):
    vecs = unit(np.random.default_rng(22), 2)
    with serve_weaviate_fake() as f:
        b = WeaviateBackend(tmp_path, DIM, _cfg(f))
        f.fail_grpc(3, grpc.StatusCode.INVALID_ARGUMENT, methods={"BatchObjects"})
        with pytest.raises(BackendError, match="INVALID_ARGUMENT|injected"):
            b.upsert(["a", "b"], vecs)
        assert len(f.grpc_calls("BatchObjects")) == 1
        f.fail_rest(1, 422, path_prefix="/v1/schema/Pensive/properties")
        with pytest.raises(BackendError, match="422"):
            b.upsert(["a"], vecs[:1], [{"new_key": "v"}])
        b.close()


def test_retries_give_up(tmp_path):
    vecs = unit(np.random.default_rng(23), 1)
    with serve_weaviate_fake() as f:
        b = WeaviateBackend(tmp_path, DIM, _cfg(f, retries=2))
        f.fail_grpc(10, grpc.StatusCode.RESOURCE_EXHAUSTED, methods={"BatchObjects"})
        with pytest.raises(BackendError, match="after 3 attempts") as err:
            b.upsert(["a"], vecs)
        assert f.url.split("//")[1] in str(err.value)
        assert len(f.grpc_calls("BatchObjects")) == 3
        b.close()


def test_per_object_batch_errors_raise(tmp_path):
    vecs = unit(np.random.default_rng(24), 2)
    with serve_weaviate_fake() as f:
        b = WeaviateBackend(tmp_path, DIM, _cfg(f))
        from weaviate.classes.config import DataType, Property

        # another writer gave the property that would hold string "z" a number type
        b.coll.config.add_property(Property(name="m_z_s", data_type=DataType.NUMBER))
        with pytest.raises(BackendError, match="1 of 2 objects were not written"):
            b.upsert(["a", "b"], vecs, [{"z": "text"}, {"y": 1}])
        assert b.count() == 1
        b.close()


# -- connection errors and configuration ----------------------------------------------------


def test_unreachable_server_names_the_address(tmp_path):
    port, grpc_port = free_port(), free_port()
    start = time.monotonic()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        WeaviateBackend(
            tmp_path,
            DIM,
            WeaviateConfig(url=f"http://127.0.0.1:{port}", grpc_port=grpc_port, timeout_s=3.0),
        )
    assert time.monotonic() - start < 5


def test_unreachable_grpc_port_names_it(tmp_path):
    grpc_port = free_port()
    with serve_weaviate_fake() as f:
        start = time.monotonic()
        with pytest.raises(BackendError, match=f"127.0.0.1:{grpc_port}"):
            WeaviateBackend(tmp_path, DIM, _cfg(f, grpc_port=grpc_port, timeout_s=3.0))
        assert time.monotonic() - start < 5


def test_missing_client_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "weaviate", None)
    with pytest.raises(MissingDependencyError, match=r"pensive\[weaviate\]"):
        WeaviateBackend(tmp_path, DIM, WeaviateConfig())
    with pytest.raises(MissingDependencyError, match=r"pensive\[weaviate\]"):
        create_backend("weaviate", tmp_path, DIM, WeaviateConfig())


def test_bad_url_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="url"):
        WeaviateBackend(tmp_path, DIM, WeaviateConfig(url="localhost:8080"))


def test_api_key_from_the_environment(tmp_path, monkeypatch):
    vecs = unit(np.random.default_rng(25), 2)
    with serve_weaviate_fake(api_key="s3cret") as f:
        monkeypatch.delenv("TEST_WEAVIATE_KEY", raising=False)
        with pytest.raises(BackendError, match="401"):
            WeaviateBackend(tmp_path, DIM, _cfg(f, api_key_env="TEST_WEAVIATE_KEY"))
        monkeypatch.setenv("TEST_WEAVIATE_KEY", "s3cret")
        b = WeaviateBackend(tmp_path, DIM, _cfg(f, api_key_env="TEST_WEAVIATE_KEY"))
        b.upsert(["a", "b"], vecs)
        assert b.search(vecs[0], 1)[0][0] == "a"
        b.close()


def test_foreign_collection_is_refused(tmp_path):
    with serve_weaviate_fake() as f:
        b = WeaviateBackend(tmp_path, DIM, _cfg(f))
        b.client.collections.create("Foreign")  # no dimension recorded, no multi-tenancy
        b.close()
        with pytest.raises(ConfigError, match="Foreign"):
            WeaviateBackend(tmp_path, DIM, _cfg(f, collection="Foreign"))


# -- batching -------------------------------------------------------------------------------


def test_batches_of_batch_size(tmp_path):
    n = 30
    vecs = unit(np.random.default_rng(26), n)
    ids = [f"id{i}" for i in range(n)]
    with serve_weaviate_fake() as f:
        b = WeaviateBackend(tmp_path, DIM, _cfg(f, batch_size=7))
        b.upsert(ids, vecs, [{"i": i} for i in range(n)])
        assert f.grpc_calls("BatchObjects") == [7, 7, 7, 7, 2]
        assert b.count() == n
        got = b.fetch(ids)
        assert len(got) == n and len(f.grpc_calls("Search")) == 5
        np.testing.assert_allclose(got["id29"], vecs[29], atol=1e-6)
        b.delete(ids[:20])
        assert len(f.grpc_calls("BatchDelete")) == 3
        assert b.count() == n - 20
        b.close()


# -- a whole store --------------------------------------------------------------------------


def test_pensive_store_on_weaviate(tmp_path):
    """The same code on another backend: config alone switches it."""
    from pensive_core import Pensive
    from tests.conftest import HASH_CONFIG, docs_corpus

    with serve_weaviate_fake() as f:
        wv = {"url": f.url, "grpc_port": f.grpc_port}
        cfg = {**HASH_CONFIG, "backend": {"name": "weaviate", "weaviate": wv}}
        with Pensive(tmp_path, config=cfg) as p:
            p.ingest(docs_corpus())
            assert p.stats()["vectors"] == 8 and p.stats()["backend"] == "weaviate"
            res = p.query("Was invoice INV-4471 paid?", k=2)
            assert res.hits[0].doc_id == "inv" and "dense" in res.hits[0].sources
            p.delete("inv")
            assert p.stats()["vectors"] == 7
        host = urlparse(f.url)
        assert host.hostname == "127.0.0.1"
        with Pensive(tmp_path) as p:  # reopened from the saved config: still Weaviate
            assert p.stats()["vectors"] == 7 and p.stats()["backend"] == "weaviate"


# -- the fake itself ------------------------------------------------------------------------


def test_fake_behaves_like_the_service():
    """What the backend relies on the service to do (or refuse), checked on the fake."""
    import weaviate
    from weaviate.classes.config import Configure, DataType, Property
    from weaviate.classes.data import DataObject
    from weaviate.classes.query import Filter
    from weaviate.exceptions import WeaviateQueryError

    with serve_weaviate_fake() as f:
        port = int(f.url.rsplit(":", 1)[1])
        client = weaviate.connect_to_local(
            host="127.0.0.1", port=port, grpc_port=f.grpc_port, skip_init_checks=True
        )
        try:
            assert client.is_ready()
            coll = client.collections.create(
                "plain",  # the service capitalizes collection names
                properties=[
                    Property(name="Title", data_type=DataType.TEXT),  # word tokenization
                    Property(name="n", data_type=DataType.NUMBER),
                ],
                vector_config=Configure.Vectors.self_provided(),
            )
            assert coll.name == "Plain"
            assert {p.name for p in coll.config.get().properties} == {"title", "n"}
            res = coll.data.insert_many(
                [
                    DataObject(properties={"title": "One two", "n": 1}, vector=[1.0, 0.0]),
                    DataObject(properties={"title": "three"}, vector=[0.0, 1.0]),
                    DataObject(properties={"title": 5}, vector=[0.0, 1.0]),  # wrong type
                    DataObject(properties={"title": "x"}, vector=[0.0, 1.0, 0.0]),  # length
                ]
            )
            assert sorted(res.errors) == [2, 3]
            q = coll.query
            word = q.fetch_objects(filters=Filter.by_property("title").equal("one"))
            assert [o.properties["title"] for o in word.objects] == ["One two"]
            # NotEqual also matches objects without the property
            assert len(q.fetch_objects(filters=Filter.by_property("n").not_equal(1.0)).objects) == 1
            with pytest.raises(WeaviateQueryError, match="valueNumber|value number"):
                q.fetch_objects(filters=Filter.by_property("n").equal(1))  # an int on NUMBER
            with pytest.raises(WeaviateQueryError, match="no such prop"):
                q.fetch_objects(filters=Filter.by_property("nope").equal("x"))
            with pytest.raises(WeaviateQueryError, match="indexNullState"):
                q.fetch_objects(filters=Filter.by_property("n").is_none(True))
            hits = q.near_vector([1.0, 0.0], limit=1, return_metadata=["distance"]).objects
            assert hits[0].properties["title"] == "One two" and hits[0].metadata.distance < 1e-6

            mt = client.collections.create(
                "Mt", multi_tenancy_config=Configure.multi_tenancy(enabled=True)
            )
            with pytest.raises(WeaviateQueryError, match="multi-tenancy enabled"):
                mt.query.fetch_objects()
            with pytest.raises(WeaviateQueryError, match="tenant not found"):
                mt.with_tenant("ghost").query.fetch_objects()
        finally:
            client.close()
