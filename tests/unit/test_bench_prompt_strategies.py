"""The prompt-strategies benchmark on a tiny store: every variant at both budgets, split by
conversation group, within budget, and the table renders."""

from __future__ import annotations

from datetime import datetime, timezone

from benchmarks.prompt_strategies import BUDGETS, VARIANTS, markdown, run
from pensive_core import Pensive
from tests.conftest import HASH_CONFIG

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)


def test_run_reports_every_variant_by_split_within_budget(tmp_path):
    convs = []
    with Pensive(tmp_path / "s", HASH_CONFIG) as p:
        for cid in ("conv-26", "conv-30"):
            turns = [
                (
                    "user",
                    f"Turn {i}: I adopted a dog named Rex{i} last spring.",
                    T0,
                    {"dia_id": f"D1:{i}"},
                )
                for i in range(12)
            ]
            p.conversation(cid).add_many(turns)
            qs = [{"text": "What is the dog called?", "gold": {"D1:3"}, "cat": 4}]
            convs.append({"id": cid, "turns": turns, "questions": qs})
    res = run(tmp_path / "s", convs, per_conv=1)
    assert set(res) == {"choosing", "reporting"}
    for table in res.values():
        assert set(table) == {label for label, _, _ in VARIANTS}
        for by_budget in table.values():
            assert set(by_budget) == {str(b) for b in BUDGETS}
            for r in by_budget.values():
                assert r["questions"] == 1 and r["over_budget"] == 0 and r["max_used"] <= 0.9
                assert r["prefix_stable"] == 1.0
    md = markdown({"results": res, "over_budget_total": 0, "prompts": 28, "prefix_stable_min": 1})
    assert "| weighted |" in md and "reporting conversations (conv-30, conv-42" in md
