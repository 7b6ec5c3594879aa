"""What one small commit costs: a one-document ingest into a store of SciFact abstracts, the
bytes and files it writes, and how long a reader in another handle takes to answer its first
question after it (the reload).

Each code version runs in its own process on its own store (a store written by newer code may
not open under older code): the working tree, and with ``--compare REV`` that commit too,
checked out in a temporary git worktree. Runs alternate between the versions, ``--rounds``
times, and every figure is a median over rounds of the per-round medians.

    python -m benchmarks.commit_cost --compare e82caeb

The embedder defaults to the model-free ``hash`` one: a commit's cost does not depend on how
its vectors were made, and the build of the store stays short (``--embedder minilm`` for the
default model).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, base_parser, environment, source_state, write_results


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """The index files (BM25 and vectors; SQLite pages are written in place, not counted)."""
    out = {}
    for p in folder.rglob("*"):
        if p.is_file() and p.relative_to(folder).parts[0].startswith(("bm25", "vectors")):
            st = p.stat()
            out[str(p.relative_to(folder))] = (st.st_mtime_ns, st.st_size)
    return out


def measure(store: Path, data: Path, n_docs: int, commits: int, embedder: str) -> dict[str, Any]:
    """One version's figures (run in the child process)."""
    from pensive_core import Document, Pensive

    with open(data / "scifact" / "corpus.jsonl") as f:
        rows = [json.loads(line) for line in f]
    docs = [
        Document(id=r["_id"], text=(r["title"] + ". " + r["text"]).strip())
        for r in rows[: n_docs + commits]
    ]
    cfg = {"embedder": {"name": embedder}}
    t0 = time.perf_counter()
    with Pensive(store, config=cfg) as p:
        p.ingest(docs[:n_docs])
    build_s = time.perf_counter() - t0
    ingest_ms, bytes_w, files_w, reload_ms, steady_ms = [], [], [], [], []
    with Pensive(store, config=cfg) as w, Pensive(store, config=cfg, read_only=True) as r:
        w.ingest([docs[n_docs]])  # warm: model, first commit of this handle
        r.query("warm up the reader", k=5)
        for i in range(commits):
            doc = docs[n_docs + i]
            before = _files(store)
            t = time.perf_counter()
            w.ingest([Document(id=f"new-{i}", text=doc.text)])
            ingest_ms.append((time.perf_counter() - t) * 1000)
            after = _files(store)
            changed = [k for k, v in after.items() if before.get(k) != v]
            bytes_w.append(sum(after[k][1] for k in changed))
            files_w.append(len(changed))
            q = doc.text.split(".")[0][:200] or "abstract"
            t = time.perf_counter()
            r.query(q, k=5)  # the reader reloads what the commit changed, then answers
            reload_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            r.query(q + " results", k=5)
            steady_ms.append((time.perf_counter() - t) * 1000)
    import pensive_core

    return {
        "code": str(Path(pensive_core.__file__).parents[1]),
        "build_s": round(build_s, 1),
        "ingest_ms": statistics.median(ingest_ms),
        "bytes_written": statistics.median(bytes_w),
        "files_written": statistics.median(files_w),
        "reader_first_query_ms": statistics.median(reload_ms),
        "reader_next_query_ms": statistics.median(steady_ms),
    }


def _child(code: Path, args: Any, store: Path) -> dict[str, Any]:
    # this tree's benchmark code, the measured tree's pensive_core: imported from ``code``
    # ahead of the editable install's finder (which would map it to this tree)
    boot = (
        "import sys; from benchmarks import commit_cost as m; "
        "sys.meta_path = [f for f in sys.meta_path if '__editable__' not in "
        "getattr(f, '__module__', '') + getattr(f, '__name__', '')]; "
        f"sys.path = [{str(code)!r}] + [p for p in sys.path if p not in ('', {str(ROOT)!r})]; "
        "sys.argv = ['commit_cost', *sys.argv[1:]]; m.main()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-c",
        boot,
        "--child",
        str(store),
        "--data",
        str(args.data),
        "--docs",
        str(args.docs),
        "--commits",
        str(args.commits),
        "--embedder",
        args.embedder,
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{code}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=5000, help="abstracts in the store")
    ap.add_argument("--commits", type=int, default=20, help="one-document ingests per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--compare", default="", help="a git revision measured the same way")
    ap.add_argument("--child", type=Path, default=None, help=argparse_hidden())
    args = ap.parse_args()
    if args.child is not None:
        res = measure(args.child, args.data, args.docs, args.commits, args.embedder)
        print(json.dumps(res))
        return
    with tempfile.TemporaryDirectory(prefix="pensive-commit-cost-") as tmp:
        versions = {"this commit": ROOT}
        if args.compare:
            old = Path(tmp) / "old"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(old), args.compare],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            versions[args.compare] = old
        try:
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
            for rnd in range(args.rounds):
                for name, code in versions.items():
                    store = Path(tmp) / f"store-{len(runs[name])}-{abs(hash(name))}"
                    runs[name].append(_child(code, args, store))
                    print(name, rnd, runs[name][-1], flush=True)
        finally:
            if args.compare:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False
                )
    keys = [k for k in next(iter(runs.values()))[0] if k != "code"]
    table = {
        name: {k: round(statistics.median(r[k] for r in rs), 2) for k in keys}
        for name, rs in runs.items()
    }
    payload = {
        "benchmark": "commit_cost",
        "source": source_state(),
        "environment": environment(),
        "config": {
            "docs": args.docs,
            "commits": args.commits,
            "rounds": args.rounds,
            "embedder": args.embedder,
            "data": "SciFact corpus (first --docs abstracts, then one new abstract per commit)",
        },
        "versions": table,
        "runs": runs,
    }
    lines = [
        "# Commit cost: a one-document ingest into a store of SciFact abstracts",
        "",
        f"{args.docs} abstracts, `{args.embedder}` embedder, {args.commits} one-document "
        f"ingests per round, {args.rounds} rounds alternating between versions (medians). "
        f"Measured on {payload['source']['commit']}. Reproduce: `python -m "
        f"benchmarks.commit_cost{' --compare ' + args.compare if args.compare else ''}`.",
        "",
        "| code | ingest ms | index bytes written | index files written | reader's first query ms "
        "| reader's next query ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in table.items():
        lines.append(
            f"| {name} | {row['ingest_ms']:.1f} | {int(row['bytes_written']):,} | "
            f"{int(row['files_written'])} | {row['reader_first_query_ms']:.1f} | "
            f"{row['reader_next_query_ms']:.1f} |"
        )
    write_results("commit_cost", args.out, payload, "\n".join(lines) + "\n")


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
