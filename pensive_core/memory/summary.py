"""The "story so far": older conversation turns compressed into a short summary.

Extractive by default (no model): the sentences that carry a segment's recurring content words,
named things, numbers and dates are kept in their original order, each with its speaker, until
the token allowance is spent. With an LLM, the segment is summarised by the model, and the
extractive summary is the fallback when the model fails.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..chunking import split_sentences
from ..tokenize import Tokenizer

__all__ = ["SummaryTurn", "extractive_summary", "llm_summary"]

log = logging.getLogger(__name__)

_NAMED_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
_NUMBER_RE = re.compile(r"\d")
_WORDS: Tokenizer | None = None

LLM_PROMPT = (
    "Summarise this part of a conversation in at most {words} words. Keep names, places, "
    "dates, numbers, decisions, preferences and facts about the people; drop greetings and "
    "small talk. Write plain prose in the third person, no preamble.\n\n{transcript}\n\nSummary:"
)


@dataclass(frozen=True)
class SummaryTurn:
    """A turn as the summariser sees it.

    Args:
        speaker: Who spoke (a name or a role).
        text: What was said.
    """

    speaker: str
    text: str


def _words() -> Tokenizer:
    global _WORDS
    if _WORDS is None:
        _WORDS = Tokenizer()
    return _WORDS


def extractive_summary(
    turns: Sequence[SummaryTurn], max_tokens: int, count: Callable[[str], int]
) -> str:
    """The turns' most informative sentences, in order, within ``max_tokens``.

    A sentence scores by the content words it shares with the rest of the segment (weighted by
    how often the segment repeats them, so its topic words count most), plus named things,
    numbers and dates, divided by the square root of its length so long rambling sentences do
    not win by size. Sentences of the same turn are joined under one speaker label.

    Args:
        turns: The segment's turns, oldest first.
        max_tokens: The most tokens the summary may take.
        count: Counts tokens in a text.

    Returns:
        The summary, or ``""`` when nothing fits or there is nothing to summarise.
    """
    words = _words()
    sentences: list[tuple[int, int, str, list[str]]] = []  # (turn, order, text, words)
    for t, turn in enumerate(turns):
        for s, e, *_ in split_sentences(turn.text):
            text = " ".join(turn.text[s:e].split())
            if text:
                sentences.append((t, len(sentences), text, words.tokenize(text)))
    if not sentences or max_tokens <= 0:
        return ""
    tf = Counter(w for *_, ws in sentences for w in set(ws))
    scored: list[tuple[float, int]] = []
    for i, (_, _, text, ws) in enumerate(sentences):
        distinct = set(ws)
        shared = sum(math.log1p(tf[w] - 1) for w in distinct)  # words other sentences repeat
        named = len(_NAMED_RE.findall(text)) + (1 if _NUMBER_RE.search(text) else 0)
        score = (shared + 0.5 * named) / math.sqrt(max(len(ws), 3))
        scored.append((score, i))
    scored.sort(key=lambda x: (-x[0], x[1]))
    chosen: list[int] = []
    for score, i in scored:
        if score <= 0:
            break
        trial = sorted([*chosen, i])
        if count(_render(turns, sentences, trial)) <= max_tokens:
            chosen = trial
    return _render(turns, sentences, chosen)


def _render(
    turns: Sequence[SummaryTurn],
    sentences: Sequence[tuple[int, int, str, list[str]]],
    chosen: Sequence[int],
) -> str:
    lines: list[str] = []
    last_turn = -1
    for i in chosen:
        t, _, text, _ = sentences[i]
        if t == last_turn:
            lines[-1] += " " + text
        else:
            who = turns[t].speaker
            lines.append(f"{who}: {text}" if who else text)
            last_turn = t
    return "\n".join(lines)


def llm_summary(
    turns: Sequence[SummaryTurn],
    max_tokens: int,
    count: Callable[[str], int],
    complete: Callable[[str], str],
) -> str:
    """The segment summarised by an LLM, clipped to ``max_tokens`` at a sentence end.

    Args:
        turns: The segment's turns, oldest first.
        max_tokens: The most tokens the summary may take.
        count: Counts tokens in a text.
        complete: Sends a prompt to the model and returns its answer.

    Returns:
        The summary; the extractive summary if the model raises or answers with nothing.
    """
    transcript = "\n".join(f"{t.speaker}: {t.text}" for t in turns)
    words = max(20, int(max_tokens * 0.7))
    try:
        answer = " ".join(
            str(complete(LLM_PROMPT.format(words=words, transcript=transcript))).split()
        )
    except Exception as exc:  # the model's failure must not lose the turn being added
        log.warning("LLM summary failed (%s); using the extractive summary", exc)
        answer = ""
    if not answer:
        return extractive_summary(turns, max_tokens, count)
    if count(answer) <= max_tokens:
        return answer
    kept = ""
    for _s, e, *_ in split_sentences(answer):
        trial = answer[:e].strip()
        if count(trial) > max_tokens:
            break
        kept = trial
    return kept or extractive_summary(turns, max_tokens, count)
