"""The hypervector selector's cost: build time, query latency and bank memory by bank size.

Turns are real chat text, never repeated: every LoCoMo development turn (2,760, in
conversation and session order), then TIAGE utterances (train, then dev), then, as those two
hold 8,885 distinct texts, LoCoMo's per-session observation sentences to reach 10,000.
Exact duplicate texts are dropped. A bank of ``n`` turns is the first ``n`` of that list,
so the 60- and 1,000-turn banks are LoCoMo conversation alone.

Queries are LoCoMo questions (``qa[i]["question"]``), ``repeats`` of them drawn with a
fixed seed. Each bank is built fresh with one ``add`` (build time includes tokenising and the
codebook rows it makes). One untimed pass over the queries first warms the tokenizer's stem
cache, the word-to-row cache and the codebook cache as a long-running process would have them;
the first (cold) pass is reported too. Per query: *encode + search* is ``search(q, k=10)`` as
a caller sees it; *search alone* scores an already-encoded query against the bank (top 10).

    python -m benchmarks.memory_hv            # prints the markdown table
"""

from __future__ import annotations

import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pensive_core.memory.hypervector import HypervectorSelector

SIZES = (60, 1_000, 10_000)
K = 10


def load_turns(data: Path, limit: int = max(SIZES)) -> tuple[list[str], dict[str, int]]:
    """Distinct real turn texts, LoCoMo first, and how many came from each source."""
    locomo = json.loads((data / "locomo" / "locomo_dev.json").read_text())
    seen: dict[str, None] = {}
    counts: dict[str, int] = {}

    def take(source: str, texts: list[str]) -> None:
        for text in texts:
            if len(seen) >= limit:
                return
            text = text.strip()
            if text and text not in seen:
                seen[text] = None
                counts[source] = counts.get(source, 0) + 1

    turns: list[str] = []
    for sample in locomo:
        conv = sample["conversation"]
        sessions = sorted(
            (k for k in conv if k.startswith("session_") and isinstance(conv[k], list)),
            key=lambda k: int(k.split("_")[1]),
        )
        turns.extend(t["text"] for s in sessions for t in conv[s])
    take("locomo_turns", turns)
    for name in ("anno_train.json", "anno_dev.json"):
        dialogs = json.loads((data / "tiage" / name).read_text())
        take("tiage_utterances", [u for d in dialogs.values() for u, _label in d])
    observations = [
        fact
        for sample in locomo
        for session in sample.get("observation", {}).values()
        for facts in session.values()
        for fact, *_evidence in facts
    ]
    take("locomo_observations", observations)
    return list(seen), counts


def load_questions(data: Path, repeats: int, seed: int = 0) -> list[str]:
    """``repeats`` LoCoMo questions, drawn without replacement while they last."""
    locomo = json.loads((data / "locomo" / "locomo_dev.json").read_text())
    questions = [qa["question"] for sample in locomo for qa in sample["qa"]]
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < repeats:
        out.extend(rng.sample(questions, min(len(questions), repeats - len(out))))
    return out


def _us(seconds: list[float]) -> dict[str, float]:
    arr = np.asarray(seconds) * 1e6
    return {
        "median_us": round(float(np.median(arr)), 1),
        "p95_us": round(float(np.percentile(arr, 95)), 1),
    }


def _measure(texts: list[str], questions: list[str]) -> dict[str, Any]:
    sel = HypervectorSelector()
    t0 = time.perf_counter()
    sel.add(texts)
    build_s = time.perf_counter() - t0

    cold = []
    for q in questions:
        a = time.perf_counter()
        sel.search(q, k=K)
        cold.append(time.perf_counter() - a)
    full = []
    for q in questions:
        a = time.perf_counter()
        sel.search(q, k=K)
        full.append(time.perf_counter() - a)
    # search alone: the query already encoded
    encoded = [sel.encode_packed(q) for q in questions]
    alone = []
    for vec in encoded:
        if vec is None:
            continue
        a = time.perf_counter()
        sel.search_packed(vec, K)
        alone.append(time.perf_counter() - a)
    n = len(sel)
    return {
        "turns": n,
        "build_s": round(build_s, 4),
        "build_us_per_turn": round(build_s / n * 1e6, 1),
        "encode_search": _us(full),
        "encode_search_cold": _us(cold),
        "search_alone": _us(alone),
        "bank_bytes": sel.memory_bytes(),
        "bank_bytes_per_turn": round(sel.memory_bytes() / n, 1),
        "packed_vector_bytes_per_turn": sel.dim // 8,
        # not in memory_bytes(): grows with the vocabulary or is fixed
        **sel.footprint(),
    }


def run_hypervector(data: Path, repeats: int = 200) -> tuple[dict[str, Any], str]:
    """Measure the hypervector selector at 60, 1,000 and 10,000 turns.

    Args:
        data: The shared data folder (holding ``locomo/`` and ``tiage/``).
        repeats: How many LoCoMo questions are timed at each size.

    Returns:
        A JSON-able dict of the figures, and a markdown table of them.
    """
    texts, sources = load_turns(Path(data))
    questions = load_questions(Path(data), repeats)
    rows = [_measure(texts[:n], questions) for n in SIZES if n <= len(texts)]
    sel = HypervectorSelector()
    result: dict[str, Any] = {
        "selector": {"dim": sel.dim, "seed": sel.seed, "codebook_rows": sel.codebook_rows},
        "k": K,
        "repeats": repeats,
        "turn_sources": sources,
        "sizes": rows,
        "environment": {
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
    }
    lines = [
        f"Hypervector selector (dim {sel.dim}, bit-packed bank), k={K}, {repeats} LoCoMo "
        "questions; latencies in microseconds, median / p95.",
        "",
        "| turns | build (s) | encode+search | encode+search, cold caches | search alone "
        "| bank bytes/turn (packed vector) | codebook cache |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['turns']:,} | {r['build_s']:.3f} "
            f"| {r['encode_search']['median_us']:.0f} / {r['encode_search']['p95_us']:.0f} "
            f"| {r['encode_search_cold']['median_us']:.0f} / {r['encode_search_cold']['p95_us']:.0f} "
            f"| {r['search_alone']['median_us']:.0f} / {r['search_alone']['p95_us']:.0f} "
            f"| {r['bank_bytes_per_turn']:.0f} ({r['packed_vector_bytes_per_turn']}) "
            f"| {r['codebook_cache_bytes'] / 1e6:.2f} MB ({r['codebook_rows_made']:,} rows) |"
        )
    lines.append("")
    lines.append(
        "Bank bytes/turn = `memory_bytes()` / turns: the packed vector plus the kept token ids "
        f"(for re-encoding as IDF moves). Fixed besides: the document-frequency table, "
        f"{rows[0]['df_table_bytes'] / 1e3:.0f} KB. Turn sources: "
        + ", ".join(f"{k} {v:,}" for k, v in sources.items())
        + "."
    )
    return result, "\n".join(lines) + "\n"


if __name__ == "__main__":
    _payload, _markdown = run_hypervector(
        Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    print(_markdown)
