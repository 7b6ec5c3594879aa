"""SciFact on the Postgres storage engine beside the embedded one: the same store moved with
``pensive migrate`` (vectors copied, nothing re-embedded), the same 809 train claims, the
default configuration with L1 off (L2 is what is compared), nDCG@10 / R@10 / R@100 on every
split, one query's latency, and what each store takes.

Postgres is started from the ``pgserver`` wheel in a folder (or ``--dsn``). The embedded store
is built (or reused, ``--base-store``: it is copied first, since a migration marks the store
it moved as moved).

    python -m benchmarks.postgres_engine --store .bench/postgres_engine --base-store .bench/scifact
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    base_parser,
    doc_ranking,
    environment,
    source_state,
    write_results,
)
from benchmarks.metrics import percentiles
from benchmarks.scifact import quality
from benchmarks.scifact_data import build_store, load

SCHEMA = "bench_scifact"
K = 100


def main() -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--base-store", type=Path, default=None, help="an embedded SciFact store")
    ap.add_argument("--dsn", default=None, help="an existing Postgres with pgvector")
    ap.add_argument("--latency-queries", type=int, default=200)
    args = ap.parse_args()
    root = args.store or Path(".bench/postgres_engine")
    root.mkdir(parents=True, exist_ok=True)
    docs, queries, qrels = load(args.data)
    chunk_doc = lambda cid: cid.split("#", 1)[0]  # noqa: E731 - a passage id names its document

    from pensive_core import Pensive
    from pensive_core.storage.migrate import migrate_store

    server = None
    if args.dsn:
        dsn = args.dsn
    else:
        import pgserver

        server = pgserver.get_server(root / "pg", cleanup_mode="stop")
        dsn = server.get_uri()
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        base = args.base_store or root / "scifact"
        p, built = build_store(base, docs)  # (unchanged documents are skipped)
        p.close()
        copy = root / "copy"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(base, copy)
        t = time.perf_counter()
        moved = migrate_store(copy, "postgres", storage={"dsn": dsn, "schema_name": SCHEMA})
        migrate_s = time.perf_counter() - t
        print("migrated:", moved, flush=True)
        off = {"router": {"l1": False}}
        pg_cfg = {**off, "storage": {"engine": "postgres", "dsn": dsn, "schema_name": SCHEMA}}
        results: dict[str, Any] = {}
        rankings: dict[str, dict[str, list[str]]] = {}
        for name, folder, cfg in (
            ("embedded", copy, off),
            ("postgres", root / "replica", pg_cfg),
        ):
            with Pensive(folder, config=cfg, read_only=True) as store:
                store.query(queries[next(iter(queries))])  # the model loaded
                t = time.perf_counter()
                ranked = {
                    q: [h.chunk_id for h in store.query(text, k=K).hits]
                    for q, text in queries.items()
                }
                pass_s = time.perf_counter() - t
                rankings[name] = ranked
                lat = []
                for q in sorted(queries)[: args.latency_queries]:
                    t = time.perf_counter()
                    store.query(queries[q], k=10)
                    lat.append((time.perf_counter() - t) * 1000)
                results[name] = {
                    "quality": quality(
                        {q: doc_ranking(r, chunk_doc) for q, r in ranked.items()}, qrels
                    ),
                    "quality_pass_s": round(pass_s, 1),
                    "latency_ms": percentiles(lat),
                    "disk_mb": round(store.stats()["disk_bytes"] / 2**20, 1),
                }
            print(name, results[name]["quality"]["all"], results[name]["latency_ms"], flush=True)
        same10 = sum(rankings["embedded"][q][:10] == rankings["postgres"][q][:10] for q in queries)
    finally:
        if server is not None:
            server.cleanup()
    diff = {
        split: round(
            results["postgres"]["quality"][split]["nDCG@10"]
            - results["embedded"]["quality"][split]["nDCG@10"],
            4,
        )
        for split in results["embedded"]["quality"]
    }
    payload = {
        "benchmark": "postgres_engine",
        "data": {
            "corpus": "scifact",
            "documents": len(docs),
            "queries": len(queries),
            "split": "train claims; every split reported, nothing chosen on any",
        },  # fmt: skip
        "config": "defaults, L1 off; the Postgres store is the embedded one moved by migrate",
        "build": built,
        "migrate": {**moved, "wall_s": round(migrate_s, 1)},
        "results": results,
        "ndcg10_postgres_minus_embedded": diff,
        "same_top10_passages": same10,
        "environment": environment(),
        "source": source_state(),
    }
    write_results("postgres_engine", args.out, payload, _markdown(payload))


def _markdown(r: dict[str, Any]) -> str:
    e, p = r["results"]["embedded"], r["results"]["postgres"]
    m = r["migrate"]

    def row(name: str, x: dict[str, Any]) -> str:
        q = x["quality"]
        lat = x["latency_ms"]
        return (
            f"| {name} | {q['all']['nDCG@10']} | {q['heldout']['nDCG@10']} | "
            f"{q['report']['nDCG@10']} | {q['all']['R@100']} | {lat['p50']:.1f} / {lat['p95']:.1f} | "
            f"{x['disk_mb']} |"
        )

    return "\n".join(
        [
            "# SciFact on the Postgres storage engine beside the embedded one",
            "",
            f"{r['data']['documents']} abstracts, {r['data']['queries']} train claims, default "
            "configuration with L1 off, one process, the same MiniLM; the Postgres store is "
            f"the embedded one moved by `pensive migrate` in {m['wall_s']} s ({m['vectors']} "
            f"vectors copied, {m['embedded']} embedded again).",
            "",
            "| engine | nDCG@10 all | heldout | report | R@100 | query p50 / p95 ms | MB |",
            "|---|---:|---:|---:|---:|---|---:|",
            row("embedded (SQLite + FAISS)", e),
            row("Postgres (pgvector, BM25 postings)", p),
            "",
            "nDCG@10 difference (Postgres - embedded) by split: "
            + ", ".join(f"{k} {v:+.4f}" for k, v in r["ndcg10_postgres_minus_embedded"].items())
            + ". Dense scores differ in the last digits between the engines (FAISS and pgvector "
            "sum the products in their own order), which reorders near-ties. "
            f"Same top 10 passages for {r['same_top10_passages']} of {r['data']['queries']} "
            "claims.",
            "",
            "Reproduce: `python -m benchmarks.postgres_engine --store .bench/postgres_engine "
            "--base-store .bench/scifact`.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
