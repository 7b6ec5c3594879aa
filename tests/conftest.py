"""Shared fixtures. Tests never write into the working directory: every store is in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("PENSIVE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

HASH_CONFIG = {"embedder": {"name": "hash", "dim": 256}}


@pytest.fixture
def hash_store(tmp_path):
    """A fresh store using the model-free hash embedder (fast)."""
    from pensive_core import Pensive

    p = Pensive(tmp_path / "store", config=HASH_CONFIG)
    yield p
    p.close()


@pytest.fixture(scope="session")
def minilm():
    """The bundled MiniLM embedder, loaded once per session."""
    pytest.importorskip("sentence_transformers")
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder

    return create_embedder(EmbedderConfig())


# read before any test runs: the fixture below clears PENSIVE_* variables for each test
TEST_POSTGRES_DSN = os.environ.get("PENSIVE_TEST_POSTGRES_DSN", "")


@pytest.fixture(scope="session")
def postgres_dsn(tmp_path_factory):
    """A real Postgres with pgvector: ``PENSIVE_TEST_POSTGRES_DSN`` when set, else one the
    ``pgserver`` wheel starts in a folder (Postgres 16, pgvector 0.6), stopped at the end."""
    if TEST_POSTGRES_DSN:
        yield TEST_POSTGRES_DSN
        return
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(autouse=True)
def _no_pensive_env(monkeypatch):
    """Keep a developer's PENSIVE_* variables out of the tests."""
    for name in list(os.environ):
        if name.startswith("PENSIVE_"):
            monkeypatch.delenv(name)


def docs_corpus():
    """A small hand-written corpus used by several tests."""
    from datetime import datetime, timezone

    from pensive_core import Document

    texts = {
        "q3": "Acme revenue rose 12% to $4.1 billion in Q3 2024, driven by cloud sales.",
        "q4": "Acme revenue fell 3% to $3.9 billion in Q4 2024 as hardware demand slowed.",
        "inv": "Invoice INV-4471 for 3,200 euros was paid by Globex on 2 May 2024.",
        "inv2": "Invoice INV-4472 remains unpaid; Initech disputes the shipping charges.",
        "ceo": "John Smith became chief executive officer of Acme in January 2021.",
        "code": "The function getUserName reads the user_name column from the accounts table.",
        "bird": "The arctic tern migrates from pole to pole every year, the longest migration.",
        "tea": "Green tea contains catechins, antioxidants studied for heart health.",
    }
    return [
        Document(
            id=k,
            text=v,
            metadata={"topic": k},
            timestamp=datetime(2024, 1 + i, 1, tzinfo=timezone.utc),
        )
        for i, (k, v) in enumerate(texts.items())
    ]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, timeout_s: float = 120.0) -> None:
    """Wait until a Pensive server at ``url`` answers ``/health/ready`` with 200."""
    import time

    import httpx

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/health/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"no ready server at {url} after {timeout_s:g} s")


def l2_state(p, text: str, k: int = 5, context=()):
    """The L2 stages a question passes before temporal resolution (the context's names, dense,
    BM25, fusion, the graph and the learning boost, the context's activation), run one by one through the store's router: the candidate
    lists, the fused order and the graph's seeds are in the returned QueryState."""
    from pensive_core.query import QueryState

    state = QueryState(text, k, context=tuple(context))
    p.router.context.expand(state)
    p.router.retrieval.run(state)
    p.router.graph.run(state)
    p.router.context.raise_scores(state)
    return state
