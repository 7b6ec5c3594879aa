"""How the owner's main-store documents read in a session's prompt.

A document whose whole text is at most ``[memory] document_whole_tokens`` tokens is shown
whole: cutting a short document saves little and loses what surrounds the match. A longer one
is shown as its matched passages, each widened by ``document_window`` passages a side (the
archive's passage expansion, :meth:`Pensive.expand`), the windows that overlap or touch merged
into one stretch, and "[…]" wherever text of the document was left out: between stretches,
and before the first or after the last when they do not reach the document's edges. Every cut
falls on a passage boundary; nothing is a head slice of the document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import PensiveError
from ..types import Hit
from .prompt_items import PromptItem
from .tokens import TokenCounter

if TYPE_CHECKING:
    from .host import SessionHost

__all__ = ["document_items", "merge_spans"]


def merge_spans(text: str, spans: Sequence[tuple[int, int]], marker: str = "[…]") -> str:
    """The parts of ``text`` that ``spans`` cover, overlapping or touching spans merged, a
    marker wherever text was left out.

    Args:
        text: The whole document.
        spans: ``(start, end)`` character offsets, any order.
        marker: What marks a cut.

    Returns:
        The stretches in document order, joined by ``" {marker} "``; a marker first or last
        when the first stretch starts after the document's start or the last ends before its
        end (whitespace aside).
    """
    merged: list[list[int]] = []
    for a, z in sorted((max(0, a), min(len(text), z)) for a, z in spans):
        if z <= a:
            continue
        # spans separated by whitespace only touch: nothing worth marking lies between them
        if merged and not text[merged[-1][1] : a].strip():
            merged[-1][1] = max(merged[-1][1], z)
        else:
            merged.append([a, z])
    if not merged:
        return ""
    out = f" {marker} ".join(text[a:z].strip() for a, z in merged)
    if text[: merged[0][0]].strip():
        out = f"{marker} {out}"
    if text[merged[-1][1] :].strip():
        out = f"{out} {marker}"
    return out


def document_items(
    host: SessionHost,
    query: str,
    k: int,
    *,
    counter: TokenCounter,
    whole_tokens: int,
    window: int = 1,
    marker: str = "[…]",
) -> list[PromptItem]:
    """The owner's main-store documents for ``query`` as prompt items, one per document.

    Args:
        host: The session's host (its store's query and archive).
        query: The user's message.
        k: Passages to retrieve (documents are fewer when several passages share one).
        counter: Counts a document's tokens against ``whole_tokens``.
        whole_tokens: A document of at most this many tokens is shown whole (0: never).
        window: Passages either side of each match.
        marker: Marks text left out.

    Returns:
        Items best first (a document's score is its best passage's), ids ``"doc:<doc id>"``.
    """
    groups: dict[str, list[Hit]] = {}
    for h in host.query(query, k).hits:
        groups.setdefault(h.doc_id, []).append(h)
    out: list[PromptItem] = []
    for doc_id, hits in groups.items():
        best = hits[0]
        try:
            whole = host.expand(best, None)
        except PensiveError:  # the document went away since the query: the passages alone
            whole = None
        if whole is None:
            text = "\n\n".join(h.text for h in hits)
        elif whole_tokens and counter.count(whole) <= whole_tokens:
            text = whole
        else:
            text = merge_spans(whole, [_span(host, whole, h, window) for h in hits], marker)
        matches = [h.match for h in hits if h.match is not None]
        out.append(
            PromptItem(
                text=text,
                score=best.score,
                id=f"doc:{doc_id}",
                match=max(matches) if matches else None,
                timestamp=best.timestamp,
            )
        )
    return out


def _span(host: SessionHost, whole: str, hit: Hit, window: int) -> tuple[int, int]:
    """Where ``hit``'s passage, widened by ``window`` passages a side, lies in ``whole``."""
    try:
        wide = host.expand(hit, window)
    except PensiveError:
        wide = hit.text
    at = whole.find(wide)
    if at < 0:  # the passage itself, at least
        wide = hit.text
        at = whole.find(wide)
    return (at, at + len(wide)) if at >= 0 else (0, 0)
