"""Nothing on disk is ever unpickled: no pickle-family imports, every ``np.load`` refuses
pickles, and a whole store life cycle runs with the unpickler made to explode."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from pensive_core import Document, Pensive
from tests.conftest import HASH_CONFIG

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pensive_core", "pensive_llamaindex", "pensive_langchain")
UNSAFE_MODULES = {
    "pickle",
    "cPickle",
    "_pickle",
    "shelve",
    "marshal",
    "dill",
    "cloudpickle",
    "joblib",
}


def _sources():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def test_no_module_imports_a_pickle_family_loader():
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n in UNSAFE_MODULES
            ]
    assert found == []


def test_every_numpy_load_refuses_pickles_and_torch_load_is_never_called():
    loads, bad = 0, []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "load_npy":
                loads += 1  # the shared loader (its own np.load is checked below)
                continue
            if not isinstance(node.func, ast.Attribute):
                continue
            owner = ast.unparse(node.func.value)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if node.func.attr == "load" and owner in ("np", "numpy"):
                loads += 1
                flag = {k.arg: k.value for k in node.keywords}.get("allow_pickle")
                if not (isinstance(flag, ast.Constant) and flag.value is False):
                    bad.append(where)
            if node.func.attr == "load" and owner == "torch":
                bad.append(where)
    assert loads >= 3  # the scan sees the loads that exist (BM25, FAISS ids, memory backend)
    assert bad == []


def test_every_numpy_load_takes_the_one_lock():
    """numpy parses a .npy header with ``ast.literal_eval``, which is not thread-safe in
    CPython 3.11 ("SystemError: AST constructor recursion depth mismatch"): a reader's warm-up
    thread loaded the saved graph view with a bare ``np.load`` while the opening thread read
    the FAISS ids under the lock, and a read-only open failed in CI. Every load in the package
    goes through ``files`` (``load_npy``, ``load_npz``, ``load_npy_checked``), which hold one
    lock; the only exception is the salvage child, a process of its own."""
    bare = []
    for path in _sources():
        if path.name == "files.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        child = {
            n
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef) and f.name == "dump_vectors"
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "load"
                and ast.unparse(node.func.value) in ("np", "numpy")
                and node not in child
            ):
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bare == []


@pytest.fixture
def no_unpickling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("something tried to unpickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


def test_a_store_lives_and_reopens_without_unpickling(tmp_path, no_unpickling):
    config = {**HASH_CONFIG, "router": {"l1": True}}
    docs = [
        Document(
            "acme", "Acme Corp hired Maria Silva as CEO on 3 March 2021.", {"source": "a.txt"}
        ),
        Document("inv", "Invoice INV-4471 was paid in full."),
    ]
    with Pensive(tmp_path, config=config) as p:
        p.ingest(docs)
        p.query("who is the CEO of Acme?")
        p.conversation("s", user="u").add("user", "I moved to Lisbon.")
    with Pensive(tmp_path, config=config) as p:  # every index, cache and session read back
        assert p.query("who is the CEO of Acme?").tier == "L1"
        assert p.query("INV-4471").hits[0].doc_id == "inv"
        assert "Lisbon" in p.conversation("s").recall("where do I live?")[0].text
    with Pensive(tmp_path, read_only=True) as r:
        assert r.query("Maria Silva").hits[0].doc_id == "acme"


@pytest.mark.slow
def test_the_bundled_model_loads_without_unpickling(minilm, tmp_path, monkeypatch):
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders.registry import create_embedder

    def refuse(*args, **kwargs):
        raise AssertionError("something tried to unpickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    embedder = create_embedder(EmbedderConfig(name="minilm"))
    assert embedder.embed(["a heron by the pond"]).shape == (1, 384)
