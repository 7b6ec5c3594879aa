"""Growth curve: how query latency and memory grow with corpus size (10k, 100k, 1M).

At each size N, in one process, one component at a time:

* dense: Pensive's ``FaissBackend`` with the default ``[backend.faiss]`` config (``index =
  "auto"``: exact inner product up to ``hnsw_threshold`` vectors, HNSW beyond), fed by
  ``upsert`` in batches and persisted to disk, exactly as ``benchmarks.backends`` part 2 does.
  Vectors are ``benchmarks.backends.synthetic``: 384-d unit vectors from a clustered Gaussian
  mixture with a power-law spectrum (like MiniLM sentence embeddings; real vectors do not exist
  at 1M); the queries are 200 held-out points of the mixture (never stored) plus noise.
  Measured: build (upsert) and persist time, search latency p50/p95 at k = ``fusion.depth``
  (100), recall@10 and @100 against exact search (``faiss.IndexFlatIP`` over the same data),
  and the index type the backend chose.
* sparse: Pensive's ``BM25Index`` (bm25s underneath) with the default ``[bm25]`` config, every
  passage ``add``-ed then one ``commit`` (one ingest). Passages are ~150 words of word-level
  Markov text fitted on the real documents of ``--data`` (``benchmarks.niah.haystack``); a
  smaller corpus is the head of a larger one. Queries: 200 short questions of random words
  from random passages. Measured: build time (add + commit, which persists) and search latency
  p50/p95 for the top 100. A size whose build, extrapolated linearly from the largest size
  built, would take longer than ``--bm25-budget-s`` is skipped and said so.
* memory: resident memory added by building each index (psutil RSS after the build minus
  before, after ``malloc_trim``) and the size of its persisted files.
* fused: one retrieval as ``Pensive._retrieve`` runs it, without embedding: dense search +
  BM25 search (both at depth 100) + ``fusion.fuse`` with the default ``[fusion]`` config.

    python -m benchmarks.growth [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.backends import (
    DIM,
    SCALE_BATCH,
    folder_bytes,
    pct,
    recall_at_k,
    synthetic,
    time_queries,
    vector_profile,
)
from benchmarks.common import (
    ROOT,
    base_parser,
    environment,
    load_average,
    source_state,
    write_results,
)

NAME = "growth"
STARTED = time.perf_counter()  # wall time is counted from the import of this module
WARMUP = 5
PASSAGE_WORDS = 150
QUESTION_STEMS = ("what about", "how does", "why is", "which", "tell me about", "")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def rss() -> int:
    """Resident set size of this process, after giving freed heap pages back to the system (so
    a before/after difference counts what is held, not what malloc kept around)."""
    import psutil

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return int(psutil.Process().memory_info().rss)


@contextlib.contextmanager
def faiss_threads(n: int | None) -> Iterator[None]:
    """FAISS's OpenMP threads set to ``n`` inside the block (None: leave the default)."""
    import faiss

    before = faiss.omp_get_max_threads()
    if n:
        faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _r(x: float, n: int = 4) -> float:
    return round(float(x), n)


def _mb(x: float | None) -> float | None:
    return None if x is None else round(x / 2**20, 1)


