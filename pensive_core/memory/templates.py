"""Prompt templates: the whole prompt's layout as text with named slots.

Without a template the builder lays the prompt out in ``## Section`` blocks (see
:mod:`.prompt`). A template replaces that layout: its fixed text is kept as written (and
counts against the budget) and each slot is filled with one section's content, no header:

============= ===========================================================================
``{query}``   the user's question (required: a template without it is an error)
``{system}``  the system prompt
``{pins}``    pinned notes, blank-line separated
``{summary}`` the story so far (rolling summaries)
``{context}`` the retrieved items, one line each as the strategy renders them
``{sources}`` the same items, each line carrying its id for citation: ``[1] <doc:q3#2> text``
``{history}`` the recent turns, one per line
============= ===========================================================================

Literal braces are written ``{{`` and ``}}``. Runs of blank lines left by empty slots are
collapsed to one. ``BuiltPrompt.prefix`` is the text up to the first slot that changes from
turn to turn (``context``, ``sources``, ``history``, ``query``): the template's head with the
system prompt, pins and summaries, byte-identical across turns as without a template.

Built in (:data:`TEMPLATES`): ``qa`` (answer from the context only), ``research`` (numbered
sources with ids, cite them), ``conversational`` (an assistant that remembers).
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError
from .strategies import parse_slots

__all__ = ["SLOTS", "TEMPLATES", "PromptTemplate", "resolve_template", "served_choice"]

#: Every slot a template may use.
SLOTS = ("system", "pins", "summary", "context", "sources", "history", "query")
# slots whose content is the same from one turn to the next (the cacheable prefix)
_STABLE = frozenset({"system", "pins", "summary"})
# the builder's sections and the slots that show each
_SECTION_SLOTS = {
    "pins": frozenset({"pins"}),
    "summaries": frozenset({"summary"}),
    "retrieved": frozenset({"context", "sources"}),
    "history": frozenset({"history"}),
}
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")

#: Built-in templates by name.
TEMPLATES: dict[str, str] = {
    "qa": (
        "{system}\n\n{pins}\n\n{summary}\n\n"
        "Answer the question using only the context below. If the context does not hold "
        "the answer, say that you do not know.\n\n"
        "Context:\n{context}\n\n{history}\n\nQuestion: {query}\nAnswer:"
    ),
    "research": (
        "{system}\n\n{pins}\n\n{summary}\n\n"
        "Answer the question from the numbered sources below. Cite every claim with the "
        "source's number in brackets, e.g. [2]; if the sources do not support an answer, "
        "say so.\n\n"
        "Sources:\n{sources}\n\n{history}\n\nQuestion: {query}\nAnswer (with citations):"
    ),
    "conversational": (
        "{system}\n\n{pins}\n\n"
        "What you remember of this conversation so far:\n{summary}\n\n"
        "Things said earlier that may matter now:\n{context}\n\n"
        "The conversation:\n{history}\n\nuser: {query}\nassistant:"
    ),
}


class PromptTemplate:
    """A prompt layout with named slots (see the module docstring for the slots).

    Args:
        text: The template.
        name: What to call it in ``BuiltPrompt.template`` and messages.
        error: The error class for a bad template (``InputError`` or ``ConfigError``).

    Raises:
        InputError: (``error``) A slot is unknown, positional or formatted, or ``{query}`` is
            missing.
    """

    def __init__(self, text: str, *, name: str = "custom", error: type = InputError) -> None:
        self.slots = frozenset(parse_slots(text, SLOTS, f"prompt template {name!r}", error))
        if "query" not in self.slots:
            raise error(
                f"prompt template {name!r} has no {{query}} slot: the question would never "
                "reach the model; add {query} where it should go"
            )
        self.text = text
        self.name = name
        self._pieces = list(string.Formatter().parse(text))
        #: The template's own text, with no slot filled (it counts against the budget).
        self.fixed = "".join(lit for lit, *_ in self._pieces)

    @property
    def cites(self) -> bool:
        """Whether retrieved lines carry their ids (the template uses ``{sources}``)."""
        return "sources" in self.slots

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, error: type = InputError) -> PromptTemplate:
        """A template read from a UTF-8 text file, named after the file.

        Raises:
            InputError: (``error``) The file cannot be read, or as the constructor.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise error(f"cannot read prompt template file {str(p)!r}: {exc}") from None
        return cls(text, name=p.name, error=error)

    def render(self, values: Mapping[str, str]) -> tuple[str, str]:
        """The filled template and its stable prefix.

        Args:
            values: Each slot's content ("" or missing: empty).

        Returns:
            ``(text, prefix)``: ``text`` starts with ``prefix``.
        """
        parts: list[str] = []
        head: str | None = None
        for literal, field, _, _ in self._pieces:
            parts.append(literal)
            if field is None:
                continue
            if head is None and field not in _STABLE:
                head = "".join(parts)
            parts.append(values.get(field, ""))
        text = _tidy("".join(parts)).strip()
        prefix = _tidy("".join(parts) if head is None else head).lstrip()
        return text, os.path.commonprefix([prefix, text])

    def restrict(self, parts: Mapping[str, list[Any]], system: str = "") -> dict[str, list[Any]]:
        """The builder's sections with those this template has no slot for emptied (so no
        budget is spent on what would not be shown).

        Args:
            parts: Items by builder section (``pins``, ``summaries``, ``retrieved``,
                ``history``); each has ``.pinned``.
            system: The system prompt.

        Returns:
            The sections, those without a slot empty.

        Raises:
            InputError: A system prompt or a pinned item would be left out for want of a slot.
        """
        if system.strip() and "system" not in self.slots:
            raise InputError(
                f"prompt template {self.name!r} has no {{system}} slot but a system prompt was "
                "given; add {system} to the template or leave the system prompt out"
            )
        out = {}
        for section, items in parts.items():
            slots = _SECTION_SLOTS[section]
            if self.slots & slots or not items:
                out[section] = list(items)
                continue
            if any(getattr(it, "pinned", False) for it in items):
                raise InputError(
                    f"prompt template {self.name!r} has no {' or '.join('{' + x + '}' for x in sorted(slots))} slot "
                    f"but {section} holds pinned items, which are never dropped; add the slot"
                )
            out[section] = []
        return out

    def __repr__(self) -> str:
        return f"PromptTemplate({self.name!r})"


