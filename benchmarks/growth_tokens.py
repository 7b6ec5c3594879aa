"""Growth with the corpus in tokens: the needle stores of ``benchmarks.niah`` at 100k, 1M and
10M tokens, side by side, on what a user waits for at each size.

From ``benchmarks/results/niah.json`` (each size's own run, its commit stated): ingest rate
(passages/s and tokens/s, embedding included), the peak memory of the ingesting process, the
store's size on disk, needle recall@5 and the warm query latency in the process that built the
store, and the peers (LangChain and LlamaIndex hybrids) at the sizes they were run.

Measured here, in new processes on each store (never the process that built it): the time to
import Pensive, open the store read-only, and answer a first question never asked before
(median of 3 processes), the warm latency of 30 more new questions in the same process
(p50/p95), and that process's peak resident memory (``ru_maxrss``).

    python -m benchmarks.niah --sizes 100k,1M --peers 1M --store .bench/niah   # the stores
    python -m benchmarks.niah --sizes 10M --store .bench/niah
    python -m benchmarks.growth_tokens --store .bench/niah
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import (
    ROOT,
    base_parser,
    environment,
    load_average,
    source_state,
    write_results,
)
from benchmarks.first_query import QUESTIONS
from benchmarks.metrics import percentiles

SIZES = ("100k", "1M", "10M")
PROCESSES = 3
WARM = 30


PROCESS = """
import json, resource, sys, time
t0 = time.perf_counter()
from pensive_core import Pensive
t1 = time.perf_counter()
p = Pensive(sys.argv[1], read_only=True)
t2 = time.perf_counter()
questions = json.loads(sys.argv[2])
p.query(questions[0], k=5)
t3 = time.perf_counter()
lat = []
for q in questions[1:]:
    t = time.perf_counter()
    p.query(q, k=5)
    lat.append((time.perf_counter() - t) * 1000)
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_s": t3 - t2, "warm_ms": lat,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "torch": "torch" in sys.modules}))
p.close()
"""


def _questions(size: str, process: int) -> list[str]:
    tag = f"({size}, process {process}, run {os.getpid()})"  # never asked: L1 cannot answer
    stems = [q.rstrip("?") for q in QUESTIONS]
    return [f"{stems[i % len(stems)]}, case {i} {tag}?" for i in range(WARM + 1)]


def measure(store: Path, size: str) -> dict[str, Any]:
    """New processes on one store: open, first question, warm latency, peak memory."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = []
    for i in range(PROCESSES):
        out = subprocess.run(
            [sys.executable, "-c", PROCESS, str(store), json.dumps(_questions(size, i))],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    warm = [x for r in runs for x in r["warm_ms"]]
    med = {k: round(statistics.median(r[k] for r in runs), 3) for k in ("import_s", "open_s")}
    return {
        **med,
        "first_s": round(statistics.median(r["first_s"] for r in runs), 3),
        "open_plus_first_s": round(statistics.median(r["open_s"] + r["first_s"] for r in runs), 3),
        "warm_ms": {k: round(v, 2) for k, v in percentiles(warm).items()},
        "peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in runs), 1),
        "torch_imported": any(r["torch"] for r in runs),
        "disk_mb": round(sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) / 1e6, 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--niah", type=Path, default=ROOT / "benchmarks" / "results" / "niah.json")
    args = ap.parse_args(argv)
    if args.store is None:
        raise SystemExit("error: --store must name the niah store folder (see the docstring)")
    niah = json.loads(args.niah.read_text())["runs"]
    load_start = load_average()
    rows: dict[str, Any] = {}
    for size in SIZES:
        store = args.store / size
        if not (store / "pensive.sqlite").exists() or size not in niah:
            print(f"[{size}] no store or no niah run: skipped", flush=True)
            continue
        run = niah[size]
        ing, pen = run["ingest"], run["pensive"]
        rows[size] = {
            "tokens": run["haystack"]["tokens"],
            "passages": ing["chunks"],
            "niah": {
                "commit": (run.get("source") or {}).get("commit"),
                "measured_at": run.get("measured_at"),
                "ingest_passages_per_s": ing["chunks_per_s"],
                "ingest_tokens_per_s": ing["tokens_per_s"],
                "ingest_peak_rss_mb": ing.get("peak_rss_mb"),
                "recall@5": pen["overall"]["recall@5"],
                "query_ms": pen["latency_ms"],
            },
            "peers": {
                name: {"recall@5": p["overall"]["recall@5"], "query_ms": p.get("latency_ms")}
                for name, p in (run.get("peers") or {}).items()
            },
            "new_process": measure(store, size),
        }
        print(f"[{size}]", rows[size]["new_process"], flush=True)
    payload = {
        "benchmark": "growth_tokens",
        "source": source_state(),
        "environment": environment(),
        "load_average": {"start": load_start, "end": load_average()},
        "sizes": rows,
    }
    write_results("growth_tokens", args.out, payload, render(payload))


def render(payload: dict[str, Any]) -> str:
    la = payload["load_average"]
    lines = [
        "# Growth in tokens: the needle stores at 100k, 1M and 10M tokens",
        "",
        f"New-process figures measured by `python -m benchmarks.growth_tokens --store DIR` at "
        f"commit {payload['source']['commit']} (load average {la['start']} at start, "
        f"{la['end']} at end; 2 cores). Ingest, recall and in-process latency come from each "
        "size's `benchmarks.niah` run (its commit in the last column).",
        "",
        "| tokens | passages | ingest passages/s | ingest tokens/s | ingest peak RSS MB | disk MB "
        "| recall@5 | query p50 / p95 ms (niah) | open s | first query s | warm p50 / p95 ms "
        "| reader peak RSS MB | torch imported | niah commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, r in payload["sizes"].items():
        n, np_ = r["niah"], r["new_process"]
        lines.append(
            f"| {size} ({r['tokens']:,}) | {r['passages']:,} | {n['ingest_passages_per_s']} "
            f"| {n['ingest_tokens_per_s']} | {n['ingest_peak_rss_mb']} | {np_['disk_mb']} "
            f"| {n['recall@5']:.1%} | {n['query_ms']['p50']} / {n['query_ms']['p95']} "
            f"| {np_['open_s']} | {np_['first_s']} | {np_['warm_ms']['p50']} / "
            f"{np_['warm_ms']['p95']} | {np_['peak_rss_mb']} | {np_['torch_imported']} "
            f"| {str(n['commit'])[:8]} |"
        )
    peers = [(s, name, p) for s, r in payload["sizes"].items() for name, p in r["peers"].items()]
    if peers:
        lines += ["", "Peers, where they were run (same haystack and needles):", ""]
        lines += ["| tokens | peer | recall@5 | query p50 / p95 ms |", "|---|---|---|---|"]
        for s, name, p in peers:
            q = p["query_ms"] or {}
            lines.append(
                f"| {s} | {name} | {p['recall@5']:.1%} | {q.get('p50')} / {q.get('p95')} |"
            )
    lines += [
        "",
        "Open s: `Pensive(store, read_only=True)` in a new process after importing Pensive. "
        "First query s: its first question (never asked before). Warm: the next "
        f"{WARM} new questions in the same process, over {PROCESSES} processes. Reader peak RSS: "
        "that process's `ru_maxrss`.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
