"""The values the prompt builder takes and gives: :class:`PromptItem` and :class:`BuiltPrompt`.

Kept apart from :mod:`.prompt` so that strategies and templates (:mod:`.strategies`,
:mod:`.templates`) can use them without importing the builder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import InputError

__all__ = ["BuiltPrompt", "PromptItem"]


@dataclass(frozen=True)
class PromptItem:
    """One piece of text the prompt may carry.

    Args:
        text: The text itself.
        score: For retrieved passages: relevance, higher is better (sets order and drop order).
        pinned: Never dropped, never clipped.
        id: A stable id (chunk id, turn id) reported in ``BuiltPrompt.included``/``dropped``/
            ``clipped``; when empty, one is made from the section and position
            (``"retrieved:3"``, ``"turn:0"``, ``"summary:1"``, ``"pin:0"``).
        role: For history turns: the line's head, who spoke (``"user"``, or with the date,
            ``"[2024-05-02] assistant"``); rendered as ``"role: text"`` and never clipped.
        expanded: For retrieved passages: a wider window of the source containing ``text``
            as a substring; the passage is widened into it, sentence by sentence around the
            passage, when there is room.
        query_hint: Words to clip around when ``build()`` is given no query.
        label: For retrieved passages: a tag a strategy shows before the text, never clipped
            (``"highly relevant"``, ``"3 turns ago"``); set by the strategy, usually.
        match: For retrieved passages: the calibrated match in [0, 1] (``Hit.match``), if known.
        timestamp: For retrieved passages: when the text was written or said, if known.
        turns_ago: For recalled turns: how many turns before the latest one it was said.
    """

    text: str
    score: float = 0.0
    pinned: bool = False
    id: str = ""
    role: str = ""
    expanded: str | None = None
    query_hint: str = ""
    label: str = ""
    match: float | None = None
    timestamp: datetime | None = None
    turns_ago: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InputError(
                f"PromptItem.text must be a str, got {type(self.text).__name__}: {self.text!r}"
            )
        if self.expanded is not None and not isinstance(self.expanded, str):
            raise InputError(
                f"PromptItem.expanded must be a str or None, got {type(self.expanded).__name__}"
            )


@dataclass(frozen=True)
class BuiltPrompt:
    """A prompt that fits its budget, and an account of what went into it.

    Args:
        text: The whole prompt, sections in order.
        prefix: The stable part (system, pins, summaries; with a template, its text up to the
            first slot that changes from turn to turn); ``text`` starts with it. It is
            byte-identical across builds that share budget, system, pins and summaries (summaries
            are cut the same way whatever the query), unless passages and history at their
            floors forced the summaries to give way.
        tokens: Tokens of ``text`` as counted by the builder's tokenizer.
        budget: The caller's total budget.
        headroom: Tokens reserved for generation; ``tokens <= budget - headroom``.
        sections: Tokens of each section's own text (header included), keyed by
            :data:`SECTIONS`; 0 for an empty section. Separators are not in any section, so
            the sum can differ from ``tokens`` by a few.
        dropped: Ids of items left out (history turns folded into an omission line included).
        clipped: Ids of items present only in part.
        included: Ids of items present, whole or clipped, in prompt order.
        strategy: The name of the strategy that rendered the retrieved items.
        template: The name of the prompt template used ("" for the default layout).
    """

    text: str
    prefix: str
    tokens: int
    budget: int
    headroom: int
    sections: Mapping[str, int] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    clipped: tuple[str, ...] = ()
    included: tuple[str, ...] = ()
    strategy: str = "concatenate"
    template: str = ""
