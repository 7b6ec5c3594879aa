"""The fusion benchmark's cross-check table is built from each setting's needle and
multi-hop runs in the order of ``CROSS``, the default first."""

from benchmarks.tune_scifact_fusion import CROSS, MULTIHOP_MEASURES, crosscheck_rows


def _needle_run(v: float) -> dict:
    kinds = {
        k: {"recall@1": v, "recall@5": v + 0.1} for k in ("identifier", "multihop", "correction")
    }
    return {"pensive": {"overall": {"recall@1": v, "recall@5": v + 0.1}, "by_kind": kinds}}


def test_rows_follow_cross_order_for_every_set():
    needles = {n: {s: _needle_run(0.1 * i) for s in ("1M", "100k")} for i, n in enumerate(CROSS)}
    multihop = {
        key: {n: {"all": {m: 0.01 * i for m in MULTIHOP_MEASURES}} for i, n in enumerate(CROSS)}
        for key in ("hotpotqa", "locomo")
    }
    rows = crosscheck_rows(needles, multihop)
    assert len(rows) == 2 * 5 + 2 * len(MULTIHOP_MEASURES)
    assert rows[0][:2] == ["needles 1M", "recall@1"]
    assert rows[0][2:] == [0.0, 0.1, 0.2, 0.3]
    assert rows[1][2:] == [0.1, 0.2, 0.3, 0.4]  # recall@5
    assert rows[5][0] == "needles 100k"
    assert rows[-1][:2] == ["LoCoMo multi-hop cat. 1 (graph on)", "mean@5 (all)"]
    assert rows[-1][2:] == [0.0, 0.01, 0.02, 0.03]
