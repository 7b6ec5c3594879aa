"""Facts that changed, stated in everyday words (issue 25): is the passage true now on top,
and, asked ``as_of`` a date, the one true then?

The development set ``benchmarks/data/changed_facts.jsonl`` (fixed, never edited; see
``benchmarks/data/README.md``): 110 changed facts and 20 unchanged controls, two or three dated
documents each. All 130 items' documents go into ONE store with dated distractors (SciFact
abstracts and haystack text, timestamps spread over 2015-2025), so "the same subject" has to be
told apart from unrelated and from other items' passages. Each question is asked twice:

* *default* (a question about the present): the top document must be the item's ``current``;
* *as of* (``as_of=`` the item's date): the top document must be ``as_of.expect``.

*Controls* are the ``unchanged`` items (both documents stay true; the file's ``current`` is
the better answer, in 16 of 20 the older document): a mechanism must not lose them. *Traps*
are the changed items whose latest-dated document is not the current one (computed from the
file: "latest date wins" gets them wrong).

Splits by the numeric id: **choosing** = odd (cf001, cf003, ...), used to choose settings;
**reporting** = even, only ever reported for a fixed configuration (``--split choosing`` runs
the choosing questions only, for tuning).

    python -m benchmarks.changed_facts --store /tmp/changed-bench
    python -m benchmarks.changed_facts --split choosing --variants   # while choosing
    python -m benchmarks.changed_facts --scifact-dated --scifact-store DIR --skip-items
    python -m benchmarks.changed_facts --locomo-dated --skip-items   # false demotions in chats
"""

from __future__ import annotations

import json
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.common import base_parser, environment, retrieved, source_state, write_results
from benchmarks.temporal import load_haystack
from pensive_core import Document, Pensive, PensiveConfig

UTC = timezone.utc
DATA = Path(__file__).parent / "data" / "changed_facts.jsonl"
DISTRACTOR_START = datetime(2015, 1, 1, tzinfo=UTC)
DISTRACTOR_END = datetime(2025, 6, 30, tzinfo=UTC)
BASE: dict[str, Any] = {
    "router": {"l1": False},
    "graph": PensiveConfig().graph.model_dump(),
    "temporal": PensiveConfig().temporal.model_dump(),
}
#: Query-time overrides of one store built with the defaults.
SYSTEMS: dict[str, dict[str, Any]] = {
    "temporal off": {"temporal": {"enabled": False}},
    "temporal (statements)": {"temporal": {"subjects": False}},
    "temporal + subjects": {"temporal": {"subjects": True}},
}
#: Settings tried while choosing (choosing split only).
VARIANTS: dict[str, dict[str, Any]] = {
    f"subjects, similarity {sim}, relevance {rel}": {
        "temporal": {"subjects": True, "subject_similarity": sim, "subject_relevance": rel}
    }
    for sim, rel in ((0.5, 0.0), (0.5, 0.5), (0.5, 0.65), (0.4, 0.5), (0.6, 0.5), (0.8, 0.9))
}


def merged(over: dict[str, Any]) -> dict[str, Any]:
    """``BASE`` with ``over`` applied one section deep."""
    cfg = {k: dict(v) for k, v in BASE.items()}
    for section, values in over.items():
        cfg[section] = {**cfg.get(section, {}), **values}
    return cfg


def split_of(item_id: str) -> str:
    """``choosing`` for an odd numeric id, ``reporting`` for an even one."""
    return "choosing" if int("".join(c for c in item_id if c.isdigit())) % 2 else "reporting"


def day(text: str) -> datetime:
    """A ``YYYY-MM-DD`` date as midnight UTC."""
    return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)


def as_of_time(text: str) -> datetime:
    """An item's ``as_of`` date as the end of that day (documents of that day count)."""
    return day(text) + timedelta(days=1) - timedelta(microseconds=1)


