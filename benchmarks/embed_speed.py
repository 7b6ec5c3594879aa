"""Passage embedding speed: the bundled MiniLM in this process (torch threads 1 and 2, batch
sizes 16/32/64 with 2 threads) against ``[embedder] workers`` (worker processes, one torch
thread each).

The same real passages are embedded by every setting: the first ``--limit`` (512) SciFact
abstracts of ``corpus.jsonl`` in file order (the model reads at most 256 tokens of each, as at
ingest). Each setting runs once untimed (warm-up; for workers this includes starting them,
reported apart as ``start_s``), then ``--repeats`` (3) timed runs; passages/s is the median.
The worker setting calls the worker pool directly, so it is measured even when ``--limit`` is
below the size at which ``embed()`` would hand a batch to the workers. The largest difference
between worker and in-process vectors is reported as a check.

Timings depend on what else runs: take them on a quiet machine (the 1-minute load average at
start and end is recorded).

    python -m benchmarks.embed_speed
    python -m benchmarks.embed_speed --limit 64 --repeats 1 --out /tmp/embed-speed   # a check
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import base_parser, environment, load_average, source_state, write_results


def load_passages(data: Path, limit: int) -> list[str]:
    """The first ``limit`` non-empty SciFact abstracts, in file order."""
    path = data / "scifact" / "corpus.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found; pass --data DIR")
    out: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            text = json.loads(line).get("text", "").strip()
            if text:
                out.append(text)
                if len(out) == limit:
                    break
    return out


def measure(run: Callable[[], np.ndarray], n: int, repeats: int) -> dict[str, Any]:
    """One untimed warm-up, then ``repeats`` timed runs: passages/s (median) and the runs."""
    t = time.perf_counter()
    vecs = run()
    warm = time.perf_counter() - t
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        runs.append(time.perf_counter() - t)
    med = statistics.median(runs)
    return {
        "passages_per_s": round(n / med, 2),
        "seconds": [round(s, 3) for s in runs],
        "warmup_s": round(warm, 3),
        "vectors": vecs,
    }


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=512, help="passages embedded (default 512)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per setting (default 3)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    args = ap.parse_args(argv)

    from pensive_core.embedders.sentence_transformers import (
        SentenceTransformerEmbedder,
        bundled_minilm_path,
    )

    texts = load_passages(args.data, args.limit)
    n = len(texts)
    load_start = load_average()
    t = time.perf_counter()
    model = SentenceTransformerEmbedder(bundled_minilm_path(), "minilm", batch_size=64)
    model_load_s = time.perf_counter() - t
    rows: list[dict[str, Any]] = []

    def in_process(threads: int, batch: int) -> None:
        def run() -> np.ndarray:
            model.batch_size = batch
            return model.embed_torch(texts, threads)

        got = measure(run, n, args.repeats)
        rows.append({"setting": "in-process", "threads": threads, "batch_size": batch, **got})
        print(f"in-process threads={threads} batch={batch}: {got['passages_per_s']} passages/s")

    in_process(1, 64)
    for batch in (16, 32, 64):
        in_process(2, batch)
    reference = next(r["vectors"] for r in rows if r["threads"] == 2 and r["batch_size"] == 64)

    pooled = SentenceTransformerEmbedder(
        bundled_minilm_path(),
        "minilm",
        batch_size=64,
        batch_threads=args.workers,
        workers=args.workers,
    )
    try:
        assert pooled.pool is not None
        pool = pooled.pool
        t = time.perf_counter()
        pool.embed(texts[:2])  # starts the workers (model load in each)
        start_s = time.perf_counter() - t
        got = measure(lambda: pool.embed(texts), n, args.repeats)
        diff = float(np.abs(got["vectors"] - reference).max())
        rows.append(
            {
                "setting": f"workers={args.workers}",
                "threads": pool.threads,
                "batch_size": 64,
                **got,
                "start_s": round(start_s, 3),
                "max_abs_diff_vs_in_process": diff,
            }
        )
        print(
            f"workers={args.workers} (threads {pool.threads} each): "
            f"{got['passages_per_s']} passages/s (start {start_s:.1f} s, max diff {diff:.1e})"
        )
    finally:
        pooled.close()

    for r in rows:
        del r["vectors"]
    command = "python -m benchmarks.embed_speed " + " ".join(
        sys.argv[1:] if argv is None else list(argv)
    )
    payload: dict[str, Any] = {
        "benchmark": "embed_speed",
        "command": command.strip(),
        "environment": environment(),
        "source": source_state(),
        "passages": n,
        "mean_chars": round(sum(map(len, texts)) / max(n, 1), 1),
        "repeats": args.repeats,
        "model_load_s": round(model_load_s, 3),
        "load_average_1min": {"start": load_start, "end": load_average()},
        "results": rows,
    }
    write_results("embed_speed", args.out, payload, render(payload))


def render(payload: dict[str, Any]) -> str:
    env, load = payload["environment"], payload["load_average_1min"]
    lines = [
        "# Passage embedding speed",
        "",
        f"`{payload['command']}`: {payload['passages']} SciFact abstracts "
        f"(mean {payload['mean_chars']} characters), bundled all-MiniLM-L6-v2 on CPU, "
        f"median of {payload['repeats']} timed runs after one warm-up. "
        f"{env.get('cpus')} CPUs, torch {env.get('torch', '?')}; 1-minute load average "
        f"{load['start']} at start, {load['end']} at end.",
        "",
        "| setting | torch threads | batch size | passages/s | runs (s) | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        note = ""
        if "start_s" in r:
            note = (
                f"workers start in {r['start_s']} s; max abs diff vs in-process "
                f"{r['max_abs_diff_vs_in_process']:.1e}"
            )
        per = " per worker" if r["setting"].startswith("workers") else ""
        lines.append(
            f"| {r['setting']} | {r['threads']}{per} | {r['batch_size']} | "
            f"{r['passages_per_s']} | {', '.join(map(str, r['seconds']))} | {note} |"
        )
    src = payload["source"]
    lines += [
        "",
        f"Commit {src.get('commit')}"
        + (
            f" with uncommitted changes in {', '.join(src['pensive_core_uncommitted'])}."
            if src.get("pensive_core_uncommitted")
            else "."
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
