"""Blue/green re-embedding: throughput of ``Pensive.reembed`` (hash -> the bundled MiniLM) and
the work a SIGKILL in the middle costs.

A store is built with the model-free ``hash`` embedder over the first ``--limit`` (1000)
SciFact abstracts of ``corpus.jsonl`` (title + abstract, as ``benchmarks.scifact`` builds
them), and copied. On the first copy ``reembed("minilm")`` runs to the end: passages/s is
passages embedded over the whole call (model load excluded: it happens before the call,
as a real run's does once), and the publish (shadow index built from the checkpoint, the
switch) is timed apart. On the second copy a child process runs the same call and is killed
with SIGKILL by this process as soon as it reports half the documents checkpointed (so the
kill lands inside the next batch, whose work is lost); the call is then run again here and
resumes. Reported: documents the checkpoint held, passages embedded by the resumed call,
passages embedded twice (the batch in flight at the kill), and the top-10 of 50 SciFact
queries of the resumed store against the uninterrupted one (they must be the same).

Nothing is tuned here: ``batch_size`` is the default (256 passages per checkpoint). One run;
the machine was shared with other work (the 1-minute load average at start and end is
recorded), so the figures are indicative.

    python -m benchmarks.reembed
    python -m benchmarks.reembed --limit 60 --out /tmp/reembed-bench   # a quick check
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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

CHILD = """
import sys
from pensive_core import Pensive

with Pensive(sys.argv[1]) as p:
    p.embedder  # (loaded here as in the parent's run)
    print("ready", flush=True)
    p.reembed(
        "minilm",
        batch_size=int(sys.argv[2]),
        progress=lambda done, total: print(done, total, flush=True),
    )
