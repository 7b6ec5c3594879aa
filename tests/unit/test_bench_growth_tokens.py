"""benchmarks.growth_tokens: one row per needle store present, figures taken from the niah
results of that size and from new processes on the store; sizes without a store are skipped."""

from __future__ import annotations

import json

from benchmarks import growth_tokens
from pensive_core import Document, Pensive

HASH = {"embedder": {"name": "hash"}}


def _niah_run(tokens: int, passages: int) -> dict:
    return {
        "haystack": {"tokens": tokens},
        "ingest": {"chunks": passages, "chunks_per_s": 55.0, "tokens_per_s": 6000.0},
        "pensive": {"overall": {"recall@5": 1.0}, "latency_ms": {"p50": 20.0, "p95": 30.0}},
        "peers": {"langchain-ensemble": {"overall": {"recall@5": 0.6}, "latency_ms": {"p50": 40}}},
        "source": {"commit": "abc1234def"},
        "measured_at": "2026-12-05",
    }


def test_a_store_present_is_measured_in_new_processes_and_others_are_skipped(tmp_path):
    with Pensive(tmp_path / "niah" / "100k", config=HASH) as p:
        p.ingest([Document("d1", "The lighthouse keeper painted the door blue in 1911.")])
    niah = tmp_path / "niah.json"
    niah.write_text(json.dumps({"runs": {"100k": _niah_run(100_000, 1), "1M": _niah_run(10, 2)}}))
    out = tmp_path / "out"
    growth_tokens.main(["--store", str(tmp_path / "niah"), "--niah", str(niah), "--out", str(out)])
    got = json.loads((out / "growth_tokens.json").read_text())
    assert list(got["sizes"]) == ["100k"]  # 1M has a niah run but no store; 10M neither
    row = got["sizes"]["100k"]
    new = row["new_process"]
    assert new["open_s"] > 0 and new["first_s"] > 0 and new["peak_rss_mb"] > 0
    assert new["warm_ms"]["p50"] <= new["warm_ms"]["p95"]
    assert row["niah"]["commit"] == "abc1234def" and row["peers"]["langchain-ensemble"]
    md = (out / "growth_tokens.md").read_text()
    assert "| 100k (100,000) | 1 | 55.0 |" in md and "langchain-ensemble" in md
    assert "1M (" not in md
