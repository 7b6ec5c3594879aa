"""Choose Pensive's retrieval defaults on the SciFact *tune* split (even query ids).

The held-out split (odd ids) is never used to choose anything; its figures are printed beside
the tune figures only so a reader can see whether a choice generalises. Dense and BM25
candidate lists are computed once per store and fused offline with the same pure functions
the engine uses, so the grid is cheap. Writes ``results/tune_scifact.json`` and ``.md``.

    python -m benchmarks.tune_scifact [--data DIR] [--store-root DIR]
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import (
    base_parser,
    chunk_doc,
    doc_ranking,
    environment,
    split_of,
    write_results,
)
from benchmarks.metrics import evaluate, ranking_to_run
from benchmarks.scifact_data import build_store, export_chunks, load
from pensive_core.config import BM25Config
from pensive_core.fusion import fuse
from pensive_core.sparse import BM25Index

DEPTH = 100


def score(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], split: str) -> float:
    qs = {q: r for q, r in qrels.items() if split_of(q) == split}
    run = ranking_to_run({q: rankings.get(q, []) for q in qs})
    return round(evaluate(run, qs, ("nDCG@10",))["nDCG@10"], 4)


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__ or "")
    ap.add_argument(
        "--store-root",
        type=Path,
        default=None,
        help="keep the built stores here to reuse them between runs",
    )
    ap.add_argument("--targets", default="0,128", help="chunking.target_tokens values to try")
    args = ap.parse_args(argv)
    docs, queries, qrels = load(args.data)
    root = args.store_root or Path(tempfile.mkdtemp(prefix="pensive-tune-"))
    rows: list[dict[str, Any]] = []
    for target in [int(t) for t in args.targets.split(",")]:
        p, info = build_store(root / f"t{target}", docs, {"chunking": {"target_tokens": target}})
        print(f"store target_tokens={target}: {info}", flush=True)
        embedder = p.embedder
        qvec = {q: embedder.embed_query(t) for q, t in queries.items()}
        dense = {q: p.components.backend.search(v, DEPTH) for q, v in qvec.items()}  # type: ignore[union-attr]
        ids, texts, _ = export_chunks(p)
        bm25_lists: dict[str, dict[str, list[tuple[str, float]]]] = {}
        for k1, b in ((1.2, 0.75), (0.9, 0.4), (1.5, 0.75)):
            ix = BM25Index(None, BM25Config(k1=k1, b=b))
            for cid, text in zip(ids, texts):
                ix.add(cid, text)
            ix.commit()
            bm25_lists[f"k1={k1},b={b}"] = {q: ix.search(t, DEPTH) for q, t in queries.items()}
        for name, lists in bm25_lists.items():
            rk = {q: doc_ranking((c for c, _ in lists[q]), chunk_doc) for q in queries}
            rows.append(
                {
                    "target_tokens": target,
                    "bm25": name,
                    "system": "bm25 only",
                    "tune": score(rk, qrels, "tune"),
                    "heldout": score(rk, qrels, "heldout"),
                }
            )
        rk = {q: doc_ranking((c for c, _ in dense[q]), chunk_doc) for q in queries}
        rows.append(
            {
                "target_tokens": target,
                "bm25": "-",
                "system": "dense only",
                "tune": score(rk, qrels, "tune"),
                "heldout": score(rk, qrels, "heldout"),
            }
        )
        grid = [("rrf", k, w) for k in (10, 30, 60) for w in ((1, 1), (1, 0.7), (0.7, 1))]
        grid += [(m, 0, w) for m in ("weighted", "zscore") for w in ((1, 1), (1, 0.7), (0.7, 1))]
        for (bname, lists), (method, k, (wd, wb)) in itertools.product(bm25_lists.items(), grid):
            weights = {"dense": wd, "bm25": wb}
            rk = {
                q: doc_ranking(
                    (
                        f.id
                        for f in fuse(
                            method, {"dense": dense[q], "bm25": lists[q]}, weights, k or 60
                        )
                    ),
                    chunk_doc,
                )
                for q in queries
            }
            rows.append(
                {
                    "target_tokens": target,
                    "bm25": bname,
                    "system": f"{method}"
                    + (f" k={k}" if method == "rrf" else "")
                    + f" w={wd}/{wb}",
                    "tune": score(rk, qrels, "tune"),
                    "heldout": score(rk, qrels, "heldout"),
                }
            )
        p.close()
    rows.sort(key=lambda r: -r["tune"])
    best = rows[0]
    md = [
        "# SciFact tuning grid (nDCG@10; chosen on the tune split only)\n",
        f"Best on tune: `{best}`\n",
        "| target_tokens | bm25 | system | tune nDCG@10 | held-out nDCG@10 |",
        "|---|---|---|---|---|",
    ]
    md += [
        f"| {r['target_tokens']} | {r['bm25']} | {r['system']} | {r['tune']} | {r['heldout']} |"
        for r in rows
    ]
    write_results(
        "tune_scifact",
        args.out,
        {"best_on_tune": best, "rows": rows, "environment": environment()},
        "\n".join(md) + "\n",
    )


if __name__ == "__main__":
    main()
