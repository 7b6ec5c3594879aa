"""Quality parity of the Postgres storage engine: the other benchmarks' default rows run twice
in one process, on the embedded engine and on Postgres, with the same data and the same
configuration except ``[storage]``.

Parts (``--parts``; each is the default configuration's row of its benchmark, loaded and
scored by that benchmark's own functions):

* ``hotpotqa``, ``hotpotqa_untitled``, ``locomo_multihop``: ``benchmarks.multihop``'s
  "hybrid + graph (default)" row (all-support recall@2/5/10 and mean@5, per split);
  the entity graph's activation and relay read the graph's own tables.
* ``situatedqa``, ``locomo_temporal``, ``needles``, ``needles_heldout``:
  ``benchmarks.temporal``'s "hybrid + temporal" row (temporal resolution's statement tables).
* ``timeqa``: the same for TimeQA (15,335 paragraphs: about ten minutes of embedding on two
  cores, so left out of the default parts).
* ``memory``: ``benchmarks.memory``'s *pensive* selector on LoCoMo (every conversation one
  session: its turn log, its turn and window indexes).

SciFact is ``benchmarks.postgres_engine``'s (nDCG@10 within 0.001), not run again here.

Each part builds two fresh stores (the Postgres one in a schema of its own), ingesting the
same documents (or adding the same turns) with the defaults, closes them, reopens each and
asks every question. Both share one embedder whose vectors are kept by text
(``benchmarks.memory.CachedEmbedder``, saved under ``--store``): both engines index exactly
the same vectors, and a second run embeds nothing again. For every query of the Pensive parts
the ranked passage ids are kept, so the report says for how many questions the two engines
returned the same top 10. Postgres is started from the ``pgserver`` wheel in ``--store/pg``
(or ``--dsn``).

    python -m benchmarks.postgres_parity --store /work/main/.bench-parity
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import memory as mem
from benchmarks import multihop as mh
from benchmarks import temporal as tp
from benchmarks.common import base_parser, environment, source_state, write_results

#: A difference above this in any quality figure is looked into (the issue's bar).
TOLERANCE = 0.005
SCHEMA_PREFIX = "parity"
PARTS = (
    "hotpotqa",
    "hotpotqa_untitled",
    "locomo_multihop",
    "situatedqa",
    "locomo_temporal",
    "needles",
    "needles_heldout",
    "memory",
    "timeqa",
)
DEFAULT_PARTS = tuple(p for p in PARTS if p != "timeqa")
# the figures that are timings or counts, not quality: never compared
_NOT_QUALITY = ("ms", "seconds", "latency", "n", "n_gold")
#: The figures shown in the Markdown table per part (the JSON has every one).
HEADLINE: dict[str, tuple[str, ...]] = {
    "hotpotqa": ("all/all@2", "all/all@5", "all/all@10", "all/mean@5"),
    "hotpotqa_untitled": ("all/all@2", "all/all@5", "all/all@10", "all/mean@5"),
    "locomo_multihop": ("all/all@2", "all/all@5", "all/all@10", "all/mean@5"),
    "situatedqa": (
        "latest-wins/valid_above_rival",
        "latest-wins/recall@1",
        "as-of in words/all/valid_above_rival",
        "as-of in words/all/recall@1",
        "as-of explicit/all/valid_above_rival",
        "as-of explicit/all/recall@1",
    ),
    "locomo_temporal": ("recall@5", "recall@10", "all@5", "all@10"),
    "needles": ("all/recall@1", "all/recall@5"),
    "needles_heldout": ("all/recall@1", "all/recall@5"),
    "timeqa": ("recall/all/recall@1", "recall/all/recall@5"),
    "memory": ("overall/pensive@10_any", "overall/pensive@5_any", "overall/pensive@10_all"),
}


# -- comparing (pure) ---------------------------------------------------------------------------
def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The quality figures of a nested result as ``{"a/b/c": value}``: numeric leaves only,
    leaving out timings and counts (keys in ``_NOT_QUALITY`` or ending in ``_ms``/``_s`` or
    holding ``ms_p``), lists and text."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if (
            key in _NOT_QUALITY
            or key.endswith(("_ms", "_s"))
            or "ms_p" in key
            or key in ("p50", "p95")
        ):
            continue
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}/"))
        elif isinstance(value, (bool, int, float)):
            out[name] = float(value)
    return out


def compare(
    embedded: Mapping[str, Any], postgres: Mapping[str, Any], tolerance: float = TOLERANCE
) -> dict[str, Any]:
    """Every quality figure of both engines and the difference (Postgres - embedded).

    Returns:
        ``{"figures": {name: {"embedded", "postgres", "diff"}}, "max_abs_diff", "over"}``:
        ``over`` names the figures whose difference exceeds ``tolerance``.

    Raises:
        ValueError: When the two results do not hold the same figures (not the same run).
    """
    a, b = flatten(embedded), flatten(postgres)
    if a.keys() != b.keys():
        raise ValueError(f"not the same figures: only embedded {sorted(a.keys() - b.keys())}, "
                         f"only postgres {sorted(b.keys() - a.keys())}")  # fmt: skip
    figures = {k: {"embedded": a[k], "postgres": b[k], "diff": round(b[k] - a[k], 4)} for k in a}
    diffs = [abs(f["diff"]) for f in figures.values()]
    return {
        "figures": figures,
        "max_abs_diff": max(diffs, default=0.0),
        "over": sorted(k for k, f in figures.items() if abs(f["diff"]) > tolerance + 1e-9),
    }


def same_top(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]], k: int = 10) -> int:
    """For how many queries (asked in the same order) the first ``k`` ids are the same.

    Raises:
        ValueError: When the two runs asked a different number of queries.
    """
    if len(a) != len(b):
        raise ValueError(f"{len(a)} rankings against {len(b)}: not the same questions")
    return sum(list(x[:k]) == list(y[:k]) for x, y in zip(a, b))


# -- running ------------------------------------------------------------------------------------
class Recorder:
    """A store that keeps every query's ranked passage ids (what the benchmarks' evaluate
    functions call is ``query`` alone)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.ranked: list[list[str]] = []

    def query(self, text: str, **kw: Any) -> Any:
        res = self.store.query(text, **kw)
        self.asked.append((text, kw))
        self.ranked.append([h.chunk_id for h in res.hits])
        return res


