"""How retrieved items are aggregated into a prompt: strategies, chosen by name or given.

A strategy decides three things about the retrieved section and nothing else (the budget,
what is dropped and what is clipped stay the :class:`~.prompt.PromptBuilder`'s business, so
no strategy can overspend a budget or drop a pin):

* :meth:`PromptStrategy.prepare`: the items as the strategy shows them (a ``label`` set), best
  first, one for one. Dropping under pressure always goes weakest first, whatever the strategy.
* :meth:`PromptStrategy.order`: the order the kept items are shown in.
* :meth:`PromptStrategy.line`: one item's line around its (possibly clipped) body; the part
  outside ``body`` is never clipped.

Built in (:data:`STRATEGIES`):

``concatenate`` (the default)
    Best first, ``[1] text``: the builder's rendering before strategies existed, byte for byte.
``weighted``
    Best first, each labelled by how likely it answers the question: ``[1] (highly relevant)
    text``. With a calibrated ``match`` (``Hit.match``, see :mod:`pensive_core.query.match`):
    *highly relevant* at ``match >= 0.8``, *relevant* at ``match >= 0.3155`` (the calibrated
    weak-result cut, :data:`~pensive_core.query.match.WEAK_BELOW`), else *possibly relevant*.
    Items without a match (recalled turns) are labelled by score relative to the best item:
    at least 0.8 of it *highly relevant*, at least 0.5 *relevant*. Neither the 0.8 nor the
    0.5 is tuned: 0.8 reads as "four in five such passages answer", 0.5 as "half the best".
``recency``
    Oldest first (by timestamp, then by turns ago; items with neither last, best first),
    each marked ``[1] [3 turns ago] text`` (recalled turns) or ``[1] [2024-05-02] text``.
``template``
    Each item through a line template with named slots (:class:`LineTemplate`), default
    ``"[{rank}] {text}"``. A string holding ``{text}`` given as the strategy is such a
    template: ``strategy="{rank}. {text} ({date})"``.

Anything else is ``"module.path:Class"`` (instantiated without arguments) or an object with
the three methods and a ``name``.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import InputError, PensiveError
from ..query.match import WEAK_BELOW
from ..validate import check_text
from .prompt_items import PromptItem

__all__ = [
    "STRATEGIES",
    "Concatenate",
    "LineTemplate",
    "PromptStrategy",
    "Recency",
    "Weighted",
    "resolve_strategy",
]

#: ``weighted``'s labels and the match each needs (see the module docstring).
HIGH_MATCH = 0.8
RELEVANT_MATCH = WEAK_BELOW
#: Without a match: the share of the best item's score each label needs (not tuned).
HIGH_RELATIVE = 0.8
RELEVANT_RELATIVE = 0.5


@runtime_checkable
class PromptStrategy(Protocol):
    """How retrieved items are shown: labels, order, and each item's line."""

    name: str

    def prepare(self, items: Sequence[PromptItem]) -> list[PromptItem]:
        """The items as shown (``label`` set), one for one and in the same (best-first) order.

        Args:
            items: Every retrieved item, best first.

        Returns:
            As many items, in the same order.
        """
        ...

    def order(self, items: Sequence[PromptItem]) -> list[int]:
        """The order to show the kept items in.

        Args:
            items: The items that fit, best first (as :meth:`prepare` returned them).

        Returns:
            A permutation of ``range(len(items))``.
        """
        ...

    def line(self, rank: int, item: PromptItem, body: str) -> str:
        """One item's line.

        Args:
            rank: Its place in the shown order, from 1.
            item: The item (as :meth:`prepare` returned it).
            body: Its text, whole, clipped or widened.

        Returns:
            The line; everything but ``body`` is kept whole under budget pressure.
        """
        ...


