"""Topic-shift (drift) detection between consecutive conversation turns.

A :class:`DriftDetector` reads a conversation one turn at a time and says whether each turn
starts a new topic. It compares the turn with the recent turns of the current *segment* (the
run of turns since the last shift):

* **similarity** -- cosine between the turn's unit vector and a recency-weighted centroid of
  the last ``window`` segment turns (the newest weighs most, each older one half as much);
* **novelty** -- the share of the turn's content words (stemmed, stop words and
  conversational fillers such as "ok", "thanks", "lol" dropped, by
  :class:`pensive_core.tokenize.Tokenizer`) that none of those turns used;
* **dialogue-act cues** -- a turn that asks a question often opens a topic, and a turn that
  answers the previous turn's question usually keeps it.

The score is ``(1 - similarity) + novelty_weight * novelty + question_weight * asks -
answer_weight * answers``; without a vector, novelty stands in for the embedding distance,
``novelty + question_weight * asks - answer_weight * answers``, judged against
``lexical_threshold``. Higher means more likely a shift. The first turn is never a shift, nor
is a turn with fewer than ``min_words`` content words ("ok thanks"). On a shift the window
restarts from the shifting turn.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..tokenize import Tokenizer

__all__ = ["DriftDetector", "DriftSignal"]

# Defaults tuned on TIAGE's train split (300 dialogues, 4,392 labelled turns) by
# benchmarks/memory_tiage.py, maximising shift-class F1 with bundled MiniLM vectors; the dev
# split was only ever reported (dev shift F1 0.516, against 0.432 for a tuned
# cosine-to-previous-turn threshold). novelty_weight came out 0: with MiniLM vectors, lexical
# novelty added nothing on train, so it only drives the score when there is no vector.
DEFAULT_WINDOW = 2
DEFAULT_THRESHOLD = 0.84
DEFAULT_NOVELTY_WEIGHT = 0.0
DEFAULT_QUESTION_WEIGHT = 0.3
DEFAULT_ANSWER_WEIGHT = 0.15
DEFAULT_MIN_WORDS = 1
DEFAULT_LEXICAL_THRESHOLD = 1.02

# Conversational fillers: they carry no topic, so they neither count as content words nor make
# a turn novel ("ok thanks", "lol yeah cool"). Run through the detector's tokenizer at start-up.
_FILLERS = """ok okay thanks thank yes yeah yep yup no nope sure great cool nice awesome good fine lol
    haha hah hehe wow oh ah um uh hmm right alright well really hi hello hey bye goodbye welcome
    please sorry agree indeed totally absolutely exactly true"""

# Older turns of the window weigh this much less than the next newer one in the centroid.
_DECAY = 0.5


@dataclass(frozen=True)
class DriftSignal:
    """How one turn relates to the conversation so far.

    Attributes:
        score: Higher means more likely a topic shift.
        similarity: Cosine of the turn's vector to the recent window's centroid, in [-1, 1];
            ``nan`` when the turn or the window has no vector.
        novelty: Share of the turn's content words not seen in the window, in [0, 1].
        shift: Whether the turn is judged to start a new topic.
    """

    score: float
    similarity: float
    novelty: float
    shift: bool


@dataclass(frozen=True)
class _Turn:
    terms: frozenset[str]
    vector: np.ndarray | None


class DriftDetector:
    """Stateful topic-shift detector for one conversation.

    The defaults were tuned with the bundled MiniLM; another embedder spreads cosines
    differently (the model-free hash embedder scores even unrelated turns around 0.1-0.3), so
    tune ``threshold`` for it. Without vectors the default ``lexical_threshold`` (1.02, above
    the largest possible novelty) means only a question with mostly new words is a shift: on
    TIAGE train only 16% of statements made entirely of new words started a topic, against
    48% of such questions.

    Args:
        window: How many recent turns of the current segment the new turn is compared with.
        threshold: Score at or above which a turn with a vector is a shift.
        novelty_weight: Weight of lexical novelty added to the embedding distance.
        question_weight: Added to the score when the turn asks a question.
        answer_weight: Taken off the score when the previous turn asked a question.
        min_words: Turns with fewer content words are never judged a shift.
        lexical_threshold: Score at or above which a turn without a vector is a shift.
        tokenizer: Finds content words (default: English stemming, stop words dropped).

    Raises:
        InputError: If a parameter is out of range.
    """

    def __init__(
        self,
        *,
        window: int = DEFAULT_WINDOW,
        threshold: float = DEFAULT_THRESHOLD,
        novelty_weight: float = DEFAULT_NOVELTY_WEIGHT,
        question_weight: float = DEFAULT_QUESTION_WEIGHT,
        answer_weight: float = DEFAULT_ANSWER_WEIGHT,
        min_words: int = DEFAULT_MIN_WORDS,
        lexical_threshold: float = DEFAULT_LEXICAL_THRESHOLD,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InputError(f"window must be an integer >= 1; got {window!r}")
        if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 0:
            raise InputError(f"min_words must be an integer >= 0; got {min_words!r}")
        for name, value in (
            ("threshold", threshold),
            ("lexical_threshold", lexical_threshold),
            ("novelty_weight", novelty_weight),
            ("question_weight", question_weight),
            ("answer_weight", answer_weight),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{name} must be a number; got {value!r}")
            if not math.isfinite(value):
                raise InputError(f"{name} must be finite; got {value!r}")
            if name.endswith("_weight") and value < 0:
                raise InputError(f"{name} must be >= 0; got {value!r}")
        self.window = window
        self.threshold = float(threshold)
        self.novelty_weight = float(novelty_weight)
        self.question_weight = float(question_weight)
        self.answer_weight = float(answer_weight)
        self.min_words = min_words
        self.lexical_threshold = float(lexical_threshold)
        self._tokenizer = tokenizer if tokenizer is not None else Tokenizer()
        self._fillers = frozenset(self._tokenizer.tokenize(_FILLERS))
        self._recent: deque[_Turn] = deque(maxlen=window)
        self._seen_any = False
        self._prev_asked = False

    def reset(self) -> None:
        """Forget the conversation: the next turn is a first turn again."""
        self._recent.clear()
        self._seen_any = False
        self._prev_asked = False

    def score(self, text: str, vector: np.ndarray | None = None) -> DriftSignal:
        """Judge a turn without recording it.

        Args:
            text: The turn's text.
            vector: Its L2-normalised embedding, or None to judge on words alone.

        Returns:
            The signal :meth:`update` would return for this turn.

        Raises:
            InputError: If ``text`` is not a string or ``vector`` is not a finite non-zero
                1-D array matching the window's dimension.
        """
        signal, _ = self._judge(text, vector)
        return signal

    def update(self, text: str, vector: np.ndarray | None = None) -> DriftSignal:
        """Judge a turn, then add it to the window (restarting the window on a shift).

        Args:
            text: The turn's text.
            vector: Its L2-normalised embedding, or None to judge on words alone.

        Returns:
            How the turn relates to the recent window, and whether it is a shift. The first
            turn (after construction or :meth:`reset`) has nothing to compare with: score 0,
            similarity ``nan``, novelty 0, no shift.

        Raises:
            InputError: If ``text`` is not a string or ``vector`` is not a finite non-zero
                1-D array matching the window's dimension.
        """
        signal, turn = self._judge(text, vector)
        if signal.shift:
            self._recent.clear()
        self._recent.append(turn)
        self._seen_any = True
        self._prev_asked = _asks(text)
        return signal

    def content_words(self, text: str) -> frozenset[str]:
        """The terms of ``text`` that count for drift: stemmed, without stop words or fillers.

        Args:
            text: Any text.

        Returns:
            The distinct content terms.
        """
        return frozenset(self._tokenizer.tokenize(text)) - self._fillers

    def _judge(self, text: str, vector: np.ndarray | None) -> tuple[DriftSignal, _Turn]:
        if not isinstance(text, str):
            raise InputError(f"text must be a string; got {type(text).__name__}")
        unit = self._unit(vector)
        terms = self.content_words(text)
        turn = _Turn(terms, unit)
        if not self._seen_any:
            return DriftSignal(0.0, math.nan, 0.0, False), turn

        seen: set[str] = set()
        for past in self._recent:
            seen |= past.terms
        novelty = len(terms - seen) / len(terms) if terms else 0.0
        similarity = self._similarity(unit)
        cues = self.question_weight * _asks(text) - self.answer_weight * self._prev_asked
        if math.isnan(similarity):
            score = novelty + cues
            threshold = self.lexical_threshold
        else:
            score = (1.0 - similarity) + self.novelty_weight * novelty + cues
            threshold = self.threshold
        # a bare acknowledgement has too few words to say anything about the topic
        shift = len(terms) >= self.min_words and score >= threshold
        return DriftSignal(float(score), similarity, float(novelty), bool(shift)), turn

    def _unit(self, vector: np.ndarray | None) -> np.ndarray | None:
        if vector is None:
            return None
        arr = np.asarray(vector, dtype=np.float32)
        if arr.ndim != 1 or arr.size == 0:
            raise InputError(f"vector must be a 1-D array; got shape {arr.shape}")
        for past in self._recent:
            if past.vector is not None and past.vector.shape != arr.shape:
                raise InputError(
                    f"vector has dimension {arr.size} but earlier turns had "
                    f"{past.vector.size}; use one embedder per conversation or reset()"
                )
        norm = float(np.linalg.norm(arr))
        if not math.isfinite(norm) or norm == 0.0:
            raise InputError("vector must be finite and non-zero")
        # embedders already give unit rows; normalising again keeps a caller's raw vector honest
        return arr / norm

    def _similarity(self, unit: np.ndarray | None) -> float:
        if unit is None:
            return math.nan
        centroid: np.ndarray | None = None
        weight = 1.0
        for past in reversed(self._recent):
            if past.vector is not None:
                part = weight * past.vector
                centroid = part if centroid is None else centroid + part
            weight *= _DECAY
        if centroid is None:
            return math.nan
        norm = float(np.linalg.norm(centroid))
        if norm == 0.0:
            return math.nan
        return float(np.clip(unit @ centroid / norm, -1.0, 1.0))


def _asks(text: str) -> bool:
    return "?" in text
