"""Fast tests for the backend benchmark's helpers (``benchmarks/backends.py``).

No SciFact, no embedding model, no Chroma server: recall/overlap arithmetic, the synthetic
data generator, and a tiny end-to-end run of the scale part (FAISS in memory).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks import backends as bb  # noqa: E402


def test_recall_and_overlap():
    exact = [["a", "b", "c", "d"], ["x", "y", "z", "w"]]
    approx = [["a", "b", "q", "r"], ["w", "z", "y", "x"]]  # 2/4 and 4/4 (order ignored)
    assert bb.recall_at_k(approx, exact, 4) == pytest.approx(0.75)
    assert bb.recall_at_k(exact, exact, 4) == 1.0
    assert bb.overlap(approx, exact, 4) == pytest.approx(0.75)
    assert bb.overlap(exact, approx, 4) == bb.overlap(approx, exact, 4)
    # a short list: overlap divides by k, recall by what exact search returned
    assert bb.overlap([["a"]], [["a", "b"]], 2) == pytest.approx(0.5)
    assert bb.recall_at_k([["a"]], [["a"]], 10) == 1.0
    assert bb.short_results([["a"], ["a", "b"]], 2) == 1
    m = bb.overlap_matrix({"p": exact, "q": approx}, 4)
    assert m["p"]["p"] == m["q"]["q"] == 1.0
    assert m["p"]["q"] == m["q"]["p"] == 0.75


def test_pct():
    got = bb.pct([1.0, 2.0, 3.0, 4.0, 100.0])
    assert got["count"] == 5 and got["p50"] == 3.0 and got["p95"] > 4.0
    assert bb.pct([]) == {"count": 0}


def test_synthetic_shapes_norms_and_determinism():
    data, queries, desc = bb.synthetic(3000, n_queries=25, dim=64, seed=3)
    assert data.shape == (3000, 64) and queries.shape == (25, 64)
    assert data.dtype == np.float32 and queries.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(data, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    assert desc["centres"] == 150 and desc["n"] == 3000
    again, _, _ = bb.synthetic(3000, n_queries=25, dim=64, seed=3)
    np.testing.assert_array_equal(data, again)
    # clustered, not uniform noise: queries sit much closer to their neighbours than random pairs
    prof = bb.vector_profile(data, queries)
    assert prof["query_top1_cosine"] > prof["random_pair_cosine"] + 0.3
    assert prof["effective_dim"] < 64


def test_exact_topk_matches_argsort():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1000, 16)).astype(np.float32)
    queries = rng.standard_normal((7, 16)).astype(np.float32)
    got = bb.exact_topk(data, queries, 5, chunk=130)  # chunks that do not divide the data
    want = np.argsort(-(queries @ data.T), axis=1)[:, :5]
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow  # the whole benchmark, at a tiny scale
def test_tiny_scale_run_writes_results(tmp_path, monkeypatch):
    pytest.importorskip("faiss")
    monkeypatch.setattr(
        bb, "environment", lambda: {"python": "3", "platform": "test", "cpus": 1, "pensive": "0"}
    )
    bb.main(["--skip-scifact", "--scale", "2000", "--scale-queries", "20", "--out", str(tmp_path)])
    payload = json.loads((tmp_path / "backends.json").read_text())
    assert payload["scifact"] is None
    (part,) = payload["scale"]
    assert part["n"] == 2000 and part["flat_vs_numpy_bruteforce"] == 1.0
    rows = part["backends"]
    assert [rows[n]["index"] for n in ("faiss-flat", "faiss-hnsw", "faiss-ivfpq")] == [
        "flat",
        "hnsw",
        "ivfpq",
    ]
    assert rows["faiss-flat"]["recall_at_10_vs_exact"] == 1.0
    assert 0.0 < rows["faiss-ivfpq"]["recall_at_10_vs_exact"] <= 1.0
    assert rows["faiss-hnsw"]["latency_ms"]["count"] == 20
    md = (tmp_path / "backends.md").read_text()
    assert "| 2,000 | hnsw |" in md and "--skip-scifact" in md
