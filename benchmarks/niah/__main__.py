"""``python -m benchmarks.niah``: needle in a haystack at 100k, 1M and 10M tokens.

    python -m benchmarks.niah --sizes 100k,1M --peers 1M     # ~15 min on 2 cores
    python -m benchmarks.niah --sizes 10M                     # ~1.5 h on 2 cores

Each size's figures are merged into ``benchmarks/results/niah.json`` and the Markdown report is
written again from everything recorded, so sizes can be run separately.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ..common import base_parser, environment, source_state, write_results
from .needles import DEPTHS, KINDS
from .run import SIZES, build, cpu_info, peers, query

NAME = "niah"


def _parse_config(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    path = Path(text)
    if path.exists():
        import tomllib

        return tomllib.loads(path.read_text())
    return json.loads(text)


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__ or NAME)
    ap.add_argument("--sizes", default="100k,1M", help="comma list of 100k, 1M, 10M")
    ap.add_argument("--phase", choices=["all", "build", "query"], default="all")
    ap.add_argument("--peers", default="1M", help="sizes at which the peers run ('' for none)")
    ap.add_argument("--per-cell", type=int, default=2, help="needles per (kind, depth)")
    ap.add_argument(
        "--config", default=None, help="a pensive.toml or a JSON config; default: defaults"
    )
    ap.add_argument(
        "--needle-seed",
        type=int,
        default=7,
        help="seed of the needles; 7 is reported, others are for tuning (never reported)",
    )
    ap.add_argument("--read-only", action="store_true", help="query as a reader (a build runs)")
    ap.add_argument(
        "--only-present", action="store_true", help="ask only needles the store holds whole"
    )
    ap.add_argument("--tag", default="", help="record under this name instead of the size")
    args = ap.parse_args(argv)
    base = args.store or Path(".bench/niah")
    config = _parse_config(args.config)
    out_json = args.out / f"{NAME}.json"
    payload: dict[str, Any] = json.loads(out_json.read_text()) if out_json.exists() else {}
    payload.setdefault("runs", {})
    want_peers = {s for s in args.peers.split(",") if s}
    for label in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        if label not in SIZES:
            ap.error(f"unknown size {label!r}; choose from {', '.join(SIZES)}")
        key = f"{label}-{args.tag}" if args.tag else label
        store = base / label if args.phase == "query" or not args.tag else base / key
        run: dict[str, Any] = payload["runs"].get(key, {})
        if args.phase in ("all", "build"):
            print(f"[{key}] building and ingesting into {store}", flush=True)
            run = {
                "size": label,
                "config": config or "defaults",
                **build(args.data, label, store, config, args.per_cell, args.needle_seed),
            }
        if args.phase in ("all", "query"):
            print(f"[{key}] querying", flush=True)
            run["pensive"] = query(store, config, 5, args.read_only, args.only_present)
            if label in want_peers and not args.tag:
                print(f"[{key}] peers", flush=True)
                run["peers"] = peers(store)
        run["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
        run["source"] = source_state()
        # another run may have written other sizes meanwhile: merge into what is on disk
        if out_json.exists():
            payload = {
                **json.loads(out_json.read_text()),
                "runs": {**json.loads(out_json.read_text()).get("runs", {})},
            }
        payload.setdefault("runs", {})[key] = run
        payload["environment"] = {**environment(), "cpu": cpu_info()}
        write_results(NAME, args.out, payload, markdown(payload, args.out))
    return 0


def _measured(run: dict[str, Any]) -> str:
    """When a run was recorded and from which commit (``+`` when the engine had uncommitted
    changes): runs of different sizes may come from different versions."""
    src = run.get("source", {})
    commit = (src.get("commit") or "?")[:7] + ("+" if src.get("pensive_core_uncommitted") else "")
    return f"{run.get('measured_at', '?')[:10]} ({commit})"


def _fmt_pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _value(q: dict[str, Any], depth: int, metric: str) -> float | None:
    """Recall in percent at a depth; None where no needle sits (a partial store)."""
    v = q["by_depth"][str(depth)]
    return 100 * v[metric] if v["n"] else None


def _cell(q: dict[str, Any], depth: int, metric: str) -> str:
    value = _value(q, depth, metric)
    return "–" if value is None else f"{value:.1f}%"


def markdown(payload: dict[str, Any], out: Path) -> str:
    runs = payload.get("runs", {})
    order = [k for k in ("100k", "1M", "10M") if k in runs] + sorted(
        k for k in runs if k not in SIZES
    )
    lines = [
        "# Needle in a haystack",
        "",
        "`python -m benchmarks.niah --sizes 100k,1M --peers 1M` and "
        "`python -m benchmarks.niah --sizes 10M`. Haystacks from `../shared/data` (no paragraph "
        "repeated; generated filler only beyond the real text), 5 needle kinds x 11 depths x 2 "
        "needles per cell, questions asked once each, k = 5. Latency is wall time of "
        "`Pensive.query`, query embedding included, store opened cold.",
        "",
        f"Machine: {payload.get('environment', {}).get('cpu', '?')}.",
        "",
        "| haystack | config | recall@1 | recall@5 | worst depth recall@5 | p50 / p95 ms | "
        "open s | ingest | chunks/s | store MB | peak RSS MB | measured (commit) |",
        "|---|---|---:|---:|---:|---|---:|---|---:|---:|---:|---|",
    ]
    for key in order:
        r = runs[key]
        q = r.get("pensive", {})
        ing = r.get("ingest", {})
        hs = r.get("haystack", {})
        worst = min((v["recall@5"] for v in q.get("by_depth", {}).values() if v["n"]), default=None)
        cfg = "defaults" if r.get("config") == "defaults" else json.dumps(r.get("config"))
        lat = q.get("latency_ms", {})
        tokens = hs.get("tokens") or q.get("partial", {}).get("tokens_held", 0)
        lines.append(
            f"| {key} ({tokens:,} tokens) | {cfg} | {_fmt_pct(q.get('overall', {}).get('recall@1'))} "
            f"| {_fmt_pct(q.get('overall', {}).get('recall@5'))} | {_fmt_pct(worst)} "
            f"| {lat.get('p50', '–')} / {lat.get('p95', '–')} | {q.get('open_s', '–')} "
            f"| {ing.get('seconds', 0) / 60:.1f} min | {ing.get('chunks_per_s', '–')} "
            f"| {ing.get('store_bytes', 0) / 1e6:.0f} | {max(ing.get('peak_rss_mb', 0), q.get('peak_rss_mb', 0)):.0f} "
            f"| {_measured(r)} |"
        )
    for key in order:
        r = runs[key]
        q = r.get("pensive")
        if not q:
            continue
        lines += ["", f"## {key}", ""]
        lines += [
            "| kind | " + " | ".join(f"{d}%" for d in DEPTHS) + " | all |",
            "|---|" + "---:|" * (len(DEPTHS) + 1),
        ]
        lines.append(
            "| recall@5 (all kinds) | "
            + " | ".join(_cell(q, d, "recall@5") for d in DEPTHS)
            + f" | {_fmt_pct(q['overall']['recall@5'])} |"
        )
        lines.append(
            "| recall@1 (all kinds) | "
            + " | ".join(_cell(q, d, "recall@1") for d in DEPTHS)
            + f" | {_fmt_pct(q['overall']['recall@1'])} |"
        )
        lines += ["", "| kind | recall@1 | recall@5 |", "|---|---:|---:|"]
        for kind in KINDS:
            v = q["by_kind"][kind]
            lines.append(f"| {kind} | {_fmt_pct(v['recall@1'])} | {_fmt_pct(v['recall@5'])} |")
        lines.append("")
        lines.append(f"Misses at 5: {', '.join(q['misses@5']) or 'none'}.")
        lat, rep = q["latency_ms"], q["repeat_latency_ms"]
        lines.append(
            f"Latency p50 {lat['p50']} ms, p95 {lat['p95']} ms; the same questions repeated "
            f"(L1): p50 {rep['p50']} ms. Store open {q['open_s']} s, first query "
            f"{q['first_query_s']} s. Tiers: {q['tiers']}."
        )
        ing = r.get("ingest")
        if ing and ing.get("stages_s"):
            lines += ["", "| ingest stage | seconds | chunks/s |", "|---|---:|---:|"]
            for st, sec in sorted(ing["stages_s"].items(), key=lambda kv: -kv[1]):
                lines.append(f"| {st} | {sec} | {ing['stages_chunks_per_s'].get(st) or '–'} |")
            lines.append(f"| **total** | {ing['seconds']} | {ing['chunks_per_s']} |")
        for note in (r.get("haystack", {}).get("note"), (ing or {}).get("note")):
            if note:
                lines += ["", note[0].upper() + note[1:] + "."]
        hs = r.get("haystack", {})
        if hs.get("tokens_by_source"):
            lines.append("")
            lines.append(
                f"Haystack: {hs['documents']:,} documents, {hs['tokens']:,} tokens "
                f"({', '.join(f'{k} {v:,}' for k, v in hs['tokens_by_source'].items())}); "
                f"repeated paragraphs: {hs['repeated_paragraphs']}."
            )
        if r.get("peers"):
            lines += [
                "",
                "| system | recall@1 | recall@5 | p50 / p95 ms | build s |",
                "|---|---:|---:|---|---:|",
            ]
            lines.append(
                f"| Pensive (defaults) | {_fmt_pct(q['overall']['recall@1'])} | "
                f"{_fmt_pct(q['overall']['recall@5'])} | {lat['p50']} / {lat['p95']} | – |"
            )
            for name, v in r["peers"].items():
                lines.append(
                    f"| {name} | {_fmt_pct(v['overall']['recall@1'])} | "
                    f"{_fmt_pct(v['overall']['recall@5'])} | {v['latency_ms']['p50']} / "
                    f"{v['latency_ms']['p95']} | {v['build_s']} |"
                )
    plot = _plot(payload, out, order)
    if plot:
        lines += ["", f"![recall@5 by depth]({plot})"]
    lines.append("")
    return "\n".join(lines)


def _plot(payload: dict[str, Any], out: Path, order: list[str]) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    runs = payload["runs"]
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for key in order:
        q = runs[key].get("pensive")
        if not q:
            continue
        for metric, style in (("recall@5", {"marker": "o"}), ("recall@1", {"ls": "--"})):
            ax.plot(
                DEPTHS,
                [_value(q, d, metric) for d in DEPTHS],
                label=f"{key} {metric}",
                **style,
            )
    ax.set_xlabel("needle depth (%)")
    ax.set_ylabel("recall (%)")
    ax.set_ylim(0, 102)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    name = f"{NAME}_depth.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


if __name__ == "__main__":
    sys.exit(main())
