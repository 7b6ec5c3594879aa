"""Needle in a haystack at 100k, 1M and 10M tokens: build, ingest, ask, score.

Each size is built and measured on its own and merged into ``benchmarks/results/niah.json``
(so the long 10M run can be run alone). Phases: ``build`` plants the needles, ingests the
haystack into a store (timing every pipeline stage) and saves the needles beside it; ``query``
opens the store cold, asks every needle question once and scores recall@1/@5 by depth and kind.
"""

from __future__ import annotations

import bisect
import gc
import json
import os
import re
import resource
import shutil
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from pensive_core import Document, Pensive, PensiveConfig

from . import haystack
from .needles import DEPTHS, KINDS, Needle, make_needles, norm, placements

SIZES = {"100k": 100_000, "1M": 1_000_000, "10M": 10_000_000}
_BOUNDARY = re.compile(r"[.!?][\"')\]]?\s+")


def plant(docs: list[haystack.HayDoc], needles: list[Needle]) -> list[Document]:
    """The haystack as Documents, every needle sentence inserted at its depth (by token offset),
    at the next sentence boundary."""
    starts: list[int] = []
    total = 0
    for d in docs:
        starts.append(total)
        total += d.tokens
    inserts: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for depth, sentence in placements(needles):
        target = min(total - 1, max(0, int(depth / 100 * total)))
        i = max(0, bisect.bisect_right(starts, target) - 1)
        d = docs[i]
        frac = (target - starts[i]) / max(1, d.tokens)
        pos = int(frac * len(d.text))
        if depth <= 0:
            pos = 0
        elif depth >= 100:
            pos = len(d.text)
        else:
            m = _BOUNDARY.search(d.text, pos)
            pos = m.end() if m else len(d.text)
        inserts[i].append((pos, sentence))
    out: list[Document] = []
    for i, d in enumerate(docs):
        # cut the text at each insertion point (a boundary, after its whitespace) and join
        # the pieces with the sentences between them; two needles may share a point
        parts: list[str] = []
        last = 0
        for pos, sentence in sorted(inserts.get(i, []), key=lambda x: x[0]):
            parts.append(d.text[last:pos].rstrip())
            parts.append(sentence)
            last = pos
        parts.append(d.text[last:].lstrip())
        text = " ".join(x for x in parts if x)
        out.append(Document(id=d.id, text=text, metadata={"source": d.source}))
    return out


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(
    data: Path,
    label: str,
    store: Path,
    config: dict[str, Any] | None,
    per_cell: int,
    needle_seed: int = 7,
) -> dict[str, Any]:
    """Plant, ingest and record ingest figures; the needles are saved in the store folder."""
    t0 = time.perf_counter()
    docs = haystack.build(data, SIZES[label])
    needles = make_needles(per_cell, needle_seed)
    planted = plant(docs, needles)
    t_build = time.perf_counter() - t0
    sources: dict[str, int] = defaultdict(int)
    for d in docs:
        sources[d.source] += d.tokens
    tokens = sum(d.tokens for d in docs)
    repeated = haystack.repeated_paragraphs(docs)
    if store.exists():
        shutil.rmtree(store)
    rss0 = _rss_peak_mb()
    p = Pensive(store, config=config)
    stages: dict[str, float] = defaultdict(float)
    embedded = 0
    t1 = time.perf_counter()
    step = 500
    for i in range(0, len(planted), step):
        rep = p.ingest(planted[i : i + step])
        embedded += rep.chunks_embedded
        for k, v in rep.stages.items():
            stages[k] += v
        done = min(len(planted), i + step)
        el = time.perf_counter() - t1
        print(
            f"  [{label}] {done}/{len(planted)} docs, {embedded} chunks, {el:.0f}s "
            f"({embedded / max(el, 1e-9):.1f} chunks/s)",
            flush=True,
        )
    ingest_s = time.perf_counter() - t1
    stats = p.stats()
    p.close()
    (store / "niah_needles.json").write_text(
        json.dumps([asdict(n) for n in needles], indent=1) + "\n"
    )
    return {
        "haystack": {
            "tokens": tokens,
            "tokenizer": "cl100k_base",
            "documents": len(docs),
            "tokens_by_source": dict(sorted(sources.items(), key=lambda kv: -kv[1])),
            "repeated_paragraphs": repeated,
            "needle_sentences": len(placements(needles)),
            "needle_seed": needle_seed,
            "build_s": round(t_build, 1),
        },
        "ingest": {
            "seconds": round(ingest_s, 1),
            "tokens_per_s": round(tokens / ingest_s, 1),
            "chunks": embedded,
            "chunks_per_s": round(embedded / ingest_s, 2),
            "stages_s": {k: round(v, 2) for k, v in stages.items()},
            "stages_chunks_per_s": {
                k: (round(embedded / v, 1) if v > 0 else None) for k, v in stages.items()
            },
            "peak_rss_mb": round(_rss_peak_mb(), 1),
            "peak_rss_mb_before": round(rss0, 1),
            "store_bytes": _dir_bytes(store),
            "store_files": {
                f.name: f.stat().st_size
                for f in sorted(store.rglob("*"))
                if f.is_file() and f.stat().st_size > 1_000_000
            },
            "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))},
        },
    }


