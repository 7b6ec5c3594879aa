"""How the IVF-PQ defaults (bytes per vector, lists probed) were chosen.

Synthetic clustered 384-d vectors from :func:`benchmarks.backends.synthetic`, drawn with a
different seed (11) from the one the backends benchmark reports (7), so the choice is not tuned
on the reported data. Each configuration is built through :class:`FaissBackend` exactly as a
store would build it, then measured: bytes per vector of the serialised index, query latency
p50 (k = 10, one query at a time, one FAISS thread) and recall@10 against exact search.

    python -m benchmarks.tune_ivfpq [--n 100000] [--queries 200]
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.backends import exact_topk, pct, recall_at_k, synthetic
from benchmarks.common import base_parser, environment, write_results

SEED = 11
PQ_M = (24, 48, 96, 192)
NPROBE = (16, 32, 128)


def main(argv: list[str] | None = None) -> None:
    """Run the grid and write ``tune_ivfpq.json`` / ``.md``."""
    ap = base_parser(__doc__ or "")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args(argv)

    import faiss

    from pensive_core.backends.faiss import FaissBackend
    from pensive_core.config import FaissConfig

    faiss.omp_set_num_threads(1)
    data, queries, desc = synthetic(args.n, args.queries, seed=SEED)
    truth = [[f"v{i}" for i in row] for row in exact_topk(data, queries, 10).tolist()]
    ids = [f"v{i}" for i in range(len(data))]
    rows: list[dict[str, Any]] = []
    for m in PQ_M:
        for nprobe in NPROBE:
            cfg = FaissConfig(index="ivfpq", pq_m=m, ivf_nprobe=nprobe)
            b = FaissBackend(None, data.shape[1], cfg)
            t = time.perf_counter()
            b.upsert(ids, data)
            build = time.perf_counter() - t
            got, ms = [], []
            for q in queries:
                t = time.perf_counter()
                got.append([c for c, _ in b.search(q, 10)])
                ms.append((time.perf_counter() - t) * 1000)
            row = {
                "pq_m": m,
                "nprobe": nprobe,
                "bytes_per_vector": round(b.memory_bytes() / len(data), 1),
                "build_s": round(build, 1),
                "latency_ms": pct(ms),
                "recall_at_10": round(recall_at_k(got, truth, 10), 4),
            }
            print(row, flush=True)
            rows.append(row)
            del b
    payload = {"environment": environment(), "data": desc, "rows": rows}
    lines = [
        "# IVF-PQ settings (synthetic, seed 11; the reported scale run uses seed 7)",
        "",
        f"{args.n:,} clustered 384-d unit vectors, {args.queries} queries, k = 10, one FAISS "
        "thread. Float vectors take 1,536 bytes each (+ 8 for the id).",
        "",
        "    python -m benchmarks.tune_ivfpq",
        "",
        "| pq_m (bytes) | nprobe | bytes/vector | build s | p50 ms | recall@10 |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['pq_m']} | {r['nprobe']} | {r['bytes_per_vector']} | {r['build_s']} | "
            f"{r['latency_ms']['p50']} | {r['recall_at_10']} |"
        )
    write_results("tune_ivfpq", args.out, payload, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
