"""How a conversation turn reads in a prompt: ``[2023-05-08] Caroline: text``.

One rendering for every place that shows turns to a model (the session prompt's recalled
turns and its recent history, the LlamaIndex memory block, the LangChain agent middleware), so
a turn looks the same whichever way it reaches the prompt, and who said it is written once.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..types import Hit
from .turns import speaker

__all__ = ["render_turn", "render_turns", "turn_head"]


def turn_head(hit: Hit) -> str:
    """What precedes a turn's text: its date (UTC) and who said it, ``[2023-05-08] Caroline``.

    Who said it is the turn's ``speaker`` (or ``name``) metadata, else its ``role``; either
    part is left out when unknown, so the head may be ``"[2023-05-08]"``, ``"user"`` or ``""``.

    Args:
        hit: A turn as :meth:`Conversation.recall` or :meth:`Conversation.history` gives it.

    Returns:
        The head, without the colon.
    """
    return " ".join(part for part in _parts(hit) if part)


def render_turn(hit: Hit) -> str:
    """A turn as one prompt line: ``[2023-05-08] Caroline: text`` (see :func:`turn_head`).

    Args:
        hit: A turn as :meth:`Conversation.recall` or :meth:`Conversation.history` gives it.

    Returns:
        The line, its speaker written once; without a speaker ``[2023-05-08] text``, without
        a date ``user: text``, without either the text alone.
    """
    when, who = _parts(hit)
    head = f"{when} {who}:" if when and who else f"{who}:" if who else when
    return f"{head} {hit.text}" if head else hit.text


def render_turns(hits: Iterable[Hit]) -> str:
    """Turns rendered by :func:`render_turn`, one per line, in the order given."""
    return "\n".join(render_turn(h) for h in hits)


def _parts(hit: Hit) -> tuple[str, str]:
    who = speaker(str(hit.metadata.get("role", "")), hit.metadata)
    when = f"[{hit.timestamp:%Y-%m-%d}]" if hit.timestamp is not None else ""
    return when, who