def _tidy(text: str) -> str:
    """Blank-line runs left by empty slots collapsed to one blank line."""
    return _BLANK_RUNS.sub("\n\n", text)


def resolve_template(spec: Any, *, error: type = InputError) -> PromptTemplate | None:
    """The template ``spec`` names.

    Args:
        spec: ``None`` or ``""`` (no template: the ``## Section`` layout), a name of
            :data:`TEMPLATES`, template text (anything holding ``{``), a path to a template
            file, or a :class:`PromptTemplate`.
        error: What to raise (:class:`InputError` for a call, ``ConfigError`` for a setting).

    Returns:
        The template, or None for the default layout.

    Raises:
        PensiveError: (``error``) An unknown name or missing file, or a bad template.
    """
    if spec is None or isinstance(spec, PromptTemplate):
        return spec
    if isinstance(spec, os.PathLike):
        return PromptTemplate.from_file(spec, error=error)
    if not isinstance(spec, str):
        raise error(f"template must be a name, text, path or PromptTemplate, got {spec!r:.80}")
    if not spec.strip():
        return None
    if spec in TEMPLATES:
        return PromptTemplate(TEMPLATES[spec], name=spec, error=error)
    if "{" in spec:
        return PromptTemplate(spec, error=error)
    if Path(spec).is_file():
        return PromptTemplate.from_file(spec, error=error)
    raise error(
        f"unknown prompt template {spec!r}: not one of {sorted(TEMPLATES)}, not template text "
        "(no {query} slot) and not a file; pass a built-in name, text with {query}, or a path"
    )


def served_choice(strategy: str | None, template: str | None) -> tuple[Any, Any]:
    """A strategy and template that came over the network (the HTTP service, MCP), checked.

    A request may name a built-in or give text (a line template, template text); it may not
    name a ``"module:Class"`` (that would import code) or a file (that would read the
    server's files).

    Args:
        strategy: A strategy name or line template, or None.
        template: A template name or template text, or None.

    Returns:
        ``(strategy, template)`` resolved (None where not given).

    Raises:
        InputError: A class path, a file path, or what :func:`resolve_strategy` and
            :func:`resolve_template` refuse.
    """
    from .strategies import STRATEGIES, resolve_strategy

    if strategy is not None and strategy not in STRATEGIES and "{" not in strategy:
        raise InputError(
            f"unknown prompt strategy {strategy!r}; over the service use one of "
            f"{sorted(STRATEGIES)} or a line template holding {{text}}"
        )
    if template is not None and template not in TEMPLATES and "{" not in template:
        raise InputError(
            f"unknown prompt template {template!r}; over the service use one of "
            f"{sorted(TEMPLATES)} or template text holding {{query}} (no file paths)"
        )
    return (
        None if strategy is None else resolve_strategy(strategy),
        None if template is None else resolve_template(template),
    )
