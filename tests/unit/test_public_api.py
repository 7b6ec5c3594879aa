"""The public surface is pinned: names, defaults, and that importing does nothing."""

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import pensive_core
from pensive_core.config import PensiveConfig

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "Aggregation",
    "BackendError",
    "BuiltPrompt",
    "CardStatement",
    "EntityCard",
    "Conversation",
    "DriftDetector",
    "DriftSignal",
    "HypervectorSelector",
    "PromptBuilder",
    "PromptItem",
    "PromptStrategy",
    "PromptTemplate",
    "Turn",
    "Chunk",
    "ConfigError",
    "Document",
    "ExpectedTrace",
    "Explanation",
    "StageInfo",
    "StageRank",
    "Fused",
    "Hit",
    "IngestGroupsError",
    "IngestReport",
    "InputError",
    "MissingDependencyError",
    "NotFoundError",
    "Pensive",
    "PensiveConfig",
    "PensiveError",
    "QueryResult",
    "SchemaVersionError",
    "StorageError",
    "CorruptStoreError",
    "TimeScope",
    "Tokenizer",
    "VectorQuery",
    "__version__",
    "chunk_text",
    "ensure_utc",
    "load_config",
    "render_turn",
    "render_turns",
    "rrf",
    "weighted",
    "zscore",
    "repair_store",
    "verify_store",
}


def test_all_is_pinned_and_importable():
    assert set(pensive_core.__all__) == EXPECTED
    for name in pensive_core.__all__:
        assert getattr(pensive_core, name) is not None


def test_defaults_are_pinned():
    cfg = PensiveConfig()
    assert cfg.backend.name == "faiss"
    assert cfg.embedder.name == "minilm"
    assert cfg.embedder.threads == 1
    assert cfg.embedder.batch_threads == 0
    assert cfg.fusion.method == "weighted"
    assert cfg.fusion.k == 60
    assert cfg.fusion.weights == {"dense": 0.7, "bm25": 1.0}
    assert cfg.fusion.depth == 100
    assert cfg.bm25.method == "lucene"
    assert (cfg.bm25.k1, cfg.bm25.b) == (0.9, 0.4)
    assert cfg.chunking.target_tokens == 0
    assert cfg.router.l1 is True  # measured: benchmarks/results/router.md
    assert (cfg.router.l1_refresh, cfg.router.l3_below) == (256, 0.0)


def test_error_tree():
    from pensive_core import errors as e

    for cls in (
        e.ConfigError,
        e.BackendError,
        e.MissingDependencyError,
        e.NotFoundError,
        e.InputError,
        e.SchemaVersionError,
        e.StorageError,
        e.CorruptStoreError,
        e.IngestGroupsError,
    ):
        assert issubclass(cls, e.PensiveError)
    assert issubclass(e.CorruptStoreError, e.StorageError) and issubclass(e.StorageError, OSError)
    assert issubclass(e.MissingDependencyError, ImportError)


