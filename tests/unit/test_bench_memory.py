"""The memory benchmark's LoCoMo tables: the choosing/reporting split is by conversation, the
adversarial category stays out of "overall", and each conversation gets its own figures."""

from __future__ import annotations

import pytest

from benchmarks.memory import CHOOSING, REPORTING, markdown, recall_tables


def _row(conv: str, cat: int, hit: float, split: str = "tune") -> dict:
    row = {"conv": conv, "cat": cat, "split": split, "n_gold": 1}
    for k in (5, 10):
        for mode in ("any", "all"):
            row[f"pensive@{k}_{mode}"] = hit
    return row


def test_the_two_conversation_groups_do_not_overlap():
    assert CHOOSING and REPORTING
    assert not set(CHOOSING) & set(REPORTING)


def test_tables_split_by_conversation_and_keep_adversarial_apart():
    choose, report = CHOOSING[0], REPORTING[0]
    rows = [
        _row(choose, 1, 1.0),
        _row(choose, 4, 0.0, "heldout"),
        _row(choose, 5, 1.0),  # adversarial: never in overall
        _row(report, 1, 0.0),
        _row(report, 4, 0.0, "heldout"),
        _row(report, 4, 1.0),
    ]
    t = recall_tables(rows, selectors=("pensive",))
    assert t["overall"]["n"] == 5
    assert t["overall"]["pensive@10_any"] == pytest.approx(2 / 5, abs=1e-4)
    assert t["adversarial"]["n"] == 1
    assert t["overall_choosing"]["n"] == 2
    assert t["overall_choosing"]["pensive@10_any"] == pytest.approx(0.5)
    assert t["overall_reporting"]["n"] == 3
    assert t["overall_reporting"]["pensive@10_any"] == pytest.approx(1 / 3, abs=1e-4)
    assert t["multi-hop_choosing"]["pensive@10_any"] == 1.0
    assert t["multi-hop_reporting"]["pensive@10_any"] == 0.0
    assert t["overall_heldout"]["n"] == 2
    by = t["by_conversation"]
    assert list(by) == [choose, report]
    assert by[report]["overall"]["n"] == 3 and by[report]["multi-hop"]["n"] == 1
    # the group tables are exactly the pooled per-conversation rows
    pooled = sum(by[c]["overall"]["pensive@10_any"] * by[c]["overall"]["n"] for c in by)
    assert pooled == pytest.approx(t["overall"]["pensive@10_any"] * t["overall"]["n"], abs=1e-3)


def test_a_conversation_without_multi_hop_questions_has_none_not_zero():
    t = recall_tables([_row(REPORTING[0], 4, 1.0)], selectors=("pensive",))
    mh = t["by_conversation"][REPORTING[0]]["multi-hop"]
    assert mh["n"] == 0 and mh["pensive@10_any"] is None
    assert t["multi-hop_choosing"]["pensive@10_any"] is None


def test_markdown_names_the_split_of_every_conversation():
    from benchmarks.memory import SELECTORS

    rows = []
    for conv in (CHOOSING[0], REPORTING[0]):
        row = {"conv": conv, "cat": 1, "split": "tune", "n_gold": 1}
        for sel in SELECTORS:
            for k in (5, 10):
                for mode in ("any", "all"):
                    row[f"{sel}@{k}_{mode}"] = 1.0 if conv == CHOOSING[0] else 0.0
        rows.append(row)
    loc = recall_tables(rows)
    loc["latency_ms"] = {}
    md = markdown({"locomo": loc})
    assert f"| {CHOOSING[0]} | choosing | 1 | 1.000 |" in md
    assert f"| {REPORTING[0]} | reporting | 1 | 0.000 |" in md