print("finished", flush=True)
"""


def _top(p: Any, queries: list[str]) -> list[list[str]]:
    return [[h.chunk_id for h in p.query(q, k=10).hits] for q in queries]


def kill_halfway(store: Path, batch_size: int) -> dict[str, Any]:
    """Run the re-embed in a child and SIGKILL it once half the documents are checkpointed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(batch_size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    seen = 0
    started = last = killed_at = time.perf_counter()
    reports: list[float] = []
    for line in proc.stdout:
        if line.startswith("ready"):
            started = time.perf_counter()
            continue
        parts = line.split()
        if len(parts) == 2:
            seen, total = int(parts[0]), int(parts[1])
            last = time.perf_counter()
            reports.append(last)
            if total and seen >= total // 2:
                # SIGKILL half a batch later: the kill lands inside the next batch
                batch_s = (reports[-1] - reports[0]) / max(len(reports) - 1, 1)
                time.sleep(batch_s / 2)
                killed_at = time.perf_counter()
                proc.kill()
                break
    proc.wait()
    return {
        "returncode": proc.returncode,
        "documents_reported_at_kill": seen,
        "seconds_before_kill": round(killed_at - started, 2),
        "embedding_seconds_lost": round(killed_at - last, 2),
    }


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=1000, help="SciFact abstracts (default 1000)")
    ap.add_argument("--batch-size", type=int, default=256, help="passages per checkpoint")
    args = ap.parse_args(argv)

    from benchmarks.scifact_data import load
    from pensive_core import Pensive

    docs, queries, _ = load(args.data)
    docs = docs[: args.limit]
    asked = [queries[q] for q in sorted(queries, key=int)[:50]]
    load_start = load_average()
    work = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="reembed-bench-"))
    shutil.rmtree(work, ignore_errors=True)
    base, whole, killed = work / "hash", work / "whole", work / "killed"
    t = time.perf_counter()
    with Pensive(base, config={"embedder": {"name": "hash"}}) as p:
        report = p.ingest(docs)
        passages = p.stats()["vectors"]
    build_s = time.perf_counter() - t
    print(f"built the hash store: {len(docs)} documents, {passages} passages, {build_s:.1f}s")
    shutil.copytree(base, whole)
    shutil.copytree(base, killed)

    with Pensive(whole) as p:
        from pensive_core.config import EmbedderConfig
        from pensive_core.embedders import create_embedder

        t = time.perf_counter()
        model = create_embedder(EmbedderConfig(name="minilm"))
        model_load_s = time.perf_counter() - t
        marks: list[float] = []
        t = time.perf_counter()
        full = p.reembed(
            model,
            batch_size=args.batch_size,
            progress=lambda d, n: marks.append(time.perf_counter()),
        )
        full_s = time.perf_counter() - t
        embed_s = marks[-1] - t  # the last checkpointed batch: the rest is the publish
        top_whole = _top(p, asked)
    print(f"uninterrupted: {full['embedded']} passages in {full_s:.1f}s")

    kill = kill_halfway(killed, args.batch_size)
    if kill["returncode"] != -9:
        raise SystemExit(f"the child was not killed mid-run ({kill}); use a smaller --batch-size")
    with Pensive(killed) as p:
        model2 = create_embedder(EmbedderConfig(name="minilm"))
        t = time.perf_counter()
        resumed = p.reembed(model2, batch_size=args.batch_size)
        resume_s = time.perf_counter() - t
        top_killed = _top(p, asked)
    redone = resumed["resumed_from"] - kill["documents_reported_at_kill"]
    print(f"killed at {kill['documents_reported_at_kill']} documents; resumed: {resumed}")
    load_end = load_average()

    n = full["embedded"]
    results = {
        "benchmark": "reembed",
        "data": {
            "corpus": "scifact/corpus.jsonl",
            "documents": len(docs),
            "passages": passages,
            "split": "first --limit abstracts in file order; 50 train queries (lowest ids) for "
            "the parity check; nothing chosen",
        },
        "config": {"from": "hash", "to": "minilm", "batch_size": args.batch_size},
        "build_hash_store_s": round(build_s, 2),
        "ingest_chunks_embedded": report.chunks_embedded,
        "model_load_s": round(model_load_s, 2),
        "uninterrupted": {
            "seconds": round(full_s, 2),
            "embedding_s": round(embed_s, 2),
            "publish_s": round(full_s - embed_s, 2),
            "passages_per_s": round(n / full_s, 2),
            "embedded": n,
        },
        "killed": {
            **kill,
            "resumed_from_documents": resumed["resumed_from"],
            "resumed_embedded_passages": resumed["embedded"],
            "resume_s": round(resume_s, 2),
            "documents_checkpointed_after_last_report": redone,
            "passages_checkpointed_at_kill": n - resumed["embedded"],
            "published": resumed["published"],
        },
        "parity_top10_same": top_killed == top_whole,
        "load_avg_1m": {"start": load_start, "end": load_end},
        "environment": environment(),
        "source": source_state(),
    }
    held = n - resumed["embedded"]  # passages the checkpoint held at the kill
    md = [
        "# Re-embedding (hash -> minilm), blue/green",
        "",
        f"{len(docs)} SciFact abstracts ({passages} passages), one run on a shared 2-core "
        f"machine (1-min load {load_start} at start, {load_end} at end): indicative figures.",
        "",
        "| run | seconds | passages embedded | passages/s |",
        "|---|---|---|---|",
        f"| uninterrupted (embedding {embed_s:.1f}s + publish {full_s - embed_s:.1f}s) | "
        f"{full_s:.1f} | {n} | {n / full_s:.1f} |",
        f"| resumed after SIGKILL at {kill['documents_reported_at_kill']} documents | "
        f"{resume_s:.1f} | {resumed['embedded']} | {resumed['embedded'] / resume_s:.1f} |",
        "",
        f"The checkpoint held {resumed['resumed_from']} documents ({held} passages) at the "
        f"kill; the resumed call embedded only the other {resumed['embedded']} passages. The "
        f"kill came {kill['embedding_seconds_lost']}s after the last checkpoint: that much "
        f"embedding (inside one batch of at most {args.batch_size} passages) was lost and redone. Top-10 of 50 "
        f"queries, resumed store vs uninterrupted: {'identical' if top_killed == top_whole else 'DIFFERENT'}.",
        "",
        "`python -m benchmarks.reembed` (see the module docstring for the method).",
        "",
    ]
    write_results("reembed", args.out, results, "\n".join(md))
    if not args.store:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