def test_import_has_no_side_effects():
    code = (
        "import os, sys; before = dict(os.environ); import pensive_core, pensive_core.cli; "
        "heavy = [m for m in ('torch', 'faiss', 'sentence_transformers', 'bm25s', 'pytest') "
        "if m in sys.modules]; "
        "assert not heavy, heavy; assert dict(os.environ) == before; print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_install_hints_name_existing_extras():
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    assert {
        "faiss",
        "chroma",
        "pinecone",
        "weaviate",
        "postgres",
        "llamaindex",
        "langchain",
        "server",
        "testing",
        "all",
        "dev",
    } <= extras
    import re

    hinted = set()
    for path in (ROOT / "pensive_core").rglob("*.py"):
        hinted |= set(
            re.findall(r'MissingDependencyError\(\s*"[^"]+",\s*"([^"]+)"', path.read_text())
        )
    assert hinted, "no install hints found"
    assert hinted <= extras, hinted - extras


def test_hits_are_immutable_but_still_dicts():
    import copy
    import json
    import pickle

    from pensive_core import Hit

    h = Hit("d", "d#1", "text", 1.0, {"a": [1]}, None, {"bm25": 1})
    assert isinstance(h.metadata, dict) and json.dumps(h.metadata) == '{"a": [1]}'
    for change in (
        lambda: h.metadata.__setitem__("b", 2),
        lambda: h.metadata.update(b=2),
        lambda: h.sources.pop("bm25"),
        lambda: h.metadata.clear(),
    ):
        with pytest.raises(TypeError):
            change()
    assert pickle.loads(pickle.dumps(h)) == h
    assert copy.deepcopy(h) == h
    mine = dict(h.metadata)
    mine["b"] = 2  # a copy is an ordinary dict
    assert "b" not in h.metadata


def test_backend_defaults_and_signatures_are_pinned():
    import inspect

    from pensive_core import Pensive
    from pensive_core.backends import VectorBackend

    g = PensiveConfig().graph  # on: measured to help multi-hop and cost single-hop nothing
    assert g.enabled is True and (g.weight, g.hops, g.seed_hits, g.query_entities) == (1, 2, 3, 0)
    assert {e for e, w in g.edges.items() if w} == {"mentions", "about"}
    b = PensiveConfig().backend
    assert b.namespace == "" and b.faiss.index == "auto" and b.faiss.hnsw_threshold == 20_000
    assert (b.faiss.ivf_nprobe, b.faiss.pq_m, b.faiss.ivf_train_min) == (32, 0, 10_000)
    assert (b.pinecone.index, b.pinecone.api_key_env) == ("pensive", "PINECONE_API_KEY")
    assert (b.weaviate.url, b.weaviate.collection) == ("http://localhost:8080", "Pensive")
    q = inspect.signature(Pensive.query).parameters
    assert list(q) == ["self", "text", "k", "as_of", "filters", "context", "min_score", "pins"]
    assert q["k"].default == 5 and q["filters"].default is None and q["context"].default is None
    assert q["min_score"].default is None  # no hit is dropped unless asked
    assert q["filters"].kind is inspect.Parameter.KEYWORD_ONLY
    assert q["context"].kind is inspect.Parameter.KEYWORD_ONLY
    assert q["min_score"].kind is inspect.Parameter.KEYWORD_ONLY
    m = inspect.signature(Pensive.ingest_many).parameters
    assert list(m) == ["self", "groups", "progress", "archive_only"]
    assert m["groups"].kind is inspect.Parameter.VAR_POSITIONAL
    assert m["progress"].default is None and m["archive_only"].default is False
    r = inspect.signature(Pensive.reindex).parameters
    assert list(r)[:4] == ["self", "to", "options", "namespace"]
    s = inspect.signature(VectorBackend.search).parameters
    assert list(s) == ["self", "vector", "k", "where", "namespace"]
    u = inspect.signature(VectorBackend.upsert).parameters
    assert list(u) == ["self", "ids", "vectors", "metadata", "namespace"]


def test_constructor_plug_ins_and_new_defaults_are_pinned():
    import inspect

    from pensive_core import Pensive, hooks
    from pensive_core.plugins import PLUG_KINDS

    c = inspect.signature(Pensive.__init__).parameters
    assert list(c) == [
        "self",
        "path",
        "config",
        "read_only",
        "llm",
        "context_generator",
        "embedder",
        "extractor",
        "statement_extractor",
        "reranker",
    ]
    assert all(c[n].kind is inspect.Parameter.KEYWORD_ONLY for n in list(c)[3:])
    assert all(c[n].default is None for n in list(c)[4:]) and c["read_only"].default is False
    cfg = PensiveConfig()
    assert (cfg.graph.extractor, cfg.temporal.extractor, cfg.storage.engine) == (
        "rules",
        "rules",
        "embedded",
    )
    assert (cfg.rerank.model, cfg.rerank.candidates) == ("", 40)  # off by default
    assert set(PLUG_KINDS) == {
        "backend",
        "embedder",
        "context",
        "extractor",
        "statements",
        "reranker",
        "strategy",
    }
    assert hooks.POINTS[:2] == ("open", "recover") and "commit" in hooks.POINTS


def test_adapter_packages_export_distinct_names():
    """Both adapters star-imported into one module: no name of one shadows the other's (both
    once exported a ``PensiveRetriever``)."""
    pytest.importorskip("llama_index.core")
    pytest.importorskip("langchain_core")
    import pensive_langchain
    import pensive_llamaindex

    assert "PensiveLlamaIndexRetriever" in pensive_llamaindex.__all__
    assert "PensiveLangChainRetriever" in pensive_langchain.__all__
    assert not set(pensive_llamaindex.__all__) & set(pensive_langchain.__all__)
    for adapter in (pensive_llamaindex, pensive_langchain):
        for name in set(pensive_core.__all__) & set(adapter.__all__):  # render_turn: re-exported
            assert getattr(adapter, name) is getattr(pensive_core, name), name
    both: dict[str, object] = {}
    exec("from pensive_llamaindex import *\nfrom pensive_langchain import *", both)
    assert both["PensiveLlamaIndexRetriever"] is not both["PensiveLangChainRetriever"]
    assert "PensiveRetriever" not in both  # the deprecated alias is not star-exported
