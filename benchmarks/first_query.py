"""First query in a new process: how long a fresh Python process takes from start to its first
answer on an existing store (the needle store of ``benchmarks.niah``, built with ``--store``),
and the wall time of ``pensive query`` on the command line.

Each measurement is a new process asking a question never asked of the store before (so L1
cannot answer it): ``import pensive_core``, ``Pensive(store, read_only=True)``, the first
``query``, each timed inside the process, and the whole process's wall time for the CLI. The
first run after the store's last commit is reported apart (``cold``): it may build what later
processes read (the graph view, when the writer did not save it at close).

    python -m benchmarks.niah --sizes 1M --phase build --store .bench/niah   # the store
    python -m benchmarks.first_query --store .bench/niah/1M
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
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

QUESTIONS = [
    "Which lighthouse did the keeper paint blue in the storm year?",
    "Where did the old clockmaker hide the brass key for the tower?",
    "Who repaired the mill wheel after the spring flood?",
    "What colour was the boat the ferry captain sold to his cousin?",
    "When did the village council first vote on the bridge toll?",
    "Which orchard supplied the apples for the harvest fair?",
    "How many lanterns hung on the harbour wall during the festival?",
    "Who wrote the letter found under the chapel floor?",
]

IN_PROCESS = """
import json, sys, time
t0 = time.perf_counter()
import pensive_core
from pensive_core import Pensive
t1 = time.perf_counter()
p = Pensive(sys.argv[1], read_only=True)
t2 = time.perf_counter()
res = p.query(sys.argv[2], k=5)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "query_s": t3 - t2,
                  "tier": res.tier, "torch": "torch" in sys.modules}))
p.close()
"""


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--name", default="first_query", help="results file name (NAME.json/.md)")
    args = ap.parse_args(argv)
    if args.store is None or not (args.store / "pensive.sqlite").exists():
        raise SystemExit("error: --store must name a built store (see the module docstring)")
    store = str(args.store)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load_start = load_average()
    runs: list[dict[str, Any]] = []
    tag = f" (run {time.strftime('%H%M%S')})"  # never asked before: L1 cannot answer
    for i, q in enumerate(QUESTIONS[:5]):
        out = subprocess.run(
            [sys.executable, "-c", IN_PROCESS, store, q + tag],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["first_s"] = row["open_s"] + row["query_s"]
        row["process"] = i
        runs.append(row)
        print(row, flush=True)
    cli: list[float] = []
    pensive = Path(sys.executable).with_name("pensive")
    for q in QUESTIONS[5:]:
        t = time.perf_counter()
        subprocess.run(
            [str(pensive), "query", q + tag, "--store", store, "-k", "5"],
            env=env,
            capture_output=True,
            check=True,
        )
        cli.append(time.perf_counter() - t)
    warm = runs[1:]
    summary = {
        "cold": {k: round(runs[0][k], 3) for k in ("import_s", "open_s", "query_s", "first_s")},
        "warm_median": {
            k: round(statistics.median(r[k] for r in warm), 3)
            for k in ("import_s", "open_s", "query_s", "first_s")
        },
        "cli_wall_s": [round(x, 3) for x in cli],
        "cli_wall_median_s": round(statistics.median(cli), 3),
        "torch_imported": any(r["torch"] for r in runs),
        "tiers": [r["tier"] for r in runs],
    }
    payload = {
        "benchmark": "first_query",
        "source": source_state(),
        "environment": environment(),
        "load_average": {"start": load_start, "end": load_average()},
        "store": store,
        "summary": summary,
        "runs": runs,
    }
    w, c = summary["warm_median"], summary["cold"]
    md = [
        "# First query in a new process",
        "",
        f"`python -m benchmarks.first_query --store {store}`: 5 new processes, each opening the "
        f"store read-only and asking one question never asked before; then "
        f"`pensive query` {len(cli)} times. Load average {load_start} at start, "
        f"{payload['load_average']['end']} at end. Commit {payload['source']['commit']}.",
        "",
        "| process | import s | open s | first query s | open + first query s |",
        "|---|---|---|---|---|",
        f"| first after the last commit | {c['import_s']} | {c['open_s']} | {c['query_s']} "
        f"| {c['first_s']} |",
        f"| later (median of 4) | {w['import_s']} | {w['open_s']} | {w['query_s']} "
        f"| {w['first_s']} |",
        "",
        f"`pensive query` wall time (process start to exit): median "
        f"{summary['cli_wall_median_s']} s ({', '.join(map(str, summary['cli_wall_s']))}). "
        f"torch imported: {summary['torch_imported']}.",
    ]
    write_results(args.name, args.out, payload, "\n".join(md) + "\n")


if __name__ == "__main__":
    main()