class Concatenate:
    """Best first, ``[1] text``: the default, and the base the others extend."""

    name = "concatenate"

    def prepare(self, items: Sequence[PromptItem]) -> list[PromptItem]:
        """The items unchanged (see :meth:`PromptStrategy.prepare`)."""
        return list(items)

    def order(self, items: Sequence[PromptItem]) -> list[int]:
        """Best first (see :meth:`PromptStrategy.order`)."""
        return list(range(len(items)))

    def line(self, rank: int, item: PromptItem, body: str) -> str:
        """``[rank] body``, with the item's label in parentheses when it has one."""
        return f"[{rank}] ({item.label}) {body}" if item.label else f"[{rank}] {body}"


class Weighted(Concatenate):
    """Best first, each labelled *highly relevant*, *relevant* or *possibly relevant*.

    Args:
        high: The match (or, without one, the share of the best score) for *highly relevant*.
        relevant: The same for *relevant*.
    """

    name = "weighted"

    def __init__(
        self,
        high: tuple[float, float] = (HIGH_MATCH, HIGH_RELATIVE),
        relevant: tuple[float, float] = (RELEVANT_MATCH, RELEVANT_RELATIVE),
    ) -> None:
        self.high = high
        self.relevant = relevant

    def prepare(self, items: Sequence[PromptItem]) -> list[PromptItem]:
        """Each item with its relevance label."""
        top = max((it.score for it in items), default=0.0)
        out = []
        for it in items:
            if it.match is not None:
                value, col = it.match, 0
            else:  # no calibrated match: relative to the best of this prompt
                value, col = (it.score / top if top > 0 else 0.0), 1
            label = (
                "highly relevant"
                if value >= self.high[col]
                else "relevant"
                if value >= self.relevant[col]
                else "possibly relevant"
            )
            out.append(dataclasses.replace(it, label=label))
        return out


class Recency(Concatenate):
    """Oldest first, each marked with how long ago it was said or its date."""

    name = "recency"

    def prepare(self, items: Sequence[PromptItem]) -> list[PromptItem]:
        """Each item with its age: ``"3 turns ago"``, else its date, else no label."""
        out = []
        for it in items:
            if it.turns_ago is not None:
                n = it.turns_ago
                label = "latest turn" if n <= 0 else f"{n} turn{'s' if n != 1 else ''} ago"
            elif it.timestamp is not None:
                label = f"{it.timestamp:%Y-%m-%d}"
            else:
                label = ""
            out.append(dataclasses.replace(it, label=label))
        return out

    def order(self, items: Sequence[PromptItem]) -> list[int]:
        """Oldest first; items without a time after them, best first (a stable sort)."""

        def key(i: int) -> tuple[int, float, int]:
            it = items[i]
            if it.timestamp is None and it.turns_ago is None:
                return (1, 0.0, 0)
            ts = it.timestamp.timestamp() if it.timestamp is not None else 0.0
            return (0, ts, -(it.turns_ago or 0))

        return sorted(range(len(items)), key=key)

    def line(self, rank: int, item: PromptItem, body: str) -> str:
        """``[rank] [age] body``."""
        return f"[{rank}] [{item.label}] {body}" if item.label else f"[{rank}] {body}"


#: The slots a :class:`LineTemplate` may use.
LINE_SLOTS = ("rank", "text", "id", "score", "match", "label", "date")


class LineTemplate(Concatenate):
    """Each item through a template with named slots: ``{rank}`` (from 1), ``{text}`` (the
    body, required), ``{id}``, ``{score}`` and ``{match}`` (2 decimals; match "" when unknown),
    ``{label}``, ``{date}`` (``YYYY-MM-DD`` or "").

    Args:
        template: The line, e.g. ``"[{rank}] {text} (from {id}, {date})"``.
        error: The error class for a bad template (``InputError`` or ``ConfigError``).

    Raises:
        InputError: A slot is unknown, positional or formatted, or ``{text}`` is missing.
    """

    name = "template"

    def __init__(self, template: str = "[{rank}] {text}", *, error: type = InputError) -> None:
        slots = parse_slots(template, LINE_SLOTS, "line template", error)
        if "text" not in slots:
            raise error(f"line template {template!r} has no {{text}} slot; add one")
        self.template = template

    def line(self, rank: int, item: PromptItem, body: str) -> str:
        """The template filled in for this item."""
        return self.template.format(
            rank=rank,
            text=body,
            id=item.id,
            score=f"{item.score:.2f}",
            match="" if item.match is None else f"{item.match:.2f}",
            label=item.label,
            date="" if item.timestamp is None else f"{item.timestamp:%Y-%m-%d}",
        )


