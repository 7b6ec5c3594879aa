"""The prompt builder on its own: tokens used against the budget, and evidence kept.

``run_prompt_builder(cases)`` builds one prompt per case and budget with
:class:`~pensive_core.memory.prompt.PromptBuilder` and reports, per budget:

* *mean used* / *max used*: tokens of the built text over the total budget (the builder keeps
  ``headroom`` free, 10% by default, so 0.90 is the most it may use);
* *over*: builds over ``budget - headroom`` (must be 0);
* *evidence kept*: of the evidence ids a case offered the builder (among its retrieved items,
  history turns or summaries), the share present in ``BuiltPrompt.included``, pooled over
  cases; *evidence recall* divides by every evidence id instead, offered or not; *any* / *all*:
  cases keeping at least one / every offered evidence id;
* build time (p50, p95 ms).

A case is ``{"query", "retrieved": [PromptItem], "history": [(role, text)] or [PromptItem],
"summaries": [str], "evidence": {ids}, "budget": int}``. History tuples and summary strings
get the builder's ids ``"turn:<i>"`` and ``"summary:<i>"`` (``i`` the position in the case's
list), so evidence names them that way; retrieved items use their own ``id``. A case's
``budget`` is one of the budgets reported; the main memory benchmark passes one case per
question and budget.

    python -m benchmarks.memory_prompt     # a small seeded synthetic run, prints the table
"""

from __future__ import annotations

import random
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from benchmarks.metrics import percentiles
from pensive_core.memory.prompt import PromptBuilder, PromptItem


def _offered(case: dict[str, Any]) -> set[str]:
    """The ids the builder will see for this case's items."""
    ids = {
        item.id or f"retrieved:{i}"
        for i, item in enumerate(case.get("retrieved", ()))
        if isinstance(item, PromptItem)
    }
    ids |= {getattr(h, "chunk_id", "") for h in case.get("retrieved", ())} - {""}
    for i, turn in enumerate(case.get("history", ())):
        ids.add((turn.id or f"turn:{i}") if isinstance(turn, PromptItem) else f"turn:{i}")
    for i, s in enumerate(case.get("summaries", ())):
        ids.add((s.id or f"summary:{i}") if isinstance(s, PromptItem) else f"summary:{i}")
    return ids


def run_prompt_builder(
    cases: Sequence[dict[str, Any]],
    *,
    builder: PromptBuilder | None = None,
    system: str = "",
) -> tuple[dict[str, Any], str]:
    """Build every case's prompt and summarise budget use and evidence kept, per budget.

    Args:
        cases: Dicts with ``query``, ``retrieved``, ``history``, ``summaries``, ``evidence``
            and ``budget`` (see the module docstring).
        builder: The builder to measure (default: ``PromptBuilder()``, cl100k_base offline).
        system: A system prompt given to every build.

    Returns:
        ``(results, markdown)``: results keyed by budget (as a string) and the table.
    """
    builder = builder or PromptBuilder()
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for case in cases:
        budget = int(case["budget"])
        evidence = set(case.get("evidence", ()))
        t0 = time.perf_counter()
        built = builder.build(
            budget,
            query=case.get("query", ""),
            system=system,
            summaries=list(case.get("summaries", ())),
            retrieved=list(case.get("retrieved", ())),
            history=list(case.get("history", ())),
        )
        ms = (time.perf_counter() - t0) * 1000
        offered = evidence & _offered(case)
        kept = offered & set(built.included)
        rows[budget].append(
            {
                "used": built.tokens / budget,
                "over": built.tokens > budget - built.headroom,
                "evidence": len(evidence),
                "offered": len(offered),
                "kept": len(kept),
                "ms": ms,
            }
        )
    results: dict[str, Any] = {}
    for budget in sorted(rows):
        rs = rows[budget]
        offered = sum(r["offered"] for r in rs)
        with_offered = [r for r in rs if r["offered"]]
        results[str(budget)] = {
            "cases": len(rs),
            "mean_used": round(statistics.fmean(r["used"] for r in rs), 4),
            "max_used": round(max(r["used"] for r in rs), 4),
            "over_budget": sum(r["over"] for r in rs),
            "evidence_offered": offered,
            "evidence_kept": round(sum(r["kept"] for r in rs) / offered, 4) if offered else None,
            "evidence_recall": (
                round(sum(r["kept"] for r in rs) / total, 4)
                if (total := sum(r["evidence"] for r in rs))
                else None
            ),
            "evidence_any": (
                round(sum(r["kept"] > 0 for r in with_offered) / len(with_offered), 4)
                if with_offered
                else None
            ),
            "evidence_all": (
                round(sum(r["kept"] == r["offered"] for r in with_offered) / len(with_offered), 4)
                if with_offered
                else None
            ),
            "build_ms": {k: round(v, 2) for k, v in percentiles(r["ms"] for r in rs).items()},
        }
    return results, markdown(results)


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def markdown(results: dict[str, Any]) -> str:
    """The results of :func:`run_prompt_builder` as a markdown table."""
    lines = [
        "| budget | cases | mean used | max used | over | evidence offered | kept | recall "
        "| any kept | all kept | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for budget, t in results.items():
        lines.append(
            f"| {budget} | {t['cases']} | {t['mean_used']:.3f} | {t['max_used']:.3f} | "
            f"{t['over_budget']} | {t['evidence_offered']} | {_fmt(t['evidence_kept'])} | "
            f"{_fmt(t['evidence_recall'])} | {_fmt(t['evidence_any'])} | "
            f"{_fmt(t['evidence_all'])} | {t['build_ms']['p50']:.2f} | "
            f"{t['build_ms']['p95']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def synthetic_cases(
    n: int = 30, budgets: Sequence[int] = (500, 1000, 2000, 4000), seed: int = 0
) -> list[dict[str, Any]]:
    """Seeded synthetic cases: one evidence passage and one evidence turn among distractors."""
    rng = random.Random(seed)
    vocab = "river market winter train garden letter doctor violin island coffee".split()
    out = []
    for q in range(n):
        topic = rng.choice(vocab)

        def sent(word: str) -> str:
            return f"The {word} " + " ".join(rng.choices(vocab, k=rng.randint(6, 14))) + "."

        retrieved = [
            PromptItem(
                " ".join(sent(rng.choice(vocab)) for _ in range(rng.randint(3, 10))),
                score=rng.random() * 0.8,
                id=f"q{q}-p{i}",
            )
            for i in range(12)
        ]
        gold = rng.randrange(len(retrieved))
        text = " ".join(sent(rng.choice(vocab)) for _ in range(6)) + f" The {topic} was the key."
        retrieved[gold] = PromptItem(text, score=0.5 + rng.random() * 0.5, id=f"q{q}-gold")
        history = [
            (
                "user" if i % 2 == 0 else "assistant",
                " ".join(sent(rng.choice(vocab)) for _ in range(2)),
            )
            for i in range(30)
        ]
        turn = rng.randrange(len(history))
        history[turn] = (history[turn][0], f"I think the {topic} matters most.")
        for budget in budgets:
            out.append(
                {
                    "query": f"What was the key thing about the {topic}?",
                    "retrieved": retrieved,
                    "history": history,
                    "summaries": [" ".join(sent(rng.choice(vocab)) for _ in range(4))],
                    "evidence": {f"q{q}-gold", f"turn:{turn}"},
                    "budget": budget,
                }
            )
    return out


def main() -> None:
    """Run the synthetic cases and print the table."""
    _, table = run_prompt_builder(synthetic_cases())
    print(table)


if __name__ == "__main__":
    main()
