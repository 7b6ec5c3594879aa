"""Fast tests for the pure helpers of ``benchmarks/contextual.py``: the constructed pronoun
stories, the chat-log documents and their turn spans, the local edit, and the report.

No model and no shared data: the LoCoMo loader runs on a tiny file written to ``tmp_path``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks import contextual as C  # noqa: E402


def test_pronoun_stories_name_people_only_outside_the_key_sentence():
    docs, questions = C.pronoun_stories(10)
    assert len(docs) == len(questions) == 10
    for doc, q in zip(docs, questions):
        last = doc.text.split("\n\n")[-1]
        assert any(last.startswith(k) for k in C.KEY)
        assert not any(name in last for name in C.FIRST + C.LAST)
        intro = doc.text.split("\n\n")[0]
        people = q["text"].removeprefix("When did ").removesuffix(" the truth?").split(" tell ")
        assert all(person in intro for person in people) and q["doc"] == doc.id
    assert len({q["text"] for q in questions}) == 10  # every story its own pair of people


def test_locomo_sessions_keep_turn_spans(tmp_path):
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Lisbon."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a tram"},
            ],
        },
        "qa": [
            {"question": "Where did Ann move?", "evidence": ["D1:1"], "category": 4},
            {"question": "Trick?", "evidence": ["D1:2"], "category": 5},
        ],
    }
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "locomo_dev.json").write_text(json.dumps([sample]))
    docs, questions, units = C.locomo_set(tmp_path)
    assert [d.id for d in docs] == ["conv-1:session_1"]
    assert docs[0].text == "Ann: I moved to Lisbon.\nBo: Nice! [shares a photo of a tram]"
    assert docs[0].timestamp.isoformat().startswith("2023-05-08T13:56")
    assert len(questions) == 1 and questions[0]["gold"] == {"conv-1:D1:1"}  # adversarial left out
    assert questions[0]["filters"] == {"conv": "conv-1"}


def test_edit_once_changes_one_line():
    text = "\n".join(f"line {i} has quite a few words in it here" for i in range(30))
    new = C.edit_once(text, random.Random(3))
    diff = [a != b for a, b in zip(text.split("\n"), new.split("\n"))]
    assert sum(diff) == 1 and len(new.split("\n")) == 30


def test_render_reports_every_part_given():
    scores = {"all": {"recall@5": 0.5, "recall@20": 0.75, "failure": 0.25, "n": 2}}
    payload = {
        "parts": {
            "hotpotqa": {
                "questions": 2,
                "variants": {
                    v: {
                        "build": {
                            "passages": 3,
                            "ingest_s": 1.0,
                            "ingest_ms_per_passage": 5.0,
                            "contexts": 1,
                        },
                        "scores": {r: scores for r in C.RETRIEVERS},
                    }
                    for v in ("plain", "heuristic")
                },
            }
        }
    }
    md = C.render(payload)
    assert "| heuristic | hybrid | 0.5000 | 0.7500 | 0.2500 |" in md