def questions(passages: list[str], n: int, seed: int) -> list[str]:
    """``n`` short questions, each 3 to 6 random words (4+ letters) of one random passage."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        words = sorted(set(re.findall(r"[A-Za-z]{4,}", rng.choice(passages))))
        if len(words) < 3:
            continue
        pick = rng.sample(words, min(len(words), rng.randint(3, 6)))
        stem = rng.choice(QUESTION_STEMS)
        out.append((f"{stem} " if stem else "") + " ".join(w.lower() for w in pick) + "?")
    return out


class Corpus:
    """Markov passages, generated once and extended on demand (smaller corpora are heads)."""

    def __init__(self, data: Path, seed: int) -> None:
        from benchmarks.niah.haystack import MarkovFiller, real_documents

        t = time.perf_counter()
        docs = real_documents(data)
        self.filler = MarkovFiller(docs, seed=seed)
        self.fit_s = time.perf_counter() - t
        self.real_documents = len(docs)
        self.passages: list[str] = []
        self.gen_s = 0.0  # seconds spent generating all passages so far

    def head(self, n: int) -> list[str]:
        t = time.perf_counter()
        while len(self.passages) < n:
            self.passages.append(self.filler.paragraph(PASSAGE_WORDS))
        self.gen_s += time.perf_counter() - t
        return self.passages[:n]


# --------------------------------------------------------------------------------------------
# parts
# --------------------------------------------------------------------------------------------


def build_dense(n: int, ids: list[str], args: Any, work: Path) -> tuple[Any, dict[str, Any]]:
    """The FAISS backend over ``n`` synthetic vectors, measured; returns it and its row."""
    import faiss

    from pensive_core.backends.faiss import FaissBackend
    from pensive_core.config import FaissConfig, FusionConfig

    depth = FusionConfig().depth
    t = time.perf_counter()
    data, queries, desc = synthetic(n, n_queries=args.queries, seed=args.seed)
    gen_s = time.perf_counter() - t
    folder = work / f"faiss-{n}"
    shutil.rmtree(folder, ignore_errors=True)
    cfg = FaissConfig()
    batch = min(SCALE_BATCH, n)
    rss0 = rss()
    t = time.perf_counter()
    b = FaissBackend(folder, DIM, cfg)
    for s in range(0, n, batch):
        b.upsert(ids[s : s + batch], data[s : s + batch])
    build_s = time.perf_counter() - t
    rss_added = rss() - rss0
    t = time.perf_counter()
    b.persist()
    persist_s = time.perf_counter() - t
    print(f"  dense {n:,}: {b.kind} built in {build_s:.1f} s (+{persist_s:.1f} s persist)")
    got, ms = time_queries(b, queries, depth, warmup=WARMUP)
    with faiss_threads(1):
        _, ms1 = time_queries(b, queries, depth, warmup=WARMUP)

    exact = faiss.IndexFlatIP(DIM)
    exact.add(data)
    _, truth_rows = exact.search(queries, depth)
    del exact
    truth = [[ids[i] for i in row if i >= 0] for row in truth_rows.tolist()]
    profile = vector_profile(data, queries)
    del data
    gc.collect()
    params: dict[str, Any] = {}
    if b.kind == "hnsw":
        params = {"M": cfg.hnsw_m, "ef_construction": cfg.ef_construction}
        params["ef_search"] = cfg.ef_search
    row = {
        "index": b.kind,
        "params": params,
        "config": {"index": cfg.index, "hnsw_threshold": cfg.hnsw_threshold},
        "vectors": desc,
        "profile": profile,
        "generate_s": _r(gen_s, 1),
        "upsert_batch": batch,
        "build_s": _r(build_s, 2),
        "persist_s": _r(persist_s, 2),
        "vectors_per_s": round(n / build_s),
        "k": depth,
        "latency_ms": pct(ms),
        "latency_ms_1_thread": pct(ms1),
        "recall_at_10_vs_exact": _r(recall_at_k(got, truth, 10)),
        "recall_at_100_vs_exact": _r(recall_at_k(got, truth, depth)),
        "rss_added_bytes": rss_added,
        "disk_bytes": folder_bytes(folder),
        "index_bytes": b.memory_bytes(),
    }
    print(
        f"  dense {n:,}: p50 {row['latency_ms']['p50']:.3f} ms, recall@10 "
        f"{row['recall_at_10_vs_exact']:.4f}",
        flush=True,
    )
    return (b, queries), row


def build_sparse(
    n: int, ids: list[str], corpus: Corpus, args: Any, work: Path
) -> tuple[Any, dict[str, Any]]:
    """The BM25 index over ``n`` Markov passages, measured; returns it, its questions and row."""
    from pensive_core.config import BM25Config, FusionConfig
    from pensive_core.sparse.bm25 import BM25Index

    depth = FusionConfig().depth
    gen0 = corpus.gen_s
    passages = corpus.head(n)
    gen_s = corpus.gen_s - gen0
    qs = questions(passages, args.queries, args.seed + n)
    words = sum(len(p.split()) for p in passages[:2000]) / min(n, 2000)
    folder = work / f"bm25-{n}"
    shutil.rmtree(folder, ignore_errors=True)
    rss0 = rss()
    t = time.perf_counter()
    idx = BM25Index(folder, BM25Config())
    for cid, text in zip(ids, passages):
        idx.add(cid, text)
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    idx.commit()
    commit_s = time.perf_counter() - t
    rss_added = rss() - rss0
    del passages
    print(f"  bm25 {n:,}: built in {add_s + commit_s:.1f} s ({add_s:.1f} s tokenising)")
    for q in qs[:WARMUP]:
        idx.search(q, depth)
    ms = []
    for q in qs:
        t = time.perf_counter()
        idx.search(q, depth)
        ms.append((time.perf_counter() - t) * 1000)
    row = {
        "passages": n,
        "mean_words": round(words, 1),
        "vocabulary": len(idx.vocab),
        "generate_s": _r(gen_s, 1),
        "add_s": _r(add_s, 2),
        "commit_s": _r(commit_s, 2),
        "build_s": _r(add_s + commit_s, 2),
        "passages_per_s": round(n / (add_s + commit_s)),
        "k": depth,
        "question_examples": qs[:3],
        "latency_ms": pct(ms),
        "rss_added_bytes": rss_added,
        "disk_bytes": folder_bytes(folder),
    }
    print(f"  bm25 {n:,}: p50 {row['latency_ms']['p50']:.3f} ms", flush=True)
    return (idx, qs), row


def time_fused(dense: Any, sparse: Any) -> dict[str, Any]:
    """Dense search + BM25 search + fusion per question, as ``Pensive._retrieve`` does it."""
    from pensive_core.config import FusionConfig
    from pensive_core.fusion import fuse

    cfg = FusionConfig()
    weights = {name: cfg.weights.get(name, 1.0) for name in ("dense", "bm25")}
    backend, qvecs = dense
    idx, qs = sparse

    def one(i: int) -> tuple[float, float, int]:
        t = time.perf_counter()
        lists = {
            "dense": backend.search(qvecs[i], cfg.depth),
            "bm25": idx.search(qs[i], cfg.depth),
        }
        t_fuse = time.perf_counter()
        fused = fuse(cfg.method, lists, weights, cfg.k)
        end = time.perf_counter()
        return (end - t) * 1000, (end - t_fuse) * 1000, len(fused)

    def run() -> tuple[list[float], list[float], list[int]]:
        for i in range(WARMUP):
            one(len(qs) - 1 - i)
        total, fusion, sizes = [], [], []
        for i in range(len(qs)):
            a, f, m = one(i)
            total.append(a)
            fusion.append(f)
            sizes.append(m)
        return total, fusion, sizes

    total, fusion, sizes = run()
    with faiss_threads(1):
        total1, _, _ = run()
    return {
        "method": cfg.method,
        "weights": weights,
        "depth": cfg.depth,
        "latency_ms": pct(total),
        "latency_ms_1_thread": pct(total1),
        "fusion_only_ms": pct(fusion),
        "mean_fused_candidates": round(float(np.mean(sizes)), 1),
    }


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        default="10000,100000,1000000",
        help="comma-separated corpus sizes (default 10000,100000,1000000)",
    )
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--bm25-budget-s",
        type=float,
        default=300.0,
        help="skip BM25 at a size whose build, extrapolated from the largest size built, "
        "would take longer than this (default 300)",
    )
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in str(args.sizes).split(",") if s.strip())

    import faiss

    if args.store is not None:
        work = args.store
        work.mkdir(parents=True, exist_ok=True)
    else:
        base = ROOT / ".bench" / "growth"
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    command = "python -m benchmarks.growth " + " ".join(
        sys.argv[1:] if argv is None else list(argv)
    )
    env = environment()
    env["faiss_omp_threads"] = faiss.omp_get_max_threads()
    payload: dict[str, Any] = {
        "benchmark": NAME,
        "environment": env,
        "source": source_state(),
        "command": command.strip(),
        "sizes": sizes,
        "queries": args.queries,
        "bm25_budget_s": args.bm25_budget_s,
        "markov": None,
        "rows": [],
        "seconds": None,
    }
    corpus: Corpus | None = None
    try:
        for n in sizes:
            t0 = time.perf_counter()
            load0 = load_average()
            print(f"N = {n:,}", flush=True)
            ids = [f"c{i}" for i in range(n)]
            row: dict[str, Any] = {"n": n}
            dense, row["dense"] = build_dense(n, ids, args, work)

            built = [r for r in payload["rows"] if r.get("sparse")]
            row["sparse"] = row["sparse_skipped"] = None
            sparse = None
            if built:
                last = built[-1]["sparse"]
                est = last["build_s"] * n / last["passages"]
                est_gen = last["generate_s"] * n / last["passages"]
            else:
                est = est_gen = 0.0
            if est > args.bm25_budget_s:
                row["sparse_skipped"] = {
                    "estimated_build_s": round(est),
                    "estimated_generate_s": round(est_gen),
                    "extrapolated_from": built[-1]["n"],
                    "reason": f"estimated build {est:.0f} s > budget {args.bm25_budget_s:.0f} s",
                }
                print(f"  bm25 {n:,}: skipped, {row['sparse_skipped']['reason']}", flush=True)
            else:
                if corpus is None:
                    corpus = Corpus(args.data, args.seed)
                    payload["markov"] = {
                        "fit_s": _r(corpus.fit_s, 1),
                        "real_documents": corpus.real_documents,
                        "order": 2,
                        "passage_words": PASSAGE_WORDS,
                    }
                sparse, row["sparse"] = build_sparse(n, ids, corpus, args, work)
                row["fused"] = time_fused(dense, sparse)
                print(f"  fused {n:,}: p50 {row['fused']['latency_ms']['p50']:.3f} ms")
            row.setdefault("fused", None)
            del dense, sparse
            gc.collect()
            shutil.rmtree(work / f"faiss-{n}", ignore_errors=True)
            shutil.rmtree(work / f"bm25-{n}", ignore_errors=True)
            row["seconds"] = _r(time.perf_counter() - t0, 1)
            row["load_average_1min"] = {"start": load0, "end": load_average()}
            payload["rows"].append(row)
            payload["seconds"] = _r(time.perf_counter() - STARTED, 1)
            write_results(NAME, args.out, payload, render(payload))
            plot(payload, args.out / f"{NAME}.png")
    finally:
        if args.store is None:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------


def _lat(part: dict[str, Any] | None, key: str = "latency_ms") -> str:
    if not part or key not in part:
        return "-"
    d = part[key]
    return f"{d['p50']:.3f} / {d['p95']:.3f}"


def _mbs(part: dict[str, Any] | None, key: str) -> str:
    return "-" if not part else f"{part[key] / 2**20:,.1f}"


def _ratio(rows: list[dict[str, Any]], part: str, key: str = "latency_ms") -> float | None:
    have = [r for r in rows if r.get(part)]
    if len(have) < 2:
        return None
    return have[-1][part][key]["p50"] / have[0][part][key]["p50"]


def reading(r: dict[str, Any]) -> str:
    """One paragraph on how the cost grows, from the figures."""
    rows = r["rows"]
    if len(rows) < 2:
        return "Only one size was measured: no growth to read."
    out = []
    one = "latency_ms_1_thread"
    threads = r["environment"].get("faiss_omp_threads", "?")
    t1 = [(x["n"], x["dense"]["latency_ms"]["p50"], x["dense"][one]["p50"]) for x in rows]
    loads = [
        v
        for x in rows
        for v in (x.get("load_average_1min") or {}).values()
        if isinstance(v, int | float)
    ]
    load = f" (1-minute load average {min(loads)} to {max(loads)})" if loads else ""
    if sum(b < a for _, a, b in t1) > len(t1) / 2:
        key, how = one, "with one FAISS thread"
        out.append(
            f"The two cores were shared with other jobs{load}, so every latency here is "
            f"inflated, those with FAISS's default {threads} OpenMP threads most: dense p50 "
            + ", ".join(f"{a:.2f} ms at {n:,}" for n, a, _ in t1)
            + " with them against "
            + ", ".join(f"{b:.2f}" for _, _, b in t1)
            + " with one thread, measured right after (a single query gives the second "
            "thread little work, and on busy cores the threads wait for each other). The "
            "growth is therefore read on the one-thread figures."
        )
    else:
        key, how = "latency_ms", f"with FAISS's default {threads} threads"
    first, last = rows[0], rows[-1]
    out.append(
        f"Dense search p50 {how} goes "
        + " -> ".join(f"{x['dense'][key]['p50']:.2f} ms ({x['dense']['index']})" for x in rows)
        + f" from {first['n']:,} to {last['n']:,} vectors: "
        f"{_ratio(rows, 'dense', key):.2f}x for {last['n'] // first['n']:,}x the vectors."
    )
    flat = [x for x in rows if x["dense"]["index"] == "flat"]
    if len(flat) >= 2:
        fa, fb = flat[0], flat[-1]
        out.append(
            f"Exact search scores every vector: {fa['n']:,} -> {fb['n']:,} costs "
            f"{fb['dense'][key]['p50'] / fa['dense'][key]['p50']:.1f}x."
        )
    hnsw = [x for x in rows if x["dense"]["index"] == "hnsw"]
    if hnsw and flat:
        h, fl = hnsw[-1]["dense"], flat[-1]["dense"]
        out.append(
            f"Above `hnsw_threshold` ({h['config']['hnsw_threshold']:,}) the default config "
            f"builds HNSW: at {hnsw[-1]['n']:,} a query takes {h[key]['p50']:.2f} ms "
            f"({h[key]['p50'] / fl[key]['p50']:.2f}x the exact search at {flat[-1]['n']:,}), "
            f"with recall@10 {h['recall_at_10_vs_exact']:.3f}, for a build of "
            f"{h['build_s']:.0f} s ({h['vectors_per_s']:,} vectors/s, against "
            f"{fl['vectors_per_s']:,} for exact)."
        )
    sp = [x for x in rows if x.get("sparse")]
    if len(sp) >= 2:
        sa, sb = sp[0], sp[-1]
        grow = _ratio(rows, "sparse") or 0.0
        out.append(
            f"BM25 p50 grows {grow:.1f}x from {sa['n']:,} to {sb['n']:,} passages "
            f"({sb['n'] // sa['n']:,}x): a query costs a fixed part (tokenising it, one bm25s "
            "call per term, ranking) and a part that grows with the corpus (the terms' "
            "posting lists and one score per passage per term), and "
            + (
                "at these sizes the fixed part still dominates."
                if grow < math.sqrt(sb["n"] / sa["n"])
                else "at these sizes the growing part dominates."
            )
            + f" Its build runs at about {sb['sparse']['passages_per_s']:,} passages/s, "
            f"{sb['sparse']['add_s'] / sb['sparse']['build_s']:.0%} of it in `add` (tokenising and counting terms)."
        )
    fu = [x for x in rows if x.get("fused")]
    if len(fu) >= 2:
        fa, fb = fu[0]["fused"], fu[-1]["fused"]
        out.append(
            f"The fused query (dense + BM25 + fusion) {how} goes {fa[key]['p50']:.2f} -> "
            f"{fb[key]['p50']:.2f} ms from {fu[0]['n']:,} to {fu[-1]['n']:,} "
            f"({fb[key]['p50'] / fa[key]['p50']:.1f}x); fusion itself ({fb['depth']} + "
            f"{fb['depth']} candidates) stays near {fb['fusion_only_ms']['p50']:.2f} ms, so "
            "the fused cost follows the dense search."
        )
    m = [x for x in rows if x["dense"].get("disk_bytes")]
    if len(m) >= 2:
        ma, mb = m[0], m[-1]
        out.append(
            f"The FAISS files grow {mb['dense']['disk_bytes'] / ma['dense']['disk_bytes']:.0f}x "
            f"({_mbs(ma['dense'], 'disk_bytes')} -> {_mbs(mb['dense'], 'disk_bytes')} MB) and "
            f"the RSS the index adds {mb['dense']['rss_added_bytes'] / ma['dense']['rss_added_bytes']:.0f}x "
            "for the same growth: float32 vectors, plus the HNSW graph once it is one."
        )
    for x in rows:
        sk = x.get("sparse_skipped")
        if sk:
            out.append(
                f"BM25 was not built at {x['n']:,}: extrapolated linearly from "
                f"{sk['extrapolated_from']:,}, its build would take about "
                f"{sk['estimated_build_s']:,} s (plus about {sk['estimated_generate_s']:,} s "
                f"generating the passages), over the {r['bm25_budget_s']:.0f} s budget, so the "
                f"BM25 and fused figures stop at {sk['extrapolated_from']:,}."
            )
    return " ".join(out)


def render(r: dict[str, Any]) -> str:
    env = r["environment"]
    rows = r["rows"]
    src = r["source"]
    lines = [
        "# Growth: query latency and memory vs corpus size",
        "",
        f"Measured on {env['platform']}, {env['cpus']} CPUs (shared with other jobs), Python "
        f"{env['python']}, faiss {env.get('faiss', '?')} ({env.get('faiss_omp_threads', '?')} "
        f"OpenMP threads), bm25s {env.get('bm25s', '?')}, pensive {env['pensive']} at commit "
        f"`{(src.get('commit') or '?')[:12]}`"
        + (
            f" (pensive_core differed from it in: {', '.join(src['pensive_core_uncommitted'])})"
            if src.get("pensive_core_uncommitted")
            else ""
        )
        + f". Wall time {r['seconds']} s. Reproduce with:",
        "",
        f"    {r['command']}",
        "",
        "| N | index | dense p50 / p95 ms | recall@10 | BM25 p50 / p95 ms | fused p50 / p95 ms "
        "| RSS MB faiss / bm25 | disk MB faiss / bm25 | dense, 1 thread | fused, 1 thread |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    one = "latency_ms_1_thread"
    for x in rows:
        d, s, f = x["dense"], x.get("sparse"), x.get("fused")
        lines.append(
            f"| {x['n']:,} | {d['index']} | {_lat(d)} | {d['recall_at_10_vs_exact']:.4f} | "
            f"{_lat(s) if s else 'not built'} | {_lat(f)} | "
            f"{_mbs(d, 'rss_added_bytes')} / {_mbs(s, 'rss_added_bytes')} | "
            f"{_mbs(d, 'disk_bytes')} / {_mbs(s, 'disk_bytes')} | {_lat(d, one)} | "
            f"{_lat(f, one)} |"
        )
    lines += [
        "",
        "Latencies in ms at depth 100; dense and fused with FAISS's default OpenMP threads "
        f"({env.get('faiss_omp_threads', '?')}, what the engine runs with), and again with "
        "`faiss.omp_set_num_threads(1)` (last two columns). RSS and disk in MB.",
    ]
    lines += ["", reading(r), "", "![growth](growth.png)", ""]
    lines += [
        "## What was measured",
        "",
        "Every figure is one process, one size after the other, one query at a time (200 "
        f"questions, {WARMUP} unmeasured warm-up queries first). Latencies are ms p50 / p95 at "
        "depth 100 (`fusion.depth`, what the engine asks each retriever for).",
        "",
        "* **Dense**: `FaissBackend` with the default `[backend.faiss]` config (`index = "
        '"auto"`: exact inner product up to `hnsw_threshold` vectors, HNSW above), filled by '
        "`upsert` in batches of up to 100,000 (as `benchmarks.backends` does; crossing the "
        "threshold rebuilds the index as HNSW), then `persist()`. Vectors: **synthetic**, "
        "`benchmarks.backends.synthetic` (384-d unit vectors from a Gaussian mixture with "
        "random centres, per-cluster spread and a power-law spectrum; `benchmarks/results/"
        "backends.md` compares its profile with real MiniLM vectors of SciFact). No real "
        "vectors exist at 1M, so none were used at any size, to keep the sizes comparable. "
        "Queries: held-out points of the mixture (never stored) plus noise. Recall is against "
        "`faiss.IndexFlatIP` over the same vectors.",
        "* **BM25**: `BM25Index` with the default `[bm25]` config; every passage `add`-ed, "
        "then one `commit()` (one segment, persisted): the build time is what one ingest of "
        "the corpus pays in BM25. Passages: **synthetic English**, an order-2 word-level Markov "
        "chain (`benchmarks.niah.haystack.MarkovFiller`) fitted on the real documents of the "
        "data folder, ~150 words each; a smaller corpus is the head of a larger one. Questions: "
        "3-6 random words (4+ letters) of a random passage, after a question stem, e.g. "
        + "; ".join(
            f"`{q}`"
            for q in next((x["sparse"] for x in rows if x.get("sparse")), {}).get(
                "question_examples", []
            )[:2]
        )
        + ".",
        "* **Fused**: per question, dense search + BM25 search + `fusion.fuse` with the "
        "default `[fusion]` config, as `Pensive._retrieve` runs them (no embedding, filter, "
        "router or graph). Vector *i* and passage *i* share an id, but are unrelated, so the "
        "two lists barely overlap (close to the 200 candidates fusion can see at worst).",
        "* **Memory**: RSS is the process's resident memory after building an index minus "
        "before it (psutil, after `malloc_trim`; the source vectors and passages were already "
        "resident and are not counted). Disk is the index's folder after persisting.",
        "",
        "## Details",
        "",
        "| N | index (params) | gen s | build s | persist s | vectors/s | index MB | recall@100 "
        "| vector profile: eff. dim, top-1 / top-10 cos |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in rows:
        d = x["dense"]
        p = d["profile"]
        params = ", ".join(f"{k} {v}" for k, v in d["params"].items())
        lines.append(
            f"| {x['n']:,} | {d['index']}{f' ({params})' if params else ''} | "
            f"{d['generate_s']} | {d['build_s']} | {d['persist_s']} | {d['vectors_per_s']:,} | "
            f"{_mbs(d, 'index_bytes')} | {d['recall_at_100_vs_exact']:.4f} | "
            f"{p['effective_dim']}, {p['query_top1_cosine']} / {p['query_top10_cosine']} |"
        )
    lines += [
        "",
        "| N | gen s | add s (tokenise) | commit s (index + persist) | passages/s | vocabulary "
        "| mean words | fusion alone p50 / p95 ms | fused candidates |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in rows:
        s, f = x.get("sparse"), x.get("fused")
        if not s:
            sk = x.get("sparse_skipped") or {}
            lines.append(
                f"| {x['n']:,} | not built: {sk.get('reason', '?')} (extrapolated from "
                f"{sk.get('extrapolated_from', 0):,}) | | | | | | | |"
            )
            continue
        fo = f["fusion_only_ms"] if f else None
        lines.append(
            f"| {x['n']:,} | {s['generate_s']} | {s['add_s']} | {s['commit_s']} | "
            f"{s['passages_per_s']:,} | {s['vocabulary']:,} | {s['mean_words']} | "
            + (f"{fo['p50']:.3f} / {fo['p95']:.3f}" if fo else "-")
            + f" | {f['mean_fused_candidates'] if f else '-'} |"
        )
    lines += [
        "",
        "Wall time and 1-minute load average (start -> end) per size: "
        + "; ".join(
            f"{x['n']:,}: {x['seconds']} s, {x['load_average_1min']['start']} -> "
            f"{x['load_average_1min']['end']}"
            for x in rows
        )
        + ". The benchmark accounts for about 1 (2 while FAISS builds or searches exactly on "
        "both cores); above that, other jobs competed for the cores.",
        "",
    ]
    return "\n".join(lines)


def plot(r: dict[str, Any], path: Path) -> None:
    """Latency p50 per component and memory per index, against N (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = r["rows"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    threads = r["environment"].get("faiss_omp_threads", "?")
    for part, key, label, style in (
        ("dense", "latency_ms", f"dense (FAISS, {threads} threads)", "o-C0"),
        ("dense", "latency_ms_1_thread", "dense (FAISS, 1 thread)", "o:C0"),
        ("sparse", "latency_ms", "BM25", "s-C2"),
        ("fused", "latency_ms", f"dense + BM25 + fusion ({threads} threads)", "^-C3"),
        ("fused", "latency_ms_1_thread", "dense + BM25 + fusion (1 thread)", "^:C3"),
    ):
        pts = [(x["n"], x[part][key]["p50"]) for x in rows if x.get(part)]
        if pts:
            ax1.plot(*zip(*pts), style, label=label)
    for x in rows:
        ax1.annotate(
            x["dense"]["index"],
            (x["n"], x["dense"]["latency_ms"]["p50"]),
            textcoords="offset points",
            xytext=(4, -12),
            fontsize=8,
        )
    ax1.set(xscale="log", yscale="log", xlabel="passages / vectors", ylabel="latency p50 (ms)")
    ax1.set_title("query latency p50, depth 100")
    for part, key, label, style in (
        ("dense", "rss_added_bytes", "FAISS RSS added", "o-C0"),
        ("dense", "disk_bytes", "FAISS on disk", "o--C0"),
        ("sparse", "rss_added_bytes", "BM25 RSS added", "s-C2"),
        ("sparse", "disk_bytes", "BM25 on disk", "s--C2"),
    ):
        pts = [(x["n"], max(x[part][key], 1) / 2**20) for x in rows if x.get(part)]
        if pts:
            ax2.plot(*zip(*pts), style, label=label)
    ax2.set(xscale="log", yscale="log", xlabel="passages / vectors", ylabel="MB")
    ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax1.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.set_title("index memory")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Pensive retrieval cost vs corpus size")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
