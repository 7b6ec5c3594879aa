"""A prompt builder that spends a token budget by priority and never overspends it.

The prompt is laid out as::

    <system>

    ## Pinned
    ...
    ## Summary so far
    ...                      <- up to here: BuiltPrompt.prefix, stable for prompt caching
    ## Retrieved context
    [1] best passage
    [2] ...
    ## Conversation
    user: ...
    assistant: ...
    ## Question
    <query>

How the budget is spent:

* ``headroom`` (a fraction of the *total* budget) is kept free for the model's answer; the
  text never exceeds ``token_budget - headroom`` tokens, counted on the final text.
* The system prompt, pins (and any item marked ``pinned``) and the query are fixed. If they do
  not fit, :class:`~pensive_core.errors.InputError`: pins are never dropped or clipped.
* Of what remains, summaries, retrieved passages and history get their shares (10/60/20% by
  default). A section that needs less than its share gives the rest to the others, retrieved
  first, then history (so does what whole items leave of an allowance). Summaries do not
  borrow: their share is taken of the budget less headroom, system prompt and pins only, and
  they are cut to their newest sentences without regard to the query, so the cacheable prefix
  is byte-identical from one turn to the next. The
  unassigned rest is slack: it absorbs the floors below, headers and separators, and widens
  retrieved passages into their ``expanded`` text; it does not buy more whole items, so the
  shares hold when every section has more than it can carry.
* A section over its allowance degrades in order of least damage: the weakest retrieved
  passages are dropped down to ``min_retrieved``, then the largest are clipped down to
  ``min_item_tokens``; the oldest history turns are replaced by one "[… N earlier turns
  omitted …]" line, the most recent turn being clipped last; summaries give way last (the
  oldest left out first, the oldest kept cut to its closing sentences). Only when all that is
  not enough are the floors themselves given up.

Clipping never keeps a passage's first N characters: it keeps the sentence that shares the
most (stemmed) words with the query and grows outward sentence by sentence, alternating after
and before, marking each cut with ``clip_marker``. Widening into ``expanded`` grows outward
from the passage the same way.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..chunking import split_sentences
from ..errors import ConfigError, InputError
from ..tokenize import Tokenizer
from ..types import Hit
from .prompt_items import BuiltPrompt, PromptItem
from .strategies import Concatenate, PromptStrategy, resolve_strategy
from .templates import PromptTemplate, resolve_template
from .tokens import TokenCounter, token_counter

__all__ = ["PromptItem", "BuiltPrompt", "PromptBuilder", "SECTIONS", "clip_passage"]

logger = logging.getLogger(__name__)

#: Section names, in prompt order; the keys of :attr:`BuiltPrompt.sections`.
SECTIONS = ("system", "pins", "summaries", "retrieved", "history", "query")

_HEADERS = {
    "pins": "## Pinned",
    "summaries": "## Summary so far",
    "retrieved": "## Retrieved context",
    "history": "## Conversation",
    "query": "## Question",
}
_SECTION_SEP = "\n\n"
_ITEM_SEP = {"pins": "\n\n", "summaries": "\n\n", "retrieved": "\n\n", "history": "\n"}
_WORD_RE = re.compile(r"\S+")


PinInput = PromptItem | str
RetrievedInput = PromptItem | Hit | str
TurnInput = PromptItem | tuple[str, str] | str


@dataclass(frozen=True)
class _Entry:
    """An input item, normalised: its id, its section, its position in the input."""

    item: PromptItem
    id: str
    section: str
    order: int

    @property
    def pinned(self) -> bool:
        return self.item.pinned or self.section == "pins"


@dataclass(frozen=True)
class _Line:
    """An entry as it will be rendered: whole, clipped or widened."""

    entry: _Entry
    body: str
    clipped: bool = False


# A history section: lines and, where turns were left out, how many ("[… N … omitted …]").
_HistoryPart = _Line | int


class PromptBuilder:
    """Builds prompts that fit a token budget.

    Args:
        tokenizer: What counts tokens: ``None`` (tiktoken cl100k_base, offline), an encoding
            name, a callable ``str -> int``, an object with ``.encode()``, or a
            :class:`~pensive_core.memory.tokens.TokenCounter`.
        summaries_share: Share of the remainder (budget minus headroom, system, pins and
            query) for summaries.
        retrieved_share: Share for retrieved passages.
        history_share: Share for conversation history. The three may sum to less than 1; the
            rest is slack, borrowed to keep the floors below, for headers and separators,
            and to widen passages into their ``expanded`` text, but not to add more whole
            items (set shares summing to 1 to hand it all out).
        headroom: Fraction of the total budget kept free for the model's answer.
        min_retrieved: Retrieved passages are dropped down to this many before any is clipped
            (and before history or summaries give way).
        min_item_tokens: Clipping stops at this many tokens per item before anything further
            is given up.
        clip_marker: Marks each place text was cut from an item.
        strategy: How retrieved items are shown (:mod:`.strategies`): a name
            (``"concatenate"``, the default; ``"weighted"``, ``"recency"``, ``"template"``),
            a line template holding ``{text}``, ``"module:Class"`` or a ``PromptStrategy``.
        template: The prompt's layout (:mod:`.templates`): None for ``## Section`` blocks, a
            built-in name (``"qa"``, ``"research"``, ``"conversational"``), template text
            holding ``{query}``, a file path, or a ``PromptTemplate``.

    Raises:
        ConfigError: A share or the headroom is outside [0, 1], the shares sum above 1, a
            floor or the marker is invalid, or the strategy or template is unknown or bad.
    """

    def __init__(
        self,
        tokenizer: str | Callable[[str], int] | Any | None = None,
        *,
        summaries_share: float = 0.10,
        retrieved_share: float = 0.60,
        history_share: float = 0.20,
        headroom: float = 0.10,
        min_retrieved: int = 1,
        min_item_tokens: int = 48,
        clip_marker: str = "[…]",
        strategy: Any = None,
        template: Any = None,
    ) -> None:
        shares = {
            "summaries_share": summaries_share,
            "retrieved_share": retrieved_share,
            "history_share": history_share,
        }
        for name, value in shares.items():
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be a number in [0, 1], got {value!r}")
        if sum(shares.values()) > 1.0 + 1e-9:
            raise ConfigError(
                f"summaries_share + retrieved_share + history_share must be at most 1, got "
                f"{summaries_share} + {retrieved_share} + {history_share} = "
                f"{sum(shares.values()):.3f}"
            )
        if not isinstance(headroom, (int, float)) or not 0.0 <= headroom < 1.0:
            raise ConfigError(
                f"headroom is a fraction of the total budget in [0, 1), got {headroom!r}"
            )
        if (
            isinstance(min_retrieved, bool)
            or not isinstance(min_retrieved, int)
            or min_retrieved < 0
        ):
            raise ConfigError(f"min_retrieved must be an int >= 0, got {min_retrieved!r}")
        if (
            isinstance(min_item_tokens, bool)
            or not isinstance(min_item_tokens, int)
            or min_item_tokens < 1
        ):
            raise ConfigError(f"min_item_tokens must be an int >= 1, got {min_item_tokens!r}")
        if not isinstance(clip_marker, str) or not clip_marker.strip():
            raise ConfigError(f"clip_marker must be a non-blank str, got {clip_marker!r}")
        self.counter: TokenCounter = token_counter(tokenizer)
        self.shares = {
            "summaries": float(summaries_share),
            "retrieved": float(retrieved_share),
            "history": float(history_share),
        }
        self.headroom = float(headroom)
        self.min_retrieved = min_retrieved
        self.min_item_tokens = min_item_tokens
        self.clip_marker = clip_marker
        self._terms: Tokenizer | None = None
        self.strategy: PromptStrategy = resolve_strategy(strategy, error=ConfigError)
        self.template = resolve_template(template, error=ConfigError)

    def headroom_tokens(self, token_budget: int) -> int:
        """Tokens kept free for generation out of ``token_budget``.

        Args:
            token_budget: The total budget.

        Returns:
            ``ceil(headroom * token_budget)``.
        """
        return max(0, math.ceil(token_budget * self.headroom - 1e-9))

    def build(
        self,
        token_budget: int,
        *,
        query: str = "",
        system: str = "",
        pins: Sequence[PinInput] = (),
        summaries: Sequence[PinInput] = (),
        retrieved: Sequence[RetrievedInput] = (),
        history: Sequence[TurnInput] = (),
        show_query: bool = True,
        strategy: Any = None,
        template: Any = None,
    ) -> BuiltPrompt:
        """Build a prompt that fits ``token_budget`` minus the headroom.

        Args:
            token_budget: Total tokens of the model call (prompt plus answer).
            query: The user's question; rendered last, and what clipping keeps close to.
            system: The system prompt, rendered first, never cut.
            pins: Texts that must always be present (instructions, user facts).
            summaries: Rolling conversation summaries, oldest first.
            retrieved: Passages, as :class:`PromptItem` or :class:`~pensive_core.types.Hit`
                (its ``metadata["expanded"]`` is used when present); any order, rendered
                best first.
            history: Conversation turns, oldest first, as :class:`PromptItem` (with ``role``)
                or ``(role, text)`` tuples.
            show_query: Render ``query`` as the closing section; False keeps it out of the text
                (clipping still keeps close to it) where the caller shows it elsewhere.
            strategy: This call's strategy (as the constructor's; None: the builder's).
            template: This call's template (as the constructor's; None: the builder's).

        Returns:
            The :class:`BuiltPrompt`.

        Raises:
            InputError: The budget is not a positive int, an item has the wrong type, the
                strategy or template is unknown or bad, or the system prompt, pins, template
                text and query alone exceed the budget.
        """
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise InputError(f"token_budget must be a positive int, got {token_budget!r}")
        if not isinstance(query, str) or not isinstance(system, str):
            raise InputError("query and system must be str")
        headroom = self.headroom_tokens(token_budget)
        limit = token_budget - headroom
        tmpl = self.template if template is None else resolve_template(template)
        parts = {
            s: _entries(v, s) for s, v in zip(SECTIONS[1:5], (pins, summaries, retrieved, history))
        }
        if tmpl is not None:  # a section the template has no slot for is not shown at all
            parts = tmpl.restrict(parts, system)
        run = _Run(
            self,
            strategy=self.strategy if strategy is None else resolve_strategy(strategy),
            template=tmpl,
            limit=limit,
            query=query,
            show_query=show_query,
            system=system,
            **parts,
        )
        minimal = run.minimal()
        floor_text = run.render(minimal)
        floor_tokens = self.counter.count(floor_text)
        if floor_tokens > limit:
            raise InputError(
                f"The system prompt, pinned items, template and query need {floor_tokens} tokens but only "
                f"{limit} fit (token_budget {token_budget} minus {headroom} headroom). Pinned "
                "items are never dropped or clipped: shorten them or raise the budget."
            )
        target = limit
        while True:
            plan = run.fit(target) if target > 0 else minimal
            text = run.render(plan)
            tokens = self.counter.count(text)
            if tokens <= limit:
                break
            # the per-piece estimate missed how the pieces tokenize once joined: aim lower
            logger.debug("prompt came to %d tokens for %d; refitting", tokens, limit)
            target -= tokens - limit
        return run.result(plan, text, tokens, token_budget, headroom)

    def _tokenizer(self) -> Tokenizer:
        if self._terms is None:
            self._terms = Tokenizer()
        return self._terms


def _entries(items: Sequence[Any], section: str) -> list[_Entry]:
    """Normalise one section's inputs to entries with ids."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InputError(
            f"{section} must be a sequence of items, got {type(items).__name__}: {items!r:.80}"
        )
    prefix = {"pins": "pin", "summaries": "summary", "retrieved": "retrieved", "history": "turn"}
    out: list[_Entry] = []
    for i, raw in enumerate(items):
        if isinstance(raw, PromptItem):
            item = raw
        elif isinstance(raw, str):
            item = PromptItem(raw)
        elif section == "retrieved" and isinstance(raw, Hit):
            expanded = raw.metadata.get("expanded")
            item = PromptItem(
                raw.text,
                score=float(raw.score),
                id=raw.chunk_id,
                expanded=expanded if isinstance(expanded, str) else None,
                match=raw.match,
                timestamp=raw.timestamp,
            )
        elif (
            section == "history"
            and isinstance(raw, tuple)
            and len(raw) == 2
            and all(isinstance(x, str) for x in raw)
        ):
            item = PromptItem(raw[1], role=raw[0])
        else:
            kinds = {
                "retrieved": "PromptItem, Hit or str",
                "history": "PromptItem, (role, text) tuple or str",
            }.get(section, "PromptItem or str")
            raise InputError(
                f"{section}[{i}] must be a {kinds}, got {type(raw).__name__}: {raw!r:.80}"
            )
        out.append(_Entry(item, item.id or f"{prefix[section]}:{i}", section, i))
    if section == "retrieved":
        # best first; one copy of a passage retrieved twice
        out.sort(key=lambda e: -e.item.score)
        seen: set[str] = set()
        unique = []
        for e in out:
            if e.id not in seen:
                seen.add(e.id)
                unique.append(e)
        out = unique
    return out


