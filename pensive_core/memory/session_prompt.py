"""A session's prompt: what ``Conversation.build`` hands the :class:`~.prompt.PromptBuilder`.

Recalled turns are shown as ``[2023-05-08] Caroline: text`` (:func:`.render.render_turn`) and may
expand to the turns either side of them; passages of the owner's main store expand to their
neighbouring passages; the recent turns are the verbatim history, each headed the same way;
pins and the story so far form the stable prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import PensiveError
from ..types import Hit
from .render import render_turn, turn_head
from .turns import Turn

if TYPE_CHECKING:
    from ..config import MemoryConfig
    from .host import SessionHost
    from .prompt import BuiltPrompt, PromptItem

__all__ = ["neighbour_seqs", "passage_items", "recalled_items", "session_prompt"]


def neighbour_seqs(hits: Iterable[Hit], session_id: str) -> list[int]:
    """The positions either side of each of this session's recalled turns."""
    return [
        s
        for h in hits
        if h.metadata.get("session_id") == session_id
        for s in (int(h.metadata["seq"]) - 1, int(h.metadata["seq"]) + 1)
    ]


def recalled_items(
    hits: Sequence[Hit],
    neighbours: Mapping[int, Turn],
    session_id: str,
    latest: int | None = None,
) -> list[PromptItem]:
    """Recalled turns as prompt items, each of this session's expanding to the turns either
    side of it (``neighbours``, by position) and, given the ``latest`` turn's position,
    knowing how many turns ago it was said."""
    from .prompt import PromptItem

    out: list[PromptItem] = []
    for h in hits:
        text = render_turn(h)
        expanded, ago = None, None
        if h.metadata.get("session_id") == session_id:  # the turns either side
            seq = int(h.metadata["seq"])
            ago = None if latest is None else max(0, latest - seq)
            before, after = neighbours.get(seq - 1), neighbours.get(seq + 1)
            parts = [render_turn(t.to_hit(session_id)) for t in (before,) if t] + [text]
            parts += [render_turn(t.to_hit(session_id)) for t in (after,) if t]
            expanded = "\n".join(parts) if len(parts) > 1 else None
        out.append(
            PromptItem(
                text=text,
                score=h.score,
                id=h.doc_id,
                expanded=expanded,
                match=h.match,
                timestamp=h.timestamp,
                turns_ago=ago,
            )
        )
    return out


def passage_items(host: SessionHost, query: str, k: int) -> list[PromptItem]:
    """The owner's main-store passages for ``query`` as prompt items, each expanding to its
    neighbouring passages (when the document is still there)."""
    from .prompt import PromptItem

    out: list[PromptItem] = []
    for h in host.query(query, k).hits:
        try:
            wide = host.expand(h, 1)
        except PensiveError:
            wide = None
        out.append(PromptItem(text=h.text, score=h.score, id=f"doc:{h.chunk_id}", expanded=wide))
    return out


def session_prompt(
    memory: MemoryConfig,
    token_budget: int,
    *,
    query: str,
    system: str,
    pins: Sequence[str],
    summaries: Sequence[str],
    retrieved: Sequence[PromptItem],
    recent: Sequence[Turn],
    session_id: str,
    show_query: bool = True,
    strategy: Any = None,
    template: Any = None,
) -> BuiltPrompt:
    """Build the prompt within ``token_budget`` (``[memory]`` tokenizer and shares).

    Args:
        memory: The ``[memory]`` settings.
        token_budget: The whole prompt's budget in tokens.
        query: The user's message.
        system: The system prompt.
        pins: Every pinned note, stored ones first.
        summaries: The story so far.
        retrieved: Recalled turns and main-store passages.
        recent: The recent turns, shown verbatim.
        session_id: The session's id.
        show_query: End with the question section (see :meth:`PromptBuilder.build`).
        strategy: This call's strategy; None: ``[memory] prompt_strategy``.
        template: This call's template; None: ``[memory] prompt_template``.

    Returns:
        The built prompt.

    Raises:
        InputError: On a bad budget, strategy or template, or pins that alone exceed it.
    """
    from .prompt import PromptBuilder, PromptItem

    # the head ("[2023-05-08] Caroline") is the line's role: written once, never clipped away
    history = [
        PromptItem(text=t.text, id=t.id, role=turn_head(t.to_hit(session_id))) for t in recent
    ]
    builder = PromptBuilder(
        memory.tokenizer,
        summaries_share=memory.summaries_share,
        retrieved_share=memory.retrieved_share,
        history_share=memory.history_share,
        headroom=memory.headroom,
        strategy=memory.prompt_strategy,
        template=memory.prompt_template,
    )
    return builder.build(
        token_budget,
        query=query,
        system=system,
        pins=[PromptItem(text=p, pinned=True, id=f"pin{i}") for i, p in enumerate(pins)],
        summaries=[PromptItem(text=s, id=f"summary{i}") for i, s in enumerate(summaries)],
        retrieved=list(retrieved),
        history=history,
        show_query=show_query,
        strategy=strategy,
        template=template,
    )
