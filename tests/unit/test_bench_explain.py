"""The benchmarks' ``--explain-failures``: one explanation file per failing question and a
summary of where the expected items were lost, on a real (hash-embedded) store."""

from __future__ import annotations

import json

from benchmarks.common import add_explain_arguments, base_parser, explain_failures
from pensive_core import Pensive
from tests.conftest import HASH_CONFIG, docs_corpus


def test_failing_questions_are_explained_and_counted(tmp_path):
    questions = [
        {"id": "ok", "text": "Acme revenue in Q3 2024", "expect": ["q3"]},
        {"id": "cut/1", "text": "Acme revenue in Q3 2024", "expect": ["q3", "tea"]},
        {"id": "gone", "text": "green tea", "expect": ["no-such-doc"]},
    ]
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        summary = explain_failures(p, questions, tmp_path / "out", 2)
    files = sorted(f.name for f in (tmp_path / "out").iterdir())
    assert files == ["cut_1.json", "summary.json"]
    record = json.loads((tmp_path / "out" / "cut_1.json").read_text())
    assert record["id"] == "cut/1"
    tea = next(i for i in record["items"] if i["id"] == "tea")
    assert tea["lost_at"] == "hits" and tea["reason"] == "cut_by_k"
    assert summary["questions"] == 3 and summary["failing"] == 2
    assert summary["expected_found"] == 2 and summary["expected_lost"] == 1
    assert summary["lost_at"] == {"hits": 1, "not in store": 1}
    assert summary["reason"] == {"hits: cut_by_k": 1}
    assert summary["by_split"] == {"all": {"questions": 3, "failing": 2}}
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary


def test_the_options_parse():
    ap = base_parser("x")
    add_explain_arguments(ap)
    args = ap.parse_args(["--explain-failures", "/tmp/x", "--limit", "100"])
    assert str(args.explain_failures) == "/tmp/x" and args.limit == 100