def _found(gold: Sequence[str], texts: Sequence[str]) -> list[bool]:
    normed = [norm(t) for t in texts]
    return [any(norm(g) in t for t in normed) for g in gold]


def score(needles: list[Needle], ranked: list[list[str]]) -> dict[str, Any]:
    """recall@1: the first hit holds a gold sentence; recall@5: every gold sentence (both, for
    multi-hop) is in the first five hits."""
    per: list[dict[str, Any]] = []
    for nd, texts in zip(needles, ranked):
        at1 = any(_found(nd.gold, texts[:1]))
        at5 = all(_found(nd.gold, texts[:5]))
        per.append({"id": nd.id, "kind": nd.kind, "depth": nd.depth, "r1": at1, "r5": at5})

    def agg(rows: list[dict[str, Any]]) -> dict[str, float]:
        return {
            "n": len(rows),
            "recall@1": round(sum(r["r1"] for r in rows) / max(1, len(rows)), 4),
            "recall@5": round(sum(r["r5"] for r in rows) / max(1, len(rows)), 4),
        }

    return {
        "overall": agg(per),
        "by_depth": {str(d): agg([r for r in per if r["depth"] == d]) for d in DEPTHS},
        "by_kind": {k: agg([r for r in per if r["kind"] == k]) for k in KINDS},
        "misses@5": [r["id"] for r in per if not r["r5"]],
        "misses@1": [r["id"] for r in per if not r["r1"]],
    }


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(xs), q)), 2) if xs else float("nan")


def _present(p: Pensive, needles: list[Needle]) -> tuple[list[Needle], int]:
    """The needles whose every planted sentence the store holds, and the tokens it holds: for
    a store whose build was stopped part way (it commits every 500 documents)."""
    db = p.components.archive.db
    rows = db.execute(
        "SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.indexed = 1"
    )
    tokens = sum(haystack.count_tokens(r[0]) for r in rows)

    def held(sentence: str) -> bool:
        q = "SELECT 1 FROM chunks WHERE instr(text, ?) > 0 LIMIT 1"
        return db.execute(q, (sentence,)).fetchone() is not None

    return [n for n in needles if all(held(x) for x in [*n.gold, *n.support])], tokens


def _todays_graph(config: dict[str, Any] | None) -> dict[str, Any]:
    """``config`` over today's graph defaults: a store keeps the settings it was built with,
    and the graph's are query-time settings, so a store built before a default changed is
    asked with the new one (as a store built today would be)."""
    out: dict[str, Any] = {"graph": PensiveConfig().graph.model_dump()}
    for section, values in (config or {}).items():
        if section == "graph" and isinstance(values, dict):
            out["graph"] = {**out["graph"], **values}
        else:
            out[section] = values
    return out


