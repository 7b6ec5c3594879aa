"""``[embedder] workers``: passage batches embedded by worker processes match in-process
vectors, small batches stay in-process, a killed worker raises a clear error and is replaced,
and nothing is left running (or unreaped) after close."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from pensive_core.embedders.worker import WorkerPool, split_balanced
from pensive_core.errors import EmbedderError

# find_spec rather than importorskip: collecting this module, even to deselect it from the
# fast loop, must not import torch
pytestmark = [
    pytest.mark.slow,  # loads the real embedding model
    pytest.mark.skipif(
        importlib.util.find_spec("sentence_transformers") is None,
        reason="sentence-transformers is not installed (extra minilm)",
    ),
]

BATCH = 8  # workers take batches of 2 * BATCH = 16 passages or more


def _passages(n: int, seed: int = 7) -> list[str]:
    """Varied passages: lengths from a few words to ~120, punctuation, digits, non-ASCII."""
    rng = random.Random(seed)
    words = (
        "heron pond protein cell tumour gene expression receptor patients trial dose "
        "mitochondria kinase signalling pathway cohort risk ratio café naïve Zürich "
        "β-catenin p53 IL-6 CRISPR 3.5mg/kg 95% 東京 données 🙂 the of and in to with"
    ).split()
    out = []
    for i in range(n):
        k = rng.choice([2, 4, 8, 16, 30, 60])
        text = " ".join(rng.choice(words) for _ in range(k))
        out.append(f"{text.capitalize()}. (#{i})" if i % 3 else text)
    return out


def _children_zombies() -> list[int]:
    """Process ids of this process's children that exited but were never reaped."""
    me, found = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == me:
            found.append(int(stat.parent.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store whose bundled model embeds passage batches in two worker processes (batches of
    8, so workers take 16 passages or more); yields it and the model behind it."""
    from pensive_core import Pensive

    config = {"embedder": {"workers": 2, "batch_size": BATCH, "batch_threads": 2}}
    p = Pensive(tmp_path_factory.mktemp("workers") / "s", config=config)
    embedder = p.embedder
    model = getattr(embedder, "inner", embedder)  # behind a query cache, if any
    yield p, model
    p.close()
    model.close()


@pytest.fixture
def pooled(store):
    return store[1]


@pytest.fixture(scope="module")
def f32():
    """The bundled model in float32 (workers embed in float32; the shared fixture may have
    loaded PyTorch, whose bfloat16 copy would answer its batches)."""
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder

    return create_embedder(EmbedderConfig(batch_dtype="float32"))


def test_split_is_contiguous_and_balanced_by_length():
    lengths = [10, 200, 30, 30, 400, 5, 5, 90, 120, 60]
    for parts in (1, 2, 3, 4, 16):
        cuts = split_balanced(lengths, parts)
        assert cuts[0][0] == 0 and cuts[-1][1] == len(lengths)
        assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))
    a, b = split_balanced([1] * 100, 2)
    assert a == (0, 50) and b == (50, 100)
    assert split_balanced([300, 1, 1, 1, 1], 2) == [(0, 1), (1, 5)]  # a long text alone
    assert split_balanced([1, 1, 1, 1, 300], 2) == [(0, 4), (4, 5)]
    few = split_balanced([5, 5], 4)  # fewer texts than parts: some slices are empty
    assert len(few) == 4 and [b - a for a, b in few if b > a] == [1, 1]


def test_small_batches_stay_in_process(pooled, f32):
    pooled.close()
    texts = _passages(2 * BATCH - 1)
    got = pooled.embed(texts)
    assert pooled.worker_pids() == []  # no worker was started for a small batch
    assert np.allclose(got, f32.embed(texts), atol=1e-5)
    assert pooled.embed_query("a heron").shape == (384,)
    assert pooled.worker_pids() == []


def test_a_store_ingests_through_workers_and_finds_the_documents(store):
    from pensive_core import Document

    p, model = store
    topics = ["heron", "volcano", "violin", "glacier", "saffron", "lighthouse", "comet", "otter"]
    docs = [
        Document(f"d{i}", f"Note {i}: the {topics[i % 8]} report number {i} for batch {i // 8}.")
        for i in range(200)
    ]
    docs[123] = Document("d123", "Invoice INV-9911 was settled by Globex in Lisbon.")
    assert p.ingest(docs).added == 200
    assert len(model.worker_pids()) == 2  # 200 passages >= 2 * batch_size went to the workers
    assert p.query("who settled invoice INV-9911?").hits[0].doc_id == "d123"
    assert p.query("Globex Lisbon settlement").hits[0].doc_id == "d123"
    hits = p.query("volcano report", k=10).hits
    assert sum("volcano" in h.text for h in hits) >= 5


def test_worker_vectors_equal_in_process_vectors(pooled, f32):
    texts = _passages(300)
    got = pooled.embed(texts)
    assert len(pooled.worker_pids()) == 2
    want = f32.embed(texts)  # workers = 0
    assert got.dtype == np.float32 and got.shape == (300, 384)
    assert np.abs(got - want).max() <= 1e-5
    assert float((got * want).sum(axis=1).min()) >= 0.99999
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    again = pooled.embed(texts[:40])  # the workers are reused; rows come back in order
    assert np.abs(again - got[:40]).max() <= 1e-5


def test_a_killed_worker_raises_clearly_and_the_next_batch_restarts_workers(pooled, f32):
    texts = _passages(20, seed=3)
    pooled.embed(texts)
    pids = pooled.worker_pids()
    assert len(pids) == 2
    os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not _gone(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(EmbedderError, match=r"worker 0 .*SIGKILL.*exit code -9"):
        pooled.embed(texts)
    # the failure stopped every worker, and reaped them
    assert pooled.worker_pids() == []
    assert all(_gone(p) and not Path(f"/proc/{p}").exists() for p in pids)
    # decided: the next large batch starts fresh workers rather than failing forever
    again = pooled.embed(texts)
    new = pooled.worker_pids()
    assert len(new) == 2 and not set(new) & set(pids)
    assert np.abs(again - f32.embed(texts)).max() <= 1e-5


def test_close_leaves_no_process_and_no_zombie(pooled):
    pooled.embed(_passages(20, seed=5))
    pids = pooled.worker_pids()
    assert len(pids) == 2
    pooled.close()
    pooled.close()  # idempotent
    assert pooled.worker_pids() == []
    assert not any(Path(f"/proc/{p}").exists() for p in pids)
    assert _children_zombies() == []


def test_a_worker_that_cannot_load_names_its_exit_code_and_stderr(tmp_path):
    pool = WorkerPool(tmp_path / "no-such-model", 1, 1, 8, 384)
    try:
        with pytest.raises(EmbedderError, match=r"exited with code 1.*stderr tail: .*no-such"):
            pool.embed(["a", "b"])
        assert pool.pids == []
    finally:
        pool.close()
    assert _children_zombies() == []
