"""Prompt strategies and templates on LoCoMo: tokens used, and whether the evidence survives.

Each LoCoMo dev conversation is one ``Pensive.conversation`` session (built as
``benchmarks.memory`` builds it: the bundled MiniLM, the default configuration). For a sample
of each conversation's questions (adversarial category 5 left out, every n-th question, at
most ``--per-conv``), ``Conversation.build(question, budget, strategy=..., template=...)`` is
called at 500 and 2,000 tokens for every built-in strategy (no template) and every built-in
template (with ``concatenate``). Recorded per variant and budget:

* ``tokens``: the whole prompt's tokens (cl100k_base) as a share of the budget, mean and max,
  and how many prompts went over ``budget - headroom`` (must be 0);
* ``retrieved``: tokens of the retrieved section (labels and line heads included), mean;
* ``evidence_any`` / ``evidence_all``: the share of questions with at least one / every
  evidence turn (LoCoMo ``dia_id``) in the prompt, whole or clipped; ``evidence_whole``: at
  least one evidence turn present unclipped;
* ``prefix_stable``: the share of builds whose cacheable prefix (``BuiltPrompt.prefix``) is
  byte-identical to the previous question's in the same conversation (the store does not
  change between questions, so anything below 1 is a caching bug).

Nothing is chosen from these figures: the strategies' thresholds are not tuned (see
``pensive_core/memory/strategies.py``). They are reported apart on the conversations
``benchmarks.memory`` chooses its settings on (conv-26, 41, 43) and on the ones it reports on
(conv-30, 42). Questions are independent, so follow-up reuse is off.

    python -m benchmarks.prompt_strategies --store .bench/locomo
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_parser, environment, source_state, write_results
from benchmarks.memory import CHOOSING, REPORTING, build, load_locomo
from benchmarks.metrics import percentiles
from pensive_core import Pensive
from pensive_core.memory.tokens import token_counter

BUDGETS = (500, 2000)
#: (label, strategy, template): every built-in strategy alone, every template with the default
VARIANTS: tuple[tuple[str, str, str | None], ...] = (
    ("concatenate", "concatenate", None),
    ("weighted", "weighted", None),
    ("recency", "recency", None),
    ("template '{rank}. {text} ({date})'", "{rank}. {text} ({date})", None),
    ("qa template", "concatenate", "qa"),
    ("research template", "concatenate", "research"),
    ("conversational template", "concatenate", "conversational"),
)
SPLITS = {"choosing": CHOOSING, "reporting": REPORTING}


def sample(conv: dict[str, Any], per_conv: int) -> list[dict[str, Any]]:
    """Every n-th non-adversarial question of ``conv``, at most ``per_conv``."""
    qs = [q for q in conv["questions"] if q["cat"] != 5]
    return qs[:: max(1, len(qs) // per_conv)][:per_conv]


def run(store: Path, convs: list[dict[str, Any]], per_conv: int) -> dict[str, Any]:
    """Figures by split, variant and budget."""
    count = token_counter("cl100k_base").count
    rows: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    last: dict[tuple[str, str, int], str] = {}
    with Pensive(store, config={"memory": {"followup_reuse": False}}) as p:
        for conv in convs:
            split = next((s for s, ids in SPLITS.items() if conv["id"] in ids), "other")
            chat = p.conversation(conv["id"])
            id_of = {t.metadata["dia_id"]: t.id for t in chat.turns()}
            for q in sample(conv, per_conv):
                gold = {id_of[d] for d in q["gold"] if d in id_of}
                for label, strategy, template in VARIANTS:
                    for budget in BUDGETS:
                        t0 = time.perf_counter()
                        built = chat.build(q["text"], budget, strategy=strategy, template=template)
                        ms = (time.perf_counter() - t0) * 1000
                        inc, clipped = set(built.included), set(built.clipped)
                        key = (conv["id"], label, budget)
                        stable = last.setdefault(key, built.prefix) == built.prefix
                        last[key] = built.prefix
                        rows.setdefault((split, label, budget), []).append(
                            {
                                "used": count(built.text) / budget,
                                "over": built.tokens > budget - built.headroom,
                                "retrieved": built.sections["retrieved"],
                                "any": bool(gold & inc),
                                "all": bool(gold) and gold <= inc,
                                "whole": bool(gold & (inc - clipped)),
                                "ms": ms,
                                "stable": stable,
                            }
                        )
    out: dict[str, Any] = {}
    for (split, label, budget), rs in sorted(rows.items()):
        out.setdefault(split, {}).setdefault(label, {})[str(budget)] = {
            "questions": len(rs),
            "mean_used": round(statistics.fmean(r["used"] for r in rs), 4),
            "max_used": round(max(r["used"] for r in rs), 4),
            "over_budget": sum(r["over"] for r in rs),
            "retrieved_tokens": round(statistics.fmean(r["retrieved"] for r in rs), 1),
            "evidence_any": round(statistics.fmean(r["any"] for r in rs), 4),
            "evidence_all": round(statistics.fmean(r["all"] for r in rs), 4),
            "evidence_whole": round(statistics.fmean(r["whole"] for r in rs), 4),
            "prefix_stable": round(statistics.fmean(r["stable"] for r in rs), 4),
            "build_ms": percentiles([r["ms"] for r in rs]),
        }
    return out


def markdown(res: dict[str, Any]) -> str:
    """One table per split: a row per variant, columns per budget."""
    lines = [
        "# Prompt strategies and templates on LoCoMo",
        "",
        "`Conversation.build(question, budget, strategy=..., template=...)` on LoCoMo dev "
        "questions (category 5 left out). *used*: prompt tokens / budget (mean, max); *retr*: "
        "mean tokens of the retrieved section; *any / all*: share of questions with one / every "
        "evidence turn in the prompt; *whole*: one evidence turn unclipped. Over budget: "
        f"{res['over_budget_total']} prompts of {res['prompts']}; prefix byte-identical to the "
        f"previous question's: {res['prefix_stable_min']:.3f} (lowest over variants). "
        "Nothing here chose anything: "
        "the strategies' thresholds are not tuned.",
        "",
    ]
    for split, table in res["results"].items():
        convs = ", ".join(SPLITS.get(split, ()))
        n = next(iter(next(iter(table.values())).values()))["questions"]
        lines += [f"## {split} conversations ({convs}; {n} questions)", ""]
        head = "| variant |"
        rule = "|---|"
        for b in BUDGETS:
            head += f" used@{b} | retr@{b} | any@{b} | all@{b} | whole@{b} |"
            rule += "---:|---:|---:|---:|---:|"
        lines += [head, rule]
        for label, by_budget in table.items():
            row = f"| {label} |"
            for b in BUDGETS:
                r = by_budget[str(b)]
                row += (
                    f" {r['mean_used']:.3f} / {r['max_used']:.3f} | {r['retrieved_tokens']:.0f} |"
                    f" {r['evidence_any']:.3f} | {r['evidence_all']:.3f} |"
                    f" {r['evidence_whole']:.3f} |"
                )
            lines.append(row)
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__ or "")
    ap.add_argument("--per-conv", type=int, default=40, help="questions per conversation")
    args = ap.parse_args(argv)
    store = args.store or Path("/tmp/pensive-memory-bench")
    convs = load_locomo(args.data)
    t0 = time.perf_counter()
    info = build(store, convs)
    results = run(store, convs, args.per_conv)
    flat = [r for table in results.values() for v in table.values() for r in v.values()]
    res = {
        "environment": environment(),
        "source": source_state(),
        "data": "locomo/locomo_dev.json",
        "splits": {k: list(v) for k, v in SPLITS.items()},
        "budgets": list(BUDGETS),
        "per_conv": args.per_conv,
        "variants": [{"label": a, "strategy": b, "template": c} for a, b, c in VARIANTS],
        "build": info,
        "prompts": sum(r["questions"] for r in flat),
        "over_budget_total": sum(r["over_budget"] for r in flat),
        "prefix_stable_min": min(r["prefix_stable"] for r in flat),
        "results": results,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    md = markdown(res)
    print(md)
    write_results("prompt_strategies", args.out, res, md)


if __name__ == "__main__":
    main()
