"""The Chroma backend against a real ``chroma run`` server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pensive_core import BackendError, Pensive
from pensive_core.backends import create_backend
from pensive_core.config import ChromaConfig
from tests.conftest import HASH_CONFIG, docs_corpus
from tests.unit.test_backends import DIM, Conformance


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory):
    import chromadb

    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    log = open(data / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [exe, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(data / "db")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            break
        except Exception:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                log.close()
                raise RuntimeError(
                    f"chroma run did not start: {(data / 'server.log').read_text()[-2000:]}"
                ) from None
            time.sleep(0.3)
    yield port
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


class TestChromaServer(Conformance):
    name = "chroma"

    @pytest.fixture(autouse=True)
    def _server(self, chroma_port):
        self.port = chroma_port

    def make(self, folder):
        # one collection per test folder: tests share the server, never each other's vectors
        coll = "t" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()
        cfg = ChromaConfig(mode="http", port=self.port, collection=coll)
        return create_backend(self.name, folder, DIM, cfg)


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
    port = _free_port()  # nothing listens here
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        create_backend("chroma", tmp_path, DIM, ChromaConfig(mode="http", port=port))
