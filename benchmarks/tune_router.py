"""Choose the router's L3 escalation defaults on the SciFact *tune* split (even query ids).

Each setting answers every judged train question with ``k = 10`` (what an application asks
for; with a deep ``k`` the top passages almost always contain what was asked and L3 never
runs) through the same store, L1 off, and is scored by nDCG@10. The held-out split (odd ids)
is printed beside, never used to choose. Also reports how often each setting escalated and the
mean latency. Writes ``results/tune_router.json`` and ``.md``.

    python -m benchmarks.tune_router [--data DIR] [--store DIR]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    base_parser,
    chunk_doc,
    doc_ranking,
    environment,
    retrieved,
    write_results,
)
from benchmarks.scifact_data import build_store, load
from benchmarks.tune_scifact import score

SETTINGS: dict[str, dict[str, Any]] = {
    "no L3": {"l3_exact": False, "l3_below": 0.0},
    **{
        f"L3 for exact strings, first below confidence {t}": {
            "l3_exact": True,
            "l3_first_below": t,
            "l3_below": 0.0,
        }
        for t in (1.0, 0.8, 0.7, 0.6, 0.5, 0.0)
    },
    "L3 exact (first below 0.6) + below confidence 0.3": {
        "l3_exact": True,
        "l3_first_below": 0.6,
        "l3_below": 0.3,
    },
}
K = 10


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    args = ap.parse_args(argv)
    docs, queries, qrels = load(args.data)
    store = args.store or Path(tempfile.mkdtemp(prefix="pensive-tune-router-"))
    p, ingest = build_store(store, docs, {"router": {"l1": False}})
    p.query("warm-up", k=K)
    rows: dict[str, Any] = {}
    for label, router in SETTINGS.items():
        for key, value in router.items():
            setattr(p.config.router, key, value)
        before = dict(p.l3_counts)
        t = time.perf_counter()
        tiers: dict[str, int] = {}
        rankings = {}
        for qid, text in queries.items():
            res = p.query(text, k=K)
            tiers[res.tier] = tiers.get(res.tier, 0) + 1
            rankings[qid] = doc_ranking((h.chunk_id for h in retrieved(res)), chunk_doc)
        rows[label] = {
            "router": router,
            "tune_nDCG@10": score(rankings, qrels, "tune"),
            "heldout_nDCG@10": score(rankings, qrels, "heldout"),
            "tiers": tiers,
            "escalations": {k: p.l3_counts[k] - before[k] for k in before},
            "mean_ms": round((time.perf_counter() - t) * 1000 / len(queries), 2),
        }
        print(label, rows[label], flush=True)
    p.close()
    # ties go to the earlier setting (the list runs from least to most escalation)
    best = max(rows, key=lambda r: rows[r]["tune_nDCG@10"])
    payload = {
        "benchmark": "tune_router",
        "environment": environment(),
        "k": K,
        "queries": len(queries),
        "store_ingest": ingest,
        "settings": rows,
        "chosen_on_tune": best,
    }
    lines = [
        "# L3 escalation settings on SciFact (k = 10, nDCG@10; tune split chooses)",
        "",
        "| setting | tune | held-out | answered by L3 | mean ms |",
        "|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        mark = " **(chosen)**" if label == best else ""
        lines.append(
            f"| {label}{mark} | {r['tune_nDCG@10']:.4f} | {r['heldout_nDCG@10']:.4f} | "
            f"{r['tiers'].get('L3', 0)} of {len(queries)} | {r['mean_ms']} |"
        )
    lines += ["", "Reproduce: `python -m benchmarks.tune_router`.", ""]
    write_results("tune_router", args.out, payload, "\n".join(lines))


if __name__ == "__main__":
    main()