def _engines(dsn: str, part: str) -> dict[str, dict[str, Any]]:
    return {
        "embedded": {},
        "postgres": {"engine": "postgres", "dsn": dsn, "schema_name": f"{SCHEMA_PREFIX}_{part}"},
    }


def _with_storage(cfg: dict[str, Any], storage: dict[str, Any]) -> dict[str, Any]:
    return {**cfg, "storage": storage} if storage else dict(cfg)


def run_documents(
    part: str,
    root: Path,
    dsn: str,
    docs: list[Any],
    cfg: dict[str, Any],
    evaluate: Callable[[Any], dict[str, Any]],
    embedder: mem.CachedEmbedder,
) -> dict[str, Any]:
    """One default row on both engines: ingest, close, reopen, ask every question."""
    from pensive_core import Pensive

    out: dict[str, Any] = {}
    rankings: dict[str, list[list[str]]] = {}
    asked: list[tuple[str, dict[str, Any]]] = []
    for engine, storage in _engines(dsn, part).items():
        folder = root / part / engine
        shutil.rmtree(folder, ignore_errors=True)
        config = _with_storage(cfg, storage)
        t = time.perf_counter()
        with Pensive(folder, config=config, embedder=embedder) as p:
            report = p.ingest(docs)
        ingest_s = time.perf_counter() - t
        embedder.save()
        with Pensive(folder, config=config, embedder=embedder) as p:
            p.query("warm up", k=10)
            rec = Recorder(p)
            t = time.perf_counter()
            metrics = evaluate(rec)
            out[engine] = {
                "metrics": metrics,
                "ingest_s": round(ingest_s, 1),
                "documents": report.added,
                "chunks_embedded": report.chunks_embedded,
                "eval_s": round(time.perf_counter() - t, 1),
                "queries": len(rec.ranked),
            }
        rankings[engine] = rec.ranked
        asked = asked or rec.asked
        print(f"  {part} {engine}: {json.dumps(flatten(metrics))[:500]}", flush=True)
    out["compare"] = compare(out["embedded"]["metrics"], out["postgres"]["metrics"])
    out["same_top10"] = same_top(rankings["embedded"], rankings["postgres"])
    out["differing_queries"] = [
        {"query": q, "embedded": e[:10], "postgres": g[:10]}
        for (q, _), e, g in zip(asked, rankings["embedded"], rankings["postgres"])
        if e[:10] != g[:10]
    ][:50]
    return out


