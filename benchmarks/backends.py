"""Local vector backends side by side: ingest, latency, recall against exact search.

Part 1, SciFact (real MiniLM vectors): the passages of a built SciFact store and the train
questions, embedded once, are handed to FAISS exact (``flat``), FAISS HNSW, Chroma embedded,
Chroma behind a real ``chroma run`` server on 127.0.0.1 and the numpy ``memory`` backend, all
in one process through the ``VectorBackend`` protocol. Measured per backend:

* ingest: ``upsert`` of every passage vector with its metadata
  (``filters.backend_metadata``), in batches of 256, then ``persist()``: the backend's share of
  an ingest only (embedding is the same for every backend and is excluded);
* query latency for k = 10 (p50/p95 over all train questions, after a warm-up), without a
  filter, with one fixed filter (``shard $in`` 10 of 100 values, about 10% of documents; ``shard``
  is a benchmark field derived from the document id), with a new filter of that kind for every
  question, and with a new ``doc_id $in`` list of 10% of the documents per question (on the
  first ``--doc-in-queries`` questions, all by default);
* recall@10 of the approximate backends against FAISS exact, the top-10 overlap matrix of all
  backends, and document-level nDCG@10 of the 10 passages each returns. The two exact backends
  must agree (mean overlap >= 0.999), or the run exits non-zero after writing its results.

Part 2, scale (synthetic clustered unit vectors, 384-d, in memory, ``FaissBackend`` with
``folder=None``): FAISS exact, HNSW and IVF-PQ at each ``--scale`` size: build time, index
bytes (``memory_bytes()``) and process RSS growth, query latency p50/p95 (k = 10) over
perturbed held-out points, recall@10 against exact.

    python -m benchmarks.backends --base-store /tmp/bench-scifact-store [--scale 100000,1000000]
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.metadata
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import base_parser, doc_ranking, environment, load_average, write_results

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # no phoning home from Chroma

K = 10
BATCH = 256  # SciFact upsert batch
SCALE_BATCH = 100_000  # synthetic upsert batch (IVF-PQ trains on the first one)
DIM = 384
WARMUP = 5
EXACT_AGREEMENT = 0.999

# --------------------------------------------------------------------------------------------
# helpers (unit-tested in tests/unit/test_bench_backends.py)
# --------------------------------------------------------------------------------------------


def pct(values_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean of latencies in milliseconds."""
    if not len(values_ms):
        return {"count": 0}
    arr = np.asarray(values_ms, dtype=float)
    p50, p95 = np.percentile(arr, [50, 95])
    return {
        "count": len(arr),
        "p50": round(float(p50), 4),
        "p95": round(float(p95), 4),
        "mean": round(float(arr.mean()), 4),
    }


def recall_at_k(approx: Sequence[Sequence[str]], exact: Sequence[Sequence[str]], k: int) -> float:
    """Mean share of each exact top-k found in the approximate top-k."""
    if not len(exact):
        return float("nan")
    total = 0.0
    for a, e in zip(approx, exact, strict=True):
        truth = set(e[:k])
        total += len(truth & set(a[:k])) / len(truth) if truth else 1.0
    return total / len(exact)


def overlap(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]], k: int) -> float:
    """Mean ``|A ∩ B| / k`` of two lists of top-k results (symmetric)."""
    if not len(a):
        return float("nan")
    return sum(len(set(x[:k]) & set(y[:k])) / k for x, y in zip(a, b, strict=True)) / len(a)


def overlap_matrix(results: dict[str, list[list[str]]], k: int) -> dict[str, dict[str, float]]:
    """Pairwise :func:`overlap` of every backend's results (rounded to 4 places)."""
    names = list(results)
    return {a: {b: round(overlap(results[a], results[b], k), 4) for b in names} for a in names}


