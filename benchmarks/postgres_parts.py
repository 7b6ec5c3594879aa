"""The Postgres parts beside the embedded ones, on SciFact, in one process (issue 26).

A real Postgres 16 with pgvector 0.6 is started from the ``pgserver`` wheel in a folder (or
``--dsn`` names a server). The passages of a built SciFact store (its MiniLM vectors, its
texts) and the train questions (embedded once) go to:

* **vectors**: FAISS exact (``flat``, the reference), FAISS HNSW and the pgvector backend
  three ways (the default: exact scans below 20,000 rows; an HNSW index from the first row;
  an HNSW index built after one bulk upsert), each through the ``VectorBackend`` protocol:
  upsert time (batches of 256, or all at once), query
  latency for k = 10 without a filter and with a new ``shard $in`` filter (10 of 100 values,
  about 10% of documents) per question, recall@10 against exact, document nDCG@10 of the 10
  passages, and size (index files; ``pg_total_relation_size`` of the table);
* **BM25**: the embedded segments (bm25s) and the Postgres postings over the same passage
  texts, one commit each: build time, query latency for k = 100, BM25-only document nDCG@10,
  top-10 overlap, the largest score difference over every question's top 10, and size.

Latency on Postgres is the client's wall time over a Unix socket on the same two cores (the
server's work and the round trip together).

    python -m benchmarks.postgres_parts --base-store .bench/scifact   # ~5 min
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.backends import (
    BATCH,
    DIM,
    K,
    folder_bytes,
    load_scifact_vectors,
    overlap,
    pct,
    recall_at_k,
    time_queries,
)
from benchmarks.common import base_parser, doc_ranking, environment, source_state, write_results


def start_postgres(folder: Path) -> tuple[Any, str]:
    """A Postgres with pgvector from the pgserver wheel, and its DSN."""
    import pgserver

    server = pgserver.get_server(folder, cleanup_mode="stop")
    return server, server.get_uri()


def relation_bytes(dsn: str, tables: list[str]) -> int:
    """Tables with their indexes and TOAST, in bytes."""
    import psycopg

    with psycopg.connect(dsn) as c:
        return sum(
            int(c.execute("SELECT pg_total_relation_size(to_regclass(%s))", (t,)).fetchone()[0])
            for t in tables
        )


def vectors_part(
    dsn: str, work: Path, ids: list[str], vecs: np.ndarray, metas: list[dict[str, Any]],
    qvecs: np.ndarray, doc_of: dict[str, str], qids: list[str], qrels: dict[str, Any], seed: int,
) -> dict[str, Any]:  # fmt: skip
    from benchmarks.metrics import evaluate, ranking_to_run
    from pensive_core.backends import create_backend
    from pensive_core.config import FaissConfig, PgvectorConfig
    from pensive_core.filters import parse_filter

    rng = np.random.default_rng(seed)
    wheres = [
        parse_filter({"shard": {"$in": sorted(rng.choice(100, 10, replace=False).tolist())}})
        for _ in qids
    ]

    def pg(table: str, threshold: int) -> Any:
        cfg = PgvectorConfig(dsn=dsn, table=table, hnsw_threshold=threshold)
        return lambda f: create_backend("pgvector", f, DIM, cfg)

    # name: (factory, upsert batch, table)
    makers = {
        "faiss-flat": (lambda f: create_backend("faiss", f, DIM, FaissConfig(index="flat")), BATCH, ""),
        "faiss-hnsw": (lambda f: create_backend("faiss", f, DIM, FaissConfig(index="hnsw")), BATCH, ""),
        "pgvector (default: exact below 20,000 rows)": (pg("bench_vec", 20_000), BATCH, "bench_vec"),
        "pgvector, HNSW from the first row": (pg("bench_vh", 0), BATCH, "bench_vh"),
        "pgvector, HNSW, one bulk upsert": (pg("bench_vb", 0), len(ids), "bench_vb"),
    }  # fmt: skip
    rows: dict[str, Any] = {}
    res: dict[str, dict[str, list[list[str]]]] = {"no_filter": {}, "new_filter": {}}
    for name, (make, batch, table) in makers.items():
        folder = work / "vectors" / name.split(" ")[0]
        b = make(folder)
        t = time.perf_counter()
        for s in range(0, len(ids), batch):
            b.upsert(ids[s : s + batch], vecs[s : s + batch], metas[s : s + batch])
        b.persist()
        upsert_s = time.perf_counter() - t
        lat = {}
        time_queries(b, qvecs[-5:], K, None, warmup=0)
        res["no_filter"][name], ms = time_queries(b, qvecs, K, None, warmup=0)
        lat["no_filter"] = pct(ms)
        res["new_filter"][name], ms = time_queries(b, qvecs, K, wheres, warmup=0)
        lat["new_filter"] = pct(ms)
        ranks = {
            q: doc_ranking(r, doc_of.__getitem__, limit=K)
            for q, r in zip(qids, res["no_filter"][name], strict=True)
        }
        size = relation_bytes(dsn, [table]) if table else folder_bytes(folder)
        rows[name] = {
            "index": b.kind,
            "upsert_s": round(upsert_s, 2),
            "vectors_per_s": round(len(ids) / upsert_s),
            "latency_ms": lat,
            "ndcg_at_10_doc": round(evaluate(ranking_to_run(ranks), qrels, ("nDCG@10",))["nDCG@10"], 4),
            "bytes": size,
        }  # fmt: skip
        b.close()
        print(f"  vectors {name}: {rows[name]}", flush=True)
    for name, row in rows.items():
        row["recall_at_10_vs_exact"] = {
            m: round(recall_at_k(res[m][name], res[m]["faiss-flat"], K), 4) for m in res
        }
    return rows


def sparse_part(
    dsn: str, work: Path, ids: list[str], texts: list[str], queries: list[str],
    doc_of: dict[str, str], qids: list[str], qrels: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    from benchmarks.metrics import evaluate, ranking_to_run
    from pensive_core.config import BM25Config
    from pensive_core.sparse import BM25Index
    from pensive_core.sparse.postgres import PostgresBM25

    cfg = BM25Config()
    prefix = "bench"
    makers = {
        "bm25s segments": lambda: BM25Index(work / "bm25", cfg),
        "postgres postings": lambda: PostgresBM25(dsn, cfg, prefix),
    }
    rows: dict[str, Any] = {}
    hits: dict[str, list[list[tuple[str, float]]]] = {}
    for name, make in makers.items():
        ix = make()
        t = time.perf_counter()
        for cid, text in zip(ids, texts, strict=True):
            ix.add(cid, text)
        ix.commit()
        build_s = time.perf_counter() - t
        for q in queries[:5]:
            ix.search(q, 100)
        ms, got = [], []
        for q in queries:
            t = time.perf_counter()
            got.append(ix.search(q, 100))
            ms.append((time.perf_counter() - t) * 1000)
        hits[name] = got
        ranks = {
            q: doc_ranking([c for c, _ in r], doc_of.__getitem__, limit=K)
            for q, r in zip(qids, got, strict=True)
        }
        size = (
            relation_bytes(dsn, [f"{prefix}_bm25_docs", f"{prefix}_bm25_postings", f"{prefix}_bm25_stats"])
            if name.startswith("postgres")
            else folder_bytes(work / "bm25")
        )  # fmt: skip
        rows[name] = {
            "build_s": round(build_s, 2),
            "latency_ms": pct(ms),
            "ndcg_at_10_doc": round(evaluate(ranking_to_run(ranks), qrels, ("nDCG@10",))["nDCG@10"], 4),
            "bytes": size,
        }  # fmt: skip
        close = getattr(ix, "close", None)
        if close is not None:
            close()
        print(f"  bm25 {name}: {rows[name]}", flush=True)
    a, b = hits["bm25s segments"], hits["postgres postings"]
    worst = 0.0
    for ra, rb in zip(a, b, strict=True):
        sb = dict(rb)
        for cid, s in ra[:10]:
            if cid in sb:
                worst = max(worst, abs(s - sb[cid]))
    parity = {
        "top10_overlap": round(overlap([[c for c, _ in r] for r in a], [[c for c, _ in r] for r in b], 10), 4),
        "max_abs_score_difference_top10": float(f"{worst:.2e}"),
        "same_top1": round(sum(bool(x) and bool(y) and x[0][0] == y[0][0] for x, y in zip(a, b, strict=True)) / len(a), 4),
    }  # fmt: skip
    return {"systems": rows, "parity": parity}


def render(r: dict[str, Any]) -> str:
    v, s = r["vectors"], r["bm25"]
    lines = [
        "# Postgres parts beside the embedded ones (SciFact)",
        "",
        f"{r['passages']} passages of {r['documents']} abstracts, {r['questions']} train "
        f"questions; Postgres {r['postgres']} with pgvector {r['pgvector']} from the pgserver "
        "wheel on the same machine (Unix socket). Definitions in "
        "`benchmarks/postgres_parts.py`.",
        "",
        f"    {r['command']}",
        "",
        "## Vectors (k = 10)",
        "",
        "| backend | index | upsert vectors/s | p50 / p95 ms, no filter | p50 / p95 ms, new 10% filter "
        "| recall@10 vs exact (no filter / filter) | doc nDCG@10 | size MB |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for name, row in v.items():
        lat, rec = row["latency_ms"], row["recall_at_10_vs_exact"]
        lines.append(
            f"| {name} | {row['index']} | {row['vectors_per_s']} | "
            f"{lat['no_filter']['p50']:.3f} / {lat['no_filter']['p95']:.3f} | "
            f"{lat['new_filter']['p50']:.3f} / {lat['new_filter']['p95']:.3f} | "
            f"{rec['no_filter']} / {rec['new_filter']} | {row['ndcg_at_10_doc']} | "
            f"{row['bytes'] / 2**20:.1f} |"
        )
    lines += [
        "",
        "## BM25 (k = 100, one commit of every passage)",
        "",
        "| index | build s | p50 / p95 ms | BM25-only doc nDCG@10 | size MB |",
        "|---|---|---|---|---|",
    ]
    for name, row in s["systems"].items():
        lat = row["latency_ms"]
        lines.append(
            f"| {name} | {row['build_s']} | {lat['p50']:.3f} / {lat['p95']:.3f} | "
            f"{row['ndcg_at_10_doc']} | {row['bytes'] / 2**20:.1f} |"
        )
    p = s["parity"]
    lines += [
        "",
        f"Parity: top-10 overlap {p['top10_overlap']}, same top 1 for {p['same_top1']} of the "
        f"questions, largest score difference over every top 10 {p['max_abs_score_difference_top10']}.",
        "",
    ]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--base-store", type=Path, required=True, help="a built SciFact store")
    ap.add_argument("--dsn", default="", help="a Postgres with pgvector (default: pgserver)")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    from benchmarks.scifact_data import export_chunks, load

    work = args.store or Path(tempfile.mkdtemp(prefix="pensive-bench-pg-"))
    work.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        dsn = args.dsn
        if not dsn:
            shutil.rmtree(work / "pg", ignore_errors=True)
            server, dsn = start_postgres(work / "pg")
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as c:
            for t in ("bench_vec", "bench_vh", "bench_vb", "bench_bm25_docs", "bench_bm25_postings",
                      "bench_bm25_stats"):  # fmt: skip
                c.execute(f"DROP TABLE IF EXISTS {t}")  # a run starts from nothing
            pg_version = c.execute("SHOW server_version").fetchone()[0]
            c.execute("CREATE EXTENSION IF NOT EXISTS vector")
            vec_version = c.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()[0]
        _, queries, qrels = load(args.data)
        p, ids, vecs, metas, doc_of, source = load_scifact_vectors(args, work)
        _, texts, _ = export_chunks(p)
        qids = sorted(qrels)
        qvecs = np.stack([p.embedder.embed_query(queries[q]) for q in qids]).astype(np.float32)
        p.close()
        payload: dict[str, Any] = {
            "benchmark": "postgres_parts",
            "command": "python -m benchmarks.postgres_parts "
            + " ".join(__import__("sys").argv[1:] if argv is None else argv),
            "environment": environment(),
            "source": {**source_state(), "store": source},
            "postgres": pg_version,
            "pgvector": vec_version,
            "passages": len(ids),
            "documents": len(set(doc_of[c] for c in ids)),
            "questions": len(qids),
        }
        print("vectors ...", flush=True)
        payload["vectors"] = vectors_part(
            dsn, work, ids, vecs, metas, qvecs, doc_of, qids, qrels, args.seed
        )
        print("bm25 ...", flush=True)
        payload["bm25"] = sparse_part(
            dsn, work, ids, texts, [queries[q] for q in qids], doc_of, qids, qrels
        )
        write_results("postgres_parts", args.out, payload, render(payload))
    finally:
        if server is not None:
            server.cleanup()
        if args.store is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