def run_memory(root: Path, dsn: str, data: Path, embedder: mem.CachedEmbedder) -> dict[str, Any]:
    """The memory benchmark's *pensive* selector on both engines (sessions built afresh)."""
    convs = mem.load_locomo(data)
    out: dict[str, Any] = {}
    for engine, storage in _engines(dsn, "memory").items():
        folder = root / "memory" / engine
        shutil.rmtree(folder, ignore_errors=True)
        config = _with_storage({}, storage)
        t = time.perf_counter()
        mem.build(folder, convs, rebuild=True, config=config or None, embedder=embedder)
        build_s = time.perf_counter() - t
        embedder.save()
        t = time.perf_counter()
        table = mem.run_locomo(folder, convs, selectors=("pensive",), config=config or None)
        out[engine] = {
            "metrics": {k: v for k, v in table.items() if k != "latency_ms"},
            "latency_ms": table["latency_ms"],
            "build_s": round(build_s, 1),
            "eval_s": round(time.perf_counter() - t, 1),
        }
        print(f"  memory {engine}: {table['overall']}", flush=True)
    out["compare"] = compare(out["embedded"]["metrics"], out["postgres"]["metrics"])
    return out


def part_data(part: str, data: Path) -> tuple[list[Any], dict[str, Any], Callable[[Any], Any]]:
    """A part's documents, its benchmark's default configuration and its evaluation."""
    if part in ("hotpotqa", "hotpotqa_untitled"):
        docs, questions = mh.load_hotpot(data, titles=part == "hotpotqa")
        return docs, mh.merged({}), lambda p: mh.evaluate(p, questions)
    if part == "locomo_multihop":
        docs, questions = mh.load_locomo(data)
        return docs, mh.merged({}), lambda p: mh.evaluate(p, questions)
    if part == "situatedqa":
        docs, undated, dated, _ = tp.load_situatedqa(data, "dev")
        return docs, tp.merged({}), lambda p: tp.eval_situatedqa(p, undated, dated)
    if part == "locomo_temporal":
        docs, questions = tp.load_locomo_dated(data)
        return docs, tp.merged({}), lambda p: tp.eval_locomo(p, questions)
    if part in ("needles", "needles_heldout"):
        # benchmarks.temporal's defaults: 200k tokens, 12 per category, seed 7 (+1000 held out)
        haystack = tp.load_haystack(data, 200_000)
        cases = tp.make_heldout_cases(12, 1007) if part == "needles_heldout" else tp.make_cases()
        docs, placed = tp.build_needle_corpus(haystack, cases)
        return docs, tp.merged({}), lambda p: tp.eval_needles(p, placed)
    if part == "timeqa":
        docs, questions = tp.load_timeqa(data)
        return docs, tp.merged({}), lambda p: tp.eval_timeqa(p, questions)
    raise ValueError(f"unknown part {part!r}; choose from {', '.join(PARTS)}")