def parse_slots(template: str, known: Sequence[str], what: str, error: type) -> set[str]:
    """The named slots of a ``str.format`` template, checked against ``known``.

    Args:
        template: The template text (``{{`` and ``}}`` are literal braces).
        known: The slot names allowed.
        what: How to name the template in messages.
        error: The :class:`~pensive_core.errors.PensiveError` subclass to raise.

    Returns:
        The slot names used.

    Raises:
        PensiveError: (``error``) Not a str, a lone surrogate, unbalanced braces, or a slot
            that is positional, unknown, or has a conversion or format spec.
    """
    if not isinstance(template, str):
        raise error(f"{what} must be a str, got {type(template).__name__}")
    try:  # its text goes into every prompt: it must encode as the prompt will
        check_text(template, what)
    except InputError as exc:
        raise error(str(exc)) from None
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise error(
            f"{what} {template!r:.80} is not a valid template ({exc}); "
            "write literal braces as {{ and }}"
        ) from None
    slots: set[str] = set()
    for _, field, spec, conv in parsed:
        if field is None:
            continue
        if field not in known:
            raise error(
                f"{what} has an unknown slot {{{field}}}; the known slots are "
                f"{', '.join('{' + k + '}' for k in known)} (literal braces: {{{{ and }}}})"
            )
        if spec or conv:
            raise error(f"{what}: slot {{{field}}} may not have a format spec or conversion")
        slots.add(field)
    return slots


#: Built-in strategies by name.
STRATEGIES: dict[str, type] = {
    "concatenate": Concatenate,
    "weighted": Weighted,
    "recency": Recency,
    "template": LineTemplate,
}


def resolve_strategy(spec: Any, *, error: type = InputError) -> PromptStrategy:
    """The strategy ``spec`` names.

    Args:
        spec: ``None`` (``concatenate``), a name of :data:`STRATEGIES`, a line template
            string holding ``{text}``, ``"module.path:Class"``, a class, or an instance.
        error: What to raise: :class:`InputError` for a call's argument,
            :class:`ConfigError` for a setting.

    Returns:
        A :class:`PromptStrategy`.

    Raises:
        PensiveError: (``error``) Unknown name, bad template, or an object that does not
            implement :class:`PromptStrategy`.
    """
    from ..plugins import is_class_path, resolve_class

    if spec is None:
        return Concatenate()
    if isinstance(spec, str):
        if spec in STRATEGIES:
            return STRATEGIES[spec](error=error) if spec == "template" else STRATEGIES[spec]()
        if "{" in spec:
            return LineTemplate(spec, error=error)
        if not is_class_path(spec):
            raise error(
                f"unknown prompt strategy {spec!r}; use one of {sorted(STRATEGIES)}, a line "
                "template holding {text}, 'module.path:Class' or a PromptStrategy object"
            )
        try:
            spec = resolve_class("strategy", spec)
        except PensiveError as exc:
            raise error(str(exc)) from None
    if isinstance(spec, type):
        try:
            spec = spec()
        except TypeError as exc:
            raise error(f"prompt strategy {spec.__qualname__} cannot be built: {exc}") from None
    if not isinstance(spec, PromptStrategy):
        raise error(
            f"prompt strategy {type(spec).__qualname__} does not implement PromptStrategy "
            "(it needs name, prepare, order and line)"
        )
    return spec
