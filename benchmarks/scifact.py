"""SciFact: Pensive's retrievers and fusion methods beside LangChain, LlamaIndex and plain peers.

Everything runs in one process on the same passages and the same MiniLM vectors: the corpus is
embedded once, by Pensive's ingest, and the peers are built from those vectors. Documents are
ranked by their best passage. Quality is reported on all judged train queries, on the old
halves (even ids ``tune``, odd ids ``heldout``: ``tune_scifact`` chose on the first) and on the
halves of a salted hash of the id (``choose``, ``report``: ``tune_scifact_fusion`` compares
fusion settings on the first; nothing is chosen on ``report``).

Latency is per query, median over ``--repeats`` runs, then p50/p95 across queries; "retrieval"
excludes the query embedding (peers get precomputed query vectors, Pensive's own embedding time
is subtracted), "end to end" includes it.

    python -m benchmarks.scifact [--data DIR] [--latency-queries N] [--repeats R]
    python -m benchmarks.scifact --explain-failures DIR [--limit N]   # where failures are lost
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import peers as peer_mod
from benchmarks.common import (
    add_explain_arguments,
    base_parser,
    chunk_doc,
    doc_ranking,
    environment,
    explain_failures,
    half_of,
    load_average,
    retrieved,
    source_state,
    split_of,
    write_results,
)
from benchmarks.metrics import evaluate, percentiles, ranking_to_run
from benchmarks.scifact_data import build_store, export_chunks, load

K = 100  # passages asked of every system; documents are ranked by their best passage
MEASURES = ("nDCG@10", "R@10", "R@100")


def quality(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in ("all", "heldout", "tune", "choose", "report"):
        of = half_of if split in ("choose", "report") else split_of
        qs = {q: r for q, r in qrels.items() if split == "all" or of(q) == split}
        run = ranking_to_run({q: rankings.get(q, []) for q in qs})
        out[split] = {m: round(v, 4) for m, v in evaluate(run, qs, MEASURES).items()}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__ or "")
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-peers", action="store_true", help="skip the LangChain/LlamaIndex peers")
    add_explain_arguments(ap)
    args = ap.parse_args(argv)

    docs, queries, qrels = load(args.data)
    load_start = load_average()
    store = args.store or Path(tempfile.mkdtemp(prefix="pensive-scifact-"))
    if args.explain_failures is not None:
        # the default configuration only: a failing claim has a relevant abstract outside the
        # documents of the top 10 passages
        p, _ = build_store(store, docs, {"router": {"l1": False}})
        judged = [
            {
                "id": q,
                "text": queries[q],
                "expect": [d for d, s in qrels[q].items() if s > 0],
                "split": half_of(q),
            }
            for q in list(qrels)[: args.limit]
        ]
        explain_failures(p, judged, args.explain_failures, 10)
        p.close()
        return
    print(f"ingesting {len(docs)} SciFact abstracts into {store} ...", flush=True)
    # L2 is what is measured: repeats must not be answered by the L1 cache
    p, ingest = build_store(store, docs, {"router": {"l1": False}})
    print(f"ingest: {ingest}", flush=True)
    embedder = p.embedder
    ids, texts, vectors = export_chunks(p)

    t = time.perf_counter()
    qvec = {q: embedder.embed_query(text) for q, text in queries.items()}
    embed_ms = (time.perf_counter() - t) * 1000 / len(queries)
    lookup: dict[str, Any] = {queries[q]: v for q, v in qvec.items()}

    # -- the systems: each maps query text -> ranked passage ids ------------------------------
    systems: dict[str, Callable[[str], list[str]]] = {}
    build_ms: dict[str, float] = {}
    base = p.config.model_copy(deep=True)

    last: dict[str, Any] = {}

    def pensive(method: str, weights: dict[str, float]) -> Callable[[str], list[str]]:
        def run(text: str) -> list[str]:
            p.config.fusion.method = method  # the same store, only query-time settings change
            p.config.fusion.weights = weights
            res = p.query(text, k=K)
            last["timings"] = res.timings
            return [h.chunk_id for h in retrieved(res)]

        return run

    default_fusion = base.fusion
    systems["pensive bm25 only"] = pensive(default_fusion.method, {"dense": 0.0, "bm25": 1.0})
    systems["pensive dense only"] = pensive(default_fusion.method, {"dense": 1.0, "bm25": 0.0})
    for method in ("rrf", "weighted", "zscore"):
        label = f"pensive hybrid {method}" + (
            " (default)" if method == default_fusion.method else ""
        )
        systems[label] = pensive(method, dict(default_fusion.weights))

    peer_objs: dict[str, Any] = {}
    if not args.no_peers:
        builders = {
            "langchain EnsembleRetriever": lambda: peer_mod.build_langchain_ensemble(
                ids, texts, vectors, lambda s: lookup[s]
            ),
            "llamaindex QueryFusionRetriever": lambda: peer_mod.build_llamaindex_fusion(
                ids, texts, vectors, lambda s: lookup[s]
            ),
            "rank-bm25 (BM25Okapi)": lambda: peer_mod.build_rank_bm25(ids, texts),
            "plain FAISS (dense)": lambda: peer_mod.build_plain_faiss(
                ids, vectors, lambda s: lookup[s]
            ),
        }
        for name, build in builders.items():
            t = time.perf_counter()
            peer_objs[name] = build()
            build_ms[name] = round((time.perf_counter() - t) * 1000, 1)
            systems[name] = (lambda obj: lambda text: obj.search(text, K))(peer_objs[name])
            print(f"built {name} in {build_ms[name]:.0f} ms", flush=True)

    # -- quality: every judged query, once --------------------------------------------------
    results: dict[str, Any] = {}
    for name, run in systems.items():
        t = time.perf_counter()
        rankings = {q: doc_ranking(run(text), chunk_doc) for q, text in queries.items()}
        results[name] = {
            "quality": quality(rankings, qrels),
            "quality_pass_s": round(time.perf_counter() - t, 1),
        }
        print(f"{name}: {results[name]['quality']['all']}", flush=True)

    # -- latency: a fixed subset, repeats, retrieval alone and end to end --------------------
    lat_q = sorted(queries)[: args.latency_queries]
    for name, run in systems.items():
        retrieval, end_to_end = [], []
        for q in lat_q:
            text = queries[q]
            reps_r, reps_e = [], []
            for _ in range(args.repeats):
                if name.startswith("pensive"):
                    t = time.perf_counter()
                    run(text)
                    total = (time.perf_counter() - t) * 1000
                    emb = last["timings"].get("embed_ms", 0.0)
                    reps_r.append(total - emb)
                    reps_e.append(total)
                else:
                    t = time.perf_counter()
                    run(text)
                    reps_r.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    embedder.embed_query(text)
                    e = (time.perf_counter() - t) * 1000
                    reps_e.append(reps_r[-1] + e)
            retrieval.append(statistics.median(reps_r))
            end_to_end.append(statistics.median(reps_e))
        results[name]["latency_ms"] = {
            "retrieval": {k: round(v, 3) for k, v in percentiles(retrieval).items()},
            "end_to_end": {k: round(v, 3) for k, v in percentiles(end_to_end).items()},
        }
        if name in build_ms:
            results[name]["build_ms_excluding_embedding"] = build_ms[name]
        print(f"{name}: latency {results[name]['latency_ms']}", flush=True)

    default_name = next(n for n in results if n.endswith("(default)"))
    lc = results.get("langchain EnsembleRetriever")
    summary: dict[str, Any] = {
        "default": default_name,
        "default_ndcg10_all": results[default_name]["quality"]["all"]["nDCG@10"],
        "default_ndcg10_heldout": results[default_name]["quality"]["heldout"]["nDCG@10"],
        "default_ndcg10_report": results[default_name]["quality"]["report"]["nDCG@10"],
    }
    peers_nd = {
        n: r["quality"]["all"]["nDCG@10"] for n, r in results.items() if not n.startswith("pensive")
    }
    if peers_nd:
        summary["best_peer"] = max(peers_nd, key=peers_nd.get)  # type: ignore[arg-type]
        summary["beats_every_peer_ndcg10"] = all(
            summary["default_ndcg10_all"] > v for v in peers_nd.values()
        )
    if lc:
        summary["retrieval_speedup_vs_langchain_p50"] = round(
            lc["latency_ms"]["retrieval"]["p50"]
            / results[default_name]["latency_ms"]["retrieval"]["p50"],
            1,
        )
    payload = {
        "benchmark": "scifact",
        "data": {
            "corpus_docs": len(docs),
            "passages": len(ids),
            "queries": len(queries),
            "qrels": "train",
            "splits": "heldout = odd query ids, tune = even; choose/report = "
            "benchmarks.common.half_of (nothing chosen on report)",
            "latency_queries": len(lat_q),
            "repeats": args.repeats,
            "k_passages": K,
        },
        "config": base.model_dump(),
        "ingest": ingest,
        "query_embedding_ms_mean": round(embed_ms, 2),
        "systems": results,
        "summary": summary,
        "source": source_state(),
        "load_average": {"start": load_start, "end": load_average()},
        "environment": environment(),
    }
    write_results("scifact", args.out, payload, render(payload))
    p.close()


def render(payload: dict[str, Any]) -> str:
    d = payload["data"]
    lines = [
        "# SciFact (BEIR layout, train queries)\n",
        f"{d['corpus_docs']} abstracts -> {d['passages']} passages, {d['queries']} judged queries. "
        "Same passages and same all-MiniLM-L6-v2 vectors for every system; documents ranked by "
        "their best passage. nDCG@10 also on two splits of the queries: *report* (a salted-hash "
        "half on which nothing was chosen; `benchmarks.tune_scifact_fusion` compares fusion "
        "settings on the other half, *choose*) and the odd ids (*held-out* of the older tuning, "
        "which chose the default weights on the even ids; looked at often since).\n",
        "| system | nDCG@10 | R@10 | R@100 | nDCG@10 report | nDCG@10 held-out | "
        "retrieval p50 / p95 ms | end-to-end p50 / p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in payload["systems"].items():
        q, h = r["quality"]["all"], r["quality"]["heldout"]["nDCG@10"]
        rep = r["quality"]["report"]["nDCG@10"]
        lr, le = r["latency_ms"]["retrieval"], r["latency_ms"]["end_to_end"]
        lines.append(
            f"| {name} | {q['nDCG@10']:.4f} | {q['R@10']:.4f} | {q['R@100']:.4f} | "
            f"{rep:.4f} | {h:.4f} | {lr['p50']:.2f} / {lr['p95']:.2f} | "
            f"{le['p50']:.2f} / {le['p95']:.2f} |"
        )
    ing = payload["ingest"]
    s = payload["summary"]
    lines += [
        "",
        f"Pensive ingest (chunk, embed, index, archive): {ing['seconds']} s for "
        f"{ing['documents']} documents ({ing['chunks_embedded']} passages embedded). "
        f"Mean query embedding: {payload['query_embedding_ms_mean']} ms.",
        f"Summary: `{s}`",
        "",
        f"Commit {(payload.get('source') or {}).get('commit')}; load average "
        f"{(payload.get('load_average') or {}).get('start')} at start, "
        f"{(payload.get('load_average') or {}).get('end')} at end (2 cores).",
        "",
        f"Reproduce: `python -m benchmarks.scifact --latency-queries {d['latency_queries']} "
        f"--repeats {d['repeats']}` (after `make setup` and "
        "`pip install -r benchmarks/requirements.txt`).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
