"""Ingest speed: SciFact abstracts through ``Pensive.ingest`` (the default config, the model
already loaded) against plain sentence-transformers ``encode`` of the same abstracts, side by
side in one process.

Rungs (each a fresh store, the same documents): passages embedded by PyTorch in float32
(``batch_runtime = "torch"``, ``batch_dtype = "float32"``, ``batch_size`` 16: before issue
29), by onnxruntime in float32 on the verified export with batches sorted by length, and by a
bfloat16 copy of the PyTorch model (what ``auto`` picks for a large call on a CPU with native
bfloat16), each at several batch sizes; and each with the batch's embedding run in a thread
beside its archive, BM25, graph and statement stages (``overlapped``, the default) or before
them. The peer is ``SentenceTransformer.encode(texts, batch_size=32,
normalize_embeddings=True)`` on every core, what a user of the library writes. Rounds alternate
between the rungs and the peer; each figure is the median over ``--rounds``. Documents/s and
passages/s count what was ingested; ``x encode`` is the peer's time over the rung's on the
same documents (above 1: faster than embedding them with the library alone). The stage
seconds of Pensive's own report say where an ingest's time goes.

Take it on a quiet machine (the load average at start and end is recorded).

    python -m benchmarks.ingest_speed [--limit 400] [--rounds 3]
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import base_parser, environment, load_average, source_state, write_results

RUNGS = [
    ("torch float32, batch 16 (before)", "torch", "float32", 16, False),
    ("onnx float32, batch 16", "onnx", "float32", 16, False),
    ("onnx float32, batch 16, overlapped", "onnx", "float32", 16, True),
    ("torch bfloat16, batch 32", "torch", "bfloat16", 32, False),
    ("torch bfloat16, batch 32, overlapped (default)", "torch", "bfloat16", 32, True),
    ("torch bfloat16, batch 64, overlapped", "torch", "bfloat16", 64, True),
]


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=400, help="abstracts ingested (default 400)")
    ap.add_argument("--offset", type=int, default=0, help="skip this many abstracts first")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from pensive_core import Document, Pensive
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder
    from pensive_core.ingest import IngestPipeline

    with open(args.data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][args.offset : args.offset + args.limit]
    docs = [
        Document(id=r["_id"], text=(r["title"] + ". " + r["text"]).strip(), metadata={})
        for r in rows
    ]
    texts = [d.text for d in docs]
    load_start = load_average()
    embedders = {
        name: create_embedder(EmbedderConfig(batch_runtime=rt, batch_dtype=dt, batch_size=bs))
        for name, rt, dt, bs, _ in RUNGS
    }
    for e in embedders.values():  # loaded, exported, verified: not ingest time
        getattr(e, "inner", e).warm()
        e.embed(["warm up the model"])
    st = embedders[RUNGS[0][0]].model
    times: dict[str, list[float]] = {name: [] for name, *_ in RUNGS}
    times["sentence-transformers encode"] = []
    passages: dict[str, int] = {}
    stages: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in RUNGS}
    with tempfile.TemporaryDirectory(prefix="pensive-ingest-speed-") as tmp:
        for rnd in range(args.rounds):
            t = time.perf_counter()
            st.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
            times["sentence-transformers encode"].append(time.perf_counter() - t)
            for name, *_, overlap in RUNGS:
                store = Path(tmp) / f"{rnd}-{len(times[name])}-{abs(hash(name))}"
                with Pensive(store, embedder=embedders[name]) as p:
                    IngestPipeline.overlap_embedding = overlap
                    t = time.perf_counter()
                    rep = p.ingest(docs)
                    times[name].append(time.perf_counter() - t)
                passages[name] = rep.chunks_embedded
                stages[name].append(dict(rep.stages))
                print(rnd, name, round(times[name][-1], 2), "s", flush=True)
    peer = statistics.median(times["sentence-transformers encode"])
    table = []
    IngestPipeline.overlap_embedding = True
    for name, rt, dt, bs, overlap in RUNGS:
        sec = statistics.median(times[name])
        table.append(
            {
                "rung": name,
                "batch_runtime": rt,
                "batch_dtype": dt,
                "batch_size": bs,
                "overlapped": overlap,
                "seconds": round(sec, 2),
                "documents_per_s": round(len(docs) / sec, 1),
                "passages_per_s": round(passages[name] / sec, 1),
                "passages": passages[name],
                "x_encode": round(peer / sec, 2),
                "stages_s": {
                    k: round(statistics.median(s[k] for s in stages[name]), 2)
                    for k in stages[name][0]
                },
            }
        )
    payload = {
        "benchmark": "ingest_speed",
        "source": source_state(),
        "environment": environment(),
        "load_average": {"start": load_start, "end": load_average()},
        "config": {
            "documents": len(docs),
            "offset": args.offset,
            "rounds": args.rounds,
            "data": "SciFact corpus.jsonl, title + abstract, in file order",
        },
        "peer": {
            "name": "sentence-transformers encode, batch 32",
            "seconds": round(peer, 2),
            "documents_per_s": round(len(docs) / peer, 1),
            "runs_s": [round(x, 2) for x in times["sentence-transformers encode"]],
        },
        "rungs": table,
        "runs_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
    }
    lines = [
        "# Ingest speed",
        "",
        f"`python -m benchmarks.ingest_speed --limit {args.limit} --rounds {args.rounds}`: "
        f"{len(docs)} SciFact abstracts, default config, the model loaded before timing; "
        f"medians of {args.rounds} rounds. Load average {load_start} at start, {load_average()} at "
        f"end. Commit {payload['source']['commit']}.",
        "",
        f"Peer, same process and documents: sentence-transformers `encode` (batch 32, every "
        f"core): {peer:.2f} s, {len(docs) / peer:.1f} documents/s.",
        "",
        "| rung | s | documents/s | passages/s | x encode | embedding s | other stages s "
        "| waited for vectors s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        emb = r["stages_s"].get("embedding", 0.0)
        other = sum(v for k, v in r["stages_s"].items() if k not in ("embedding", "embedding_wait"))
        lines.append(
            f"| {r['rung']} | {r['seconds']} | {r['documents_per_s']} | {r['passages_per_s']} "
            f"| {r['x_encode']} | {emb:.2f} | {other:.2f} "
            f"| {r['stages_s'].get('embedding_wait', 0.0):.2f} |"
        )
    write_results("ingest_speed", args.out, payload, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