def load_items(path: Path = DATA) -> list[dict[str, Any]]:
    """The development items, with ``split`` and ``trap`` (latest-dated document is not the
    current one) added."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    for it in items:
        latest = max(it["documents"], key=lambda d: d["date"])["id"]
        it["split"] = split_of(it["id"])
        it["trap"] = it["kind"] == "changed" and latest != it["current"]
    return items


def distractors(data: Path, n_scifact: int, haystack_tokens: int, seed: int) -> list[Document]:
    """Dated unrelated documents: the first ``n_scifact`` SciFact abstracts and haystack text,
    with timestamps drawn uniformly from 2015-2025 (seeded)."""
    rng = random.Random(seed)
    span = (DISTRACTOR_END - DISTRACTOR_START).total_seconds()
    texts: list[tuple[str, str]] = []
    corpus = data / "scifact" / "corpus.jsonl"
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            if len(texts) >= n_scifact:
                break
            row = json.loads(line)
            text = f"{row['title']}\n\n{row['text']}".strip()
            if text:
                texts.append((f"sf-{row['_id']}", text))
    if haystack_tokens > 0:
        hay = load_haystack(data, haystack_tokens)
        texts += [(f"hay-{i:05d}", t) for i, t in enumerate(hay)]
    return [
        Document(id=i, text=t, timestamp=DISTRACTOR_START + timedelta(seconds=rng.random() * span))
        for i, t in texts
    ]


def item_documents(items: list[dict[str, Any]]) -> list[Document]:
    """Every item's documents, timestamped with their dates."""
    return [
        Document(id=d["id"], text=d["text"], timestamp=day(d["date"]))
        for it in items
        for d in it["documents"]
    ]


def top_doc(p: Pensive, text: str, as_of: datetime | None = None) -> tuple[str | None, float]:
    """The top document of a question, and the query's wall time in ms."""
    t = time.perf_counter()
    res = p.query(text, k=5, as_of=as_of)
    ms = (time.perf_counter() - t) * 1000
    return (res.hits[0].doc_id if res.hits else None), ms