def query(
    store: Path,
    config: dict[str, Any] | None,
    k: int = 5,
    read_only: bool = False,
    only_present: bool = False,
) -> dict[str, Any]:
    """Open the store cold, ask each needle question once; latency includes query embedding.

    ``read_only`` opens it as a reader (beside a writer still building it); ``only_present``
    asks only the needles the store holds whole (a build stopped part way)."""
    saved = store / "niah_needles.json"
    if saved.exists():
        needles = [Needle(**n) for n in json.loads(saved.read_text())]
    else:  # a build that has not finished has not saved them yet: they are seeded
        needles = make_needles(2, 7)
    if not read_only:  # answers cached by an earlier run would be L1 hits: start empty
        for f in store.glob("l1.sqlite*"):
            f.unlink()
    gc.collect()
    t0 = time.perf_counter()
    p = Pensive(store, config=_todays_graph(config), read_only=read_only)
    open_s = time.perf_counter() - t0
    partial: dict[str, Any] = {}
    if only_present:
        asked, tokens = _present(p, needles)
        partial = {
            "partial": {"needles_present": len(asked), "of": len(needles), "tokens_held": tokens}
        }
        needles = asked
    t1 = time.perf_counter()
    first = p.query("what is this collection about?", k=k)
    first_s = time.perf_counter() - t1
    del first
    ranked: list[list[str]] = []
    wall: list[float] = []
    engine: list[float] = []
    tiers: dict[str, int] = defaultdict(int)
    for nd in needles:
        t = time.perf_counter()
        res = p.query(nd.question, k=k)
        wall.append((time.perf_counter() - t) * 1000)
        engine.append(res.latency_ms)
        tiers[res.tier] += 1
        ranked.append([h.text for h in res.hits])
    # the same questions again: the L1 hot cache (and the query-embedding cache) answer
    repeat: list[float] = []
    for nd in needles:
        t = time.perf_counter()
        p.query(nd.question, k=k)
        repeat.append((time.perf_counter() - t) * 1000)
    chunks = p.stats().get("chunks", 0)
    p.close()
    out = score(needles, ranked)
    out.update(
        {
            "k": k,
            "questions": len(needles),
            "open_s": round(open_s, 3),
            "first_query_s": round(first_s, 3),
            "latency_ms": {
                "p50": _pct(wall, 50),
                "p95": _pct(wall, 95),
                "mean": round(statistics.fmean(wall), 2),
            },
            "engine_latency_ms": {"p50": _pct(engine, 50), "p95": _pct(engine, 95)},
            "repeat_latency_ms": {"p50": _pct(repeat, 50), "p95": _pct(repeat, 95)},
            "tiers": dict(tiers),
            "chunks": chunks,
            "peak_rss_mb": round(_rss_peak_mb(), 1),
            **partial,
        }
    )
    return out


def peers(store: Path, k: int = 5) -> dict[str, Any]:
    """LangChain EnsembleRetriever and LlamaIndex QueryFusionRetriever over the same passages
    and the same vectors, with the same query embedder, in this process."""
    from ..peers import build_langchain_ensemble, build_llamaindex_fusion
    from ..scifact_data import export_chunks

    needles = [Needle(**n) for n in json.loads((store / "niah_needles.json").read_text())]
    p = Pensive(store)
    ids, texts, vecs = export_chunks(p)
    text_of = dict(zip(ids, texts))
    embedder = p.embedder
    embed: Callable[[str], np.ndarray] = embedder.embed_query
    out: dict[str, Any] = {}
    for name, builder in (
        ("langchain-ensemble", build_langchain_ensemble),
        ("llamaindex-fusion", build_llamaindex_fusion),
    ):
        t0 = time.perf_counter()
        r = builder(ids, texts, vecs, embed)
        build_s = time.perf_counter() - t0
        ranked: list[list[str]] = []
        wall: list[float] = []
        for nd in needles:
            t = time.perf_counter()
            got = r.search(nd.question, k)
            wall.append((time.perf_counter() - t) * 1000)
            ranked.append([text_of[c] for c in got])
        s = score(needles, ranked)
        s.update(
            {
                "build_s": round(build_s, 1),
                "latency_ms": {"p50": _pct(wall, 50), "p95": _pct(wall, 95)},
            }
        )
        out[name] = s
        del r
        gc.collect()
    p.close()
    return out


def cpu_info() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" x{os.cpu_count()}"
    except OSError:
        pass
    return f"{os.cpu_count()} cpus"
