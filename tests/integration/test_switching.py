"""The same application code on four backends, chosen by config alone; and a store moved from
one backend to the next with ``reindex``, never embedding again."""

from __future__ import annotations

import uuid

import pytest

from pensive_core import BackendError, Pensive
from tests.conftest import HASH_CONFIG, docs_corpus
from tests.fakes.pinecone_fake import serve_pinecone_fake
from tests.fakes.weaviate_fake import serve_weaviate_fake
from tests.integration.test_chroma_server import chroma_port  # noqa: F401 - a fixture

pytestmark = pytest.mark.integration

KEY_ENV = "PINECONE_FAKE_API_KEY"
DIM = HASH_CONFIG["embedder"]["dim"]


@pytest.fixture
def services(monkeypatch, chroma_port, postgres_dsn):  # noqa: F811 - the fixture imported above
    """Backend configs for FAISS, a real Chroma server, a real Postgres with pgvector, and
    Pinecone and Weaviate fakes."""
    monkeypatch.setenv(KEY_ENV, "fake-key")
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
    monkeypatch.delenv("WEAVIATE_API_KEY", raising=False)
    with serve_pinecone_fake(DIM) as pc, serve_weaviate_fake() as wv:
        yield {
            "faiss": {"name": "faiss"},
            "chroma": {
                "name": "chroma",
                "chroma": {"mode": "http", "port": chroma_port, "collection": "switching"},
            },
            "pinecone": {
                "name": "pinecone",
                "pinecone": {"host": pc.url, "api_key_env": KEY_ENV, "backoff_s": 0.01},
            },
            "weaviate": {
                "name": "weaviate",
                "weaviate": {"url": wv.url, "grpc_port": wv.grpc_port, "backoff_s": 0.01},
            },
            # a table of this run's own: PENSIVE_TEST_POSTGRES_DSN may name a lasting server
            "pgvector": {"name": "pgvector", "pgvector": {"table": f"sw{uuid.uuid4().hex[:8]}"}},
        }


QUESTIONS = [
    "Was invoice INV-4471 paid?",
    "arctic tern migration",
    "Acme revenue in Q3 2024",
    "green tea antioxidants",
]


def application(folder, backend: dict) -> dict:
    """What a user's code does; only the config differs between backends."""
    out = {}
    with Pensive(folder, config={**HASH_CONFIG, "backend": backend}) as p:
        p.ingest(docs_corpus())
        out["vectors"] = p.stats()["vectors"]
        for q in QUESTIONS:
            res = p.query(q, k=3)
            out[q] = [h.doc_id for h in res.hits]
            assert "dense" in res.hits[0].sources
        res = p.query("Acme revenue", k=5, filters={"topic": {"$in": ["q4", "ceo"]}})
        out["filtered"] = sorted(h.doc_id for h in res.hits)
        p.delete("bird")
        out["after_delete"] = p.stats()["vectors"]
    return out


def test_same_code_four_backends(tmp_path, services):
    results = {name: application(tmp_path / name, cfg) for name, cfg in services.items()}
    reference = results["faiss"]
    assert reference["vectors"] == 8 and reference["after_delete"] == 7
    assert reference["filtered"] == ["ceo", "q4"]
    for name, got in results.items():
        assert got == reference, name  # same answers, whatever holds the vectors


def test_reindex_round_trip_through_every_backend(tmp_path, services, monkeypatch):
    folder = tmp_path / "store"
    with Pensive(folder, config={**HASH_CONFIG, "backend": services["faiss"]}) as p:
        p.ingest(docs_corpus())
        before = {q: [h.chunk_id for h in p.query(q, k=3).hits] for q in QUESTIONS}
        embedder = p.embedder

        def no_embedding(*_a, **_k):
            raise AssertionError("reindex must not embed stored passages again")

        monkeypatch.setattr(embedder, "embed", no_embedding)
        for name in ("pinecone", "weaviate", "chroma", "pgvector", "faiss"):
            cfg = services[name]
            report = p.reindex(name, cfg.get(name), namespace="moved" if name != "faiss" else "")
            assert report["vectors"] == 8 and report["embedded"] == 0, name
            assert p.stats()["backend"] == name and p.stats()["vectors"] == 8
            after = {q: [h.chunk_id for h in p.query(q, k=3).hits] for q in QUESTIONS}
            assert after == before, name
    with Pensive(folder) as p:  # the saved config names the last backend
        assert p.stats()["backend"] == "faiss" and p.stats()["vectors"] == 8
    # one vector folder is left: each move removed the local index it left behind
    assert len([f for f in folder.iterdir() if f.name.startswith("vectors")]) == 1


def test_reindex_refuses_a_namespace_in_use(tmp_path, services):
    with Pensive(tmp_path / "a", config={**HASH_CONFIG, "backend": services["pinecone"]}) as p:
        p.ingest(docs_corpus())
    with Pensive(tmp_path / "b", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus()[:3])
        with pytest.raises(BackendError, match="already holds 8 vectors"):
            p.reindex("pinecone", services["pinecone"]["pinecone"])
        # nothing changed: still FAISS, still answering
        assert p.stats()["backend"] == "faiss" and p.stats()["vectors"] == 3
        assert p.query("Acme revenue", k=1).hits


@pytest.mark.parametrize("name", ["pinecone", "weaviate", "chroma", "pgvector"])
def test_two_stores_share_one_service_apart_by_namespace(tmp_path, services, name):
    docs = {d.id: d for d in docs_corpus()}
    tenants = {"acme": ["q3", "q4", "ceo"], "nature": ["bird", "tea"]}
    stores = {}
    for tenant, ids in tenants.items():
        cfg = {**HASH_CONFIG, "backend": {**services[name], "namespace": f"ns-{tenant}"}}
        stores[tenant] = Pensive(tmp_path / tenant, config=cfg)
        stores[tenant].ingest(docs[i] for i in ids)
    try:
        for tenant, p in stores.items():
            assert p.stats()["vectors"] == len(tenants[tenant])
            for q in ("Acme revenue billion", "arctic tern migration"):
                res = p.query(q, k=5, filters={"topic": {"$ne": "nothing"}})
                assert {h.doc_id for h in res.hits} <= set(tenants[tenant])
                dense = p.components.backend.search(
                    p.embedder.embed_query(q), 10, namespace=p.config.backend.namespace
                )
                assert {c.split("#")[0] for c, _ in dense} == set(tenants[tenant])
    finally:
        for p in stores.values():
            p.close()