@dataclass
class _Plan:
    """What one build puts in each variable section."""

    summaries: list[_Line]
    retrieved: list[_Line]
    history: list[_HistoryPart]


class _Run:
    """The state of one ``build()`` call: inputs, the token-count memo, the fitting steps."""

    def __init__(
        self,
        builder: PromptBuilder,
        *,
        strategy: PromptStrategy | None = None,
        template: PromptTemplate | None = None,
        limit: int,
        query: str,
        show_query: bool = True,
        system: str,
        pins: list[_Entry],
        summaries: list[_Entry],
        retrieved: list[_Entry],
        history: list[_Entry],
    ) -> None:
        self.b = builder
        self.query = query
        self.system = system
        self.pins = pins
        # empty texts carry nothing: left out from the start (pinned ones are kept)
        self.empty = [
            e
            for e in (*summaries, *retrieved, *history)
            if not e.item.text.strip() and not e.pinned
        ]
        gone = {id(e) for e in self.empty}
        self.summaries = [e for e in summaries if id(e) not in gone]
        self.retrieved = [e for e in retrieved if id(e) not in gone]
        self.history = [e for e in history if id(e) not in gone]
        self.strategy = strategy or Concatenate()
        self.template = template
        shown = self.strategy.prepare([e.item for e in self.retrieved])
        if len(shown) != len(self.retrieved):
            raise InputError(f"strategy {self.strategy.name!r} must prepare items one for one")
        self.retrieved = [
            _Entry(it, e.id, e.section, e.order) for it, e in zip(shown, self.retrieved)
        ]
        # estimates number each passage by its place among all of them: never fewer digits
        # than its place among those kept, and the same text whatever else is dropped
        self._rank = {e.id: i + 1 for i, e in enumerate(self.retrieved)}
        self._counts: dict[str, int] = {}
        self._terms: dict[str, frozenset[str]] = {}
        self._query_terms = self._words(query) if query.strip() else frozenset()
        self.sep_cost = self.n(_SECTION_SEP)
        self.fixed_text = {
            "system": system,
            "pins": self._section("pins", [e.item.text for e in pins]),
            "query": self._section("query", [query]) if show_query and query.strip() else "",
        }
        self.fixed_cost = sum(self.n(t) + self.sep_cost for t in self.fixed_text.values() if t)
        if template is not None:  # no headers or separators: the template's text stands for them
            bodies = [system, *(e.item.text for e in pins), query if show_query else ""]
            self.fixed_cost = self.n(template.fixed) + sum(self.n(t) for t in bodies if t)
        stable = [self.fixed_text["system"], self.fixed_text["pins"]]
        stable_cost = sum(self.n(t) + self.sep_cost for t in stable if t)
        self.summary_room = math.floor(max(0, limit - stable_cost) * builder.shares["summaries"])

    # ---- counting -------------------------------------------------------------------------

    def n(self, text: str) -> int:
        """Tokens of ``text``, memoised for this build."""
        got = self._counts.get(text)
        if got is None:
            got = self.b.counter.count(text)
            self._counts[text] = got
        return got

    def _words(self, text: str) -> frozenset[str]:
        got = self._terms.get(text)
        if got is None:
            got = frozenset(self.b._tokenizer().tokenize(text))
            self._terms[text] = got
        return got

    def _terms_for(self, entry: _Entry) -> frozenset[str]:
        if self._query_terms or not entry.item.query_hint.strip():
            return self._query_terms
        return self._words(entry.item.query_hint)

    # ---- rendering ------------------------------------------------------------------------

    @staticmethod
    def _section(name: str, lines: Sequence[str]) -> str:
        if not lines:
            return ""
        return _HEADERS[name] + "\n" + _ITEM_SEP.get(name, "\n").join(lines)

    def _retrieved_line(self, entry: _Entry, rank: int, body: str) -> str:
        line = self.strategy.line(rank, entry.item, body)
        if self.template is not None and self.template.cites:  # "[1] <doc:q3#2> text"
            head, sep, rest = line.partition("] ")
            line = f"{head}] <{entry.id}> {rest}" if sep else f"<{entry.id}> {line}"
        return line

    @staticmethod
    def _turn_line(entry: _Entry, body: str) -> str:
        return f"{entry.item.role}: {body}" if entry.item.role else body

    @staticmethod
    def _omitted_line(count: int) -> str:
        return f"[… {count} earlier turn{'s' if count != 1 else ''} omitted …]"

    def _history_lines(self, parts: Sequence[_HistoryPart]) -> list[str]:
        return [
            self._omitted_line(p) if isinstance(p, int) else self._turn_line(p.entry, p.body)
            for p in parts
        ]

    def section_texts(self, plan: _Plan) -> dict[str, str]:
        """Each section's text under ``plan`` ("" when empty)."""
        return {
            "system": self.fixed_text["system"],
            "pins": self.fixed_text["pins"],
            "summaries": self._section("summaries", [ln.body for ln in plan.summaries]),
            "retrieved": self._section(
                "retrieved",
                [
                    self._retrieved_line(ln.entry, i + 1, ln.body)
                    for i, ln in enumerate(self.shown(plan.retrieved))
                ],
            ),
            "history": self._section("history", self._history_lines(plan.history)),
            "query": self.fixed_text["query"],
        }

    def shown(self, lines: list[_Line]) -> list[_Line]:
        """The kept passages in the order the strategy shows them."""
        order = self.strategy.order([ln.entry.item for ln in lines])
        if sorted(order) != list(range(len(lines))):
            raise InputError(f"strategy {self.strategy.name!r}: order() is not a permutation")
        return [lines[i] for i in order]

    def render(self, plan: _Plan) -> str:
        return self.layout(plan)[0]

    def layout(self, plan: _Plan) -> tuple[str, str]:
        """The prompt's text and its stable prefix under ``plan``."""
        texts = self.section_texts(plan)
        if self.template is None:
            return _SECTION_SEP.join(texts[s] for s in SECTIONS if texts[s]), _SECTION_SEP.join(
                texts[s] for s in ("system", "pins", "summaries") if texts[s]
            )
        body = {s: t.partition("\n")[2] if s in _HEADERS else t for s, t in texts.items()}
        slots = dict(body, summary=body["summaries"], context=body["retrieved"])
        return self.template.render(dict(slots, sources=body["retrieved"]))

    def result(
        self, plan: _Plan, text: str, tokens: int, budget: int, headroom: int
    ) -> BuiltPrompt:
        texts = self.section_texts(plan)
        prefix = self.layout(plan)[1]
        lines = [
            *plan.summaries,
            *self.shown(plan.retrieved),
            *(p for p in plan.history if isinstance(p, _Line)),
        ]
        present = {ln.entry.id for ln in lines} | {e.id for e in self.pins}
        included = [e.id for e in self.pins] + [ln.entry.id for ln in lines]
        order = [*self.summaries, *self.retrieved, *self.history, *self.empty]
        return BuiltPrompt(
            text=text,
            prefix=prefix,
            tokens=tokens,
            budget=budget,
            headroom=headroom,
            sections=MappingProxyType({s: self.n(texts[s]) if texts[s] else 0 for s in SECTIONS}),
            dropped=tuple(e.id for e in order if e.id not in present),
            clipped=tuple(ln.entry.id for ln in lines if ln.clipped),
            included=tuple(included),
            strategy=self.strategy.name,
            template=self.template.name if self.template else "",
        )

    # ---- costs (estimates: pieces counted apart, checked on the joined text) --------------

    def _cost(self, name: str, lines: Sequence[str]) -> int:
        if not lines:
            return 0
        head = 0 if self.template else self.n(_HEADERS[name] + "\n") + self.sep_cost
        return head + sum(self.n(t) for t in lines) + (len(lines) - 1) * self.n(_ITEM_SEP[name])

    def cost_summaries(self, lines: Sequence[_Line]) -> int:
        return self._cost("summaries", [ln.body for ln in lines])

    def cost_retrieved(self, lines: Sequence[_Line]) -> int:
        return self._cost(
            "retrieved",
            [self._retrieved_line(ln.entry, self._rank[ln.entry.id], ln.body) for ln in lines],
        )

    def cost_history(self, parts: Sequence[_HistoryPart]) -> int:
        return self._cost("history", self._history_lines(parts))

    def estimate(self, plan: _Plan) -> int:
        return (
            self.fixed_cost
            + self.cost_summaries(plan.summaries)
            + self.cost_retrieved(plan.retrieved)
            + self.cost_history(plan.history)
        )

    # ---- plans ----------------------------------------------------------------------------

    def minimal(self) -> _Plan:
        """Only what may never be left out: pinned items."""
        return _Plan(
            summaries=[_Line(e, e.item.text) for e in self.summaries if e.pinned],
            retrieved=[_Line(e, e.item.text) for e in self.retrieved if e.pinned],
            history=[_Line(e, e.item.text) for e in self.history if e.pinned],
        )

    def fit(self, target: int) -> _Plan:
        """The fullest plan whose estimated size is at most ``target`` tokens."""
        whole = {
            "summaries": self.cost_summaries([_Line(e, e.item.text) for e in self.summaries]),
            "retrieved": self.cost_retrieved([_Line(e, e.item.text) for e in self.retrieved]),
            "history": self.cost_history([_Line(e, e.item.text) for e in self.history]),
        }
        allowance = self._allocate(max(0, target - self.fixed_cost), whole)
        # The summaries' room depends on nothing that changes from turn to turn (query,
        # passages, history), and they are cut without looking at the query, so the cacheable
        # prefix stays byte-identical; they do not borrow what the other sections leave.
        allowance["summaries"] = min(whole["summaries"], self.summary_room)
        b = self.b
        fits: dict[str, Callable[[int], Any]] = {
            "summaries": lambda a: self.fit_summaries(a, keep=1),
            "retrieved": lambda a: self.fit_retrieved(a, b.min_retrieved, b.min_item_tokens),
            "history": lambda a: self.fit_history(a, keep_last=True),
        }
        costs: dict[str, Callable[[Any], int]] = {
            "summaries": self.cost_summaries,
            "retrieved": self.cost_retrieved,
            "history": self.cost_history,
        }
        plan = _Plan(**{s: fits[s](allowance[s]) for s in fits})
        # Whole items rarely fill an allowance exactly: what a section left of its allowance
        # flows on like an unused share, retrieved first.
        used = {s: costs[s](getattr(plan, s)) for s in fits}
        free = sum(allowance.values()) - sum(used.values())
        for s in ("retrieved", "history"):
            if free > 0 and used[s] < whole[s]:
                setattr(plan, s, fits[s](used[s] + free))
                grown = costs[s](getattr(plan, s))
                free -= grown - used[s]
                used[s] = grown
        # Over the target: give way in order of least damage, honouring the floors first.
        steps: list[tuple[str, Callable[[int], Any]]] = [
            ("retrieved", lambda a: self.fit_retrieved(a, b.min_retrieved, b.min_item_tokens)),
            ("history", lambda a: self.fit_history(a, keep_last=True)),
            ("summaries", lambda a: self.fit_summaries(a, keep=0)),
            ("retrieved", lambda a: self.fit_retrieved(a, 0, b.min_item_tokens)),
            ("history", lambda a: self.fit_history(a, keep_last=False)),
        ]
        for name, step in steps:
            over = self.estimate(plan) - target
            if over <= 0:
                break
            logger.debug("prompt %d tokens over; %s gives way", over, name)
            current = costs[name](getattr(plan, name))
            setattr(plan, name, step(max(0, current - over)))
        spare = target - self.estimate(plan)
        if spare > 0:
            plan.retrieved = self.widen(plan.retrieved, spare)
        return plan

    def _allocate(self, remainder: int, whole: Mapping[str, int]) -> dict[str, int]:
        """Split ``remainder`` by the shares; unused share flows retrieved, history, summaries."""
        share = {s: math.floor(remainder * f) for s, f in self.b.shares.items()}
        unused = sum(max(0, share[s] - whole[s]) for s in share)
        out = {"summaries": min(whole["summaries"], share["summaries"])}
        for s in ("retrieved", "history"):
            grant = min(unused, max(0, whole[s] - share[s]))
            unused -= grant
            out[s] = min(whole[s], share[s] + grant)
        return out

    # ---- sections -------------------------------------------------------------------------

    def fit_retrieved(self, allowance: int, min_count: int, min_tokens: int) -> list[_Line]:
        """Passages within ``allowance``: drop the weakest down to ``min_count``, bring back
        any dropped one that still fits whole, then clip the largest down to ``min_tokens``."""
        kept = [_Line(e, e.item.text) for e in self.retrieved]
        if self.cost_retrieved(kept) <= allowance:
            return kept
        dropped: list[_Line] = []
        while self.cost_retrieved(kept) > allowance and len(kept) > min_count:
            weakest = next(
                (i for i in range(len(kept) - 1, -1, -1) if not kept[i].entry.pinned), None
            )
            if weakest is None:
                break
            dropped.append(kept.pop(weakest))
        if self.cost_retrieved(kept) <= allowance:
            for ln in reversed(dropped):  # strongest first
                trial = sorted([*kept, ln], key=lambda x: self._rank[x.entry.id])
                if self.cost_retrieved(trial) <= allowance:
                    kept = trial
            return kept
        return self._clip_lines(
            kept,
            allowance,
            min_tokens,
            cost=self.cost_retrieved,
            line=lambda entry, body: self._retrieved_line(entry, self._rank[entry.id], body),
        )

    def fit_summaries(self, allowance: int, keep: int) -> list[_Line]:
        """Summaries within ``allowance``, newest kept first: the newest that fit whole, the
        next older one cut to its closing sentences if at least the floor fits, older ones
        left out. With ``keep`` the newest stays (cut down to the floor) even if over. The
        query plays no part, so the same allowance always gives the same text."""
        whole = [_Line(e, e.item.text) for e in self.summaries]
        if self.cost_summaries(whole) <= allowance:
            return whole
        chosen: dict[int, _Line] = {
            id(e): _Line(e, e.item.text) for e in self.summaries if e.pinned
        }

        def lines() -> list[_Line]:
            return [chosen[id(e)] for e in self.summaries if id(e) in chosen]

        floor = self.b.min_item_tokens
        for e in reversed([e for e in self.summaries if not e.pinned]):
            chosen[id(e)] = _Line(e, e.item.text)
            if self.cost_summaries(lines()) <= allowance:
                continue
            chosen[id(e)] = _Line(e, "")
            room = allowance - self.cost_summaries(lines())
            first = not any(not ln.entry.pinned and ln.body for ln in chosen.values())
            body = None
            if room >= floor or (first and keep):
                body = self._clip(e, max(room, floor), lambda t: t, tail=True)
            if body is None:
                del chosen[id(e)]
            else:
                chosen[id(e)] = _Line(e, body, True)
            break
        return lines()

    def fit_history(self, allowance: int, keep_last: bool) -> list[_HistoryPart]:
        """The most recent turns that fit whole, older ones folded into omission lines; the
        most recent turn is clipped (down to the floor) only when it alone does not fit."""
        turns = self.history
        whole = self._history_parts({id(e): e.item.text for e in turns})
        if self.cost_history(whole) <= allowance:
            return whole
        pinned = {id(e): e.item.text for e in turns if e.pinned}
        unpinned = [e for e in turns if not e.pinned]
        best = self._history_parts(pinned, with_omitted=False)
        for k in range(1, len(unpinned) + 1):
            keep = dict(pinned)
            keep.update((id(e), e.item.text) for e in unpinned[-k:])
            parts = self._history_parts(keep)
            if self.cost_history(parts) > allowance:
                break
            best = parts
        else:
            return best
        if any(isinstance(p, _Line) and not p.entry.pinned for p in best):
            return best
        # not even the most recent turn fits whole: clip it
        last = unpinned[-1]
        parts = self._history_parts({**pinned, id(last): ""})
        room = allowance - self.cost_history(parts) + self.n(self._turn_line(last, ""))
        body = None
        if keep_last or room >= self.b.min_item_tokens:
            body = self._clip(
                last,
                max(room, self.b.min_item_tokens if keep_last else room),
                lambda s: self._turn_line(last, s),
            )
        if body is None:
            return best
        return self._history_parts({**pinned, id(last): body}, clipped={id(last)})

    def _history_parts(
        self,
        keep: Mapping[int, str],
        *,
        clipped: set[int] | None = None,
        with_omitted: bool = True,
    ) -> list[_HistoryPart]:
        """Turns in order, those not in ``keep`` (by ``id(entry)``) folded into counts."""
        parts: list[_HistoryPart] = []
        gap = 0
        for e in self.history:
            if id(e) in keep:
                if gap and with_omitted:
                    parts.append(gap)
                gap = 0
                parts.append(_Line(e, keep[id(e)], bool(clipped and id(e) in clipped)))
            else:
                gap += 1
        if gap and with_omitted and parts:
            parts.append(gap)
        return parts

    def _clip_lines(
        self,
        lines: list[_Line],
        allowance: int,
        min_tokens: int,
        *,
        cost: Callable[[Sequence[_Line]], int],
        line: Callable[[_Entry, str], str],
    ) -> list[_Line]:
        """Clip the largest unpinned lines to a common cap (not below ``min_tokens``) so that
        ``cost(lines) <= allowance`` where possible; then hand back what clipping left over."""
        sizes = [self.n(line(ln.entry, ln.body)) for ln in lines]
        movable = [i for i, ln in enumerate(lines) if not ln.entry.pinned]
        fixed = cost(lines) - sum(sizes[i] for i in movable)
        room = allowance - fixed

        def total(cap: int) -> int:
            return sum(min(sizes[i], cap) for i in movable)

        lo, hi = min_tokens, max((sizes[i] for i in movable), default=min_tokens)
        if total(lo) > room:
            cap = lo
        else:  # the largest cap that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if total(mid) <= room:
                    lo = mid
                else:
                    hi = mid - 1
            cap = lo
        out = list(lines)
        for i in movable:
            if sizes[i] > cap:
                body = self._clip(lines[i].entry, cap, functools.partial(line, lines[i].entry))
                out[i] = _Line(lines[i].entry, body if body is not None else "", True)
        # sentence boundaries leave some of the cap unused: offer it back, best item first
        for i in movable:
            if not out[i].clipped or not out[i].body:
                continue
            left = allowance - cost([ln for ln in out if ln.body or not ln.clipped])
            if left <= 0:
                break
            have = self.n(line(out[i].entry, out[i].body))
            body = self._clip(out[i].entry, have + left, functools.partial(line, out[i].entry))
            if body is not None and body != out[i].body:
                out[i] = _Line(out[i].entry, body, body != out[i].entry.item.text)
        return [ln for ln in out if ln.body or not ln.clipped]

    # ---- clipping and widening ------------------------------------------------------------

    def _clip(
        self, entry: _Entry, max_tokens: int, wrap: Callable[[str], str], *, tail: bool = False
    ) -> str | None:
        """The stretch of ``entry``'s text around its best sentence that fits ``max_tokens``
        once wrapped; markers where text was cut. None if not even one word fits. With
        ``tail``, the closing sentences instead, whatever the query."""
        text = entry.item.text
        spans = [(s, e) for s, e, _ in split_sentences(text)] or [(0, len(text))]
        terms = frozenset() if tail else self._terms_for(entry)
        if tail:
            seed = len(spans) - 1
        elif terms:
            scores = [(len(terms & self._words(text[s:e])), -i) for i, (s, e) in enumerate(spans)]
            seed = max(range(len(spans)), key=lambda i: scores[i])
        else:
            seed = 0  # nothing to aim at: the passage reads from its start
        marker = self.b.clip_marker

        def render(a: int, z: int) -> str:
            body = text[a:z]
            if text[:a].strip():
                body = f"{marker} {body}"
            if text[z:].strip():
                body = f"{body} {marker}"
            return body

        def fits(body: str) -> bool:
            return self.n(wrap(body)) <= max_tokens

        lo = hi = seed
        best = render(*spans[seed])
        if not fits(best):
            return self._clip_words(text, spans[seed], terms, render, fits, tail=tail)
        after, before = hi + 1 < len(spans), lo > 0
        turn_after = True
        while after or before:
            if turn_after and after:
                cand = render(spans[lo][0], spans[hi + 1][1])
                if fits(cand):
                    hi, best = hi + 1, cand
                    after = hi + 1 < len(spans)
                else:
                    after = False
            elif not turn_after and before:
                cand = render(spans[lo - 1][0], spans[hi][1])
                if fits(cand):
                    lo, best = lo - 1, cand
                    before = lo > 0
                else:
                    before = False
            turn_after = not turn_after
        return best

    def _clip_words(
        self,
        text: str,
        span: tuple[int, int],
        terms: frozenset[str],
        render: Callable[[int, int], str],
        fits: Callable[[str], bool],
        *,
        tail: bool = False,
    ) -> str | None:
        """Within one over-long sentence: the widest word window around its first query word
        (its last word with ``tail``)."""
        s, e = span
        words = [(s + m.start(), s + m.end()) for m in _WORD_RE.finditer(text[s:e])]
        if not words:
            return None
        center = next((i for i, (a, z) in enumerate(words) if terms & self._words(text[a:z])), 0)
        if tail:
            center = len(words) - 1

        def window(w: int) -> str:
            start = min(max(0, center - (w - 1) // 2), len(words) - w)
            return render(words[start][0], words[start + w - 1][1])

        if not fits(window(1)):
            return None
        lo, hi = 1, len(words)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(window(mid)):
                lo = mid
            else:
                hi = mid - 1
        return window(lo)

    def widen(self, lines: list[_Line], spare: int) -> list[_Line]:
        """Grow whole passages into their ``expanded`` text while ``spare`` tokens last:
        a sentence at a time, after then before, one step per passage per round, best first."""
        out = list(lines)
        state: dict[int, list[Any]] = {}  # index -> [expanded, spans, a, z, after, before, turn]
        for i, ln in enumerate(out):
            exp = ln.entry.item.expanded
            if ln.clipped or not exp or ln.entry.pinned:
                continue
            passage = ln.entry.item.text
            at = exp.find(passage)
            if at < 0 or len(exp) <= len(passage):
                continue
            spans = [(s, e) for s, e, _ in split_sentences(exp)]
            state[i] = [exp, spans, at, at + len(passage), True, True, True]
        while state and spare > 0:
            for i in list(state):
                exp, spans, a, z, after, before, turn = state[i]
                nxt_z = min((e for _, e in spans if e > z), default=None) if after else None
                nxt_a = max((s for s, _ in spans if s < a), default=None) if before else None
                if nxt_z is None:
                    after = False
                if nxt_a is None:
                    before = False
                go_after = after and (turn or not before)
                if not (after or before):
                    del state[i]
                    continue
                na, nz = (a, nxt_z) if go_after else (nxt_a, z)
                assert na is not None and nz is not None
                rank = self._rank[out[i].entry.id]
                old = self.n(self._retrieved_line(out[i].entry, rank, out[i].body))
                body = exp[na:nz]
                delta = self.n(self._retrieved_line(out[i].entry, rank, body)) - old
                if delta <= spare:
                    spare -= delta
                    out[i] = _Line(out[i].entry, body)
                    a, z = na, nz
                elif go_after:
                    after = False
                else:
                    before = False
                state[i] = [exp, spans, a, z, after, before, not go_after]
        return out


def clip_passage(builder: PromptBuilder, text: str, query: str, max_tokens: int) -> str:
    """``text`` cut to ``max_tokens`` the way the builder clips a retrieved passage: from the
    sentence sharing the most words with ``query``, grown outward, cuts marked; never its head.

    Args:
        builder: Supplies the token counter, the clip marker and the floors.
        text: The passage.
        query: The question it was retrieved for.
        max_tokens: The most tokens the result may take.

    Returns:
        The clipped text ("" if nothing worth keeping fits).
    """
    entry = _Entry(PromptItem(text, id="0"), "0", "retrieved", 0)
    run = _Run(
        builder,
        limit=max_tokens,
        query=query,
        system="",
        pins=[],
        summaries=[],
        retrieved=[entry],
        history=[],
    )
    return run._clip(entry, max_tokens, lambda s: s) or ""
