"""benchmarks.tune_memory: its replay of HybridSearch's scoring must rank exactly as
``Conversation.recall()`` does (else every figure it reports is of another system), and the
weights it varies must move the ranking the way recall() would."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from benchmarks.tune_memory import collect, found, grid, replay, score, sign_test
from pensive_core import Pensive
from tests.conftest import HASH_CONFIG

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
LINES = [
    ("Ana", "I finally finished reading Dune last weekend, what a book."),
    ("Ben", "Ana, your book collection is huge! Which one is next?"),
    ("Ana", "Probably the Name of the Wind. Do you read fantasy?"),
    ("Ben", "Not much. I mostly play basketball with my team on Sundays."),
    ("Ana", "Basketball sounds fun. I took up pottery classes this spring."),
    ("Ben", "Pottery! Did you make anything yet?"),
    ("Ana", "A blue bowl for my mother, she loved it."),
    ("Ben", "We won our basketball game by ten points yesterday."),
    ("Ana", "Congrats! Last month I went camping in the mountains with my kids."),
    ("Ben", "Camping is great. Which books did you take along?"),
    ("Ana", "Charlotte's Web, to read to the kids by the fire."),
    ("Ben", "Nice. I read a book on leadership for my team."),
]
QUESTIONS = [
    ("What books has Ana read?", {"D1:1", "D2:5"}, 1),
    ("What sport does Ben play?", {"D1:4"}, 4),
    ("What did Ana make in pottery class?", {"D1:7"}, 4),
    ("Where did Ana go camping?", {"D2:3"}, 2),
]


def _conv():
    turns = []
    for i, (who, text) in enumerate(LINES):
        session = 1 if i < 8 else 2
        dia = f"D{session}:{i + 1 if session == 1 else i - 7}"
        when = T0 + timedelta(days=7 * (session - 1))
        role = "user" if who == "Ana" else "assistant"
        turns.append((role, text, when, {"speaker": who, "dia_id": dia}))
    qs = [{"text": t, "gold": g, "cat": c} for t, g, c in QUESTIONS]
    return {"id": "conv-x", "turns": turns, "questions": qs}


def _data(tmp_path):
    conv = _conv()
    with Pensive(tmp_path / "store", HASH_CONFIG) as p:
        p.conversation(conv["id"]).add_many(conv["turns"])
    return collect(tmp_path / "store", [conv], config=HASH_CONFIG), conv


DEFAULT = {
    "window_weight": 1.5,
    "neighbour_weight": 0.5,
    "question_gain": 0.5,
    "speaker_weight": 0.25,
}


def test_replay_ranks_exactly_as_recall_at_the_defaults(tmp_path):
    from pensive_core.config import MemoryConfig

    d = MemoryConfig()
    default = {k: getattr(d, k) for k in DEFAULT}
    data, _ = _data(tmp_path)
    conv = data["conv-x"]
    for q in conv["questions"]:
        assert q["real"], q["text"]
        assert replay(conv, q, default) == q["real"], q["text"]


def test_the_weights_move_the_replayed_ranking(tmp_path):
    data, _ = _data(tmp_path)
    conv = data["conv-x"]
    q = conv["questions"][0]  # names Ana
    off = {
        "window_weight": 0.0,
        "neighbour_weight": 0.0,
        "question_gain": 0.0,
        "speaker_weight": 0.0,
    }
    plain = replay(conv, q, off, k=len(conv["text"]))
    named = replay(conv, q, {**off, "speaker_weight": 100.0}, k=len(conv["text"]))
    ana = [s for s in plain if conv["speaker"][s] == "Ana"]
    # a huge speaker weight puts every fused turn by Ana ahead of every turn by Ben
    assert named[: len(ana)] == sorted(ana, key=named.index)
    assert set(named[: len(ana)]) == set(ana)
    # windows reach turns the turn index did not return
    windowed = replay(conv, q, {**off, "window_weight": 1.0}, k=len(conv["text"]))
    assert set(windowed) >= set(plain)


def test_scores_and_sign_test():
    hits = {("a", 0, 1): True, ("a", 1, 4): False, ("b", 0, 1): False, ("b", 1, 2): True}
    s = score(hits)
    assert s == {"n": 4, "r10": 0.5, "n_multi_hop": 2, "multi_hop": 0.5}
    flipped = {k: not v for k, v in hits.items()}
    t = sign_test(hits, flipped)
    assert (t["wins"], t["losses"]) == (2, 2) and t["p"] == 1.0
    better = dict.fromkeys(hits, True)
    t = sign_test(hits, better)
    assert (t["wins"], t["losses"]) == (2, 0) and t["p"] == 0.5
    assert sign_test(hits, hits) == {"wins": 0, "losses": 0, "p": 1.0}


def test_found_skips_adversarial_and_grid_has_no_duplicate_points(tmp_path):
    data, _ = _data(tmp_path)
    conv = data["conv-x"]
    conv["questions"].append({**conv["questions"][0], "cat": 5})
    w = {
        "window_weight": 1.5,
        "neighbour_weight": 0.5,
        "question_gain": 0.5,
        "speaker_weight": 0.25,
    }
    assert len(found(data, w, ("conv-x",))) == len(QUESTIONS)
    points = [tuple(sorted(p.items())) for p in grid()]
    assert len(points) == len(set(points))
    assert all(p["question_gain"] == 0 for p in grid() if p["neighbour_weight"] == 0)
