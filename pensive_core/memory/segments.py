"""How a session is cut into topic segments, and what its older turns come to: the story so far.

Each new turn is scored for a topic shift against the turns just before it (:mod:`.drift`); a
shift, or a segment grown to ``[memory] segment_max_turns``, closes the segment and summarises
it. Turns that age out of the verbatim window are summarised too, a block at a time, so the
story so far changes once per block and a prompt's prefix stays byte-identical in between.
Past a few block summaries, the oldest are folded into one story-so-far summary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..embedders.base import checked
from .turns import Turn, TurnStore, speaker

if TYPE_CHECKING:
    from .drift import DriftDetector, DriftSignal
    from .host import SessionHost

__all__ = ["Segmenter", "Story"]

_MAX_BLOCKS = 8  # block summaries shown before the oldest are folded into the story so far
_KEEP_BLOCKS = 4  # the newest blocks kept apart when folding
_SUMMARY_BLOCK = 2  # a summary part is written once this many x recent_turns have aged out


class Story:
    """The story so far of one session: the summaries its log holds, and the writing of them.

    Args:
        host: The session's host (its ``[memory]`` settings and its LLM).
    """

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._cache: tuple[int, list[str]] | None = None

    def method(self) -> str:
        """How summaries are written: "llm", "extractive" or "none" (``[memory] summary``;
        "auto" is "llm" when the owner has an LLM)."""
        choice = self._host.config.memory.summary
        if choice == "auto":
            return "llm" if self._host.llm is not None else "extractive"
        return choice

    def close_segment(self, log: TurnStore, segment: int, end: int) -> None:
        """Summarise what is not summarised yet of ``segment``, up to turn ``end``."""
        with log.transaction():
            self._summarise(log, segment, log.summarised_to() + 1, end)

    def summarise_aged(self, log: TurnStore) -> None:
        """Summarise the open segment's turns that have aged out of the verbatim window, in
        blocks, so the story so far changes only once per block (a stable prompt prefix)."""
        cfg = self._host.config.memory
        block = max(2, _SUMMARY_BLOCK * max(cfg.recent_turns, 1))
        done = log.summarised_to()
        aged_end = log.last_seq() - cfg.recent_turns  # turns up to here are no longer verbatim
        if aged_end - done < block:
            return
        with log.transaction():
            for segment, start, end in log.segment_spans(done + 1, aged_end):
                self._summarise(log, segment, start, end)

    def summaries(self, log: TurnStore) -> list[str]:
        """The story so far: one summary per block of older turns, oldest first, each headed
        by its turn range and dates (the folded story so far first)."""
        version = log.summaries_version()
        if self._cache is not None and self._cache[0] == version:
            return list(self._cache[1])
        out = []
        for s in log.shown_summaries():
            d0, d1 = s.began.date().isoformat(), s.ended.date().isoformat()
            when = d0 if d0 == d1 else f"{d0} to {d1}"
            head = "story so far, turns" if s.level else "turns"
            out.append(f"[{head} {s.start}-{s.end}, {when}]\n{s.text}")
        self._cache = (version, out)
        return list(out)

    def forget(self) -> None:
        """Drop what is remembered of the log (it was deleted)."""
        self._cache = None

    def _compress(self, parts: Sequence[Any], max_tokens: int) -> tuple[str, str]:
        """A summary of ``parts`` (speaker, text) and the method that made it."""
        from .summary import extractive_summary, llm_summary
        from .tokens import token_counter

        count = token_counter(self._host.config.memory.tokenizer).count
        llm = self._host.llm
        if self.method() == "llm" and llm is not None:
            from ..context.llm import as_completion

            return llm_summary(parts, max_tokens, count, as_completion(llm)), "llm"
        return extractive_summary(parts, max_tokens, count), "extractive"

    def _summarise(self, log: TurnStore, segment: int, start: int, end: int) -> None:
        if self.method() == "none" or end < start:
            return
        from .summary import SummaryTurn

        parts = [SummaryTurn(speaker(t.role, t.metadata), t.text) for t in log.span(start, end)]
        text, method = self._compress(parts, self._host.config.memory.summary_tokens)
        if text:
            log.add_summary(segment, start, end, text, method)
            self._condense(log)
        self._cache = None

    def _condense(self, log: TurnStore) -> None:
        """Past ``_MAX_BLOCKS`` block summaries, the oldest are folded (with the previous story
        so far) into one story-so-far summary: the story stays short however long the talk."""
        from .summary import SummaryTurn

        top = log.story_so_far()
        blocks = log.block_summaries(-1 if top is None else top[0])
        if len(blocks) <= _MAX_BLOCKS:
            return
        old = blocks[: len(blocks) - _KEEP_BLOCKS]
        parts = []
        for text in ([top[1]] if top else []) + [b[1] for b in old]:
            for line in text.splitlines():
                who, sep, said = line.partition(": ")
                if line.strip():
                    parts.append(SummaryTurn(who, said) if sep else SummaryTurn("", line))
        text, method = self._compress(parts, 2 * self._host.config.memory.summary_tokens)
        if text:
            log.fold_summaries(old[-1][0], text, method)


class Segmenter:
    """Places each new turn of a session in a topic segment.

    Args:
        host: The session's host (its ``[memory]`` drift settings and its model).
        story: The session's story, which summarises each segment closed.

    Attributes:
        last_shift: The position of the last turn that started a new topic (None if none
            since the session was opened or cleared; the session sets it from its log).
    """

    def __init__(self, host: SessionHost, story: Story) -> None:
        self._host = host
        self._story = story
        self._drift: DriftDetector | None = None
        self.last_shift: int | None = None

    def vectors(self, turns: Sequence[Turn]) -> list[np.ndarray | None]:
        """The vectors drift scores ``turns`` with (None each when drift is off)."""
        if not self._host.config.memory.drift:
            return [None] * len(turns)
        # the raw turn, as the detector's thresholds were tuned (the indexed text carries the
        # previous turn too, which would make every turn look like its neighbour)
        embedder = self._host.embedder
        texts = [t.text for t in turns]
        return list(checked(embedder, embedder.embed(texts), len(texts)))

    def place(self, log: TurnStore, turn: Turn, vector: np.ndarray | None, segment: int) -> Turn:
        """Score the turn for a topic shift; a shift (or a full segment) starts a new segment.

        Args:
            log: The session's log (the turn is in it).
            turn: The new turn.
            vector: Its drift vector (from :meth:`vectors`).
            segment: The segment the turn before it is in.

        Returns:
            The turn with its segment, drift score and shift.
        """
        cfg = self._host.config.memory
        signal: DriftSignal | None = None
        if cfg.drift:
            signal = self._detector(log).update(turn.text, vector)
            if turn.seq == 0:
                signal = None
        shift = bool(signal is not None and signal.shift)
        seg_start = log.segment_start(segment)
        full = seg_start is not None and turn.seq - seg_start >= cfg.segment_max_turns
        if (shift or full) and turn.seq > 0:
            self._story.close_segment(log, segment, turn.seq - 1)
            segment += 1
        if shift:
            self.last_shift = turn.seq
        return dataclasses.replace(
            turn,
            segment=segment,
            drift=None if signal is None else float(signal.score),
            shift=shift,
        )

    def forget(self) -> None:
        """Start afresh (the session's log was deleted)."""
        self._drift = None
        self.last_shift = None

    def _detector(self, log: TurnStore) -> DriftDetector:
        if self._drift is None:
            from .drift import DriftDetector

            cfg = self._host.config.memory
            self._drift = DriftDetector(
                window=cfg.drift_window,
                threshold=cfg.drift_threshold,
                novelty_weight=cfg.drift_novelty_weight,
            )
            # reopened: prime the window with the open segment's last turns
            tail = log.open_segment_tail(cfg.drift_window)
            if tail:
                vectors = self._host.embedder.embed([t.text for t in tail])
                for t, vec in zip(tail, vectors, strict=True):
                    self._drift.update(t.text, vec)
        return self._drift