def _drop_schemas(dsn: str) -> None:
    """Every schema an earlier run left (this benchmark's prefix only)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                (f"{SCHEMA_PREFIX}%",),
            ).fetchall()
        ]
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


# -- report -------------------------------------------------------------------------------------
def render(payload: dict[str, Any]) -> str:
    """The Markdown report: the headline figures of every part, both engines, the difference."""
    lines = [
        "# Quality parity: the Postgres storage engine beside the embedded one",
        "",
        "Each benchmark's default row, run twice in one process with the same data, the same "
        "vectors (one embedder shared, vectors kept by text) and the same configuration except "
        "`[storage]`: the embedded engine (SQLite + FAISS) and Postgres 16 + pgvector "
        f"(`pgserver`). A difference above {TOLERANCE} in any figure is listed under the table.",
        "",
        f"    {payload['command']}",
        "",
        "| part | figure | embedded | Postgres | difference | max abs diff (all figures) "
        "| same top 10 |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for part, r in payload["parts"].items():
        figs = r["compare"]["figures"]
        same = f"{r['same_top10']} / {r['postgres']['queries']}" if "same_top10" in r else "-"
        for i, name in enumerate(HEADLINE.get(part, ())):
            f = figs.get(name)
            if f is None:
                continue
            tail = f" {r['compare']['max_abs_diff']:.4f} | {same} |" if i == 0 else " | |"
            lines.append(
                f"| {part if i == 0 else ''} | {name} | {f['embedded']:.4f} | {f['postgres']:.4f}"
                f" | {f['diff']:+.4f} |" + tail
            )
    lines += ["", "Run time per part (s): " + ", ".join(
        f"{k} {v['seconds']}" for k, v in payload["parts"].items()
    ) + f"; total {payload.get('seconds')}.", ""]  # fmt: skip
    over = {k: r["compare"]["over"] for k, r in payload["parts"].items() if r["compare"]["over"]}
    if over:
        lines += [f"Figures differing by more than {TOLERANCE}:", ""]
        for part, names in over.items():
            figs = payload["parts"][part]["compare"]["figures"]
            lines.append(
                f"- {part}: "
                + ", ".join(f"{n} {figs[n]['diff']:+.4f}" for n in names[:12])
                + (f" (and {len(names) - 12} more)" if len(names) > 12 else "")
            )
        lines.append("")
    else:
        lines += [f"No figure differs by more than {TOLERANCE}.", ""]
    if payload.get("notes"):
        lines += ["## Notes", "", *payload["notes"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run every part on both engines, write ``postgres_parity.json``/``.md``."""
    ap = base_parser(__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--parts", default=",".join(DEFAULT_PARTS), help=f"of {', '.join(PARTS)}")
    ap.add_argument("--dsn", default=None, help="an existing Postgres with pgvector")
    args = ap.parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    root = args.store or Path("/tmp/pensive-postgres-parity")
    root.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.postgres_parity" + "".join(
        f" {a}" for a in (argv if argv is not None else __import__("sys").argv[1:])
    )
    server = None
    if args.dsn:
        dsn = args.dsn
    else:
        import pgserver

        server = pgserver.get_server(root / "pg", cleanup_mode="stop")
        dsn = server.get_uri()
    payload: dict[str, Any] = {
        "benchmark": "postgres_parity",
        "command": command,
        "tolerance": TOLERANCE,
        "parts": {},
        "environment": environment(),
        "source": source_state(),
    }
    t0 = time.perf_counter()
    try:
        _drop_schemas(dsn)
        from pensive_core.config import EmbedderConfig
        from pensive_core.embedders import create_embedder

        # the default embedder (MiniLM), its vectors kept by text for both engines
        embedder = mem.CachedEmbedder(create_embedder(EmbedderConfig()), root / "vectors.npz")
        for part in parts:
            print(f"{part} ...", flush=True)
            t = time.perf_counter()
            if part == "memory":
                result = run_memory(root, dsn, args.data, embedder)
            else:
                docs, cfg, evaluate = part_data(part, args.data)
                result = run_documents(part, root, dsn, docs, cfg, evaluate, embedder)
            result["seconds"] = round(time.perf_counter() - t, 1)
            payload["parts"][part] = result
            print(f"  {part}: max |diff| {result['compare']['max_abs_diff']}, over "
                  f"{result['compare']['over'][:8]}", flush=True)  # fmt: skip
            payload["seconds"] = round(time.perf_counter() - t0, 1)
            # written after every part: a failure later keeps what was measured
            write_results("postgres_parity", args.out, payload, render(payload))
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
