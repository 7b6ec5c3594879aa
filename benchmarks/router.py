"""Router benchmark: skewed, repeating traffic with surface variants and interleaved ingests.

Workload: SciFact train questions drawn from a Zipf distribution (s = 1.1 by default, ranks
assigned by a seeded shuffle), each asked as itself or as a surface variant (case, punctuation,
word order, one typo). Some SciFact abstracts -- those judged relevant to the most popular
questions -- are held out of the initial store and ingested in small batches while the traffic
runs, so cached answers go stale unless invalidation catches them.

Measured in one process, on one store:

* L1 hit rate after warm-up, and how keys matched (exact / bag of words / typo-level);
* stale serves: every L1 answer is compared with what L2 returns *now* for the question the
  entry was computed from (memoised per commit); any difference counts;
* false hits: near-miss twins of workload questions (a digit changed, a negation added, a name
  swapped) and the canonical pairs ("Q3 2024"/"Q4 2024", "INV-4471"/"INV-4472", "did X"/"did X
  not") are asked after their originals; any L1 answer to a twin counts;
* latency per tier (p50/p95/p99, inside ``query`` and wall-clock around it), and end-to-end
  mean latency of the whole workload against the same workload with L1 off.

Run: ``python -m benchmarks.router`` (``--store DIR`` keeps the built store between runs).
"""

from __future__ import annotations

import random
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import base_parser, environment, write_results
from benchmarks.scifact_data import load
from pensive_core import Pensive

CANONICAL_PAIRS = [
    ("What was revenue in Q3 2024?", "What was revenue in Q4 2024?"),
    ("Was invoice INV-4471 paid?", "Was invoice INV-4472 paid?"),
    ("Did the trial reduce mortality?", "Did the trial not reduce mortality?"),
]
_AUX = re.compile(r"\b(is|are|was|were|does|do|did|can|may|has|have|will)\b", re.IGNORECASE)


