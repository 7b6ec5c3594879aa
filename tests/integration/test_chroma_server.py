"""The Chroma backend against a real ``chroma run`` server on 127.0.0.1."""

from __future__ import annotations

import hashlib

import pytest

from benchmarks.backends import free_port, start_chroma_server, stop_chroma_server
from pensive_core import BackendError, Pensive
from pensive_core.backends import create_backend
from pensive_core.config import ChromaConfig
from pensive_core.testing import DIM, VectorBackendTests
from tests.conftest import HASH_CONFIG, docs_corpus

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory):
    """A real ``chroma run`` server on 127.0.0.1 for the module (the benchmark starts it the
    same way)."""
    proc, port, log = start_chroma_server(tmp_path_factory.mktemp("chroma-server"))
    yield port
    stop_chroma_server(proc, log)


class TestChromaServer(VectorBackendTests):
    @pytest.fixture
    def make_backend(self, chroma_port):
        def make(folder):
            # one collection per test folder: tests share the server, never each other's vectors
            coll = "t" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()
            cfg = ChromaConfig(mode="http", port=chroma_port, collection=coll)
            return create_backend("chroma", folder, DIM, cfg)

        return make


def test_pensive_on_a_chroma_server(tmp_path, chroma_port):
    cfg = {
        **HASH_CONFIG,
        "backend": {"name": "chroma", "chroma": {"mode": "http", "port": chroma_port}},
    }
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs_corpus())
        assert p.stats()["vectors"] == 8
        assert p.query("arctic tern migration", k=1).hits[0].doc_id == "bird"


def test_unreachable_server_names_the_address(tmp_path):
    port = free_port()  # nothing listens here
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        create_backend("chroma", tmp_path, DIM, ChromaConfig(mode="http", port=port))