def short_results(results: Sequence[Sequence[str]], k: int) -> int:
    """How many result lists hold fewer than ``k`` ids."""
    return sum(len(r) < k for r in results)


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def synthetic(
    n: int,
    n_queries: int = 200,
    dim: int = DIM,
    centres: int | None = None,
    seed: int = 7,
    chunk: int = 65_536,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Clustered unit vectors like sentence embeddings, and queries near them.

    A Gaussian mixture: ``centres`` random centres (default ``min(2000, n // 20)``), each point
    its centre plus noise of a per-cluster spread; centres and noise share a power-law
    spectrum (variance of the i-th of ``dim`` random orthogonal directions ~ i^-0.75, about
    85 effective dimensions), because real embeddings fill far fewer directions than they
    have. Queries are ``n_queries`` further points of the mixture (held out: not in the data)
    perturbed by a little more noise. Built in chunks into one float32 array (one copy).

    Returns:
        ``(data (n, dim), queries (n_queries, dim), description)``, all rows of unit norm.
    """
    rng = np.random.default_rng(seed)
    n_centres = centres or max(1, min(2000, n // 20))
    basis, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    scale = (np.arange(1, dim + 1) ** -0.75).astype(np.float64)
    scale = np.sqrt(scale / scale.sum())  # E||z * scale||^2 = 1
    mix = (scale[:, None] * basis.T).astype(np.float32)  # z @ mix: spectrum-shaped, unit power

    def shaped(m: int) -> np.ndarray:
        return rng.standard_normal((m, dim), dtype=np.float32) @ mix

    cents = _unit(shaped(n_centres))
    spread = rng.uniform(0.55, 1.1, n_centres).astype(np.float32)

    def draw(out: np.ndarray) -> None:
        for s in range(0, len(out), chunk):
            m = min(chunk, len(out) - s)
            who = rng.integers(0, n_centres, m)
            block = cents[who] + spread[who, None] * shaped(m)
            out[s : s + m] = _unit(block)

    data = np.empty((n, dim), dtype=np.float32)
    draw(data)
    queries = np.empty((n_queries, dim), dtype=np.float32)
    draw(queries)
    queries[:] = _unit(queries + 0.45 * shaped(n_queries))
    desc = {
        "n": n,
        "dim": dim,
        "centres": n_centres,
        "spread": [0.55, 1.1],
        "spectrum": "i^-0.75 over random orthogonal directions",
        "queries": n_queries,
        "query_noise": 0.45,
        "seed": seed,
    }
    return data, queries, desc


def vector_profile(data: np.ndarray, queries: np.ndarray, k: int = K) -> dict[str, float]:
    """How a vector set looks to a nearest-neighbour search: effective dimension
    (participation ratio of the covariance spectrum), mean cosine of random pairs, and the
    queries' mean exact top-1 and k-th cosine."""
    rng = np.random.default_rng(0)
    sample = data[rng.choice(len(data), size=min(len(data), 20_000), replace=False)]
    centred = sample - sample.mean(axis=0)
    eig = np.linalg.eigvalsh(centred.T @ centred / len(sample)).clip(min=0)
    a, b = rng.integers(0, len(sample), (2, 5000))
    top = _topk_scores(data, queries, k)
    return {
        "effective_dim": round(float(eig.sum() ** 2 / (eig**2).sum()), 1),
        "random_pair_cosine": round(float(np.mean(np.sum(sample[a] * sample[b], axis=1))), 3),
        "query_top1_cosine": round(float(top[:, 0].mean()), 3),
        f"query_top{k}_cosine": round(float(top[:, -1].mean()), 3),
    }


def _topk_scores(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    ids = exact_topk(data, queries, k)
    return np.einsum("qkd,qd->qk", data[ids], queries)


def exact_topk(data: np.ndarray, queries: np.ndarray, k: int, chunk: int = 100_000) -> np.ndarray:
    """Brute-force top-k row numbers (best first) by inner product, in chunks of the data."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for s in range(0, len(data), chunk):
        scores = queries @ data[s : s + chunk].T
        kk = min(k, scores.shape[1])
        part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        best_s = np.concatenate([best_s, np.take_along_axis(scores, part, 1)], axis=1)
        best_i = np.concatenate([best_i, part + s], axis=1)
        keep = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
        best_s = np.take_along_axis(best_s, keep, 1)
        best_i = np.take_along_axis(best_i, keep, 1)
    return best_i


def rss_bytes() -> int:
    """Resident set size of this process (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def pid_rss_bytes(pid: int) -> int:
    """Resident set size of another process (Linux; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def time_queries(
    backend: Any,
    queries: np.ndarray,
    k: int,
    wheres: Sequence[Any] | None = None,
    warmup: int = WARMUP,
) -> tuple[list[list[str]], list[float]]:
    """Run every query once (after ``warmup`` unmeasured ones); ids per query, ms per query."""
    for i in range(min(warmup, len(queries))):
        backend.search(queries[i], k, where=None if wheres is None else wheres[i])
    ids: list[list[str]] = []
    ms: list[float] = []
    for i, q in enumerate(queries):
        where = None if wheres is None else wheres[i]
        t = time.perf_counter()
        hits = backend.search(q, k, where=where)
        ms.append((time.perf_counter() - t) * 1000)
        ids.append([h[0] for h in hits])
    return ids, ms


def _r(x: float, n: int = 4) -> float:
    return round(float(x), n)


# --------------------------------------------------------------------------------------------
# part 1: SciFact
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_chroma_server(folder: Path) -> tuple[subprocess.Popen[bytes], int, Any]:
    """A real ``chroma run`` on a free 127.0.0.1 port with its data in ``folder``."""
    import chromadb

    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed by stop_chroma_server
    proc = subprocess.Popen(
        [exe, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(folder / "db")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return proc, port, log
        except Exception:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                log.close()
                raise RuntimeError(
                    f"chroma run did not start: {(folder / 'server.log').read_text()[-2000:]}"
                ) from None
            time.sleep(0.3)


def stop_chroma_server(proc: subprocess.Popen[bytes], log: Any) -> None:
    """Stop a server from :func:`start_chroma_server` and close its log."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def shard_of(doc_id: str) -> int:
    """A stable number 0..99 per document: a cheap field to filter on (10 shards = 10%)."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=4).digest(), "little") % 100


def load_scifact_vectors(
    args: Any, work: Path
) -> tuple[Any, list[str], np.ndarray, list[dict[str, Any]], dict[str, str], dict[str, Any]]:
    """The open store (the caller closes it), its passage ids, vectors and backend metadata,
    the passage -> document map and where they came from."""
    from benchmarks.scifact_data import build_store, export_chunks, load
    from pensive_core import Pensive
    from pensive_core.filters import backend_metadata

    if args.base_store:
        p = Pensive(args.base_store, read_only=True)
        source = {"store": str(args.base_store), "built_seconds": None}
    else:
        docs, _, _ = load(args.data)
        p, ingest = build_store(work / "pensive", docs)
        source = {"store": str(work / "pensive"), "built_seconds": ingest["seconds"]}
    ids, _texts, vecs = export_chunks(p)
    db = p.components.archive.db
    doc_of = dict(db.execute("SELECT id, doc_id FROM chunks").fetchall())
    doc_meta = {
        did: json.loads(meta) for did, meta in db.execute("SELECT id, metadata FROM documents")
    }
    metas = [
        backend_metadata({**doc_meta[doc_of[c]], "shard": shard_of(doc_of[c])}, doc_of[c])
        for c in ids
    ]
    source["embedder"] = getattr(p.embedder, "name", "?")
    return p, ids, np.ascontiguousarray(vecs, dtype=np.float32), metas, doc_of, source


def scifact_part(args: Any, work: Path) -> dict[str, Any]:
    from benchmarks.metrics import evaluate, ranking_to_run
    from benchmarks.scifact_data import load
    from pensive_core.backends import create_backend
    from pensive_core.config import ChromaConfig, FaissConfig
    from pensive_core.filters import matches, parse_filter

    _, queries, qrels = load(args.data)
    p, ids, vecs, metas, doc_of, source = load_scifact_vectors(args, work)
    emb = p.embedder
    qids = sorted(queries, key=lambda q: (len(q), q))
    t = time.perf_counter()
    qvecs = np.stack([emb.embed_query(queries[q]) for q in qids]).astype(np.float32)
    embed_s = time.perf_counter() - t
    p.close()
    print(
        f"SciFact: {len(ids)} passages, {len(qids)} questions embedded in {embed_s:.1f} s",
        flush=True,
    )

    rng = np.random.default_rng(args.seed)
    docs = sorted(set(doc_of[c] for c in ids))
    n_big = min(1000, max(1, len(docs) // 10))

    def shard_filter() -> Any:  # 10 of the 100 shards: about 10% of the documents
        pick = sorted(rng.choice(100, size=10, replace=False).tolist())
        return parse_filter({"shard": {"$in": pick}})

    def doc_filter() -> Any:  # 10% of the documents by id: a long $in list
        pick = sorted(rng.choice(len(docs), size=n_big, replace=False).tolist())
        return parse_filter({"doc_id": {"$in": [docs[i] for i in pick]}})

    n_q = len(qids)
    n_big_q = min(n_q, args.doc_in_queries)
    shared = shard_filter()
    # mode: (filters of the measured questions, filters of the warm-up queries); None: no filter.
    # Warm-up filters are not reused by the measured questions (no cached selection helps them).
    modes: dict[str, tuple[list[Any] | None, list[Any] | None]] = {
        "no_filter": (None, None),
        "same_filter": ([shared] * n_q, [shared] * WARMUP),
        "new_filter": (
            [shard_filter() for _ in qids],
            [shard_filter() for _ in range(WARMUP)],
        ),
        "doc_id_in": ([doc_filter() for _ in range(n_big_q)], [doc_filter()]),
    }
    passing = sum(matches(shared, m) for m in metas)

    server_dir = work / "chroma-server"
    proc, port, log = start_chroma_server(server_dir)
    factories: dict[str, tuple[str, Callable[[Path], Any]]] = {
        "faiss-flat": (
            "exact",
            lambda f: create_backend("faiss", f, DIM, FaissConfig(index="flat")),
        ),
        "faiss-hnsw": (
            "approximate",
            lambda f: create_backend("faiss", f, DIM, FaissConfig(index="hnsw")),
        ),
        "chroma-embedded": (
            "approximate",
            lambda f: create_backend("chroma", f, DIM, ChromaConfig(mode="persistent")),
        ),
        "chroma-server": (
            "approximate",
            lambda f: create_backend(
                "chroma", f, DIM, ChromaConfig(mode="http", port=port, collection="bench")
            ),
        ),
        "memory": ("exact", lambda f: create_backend("memory", f, DIM)),
    }
    rows: dict[str, dict[str, Any]] = {}
    res: dict[str, dict[str, list[list[str]]]] = {m: {} for m in modes}
    try:
        for name, (kind, make) in factories.items():
            folder = work / "backends" / name
            gc.collect()
            rss0 = rss_bytes()
            b = make(folder)
            t = time.perf_counter()
            for s in range(0, len(ids), BATCH):
                b.upsert(ids[s : s + BATCH], vecs[s : s + BATCH], metas[s : s + BATCH])
            upsert_s = time.perf_counter() - t
            t = time.perf_counter()
            b.persist()
            persist_s = time.perf_counter() - t
            total_s = upsert_s + persist_s
            count = b.count()
            if count != len(ids):
                raise SystemExit(f"error: {name} holds {count} vectors, not {len(ids)}")
            lat: dict[str, Any] = {}
            short: dict[str, int] = {}
            for mode, (wheres, warm_wheres) in modes.items():
                n_meas = n_q if wheres is None else len(wheres)
                n_warm = WARMUP if warm_wheres is None else len(warm_wheres)
                time_queries(b, qvecs[-n_warm:], K, warm_wheres, warmup=0)
                res[mode][name], ms = time_queries(b, qvecs[:n_meas], K, wheres, warmup=0)
                lat[mode] = pct(ms)
                short[mode] = short_results(res[mode][name], K)
            on_disk = server_dir / "db" if name == "chroma-server" else folder
            rows[name] = {
                "kind": kind,
                "index": getattr(b, "kind", "?"),
                "ingest": {
                    "vectors": len(ids),
                    "upsert_s": _r(upsert_s, 3),
                    "persist_s": _r(persist_s, 3),
                    "vectors_per_s": round(len(ids) / total_s),
                },
                "latency_ms": lat,
                "short_results": short,
                "disk_bytes": folder_bytes(on_disk) if on_disk.exists() else None,
                "client_rss_growth_bytes": max(0, rss_bytes() - rss0),
            }
            if name == "chroma-server":
                rows[name]["server_rss_bytes"] = pid_rss_bytes(proc.pid)
            print(
                f"  {name}: {rows[name]['ingest']['vectors_per_s']} vectors/s, p50 ms "
                + ", ".join(f"{m} {v['p50']:.3f}" for m, v in lat.items()),
                flush=True,
            )
            b.close()
            del b
    finally:
        stop_chroma_server(proc, log)

    ref = "faiss-flat"
    for name, row in rows.items():
        row["recall_at_10_vs_exact"] = {
            m: _r(recall_at_k(res[m][name], res[m][ref], K)) for m in modes
        }
        ranks = {
            q: doc_ranking(r, doc_of.__getitem__, limit=K)
            for q, r in zip(qids, res["no_filter"][name])
        }
        row["ndcg_at_10_doc"] = _r(evaluate(ranking_to_run(ranks), qrels, ("nDCG@10",))["nDCG@10"])
    exact_names = [n for n, r in rows.items() if r["kind"] == "exact"]
    agreement = {m: _r(overlap(res[m][exact_names[0]], res[m][exact_names[1]], K)) for m in modes}
    return {
        "source": source,
        "passages": len(ids),
        "documents": len(docs),
        "questions": n_q,
        "question_embed_seconds": _r(embed_s, 1),
        "filters": {
            "shard": "benchmark field shard = blake2b(doc_id) mod 100 on every passage",
            "same_filter": "shard $in 10 fixed values (the same for every question)",
            "new_filter": "shard $in 10 random values, drawn anew for every question",
            "doc_id_in": f"doc_id $in {n_big} random documents, new for every question",
            "passages_passing_same_filter": int(passing),
            "doc_id_in_documents": n_big,
            "questions_per_mode": {m: n_q if v[0] is None else len(v[0]) for m, v in modes.items()},
        },
        "profile": vector_profile(vecs, qvecs),
        "backends": rows,
        "overlap_at_10": {m: overlap_matrix(res[m], K) for m in ("no_filter", "same_filter")},
        "exact_agreement": {"backends": exact_names, **agreement},
    }


# --------------------------------------------------------------------------------------------
# part 2: scale
# --------------------------------------------------------------------------------------------


def scale_part(n: int, args: Any) -> dict[str, Any]:
    from pensive_core.backends.faiss import FaissBackend
    from pensive_core.config import FaissConfig

    t = time.perf_counter()
    data, queries, desc = synthetic(n, n_queries=args.scale_queries, seed=args.seed)
    gen_s = time.perf_counter() - t
    batch = min(SCALE_BATCH, n)
    ids = [f"v{i}" for i in range(n)]
    truth_rows = exact_topk(data, queries, K)
    truth = [[ids[i] for i in row] for row in truth_rows.tolist()]
    print(f"scale {n}: data ready in {gen_s:.1f} s", flush=True)
    configs = {
        "faiss-flat": FaissConfig(index="flat"),
        "faiss-hnsw": FaissConfig(
            index="hnsw",
            **({"ef_construction": args.ef_construction} if args.ef_construction else {}),
        ),
        "faiss-ivfpq": FaissConfig(index="ivfpq", ivf_train_min=max(256, min(10_000, batch))),
    }
    rows: dict[str, dict[str, Any]] = {}
    results: dict[str, list[list[str]]] = {}
    for name, cfg in configs.items():
        gc.collect()
        rss0 = rss_bytes()
        t = time.perf_counter()
        b = FaissBackend(None, DIM, cfg)
        for s in range(0, n, batch):
            b.upsert(ids[s : s + batch], data[s : s + batch])
        build_s = time.perf_counter() - t
        gc.collect()
        rss_growth = rss_bytes() - rss0
        mem = b.memory_bytes()
        results[name], ms = time_queries(b, queries, K)
        extra: dict[str, Any] = {}
        if b.kind == "hnsw":
            extra = {"M": cfg.hnsw_m, "ef_construction": cfg.ef_construction}
            extra["ef_search"] = cfg.ef_search
        elif b.kind == "ivfpq":
            inner = b.raw_index()
            extra = {
                "nlist": int(inner.nlist),
                "nprobe": int(inner.nprobe),
                "pq_bytes": int(inner.pq.code_size),
                "trained_on": batch,
            }
        rows[name] = {
            "index": b.kind,
            "params": extra,
            "build_s": _r(build_s, 2),
            "vectors_per_s": round(n / build_s),
            "memory_bytes": mem,
            "rss_growth_bytes": rss_growth,
            "latency_ms": pct(ms),
            "recall_at_10_vs_exact": None,
        }
        print(
            f"  {name} ({b.kind}): build {build_s:.1f} s, {mem / 2**20:.0f} MiB, p50 "
            f"{rows[name]['latency_ms']['p50']:.3f} ms",
            flush=True,
        )
        del b
        gc.collect()
    for name in rows:
        rows[name]["recall_at_10_vs_exact"] = _r(
            recall_at_k(results[name], results["faiss-flat"], K)
        )
    flat_vs_numpy = _r(recall_at_k(results["faiss-flat"], truth, K))
    profile = vector_profile(data, queries)
    del data
    gc.collect()
    return {
        "n": n,
        "data": desc,
        "generate_s": _r(gen_s, 1),
        "upsert_batch": batch,
        "profile": profile,
        "flat_vs_numpy_bruteforce": flat_vs_numpy,
        "backends": rows,
    }


# --------------------------------------------------------------------------------------------
# main and report
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument(
        "--base-store",
        type=Path,
        default=None,
        help="read passage vectors from this already built SciFact store (read-only) instead "
        "of embedding the corpus again",
    )
    ap.add_argument(
        "--scale",
        default="100000,1000000",
        help="comma-separated synthetic sizes for part 2 (default 100000,1000000)",
    )
    ap.add_argument("--scale-queries", type=int, default=200)
    ap.add_argument(
        "--ef-construction",
        type=int,
        default=0,
        help="HNSW ef_construction for the scale run (0: the FaissConfig default)",
    )
    ap.add_argument(
        "--doc-in-queries",
        type=int,
        default=100_000,
        help="questions measured with a long doc_id $in filter (default: all)",
    )
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    sizes = [] if args.skip_scale else [int(s) for s in str(args.scale).split(",") if s.strip()]

    import faiss

    work = args.store or Path(tempfile.mkdtemp(prefix="pensive-bench-backends-"))
    work.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.backends " + " ".join(
        sys.argv[1:] if argv is None else list(argv)
    )
    env = environment()
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        env["chromadb"] = importlib.metadata.version("chromadb")
    env["faiss_omp_threads"] = faiss.omp_get_max_threads()
    payload: dict[str, Any] = {
        "benchmark": "backends",
        "environment": env,
        "command": command.strip(),
        "k": K,
        "scifact": None,
        "scale": [],
    }
    failed = ""
    try:
        if not args.skip_scifact:
            t = time.perf_counter()
            load0 = load_average()
            payload["scifact"] = sci = scifact_part(args, work)
            sci["seconds"] = _r(time.perf_counter() - t, 1)
            sci["load_average_1min"] = {"start": load0, "end": load_average()}
            write_results("backends", args.out, payload, render(payload))
            agree = sci["exact_agreement"]
            worst = min(v for k, v in agree.items() if k != "backends")
            if worst < EXACT_AGREEMENT:
                failed = f"exact backends disagree: {agree}"
        for n in sizes:
            t = time.perf_counter()
            load0 = load_average()
            part = scale_part(n, args)
            part["seconds"] = _r(time.perf_counter() - t, 1)
            part["load_average_1min"] = {"start": load0, "end": load_average()}
            payload["scale"].append(part)
            write_results("backends", args.out, payload, render(payload))
            if part["flat_vs_numpy_bruteforce"] < EXACT_AGREEMENT:
                failed = (
                    f"FAISS flat disagrees with numpy at {n}: {part['flat_vs_numpy_bruteforce']}"
                )
    finally:
        if args.store is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.skip_scifact and not sizes:
        write_results("backends", args.out, payload, render(payload))
    if failed:
        raise SystemExit(f"error: {failed}")


def _mb(x: Any) -> str:
    return "-" if x is None else f"{x / 2**20:,.1f}"


def _lat(d: dict[str, Any]) -> str:
    return f"{d['p50']:.3f} / {d['p95']:.3f}" if d.get("count") else "-"


def render(r: dict[str, Any]) -> str:
    env = r["environment"]
    lines = [
        "# Local vector backends (SciFact and synthetic scale)",
        "",
        f"Measured on {env['platform']}, {env['cpus']} CPUs, Python {env['python']}, faiss "
        f"{env.get('faiss', '?')}, chromadb {env.get('chromadb', '?')}, pensive "
        f"{env['pensive']}. k = {r['k']} everywhere. Every figure below comes from the run "
        "reproduced by:",
        "",
        f"    {r['command']}",
        "",
    ]
    s = r.get("scifact")
    if s:
        f = s["filters"]
        qpm = f["questions_per_mode"]
        lines += [
            "## Part 1: SciFact, five local backends in one process",
            "",
            f"{s['passages']} passages of {s['documents']} SciFact abstracts "
            f"(all-MiniLM-L6-v2, 384-d, vectors read from a built store: `{s['source']['store']}`), "
            f"{s['questions']} train questions embedded once beforehand. Passage metadata: "
            "`backend_metadata` of the document (`title`, `doc_id`) plus a benchmark field "
            "`shard` (blake2b(doc_id) mod 100) to filter on. Chroma runs with its default HNSW "
            "settings (cosine space); the server is a real `chroma run` on 127.0.0.1 (HTTP "
            "round trip included). FAISS HNSW: FaissConfig defaults (M 32, ef_construction 80, "
            "ef_search 128).",
            "",
            "Filters: *same* = `shard $in` 10 fixed values (about 10% of documents; "
            f"{f['passages_passing_same_filter']} passages pass), the same for every question; "
            "*new* = `shard $in` 10 random values drawn anew for every question; *doc_id $in* "
            f"= `doc_id $in` {f['doc_id_in_documents']} random document ids (10%), new for every "
            f"question, measured on {qpm['doc_id_in']} questions.",
            "",
            "Ingest: the backend's share only (`upsert` of precomputed vectors with metadata in "
            "batches of 256, then `persist()`); embedding is identical for every backend and "
            "excluded. Disk is the backend's folder afterwards (for the server: its `--path`).",
            "",
            "| backend | index | vectors/s | upsert s | persist s | disk MiB |",
            "|---|---|---|---|---|---|",
        ]
        for name, b in s["backends"].items():
            i = b["ingest"]
            lines.append(
                f"| {name} | {b['index']} | {i['vectors_per_s']:,} | {i['upsert_s']} | "
                f"{i['persist_s']} | {_mb(b['disk_bytes'])} |"
            )
        lines += [
            "",
            f"Query latency, ms p50 / p95, one `search(k=10)` at a time ({qpm['no_filter']} "
            f"questions per column, {qpm['doc_id_in']} for doc_id $in; {WARMUP} unmeasured "
            "warm-up queries first, with their own filters).",
            "",
            "| backend | no filter | same filter | new filter | doc_id $in (new) |",
            "|---|---|---|---|---|",
        ]
        for name, b in s["backends"].items():
            lat = b["latency_ms"]
            lines.append(
                f"| {name} | {_lat(lat['no_filter'])} | {_lat(lat['same_filter'])} | "
                f"{_lat(lat['new_filter'])} | {_lat(lat['doc_id_in'])} |"
            )
        lines += [
            "",
            "Note: FAISS and memory evaluate a filter column by column with numpy "
            "(`filters.MetadataIndex`: equality and `$in` look rows up by value, ranges compare "
            "a float column), built for a field at its first filter after a write; FAISS also "
            "keeps each filter's selection until the next write (the *same* column). Chroma "
            "filters inside its own engine. FAISS HNSW answers filters passing "
            "fewer than 4,096 passages by exact search over them (`exact_filter_below`).",
        ]
        lines += [
            "",
            "Recall@10 against FAISS exact under the same filter, document-level nDCG@10 of "
            "the 10 passages returned without a filter (context only: passages collapse to "
            "documents, so it is below a k=100 run), and result lists shorter than 10.",
            "",
            "| backend | recall no filter | same | new | doc_id $in | nDCG@10 | short lists |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, b in s["backends"].items():
            rec, sh = b["recall_at_10_vs_exact"], b["short_results"]
            lines.append(
                f"| {name} | {rec['no_filter']:.4f} | {rec['same_filter']:.4f} | "
                f"{rec['new_filter']:.4f} | {rec['doc_id_in']:.4f} | {b['ndcg_at_10_doc']:.4f} "
                f"| {sum(sh.values())} |"
            )
        names = list(s["backends"])
        lines += [
            "",
            "Top-10 overlap between backends, no filter (mean |A ∩ B| / 10 over all questions):",
            "",
            "| | " + " | ".join(names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]
        m = s["overlap_at_10"]["no_filter"]
        for a in names:
            lines.append(f"| {a} | " + " | ".join(f"{m[a][b]:.4f}" for b in names) + " |")
        ea = s["exact_agreement"]
        lines += [
            "",
            f"Exact backends ({' and '.join(ea['backends'])}) agree: overlap "
            f"{ea['no_filter']:.4f} without a filter, {ea['same_filter']:.4f} / "
            f"{ea['new_filter']:.4f} / {ea['doc_id_in']:.4f} with the filters (the run fails "
            f"below {EXACT_AGREEMENT}).",
            "",
        ]
        if any("server_rss_bytes" in b for b in s["backends"].values()):
            srv = s["backends"]["chroma-server"]["server_rss_bytes"]
            lines += [f"Chroma server process RSS after its queries: {_mb(srv)} MiB.", ""]
    if r.get("scale"):
        lines += [
            "## Part 2: scale, synthetic clustered vectors (FAISS in memory)",
            "",
            "Unit vectors, 384-d, from a Gaussian mixture (random centres, per-cluster spread, "
            "power-law spectrum so they fill few directions, like sentence embeddings); "
            "queries are held-out mixture points perturbed by noise. The profile table "
            "compares them with SciFact. Each index is built through `FaissBackend` "
            "(`folder=None`) by `upsert` in batches; IVF-PQ trains on the first batch. "
            "Recall@10 is against FAISS exact, which is itself checked against numpy brute "
            "force.",
            "",
            "| vectors | effective dim | random-pair cos | query top-1 cos | query top-10 cos |",
            "|---|---|---|---|---|",
        ]
        if s:
            p = s["profile"]
            lines.append(
                f"| SciFact ({s['passages']}) | {p['effective_dim']} | "
                f"{p['random_pair_cosine']} | {p['query_top1_cosine']} | "
                f"{p['query_top10_cosine']} |"
            )
        for part in r["scale"]:
            p = part["profile"]
            lines.append(
                f"| synthetic {part['n']:,} | {p['effective_dim']} | "
                f"{p['random_pair_cosine']} | {p['query_top1_cosine']} | "
                f"{p['query_top10_cosine']} |"
            )
        lines += [
            "",
            "Build, memory, latency (ms p50 / p95, one query at a time, "
            f"{r['scale'][0]['data']['queries']} queries) and recall@10 per index and size. "
            "Index MiB is `FaissBackend.memory_bytes()` (the serialised index); RSS growth is "
            "the process's resident memory after the build minus before it, approximate (the "
            "source vectors were already resident; memory freed by the previous index can be "
            "reused). FAISS searches with its default OpenMP threads "
            f"({env.get('faiss_omp_threads', '?')}).",
            "",
            "| vectors | index | params | build s | vectors/s | index MiB | RSS growth MiB | "
            "latency p50 / p95 | recall@10 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for part in r["scale"]:
            for _name, b in part["backends"].items():
                params = ", ".join(f"{k} {v}" for k, v in b["params"].items()) or "-"
                lines.append(
                    f"| {part['n']:,} | {b['index']} | {params} | {b['build_s']} | "
                    f"{b['vectors_per_s']:,} | {_mb(b['memory_bytes'])} | "
                    f"{_mb(b['rss_growth_bytes'])} | {_lat(b['latency_ms'])} | "
                    f"{b['recall_at_10_vs_exact']:.4f} |"
                )
        lines += [
            "",
            "FAISS exact vs numpy brute force (recall@10): "
            + ", ".join(f"{p['n']:,}: {p['flat_vs_numpy_bruteforce']:.4f}" for p in r["scale"])
            + ".",
            "",
        ]
    loads = []
    if s and s.get("load_average_1min"):
        loads.append(("SciFact", s["load_average_1min"], s.get("seconds")))
    loads += [(f"{p['n']:,}", p.get("load_average_1min"), p.get("seconds")) for p in r["scale"]]
    loads = [x for x in loads if x[1]]
    if loads:
        lines += [
            "The machine was shared with other jobs while this ran; 1-minute load average "
            "(start -> end) and wall time per part: "
            + "; ".join(f"{n}: {ld['start']} -> {ld['end']}, {sec} s" for n, ld, sec in loads)
            + ". The benchmark itself accounts for about 1 (2 while FAISS builds on both "
            "cores); above that, other jobs competed for the cores and latencies are inflated "
            "(most visibly FAISS's multi-threaded searches).",
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
