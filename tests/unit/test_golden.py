"""The engine answers exactly what the golden file recorded (tests/golden/harness.py says how
it was recorded and how to rerun it): hits, scores to 1e-6, tiers, confidence, time scopes,
aggregation, ingest counts and which cached answers each scripted change invalidated."""

import pytest

from tests.golden import harness

MODEL_FREE = harness.names(include_model=False)
# the fast loop replays the default configuration and conversation memory; the other
# configurations take seconds each and run with the slow tests
FAST = {"default", "conversation"}


@pytest.mark.parametrize(
    "name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in MODEL_FREE]
)
def test_matches_the_golden_file(name, tmp_path):
    problems = harness.check(name, tmp_path)
    assert not problems, "\n".join(problems[:40])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(harness.MODEL_SCENARIOS))
def test_matches_the_golden_file_with_the_model(name, tmp_path):
    pytest.importorskip("sentence_transformers")
    problems = harness.check(name, tmp_path)
    assert not problems, "\n".join(problems[:40])


def test_a_changed_answer_is_caught():
    want = {"hits": [{"score": 0.5, "doc_id": "a"}], "tier": "L2"}
    assert harness.diff(want, want) == []
    assert harness.diff(want, {"hits": [{"score": 0.5 + 2e-6, "doc_id": "a"}], "tier": "L2"})
    assert harness.diff(want, {"hits": [{"score": 0.5, "doc_id": "b"}], "tier": "L2"})
    assert harness.diff(want, {"hits": [], "tier": "L2"})
    assert harness.diff(want, {"hits": [{"score": 0.5, "doc_id": "a"}], "tier": "L1"})