def evaluate(p: Pensive, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Top-1 accuracy per split and group (changed / controls / traps), default and as-of."""
    rows = []
    for it in items:
        now, ms1 = top_doc(p, it["question"])
        then, ms2 = top_doc(p, it["question"], as_of_time(it["as_of"]["date"]))
        rows.append(
            {
                "id": it["id"],
                "split": it["split"],
                "kind": it["kind"],
                "trap": it["trap"],
                "default": now == it["current"],
                "as_of": then == it["as_of"]["expect"],
                "top_default": now,
                "top_as_of": then,
                "ms": (ms1, ms2),
            }
        )
    out: dict[str, Any] = {}
    for split in ("choosing", "reporting", "all"):
        rs = [r for r in rows if split in ("all", r["split"])]
        if not rs:
            continue
        cell: dict[str, Any] = {}
        for group, pick in (
            ("changed", lambda r: r["kind"] == "changed"),
            ("controls", lambda r: r["kind"] == "unchanged"),
            ("traps", lambda r: r["trap"]),
        ):
            g = [r for r in rs if pick(r)]
            if g:
                cell[group] = {
                    "n": len(g),
                    "default": round(sum(r["default"] for r in g) / len(g), 4),
                    "as_of": round(sum(r["as_of"] for r in g) / len(g), 4),
                }
        out[split] = cell
    ms = sorted(m for r in rows for m in r["ms"])
    out["query_ms_p50"] = round(ms[len(ms) // 2], 2) if ms else None
    out["wrong"] = [
        {k: r[k] for k in ("id", "split", "kind", "default", "as_of", "top_default", "top_as_of")}
        for r in rows
        if not (r["default"] and r["as_of"])
    ]
    return out


def build(store: Path, docs: list[Document]) -> dict[str, Any]:
    """Ingest under the defaults; a no-op for a store built before."""
    t = time.perf_counter()
    with Pensive(store, config=BASE) as p:
        report = p.ingest(docs)
    return {
        "documents": len(docs),
        "seconds": round(time.perf_counter() - t, 1),
        "chunks_embedded": report.chunks_embedded,
    }


def as_question(claim: str) -> str:
    """A SciFact claim asked as a question about now: "Is it true that <claim>?" (the
    subjects step leaves claims alone, and questions are what it resolves)."""
    c = claim.strip().rstrip(".")
    return f"Is it true that {c[:1].lower() + c[1:]}?"


def scifact_dated(data: Path, store: Path, source: Path, seed: int) -> dict[str, Any]:
    """The false-demotion check with dates: SciFact nDCG@10 when every abstract carries a
    timestamp (drawn uniformly from 2015-2025, seeded), so passages on one topic from
    different "years" meet in the top candidates. Each claim is asked as written and as a
    question (:func:`as_question`).

    ``source`` is a store built by ``benchmarks.scifact``; it is copied and the copy's document
    timestamps are set in its SQLite file (re-ingesting 5,183 abstracts only to date them takes
    longer than every query), and its temporal index is marked stale so it is rebuilt from the
    dated archive when the copy is opened.
    """
    import shutil
    import sqlite3

    from benchmarks.metrics import evaluate as ir_evaluate
    from benchmarks.metrics import ranking_to_run
    from benchmarks.scifact_data import load
    from pensive_core.timeutil import to_iso

    docs, queries, qrels = load(data)
    if not (store / "pensive.sqlite").exists():
        shutil.copytree(source, store, ignore=shutil.ignore_patterns("writer.lock"))
        rng = random.Random(seed)
        span = (DISTRACTOR_END - DISTRACTOR_START).total_seconds()
        db = sqlite3.connect(store / "pensive.sqlite")
        with db:
            for (did,) in db.execute("SELECT id FROM documents ORDER BY id").fetchall():
                t = DISTRACTOR_START + timedelta(seconds=rng.random() * span)
                db.execute("UPDATE documents SET timestamp = ? WHERE id = ?", (to_iso(t), did))
            db.execute("UPDATE meta SET value = '0' WHERE key = 'temporal_version'")
        db.close()
    runs: dict[str, Any] = {}
    for name, over in SYSTEMS.items():
        runs[name] = {}
        with Pensive(store, config=merged(over)) as p:
            for form, ask in (("nDCG@10", lambda c: c), ("nDCG@10 asked", as_question)):
                ranks = {}
                for qid in qrels:
                    res = p.query(ask(queries[qid]), k=100)
                    ranks[qid] = list(dict.fromkeys(h.doc_id for h in retrieved(res)))
                ndcg = ir_evaluate(ranking_to_run(ranks), qrels, ("nDCG@10",))["nDCG@10"]
                runs[name][form] = round(ndcg, 4)
        print(f"scifact dated, {name}: {runs[name]}", flush=True)
    return {"claims": len(qrels), "abstracts": len(docs), "runs": runs}


def locomo_dated(data: Path, store: Path) -> dict[str, Any]:
    """The false-demotion check on conversations: LoCoMo's development conversations, every
    turn a document timestamped with its session's date, and the questions of categories 1-4
    (multi-hop, temporal, open-domain, single-hop), each filtered to its conversation; most
    are about things that did not change. Evidence recall@10 per category and overall."""
    from benchmarks.temporal import eval_locomo, load_locomo_dated

    docs, questions = load_locomo_dated(data, (1, 2, 3, 4))
    t = time.perf_counter()
    with Pensive(store, config=BASE) as p:
        p.ingest(docs)
    out: dict[str, Any] = {
        "turns": len(docs),
        "questions": len(questions),
        "ingest_seconds": round(time.perf_counter() - t, 1),
        "runs": {},
    }
    for name, over in SYSTEMS.items():
        with Pensive(store, config=merged(over)) as p:
            res = eval_locomo(p, questions, by="category")  # every question asked once
        cell = {"all": res["recall@10"]}
        cell.update({f"category {c}": r["recall@10"] for c, r in sorted(res["by"].items())})
        out["runs"][name] = cell
        print(f"locomo dated, {name}: {cell}", flush=True)
    return out


def _pct(cell: dict[str, Any] | None, key: str) -> str:
    if not cell:
        return "-"
    return f"{cell[key]:.3f} ({round(cell[key] * cell['n'])}/{cell['n']})"


def render(payload: dict[str, Any]) -> str:
    """The Markdown report."""
    d = payload["data"]
    lines = [
        "# Changed facts in everyday words (issue 25)",
        "",
        f"{d['items']} items ({d['changed']} changed, {d['controls']} unchanged controls, "
        f"{d['traps']} traps) in one store with {d['distractors']} dated distractors "
        f"({d['documents']} documents). Top-1 document accuracy; *default* = the question as "
        "asked (about the present), *as of* = `as_of=` the item's date. **choosing** split = "
        "odd ids (settings chosen here), **reporting** = even ids (fixed configuration, "
        "reported only). Definitions in `benchmarks/changed_facts.py`.",
        "",
        f"    {payload['command']}",
        "",
    ]
    for split in ("choosing", "reporting"):
        runs = {n: r for n, r in payload["runs"].items() if split in r}
        if not runs:
            continue
        lines += [
            f"## {split} split",
            "",
            "| system | changed, default | changed, as of | controls, default | controls, as of "
            "| traps, default | traps, as of |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, r in runs.items():
            c = r[split]
            lines.append(
                f"| {name} | {_pct(c.get('changed'), 'default')} | {_pct(c.get('changed'), 'as_of')} "
                f"| {_pct(c.get('controls'), 'default')} | {_pct(c.get('controls'), 'as_of')} "
                f"| {_pct(c.get('traps'), 'default')} | {_pct(c.get('traps'), 'as_of')} |"
            )
        lines.append("")
    sf = payload.get("scifact_dated")
    if sf:
        lines += [
            f"## SciFact with dates (false demotions): {sf['claims']} claims, {sf['abstracts']} "
            "abstracts each timestamped at random in 2015-2025", "",
            "| system | nDCG@10, claims as written | nDCG@10, asked \"Is it true that ...?\" |",
            "|---|---|---|",
        ] + [f"| {n} | {r['nDCG@10']} | {r.get('nDCG@10 asked', '-')} |"
             for n, r in sf["runs"].items()] + [""]  # fmt: skip
    lc = payload.get("locomo_dated")
    if lc:
        cols = list(next(iter(lc["runs"].values())))
        lines += [
            f"## LoCoMo with dates (false demotions): {lc['questions']} questions of categories "
            f"1-4 over {lc['turns']} turns, each turn timestamped with its session's date", "",
            "Evidence recall@10 (each question filtered to its conversation).", "",
            "| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|",
        ] + [f"| {n} | " + " | ".join(str(r[c]) for c in cols) + " |"
             for n, r in lc["runs"].items()] + [""]  # fmt: skip
    lines += ["Query p50 (ms): " + ", ".join(
        f"{n} {r['query_ms_p50']}" for n, r in payload["runs"].items()
    ), ""]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the store, run the systems, write ``changed_facts.json``/``.md``."""
    ap = base_parser(__doc__ or "")
    ap.add_argument("--split", choices=("choosing", "reporting", "both"), default="both")
    ap.add_argument(
        "--variants", action="store_true", help="also the settings tried while choosing"
    )
    ap.add_argument("--systems", default=None, help="semicolon list of system names to run")
    ap.add_argument("--scifact-distractors", type=int, default=1500)
    ap.add_argument("--haystack-tokens", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--name", default="changed_facts")
    ap.add_argument("--scifact-dated", action="store_true",
                    help="also SciFact nDCG@10 with every abstract dated (false demotions)")  # fmt: skip
    ap.add_argument("--scifact-store", type=Path, default=None,
                    help="a store built by benchmarks.scifact, copied (no re-embedding)")  # fmt: skip
    ap.add_argument("--locomo-dated", action="store_true",
                    help="also LoCoMo recall@10 with every turn dated (false demotions)")  # fmt: skip
    ap.add_argument("--skip-items", action="store_true", help="only the SciFact/LoCoMo checks")
    args = ap.parse_args(argv)
    if args.variants and args.split != "choosing":
        ap.error("--variants are for choosing: use --split choosing")
    items = load_items()
    docs = item_documents(items)
    extra = distractors(args.data, args.scifact_distractors, args.haystack_tokens, args.seed)
    store = args.store or Path("/tmp/pensive-changed-facts")
    payload: dict[str, Any] = {
        "command": "python -m benchmarks.changed_facts"
        + "".join(f" {a}" for a in (argv if argv is not None else __import__("sys").argv[1:])),
        "data": {
            "items": len(items),
            "changed": sum(it["kind"] == "changed" for it in items),
            "controls": sum(it["kind"] == "unchanged" for it in items),
            "traps": sum(it["trap"] for it in items),
            "distractors": len(extra),
            "documents": len(docs) + len(extra),
            "splits": "choosing = odd numeric id, reporting = even",
        },
        "config": {"base": BASE, "systems": SYSTEMS},
        "environment": environment(),
        "source": source_state(),
    }
    payload["runs"] = {}
    if args.scifact_dated:
        if args.scifact_store is None:
            ap.error("--scifact-dated needs --scifact-store (a store built by benchmarks.scifact)")
        payload["scifact_dated"] = scifact_dated(
            args.data, store.parent / (store.name + "-scifact-dated"), args.scifact_store, args.seed
        )
        write_results(args.name, args.out, payload, render(payload))
    if args.locomo_dated:
        payload["locomo_dated"] = locomo_dated(args.data, store.parent / (store.name + "-locomo"))
        write_results(args.name, args.out, payload, render(payload))
    if args.skip_items:
        return
    payload["ingest"] = build(store, docs + extra)
    asked = [it for it in items if args.split in ("both", it["split"])]
    systems = dict(SYSTEMS) | (VARIANTS if args.variants else {})
    if args.systems:
        keep = {s.strip() for s in args.systems.split(";")}
        systems = {n: o for n, o in systems.items() if n in keep}
    for name, over in systems.items():
        with Pensive(store, config=merged(over)) as p:
            p.query("warm up", k=5)
            payload["runs"][name] = evaluate(p, asked)
        short = {k: v for k, v in payload["runs"][name].items() if k != "wrong"}
        print(f"{name}: {json.dumps(short)}", flush=True)
        write_results(args.name, args.out, payload, render(payload))
    write_results(args.name, args.out, payload, render(payload))


if __name__ == "__main__":
    main()
