"""DriftDetector: topic shifts between consecutive turns, on words alone and with vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pensive_core.config import load_config
from pensive_core.embedders.registry import create_embedder
from pensive_core.errors import InputError
from pensive_core.memory.drift import DriftDetector, DriftSignal

# Cooking pasta, then an abrupt switch to a car that will not start (turn 6).
PASTA_THEN_CAR = [
    "I'm making pasta tonight, how long should I boil the spaghetti?",
    "Boil the spaghetti in salted water for about nine minutes until al dente.",
    "Should I add olive oil to the pasta water?",
    "No need for oil, just stir the spaghetti so it does not stick and save some pasta water.",
    "ok thanks",
    "The tomato sauce gets silkier when I toss the spaghetti with a splash of pasta water.",
    "My car won't start this morning and the battery light stays on, what should I check?",
    "If the engine cranks slowly, test the car battery and clean the battery terminals.",
    "lol yeah cool",
    "The battery terminals were corroded, so I cleaned them and the car engine started.",
]
SWITCH = 6


def _lexical_run(turns: list[str], det: DriftDetector | None = None) -> list[DriftSignal]:
    det = det or DriftDetector()
    return [det.update(t) for t in turns]


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _topic_vectors(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two orthogonal topic directions and a generator of noisy unit vectors around them."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(64, 3)))[0].T  # three orthonormal rows
    noise = rng.normal(size=(20, 64)) * 0.04
    return basis[0], basis[1], noise


def test_switch_is_flagged_and_same_topic_turns_are_not():
    signals = _lexical_run(PASTA_THEN_CAR)
    flagged = [i for i, s in enumerate(signals) if s.shift]
    assert flagged == [SWITCH]
    assert all(math.isnan(s.similarity) for s in signals)  # no vectors given
    # the switch is the most novel turn of the conversation
    assert signals[SWITCH].novelty == 1.0
    assert signals[SWITCH].score == max(s.score for s in signals)


def test_first_turn_is_never_a_shift():
    det = DriftDetector(threshold=-10.0, lexical_threshold=-10.0)  # everything else would shift
    first = det.update("Completely new topic about quantum chromodynamics?")
    assert not first.shift
    assert (first.score, first.novelty) == (0.0, 0.0) and math.isnan(first.similarity)
    assert det.update("Another unrelated question about knitting patterns?").shift


def test_short_acknowledgements_do_not_trigger():
    a, _, noise = _topic_vectors()
    det = DriftDetector()
    det.update("Boil the spaghetti in salted water for nine minutes.", _unit(a + noise[0]))
    rng = np.random.default_rng(5)
    for ack in ("ok thanks", "lol yeah cool", "ok", "Thanks!", "yes, great?"):
        # even with a vector pointing anywhere at all, an acknowledgement is not a topic
        sig = det.score(ack, _unit(rng.normal(size=64)))
        assert not sig.shift, ack
        assert not det.score(ack).shift, ack
    # ...while the same vector on a turn with content is judged a shift
    assert det.score("Which winter tyres fit a hatchback?", _unit(rng.normal(size=64))).shift


def test_score_does_not_change_state():
    det = DriftDetector()
    for t in PASTA_THEN_CAR[:4]:
        det.update(t)
    probe = PASTA_THEN_CAR[SWITCH]
    first = det.score(probe)
    assert first.shift
    assert det.score(probe) == first  # scoring again sees the same window
    rest = [det.update(t) for t in PASTA_THEN_CAR[4:]]
    assert rest == _lexical_run(PASTA_THEN_CAR)[4:]


def test_reset_forgets_the_conversation():
    det = DriftDetector()
    for t in PASTA_THEN_CAR[:4]:
        det.update(t)
    det.reset()
    after = det.update(PASTA_THEN_CAR[SWITCH])
    assert not after.shift and after.score == 0.0  # a first turn again
    # the pasta turns are gone from the window: a pasta turn now reads as new as it would after
    # the car turn in a fresh conversation
    pasta = PASTA_THEN_CAR[5]
    assert det.update(pasta) == _lexical_run([PASTA_THEN_CAR[SWITCH], pasta])[1]
    assert det.score(pasta).novelty == 0.0


def test_window_restarts_after_a_shift():
    a, b, noise = _topic_vectors()
    det = DriftDetector(window=3)
    topic_a = [_unit(a + noise[i]) for i in range(4)]
    for i, v in enumerate(topic_a):
        sig = det.update(f"pasta spaghetti sauce step {i}", v)
        assert not sig.shift
    assert sig.similarity > 0.9

    switch_vec, next_vec = _unit(b + noise[10]), _unit(b + noise[11])
    switch_text = "The car engine will not start, battery light on."
    after_text = "Cleaned the car battery terminals and the engine started."
    switch = det.update(switch_text, switch_vec)
    assert switch.shift and switch.similarity < 0.2
    after = det.update(after_text, next_vec)
    assert not after.shift
    # the window holds only the shifting turn, not the pasta turns before it
    assert after.similarity == pytest.approx(float(next_vec @ switch_vec), abs=1e-5)
    words = det.content_words
    new = words(after_text) - words(switch_text)
    assert after.novelty == pytest.approx(len(new) / len(words(after_text)))


def test_window_similarity_is_a_recency_weighted_centroid():
    a, b, _ = _topic_vectors()
    det = DriftDetector(window=2, threshold=10.0)  # never shift: observe the window only
    det.update("first words", _unit(a))
    det.update("second words", _unit(b))
    probe = _unit(a + b)
    centroid = 0.5 * _unit(a) + 1.0 * _unit(b)  # newest weighs 1, the one before 0.5
    expected = float(probe @ centroid / np.linalg.norm(centroid))
    assert det.score("third words", probe).similarity == pytest.approx(expected, abs=1e-5)
    det.update("third words", probe)
    # window=2: the first turn has left the window
    assert det.score("fourth", _unit(a)).similarity == pytest.approx(
        float(_unit(a) @ _unit(0.5 * _unit(b) + probe)), abs=1e-5
    )


def test_question_cues_move_the_score():
    asked, told = (
        DriftDetector(question_weight=0.3, answer_weight=0.15, lexical_threshold=10.0)
        for _ in range(2)
    )
    for det, end in ((asked, "?"), (told, ".")):
        det.update("We went hiking in the alps last summer")
        det.update("Do you like the mountains" + end)
    statement = told.score("Skiing in the mountains is fun")
    # asking a question raises the score; answering one lowers it
    assert told.score("Skiing in the mountains is fun?").score == pytest.approx(
        statement.score + 0.3
    )
    assert asked.score("Skiing in the mountains is fun").score == pytest.approx(
        statement.score - 0.15
    )


def test_hash_embedder_vectors_are_accepted():
    emb = create_embedder(load_config({"embedder": {"name": "hash", "dim": 256}}).embedder)
    vecs = emb.embed(PASTA_THEN_CAR)
    det = DriftDetector()
    signals = [det.update(t, v) for t, v in zip(PASTA_THEN_CAR, vecs)]
    assert not signals[0].shift
    for s in signals[1:]:
        assert -1.0 <= s.similarity <= 1.0
        assert 0.0 <= s.novelty <= 1.0
    assert signals[SWITCH].novelty == 1.0
    assert not signals[4].shift and not signals[8].shift  # the acknowledgements


def test_defaults_are_the_values_tuned_on_tiage_train():
    det = DriftDetector()
    assert (det.window, det.threshold, det.novelty_weight) == (2, 0.84, 0.0)
    assert (det.question_weight, det.answer_weight) == (0.3, 0.15)
    assert (det.min_words, det.lexical_threshold) == (1, 1.02)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"window": 1.5},
        {"window": True},
        {"min_words": -1},
        {"threshold": math.nan},
        {"threshold": "high"},
        {"lexical_threshold": math.inf},
        {"novelty_weight": -0.1},
        {"question_weight": -1},
        {"answer_weight": None},
    ],
)
def test_bad_constructor_arguments(kwargs):
    with pytest.raises(InputError, match=next(iter(kwargs))):
        DriftDetector(**kwargs)


def test_bad_turns():
    det = DriftDetector()
    det.update("hello there, pasta", np.ones(8, dtype=np.float32) / np.sqrt(8))
    with pytest.raises(InputError, match="string"):
        det.update(None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="1-D"):
        det.update("pasta", np.ones((2, 4), dtype=np.float32))
    with pytest.raises(InputError, match="non-zero"):
        det.update("pasta", np.zeros(8, dtype=np.float32))
    with pytest.raises(InputError, match="dimension"):
        det.update("pasta", np.ones(16, dtype=np.float32))
    # nothing above was recorded
    assert det.score("hello there, pasta").novelty == 0.0