def zipf_draws(n_items: int, n: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of item ranks 0..n_items-1 with P(rank r) proportional to 1/(r+1)^s."""
    weights = 1.0 / np.arange(1, n_items + 1) ** s
    return rng.choice(n_items, size=n, p=weights / weights.sum())


def variant(text: str, kind: str, rng: random.Random) -> str:
    """A surface variant of a question: same question, different spelling."""
    if kind == "case":
        return text.lower() if rng.random() < 0.5 else text.upper()
    if kind == "punct":
        core = text.rstrip(".?! ")
        return rng.choice([core + "?", core + " !", "  " + core.replace(",", " ,") + " "])
    if kind == "order":
        words = text.rstrip(".?! ").split()
        if len(words) < 4:
            return text
        cut = rng.randint(1, len(words) - 1)  # rotate: "b c d a" -- same words, another order
        return " ".join(words[cut:] + words[:cut])
    if kind == "typo":
        words = text.split()
        cands = [i for i, w in enumerate(words) if len(w) >= 7 and w.isalpha() and w.islower()]
        if not cands:
            return text
        i = rng.choice(cands)
        w = words[i]
        j = rng.randint(1, len(w) - 3)
        words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :]  # swap two inner letters
        return " ".join(words)
    return text


VARIANTS = {"original": 0.4, "case": 0.15, "punct": 0.15, "order": 0.15, "typo": 0.15}


def near_miss(text: str, names: list[str], rng: random.Random) -> str | None:
    """A different question that looks almost the same: a digit, a negation or a name changed."""
    digits = [m.start() for m in re.finditer(r"\d", text)]
    if digits and rng.random() < 0.5:
        i = rng.choice(digits)
        return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]
    caps = [m for m in re.finditer(r"(?<=\s)[A-Z][A-Za-z0-9-]{2,}", text)]
    if caps and rng.random() < 0.5:
        m = rng.choice(caps)
        other = rng.choice([n for n in names if n.lower() != m.group(0).lower()])
        return text[: m.start()] + other + text[m.end() :]
    aux = _AUX.search(text)
    if aux:
        return text[: aux.end()] + " not" + text[aux.end() :]
    return "It is not true that " + text[:1].lower() + text[1:]


def _pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    arr = np.asarray(values)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {
        "count": len(values),
        "p50": round(float(p50), 4),
        "p95": round(float(p95), 4),
        "p99": round(float(p99), 4),
        "mean": round(float(arr.mean()), 4),
    }


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=8000, help="workload length")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s")
    ap.add_argument("--events", type=int, default=10, help="ingest events during the workload")
    ap.add_argument("--held-out", type=int, default=40, help="abstracts ingested during it")
    ap.add_argument("--warmup", type=float, default=0.2, help="share of the workload as warm-up")
    ap.add_argument("--near-misses", type=int, default=300, help="near-miss twins asked")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--base-store",
        type=Path,
        default=None,
        help="copy this already built full SciFact store (e.g. from benchmarks.scifact --store) "
        "instead of embedding the corpus again",
    )
    args = ap.parse_args(argv)
    rng_np = np.random.default_rng(args.seed)
    rng = random.Random(args.seed)

    docs, queries, qrels = load(args.data)
    qids = sorted(queries)
    rng.shuffle(qids)  # popularity rank: a seeded shuffle, independent of content
    draws = zipf_draws(len(qids), args.queries, args.zipf, rng_np)

    # hold out abstracts judged relevant to the most popular questions: their arrival changes
    # exactly the answers that are most often cached
    held: list[str] = []
    for qid in qids:
        for did in qrels.get(qid, {}):
            if did not in held:
                held.append(did)
        if len(held) >= args.held_out:
            break
    held = held[: args.held_out]
    by_id = {d.id: d for d in docs}
    future = [by_id[d] for d in held if d in by_id]

    store = args.store or Path(tempfile.mkdtemp(prefix="pensive-router-"))
    if args.base_store and not (store / "pensive.sqlite").exists():
        shutil.copytree(args.base_store, store, dirs_exist_ok=True)
        for f in store.glob("l1.sqlite*"):
            f.unlink()
    config = {"router": {"l1": True}}  # the default; pinned so the benchmark measures it
    p = Pensive(store, config=config)
    t = time.perf_counter()
    present = [d.id for d in future if p.components.archive.fingerprint(d.id) is not None]
    for did in present:
        p.delete(did)
    held_set = {d.id for d in future}
    report = p.ingest([d for d in docs if d.id not in held_set])
    build_s = time.perf_counter() - t
    print(f"store ready in {build_s:.0f} s: {report.added} added, {report.unchanged} unchanged")
    p.components.l1.invalidate_all(p.commit_number)  # type: ignore[union-attr]  # start cold
    truth_reader = Pensive(store, config={"router": {"l1": False}}, read_only=True)

    # the workload
    kinds = list(VARIANTS)
    probs = np.array([VARIANTS[k] for k in kinds])
    work: list[tuple[str, str, str]] = []  # (qid, kind, text)
    for r in draws:
        qid = qids[int(r)]
        kind = kinds[int(rng_np.choice(len(kinds), p=probs))]
        work.append((qid, kind, variant(queries[qid], kind, rng)))
    event_at = {int((i + 1) * len(work) / (args.events + 1)): i for i in range(args.events)}
    per_event = max(1, len(future) // max(1, args.events))
    warm = int(args.warmup * len(work))

    p.query("warm-up: load the model", k=args.k)
    truth_reader.query("warm-up: load the model", k=args.k)
    tiers: list[str] = []
    inner: dict[str, list[float]] = {"L1": [], "L2": [], "L3": []}
    wall: dict[str, list[float]] = {"L1": [], "L2": [], "L3": []}
    matches = {"exact": 0, "bag": 0, "fuzzy": 0}
    by_match: dict[str, list[float]] = {"exact": [], "bag": [], "fuzzy": []}
    truth: dict[tuple[str, int], list[str]] = {}
    stale = checked = 0
    stale_examples: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    all_wall: list[float] = []
    l1_before = p.stats()["l1"]
    for i, (_qid, _kind, text) in enumerate(work):
        if i in event_at:
            batch = future[event_at[i] * per_event : (event_at[i] + 1) * per_event]
            before = p.stats()["l1"]
            t = time.perf_counter()
            p.ingest(batch)
            after = p.stats()["l1"]
            events.append(
                {
                    "at_query": i,
                    "documents": [d.id for d in batch],
                    "seconds": round(time.perf_counter() - t, 3),
                    "entries_before": before["entries"],
                    "invalidated": after["invalidated"] - before["invalidated"],
                    "refreshed": after["refreshed"] - before["refreshed"],
                }
            )
        before_matches = dict(p.components.l1.matches)  # type: ignore[union-attr]
        t = time.perf_counter()
        res = p.query(text, k=args.k)
        ms = (time.perf_counter() - t) * 1000
        all_wall.append(ms)
        tiers.append(res.tier)
        inner[res.tier].append(res.latency_ms)
        wall[res.tier].append(ms)
        if res.tier == "L1":
            kind = next(
                k
                for k, n in p.components.l1.matches.items()  # type: ignore[union-attr]
                if n != before_matches[k]
            )
            by_match[kind].append(res.latency_ms)
            if i >= warm:
                matches[kind] += 1
            key = (res.cached_from or text, p.commit_number)
            if key not in truth:
                truth[key] = [h.chunk_id for h in truth_reader.query(key[0], k=args.k).hits]
            checked += 1
            if [h.chunk_id for h in res.hits] != truth[key]:
                stale += 1
                if len(stale_examples) < 5:
                    stale_examples.append({"query": text, "cached_from": res.cached_from})
    l1_after = p.stats()["l1"]
    after_warm = tiers[warm:]
    hit_rate = sum(t == "L1" for t in after_warm) / max(1, len(after_warm))

    # near misses: ask each original (cached, or cached now), then its twin
    names = sorted(
        {m for q in queries.values() for m in re.findall(r"(?<=\s)[A-Z][A-Za-z0-9-]{2,}", q)}
    )
    seen_texts = {text.casefold() for _, _, text in work}
    pairs: list[tuple[str, str]] = list(CANONICAL_PAIRS)
    for qid in qids:
        if len(pairs) >= args.near_misses + len(CANONICAL_PAIRS):
            break
        twin = near_miss(queries[qid], names, rng)
        if twin and twin != queries[qid] and twin.casefold() not in seen_texts:
            pairs.append((queries[qid], twin))
    false_hits: list[dict[str, str]] = []
    for a, b in pairs:
        p.query(a, k=args.k)
        res = p.query(b, k=args.k)
        if res.tier == "L1":
            false_hits.append({"asked": b, "served_from": res.cached_from or ""})

    # the same workload with L1 off, on the same (now complete) store
    l2_only: list[float] = []
    for _qid, _kind, text in work:
        t = time.perf_counter()
        truth_reader.query(text, k=args.k)
        l2_only.append((time.perf_counter() - t) * 1000)
    truth_reader.close()
    stats = p.stats()
    p.close()
    if args.store is None:
        shutil.rmtree(store, ignore_errors=True)

    mean_routed, mean_l2 = float(np.mean(all_wall)), float(np.mean(l2_only))
    l1_p50 = _pct(inner["L1"]).get("p50", float("nan"))
    payload: dict[str, Any] = {
        "benchmark": "router",
        "environment": environment(),
        "data": {
            "corpus": "SciFact",
            "questions": len(qids),
            "documents": len(docs),
            "held_out_documents": len(future),
        },
        "workload": {
            "queries": len(work),
            "zipf_s": args.zipf,
            "variants": VARIANTS,
            "distinct_questions": len({q for q, _, _ in work}),
            "distinct_texts": len({t for _, _, t in work}),
            "warmup_queries": warm,
            "ingest_events": len(events),
            "k": args.k,
            "seed": args.seed,
        },
        "config": {"router": {"l1": True}},
        "store_build_seconds": round(build_s, 1),
        "l1_hit_rate_after_warmup": round(hit_rate, 4),
        "l1_matches_after_warmup": matches,
        "tier_shares": {t: round(tiers.count(t) / len(tiers), 4) for t in ("L1", "L2", "L3")},
        "stale_serves": stale,
        "stale_checked": checked,
        "stale_examples": stale_examples,
        "near_miss_pairs": len(pairs),
        "false_hits": len(false_hits),
        "false_hit_examples": false_hits[:10],
        "latency_in_query_ms": {t: _pct(v) for t, v in inner.items()},
        "latency_wall_ms": {t: _pct(v) for t, v in wall.items()},
        "l1_latency_by_match_ms": {m: _pct(v) for m, v in by_match.items()},
        "end_to_end_mean_ms": {
            "routed": round(mean_routed, 3),
            "l2_only": round(mean_l2, 3),
            "speedup": round(mean_l2 / mean_routed, 2),
        },
        "ingest_events": events,
        "l1_counters": {
            k: l1_after[k] - l1_before[k]
            for k in ("hits", "misses", "evictions", "invalidated", "refreshed")
        },
        "l3_escalations": stats["l3"],
        "targets": {
            "l1_hit_p50_le_0.05ms": bool(l1_p50 <= 0.05),
            "hit_rate_ge_60pct": bool(hit_rate >= 0.6),
            "zero_false_hits": not false_hits,
            "zero_stale_serves": stale == 0,
        },
    }
    write_results("router", args.out, payload, render(payload))


def render(r: dict[str, Any]) -> str:
    w = r["workload"]
    lines = [
        "# Router benchmark (SciFact, Zipf traffic with variants and interleaved ingests)",
        "",
        f"{w['queries']} queries, Zipf s = {w['zipf_s']} over {r['data']['questions']} SciFact "
        f"train questions ({w['distinct_questions']} distinct asked, {w['distinct_texts']} "
        f"distinct texts); variants {w['variants']}; {w['ingest_events']} ingest events adding "
        f"{r['data']['held_out_documents']} held-out abstracts relevant to the most popular "
        f"questions; first {w['warmup_queries']} queries are warm-up. k = {w['k']}.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| L1 hit rate after warm-up | {r['l1_hit_rate_after_warmup']:.1%} | >= 60% |",
        f"| L1 matches (exact / bag / typo) | {r['l1_matches_after_warmup']['exact']} / "
        f"{r['l1_matches_after_warmup']['bag']} / {r['l1_matches_after_warmup']['fuzzy']} | |",
        f"| stale serves | {r['stale_serves']} of {r['stale_checked']} L1 answers checked | 0 |",
        f"| false hits | {r['false_hits']} of {r['near_miss_pairs']} near-miss pairs | 0 |",
        f"| L1 hit p50 (in query) | {r['latency_in_query_ms']['L1'].get('p50', float('nan')):.4f} ms"
        " | <= 0.05 ms |",
        f"| end-to-end mean, routed | {r['end_to_end_mean_ms']['routed']:.2f} ms | |",
        f"| end-to-end mean, L2 only | {r['end_to_end_mean_ms']['l2_only']:.2f} ms | |",
        f"| speed-up | {r['end_to_end_mean_ms']['speedup']}x | |",
        "",
        "Latency per tier (ms): inside `query` / wall-clock around the call",
        "",
        "| tier | count | p50 | p95 | p99 | wall p50 | wall p95 | wall p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in ("L1", "L2", "L3"):
        a, b = r["latency_in_query_ms"][t], r["latency_wall_ms"][t]
        if a.get("count"):
            lines.append(
                f"| {t} | {a['count']} | {a['p50']:.4f} | {a['p95']:.4f} | {a['p99']:.4f} | "
                f"{b['p50']:.4f} | {b['p95']:.4f} | {b['p99']:.4f} |"
            )
    lines += [
        "",
        "L1 latency by how the key matched (ms, inside `query`)",
        "",
        "| match | count | p50 | p95 | p99 |",
        "|---|---|---|---|---|",
    ]
    for m, a in r["l1_latency_by_match_ms"].items():
        if a.get("count"):
            lines.append(
                f"| {m} | {a['count']} | {a['p50']:.4f} | {a['p95']:.4f} | {a['p99']:.4f} |"
            )
    lines += [
        "",
        "Ingest events: cache entries affected (dropped or answered again), of those held",
        "",
        "| at query | documents | seconds | affected | refreshed | of entries |",
        "|---|---|---|---|---|---|",
    ]
    for e in r["ingest_events"]:
        lines.append(
            f"| {e['at_query']} | {len(e['documents'])} | {e['seconds']} | {e['invalidated']} | "
            f"{e['refreshed']} | {e['entries_before']} |"
        )
    lines += ["", "Reproduce: `python -m benchmarks.router` (see the module docstring).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
