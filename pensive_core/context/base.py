"""The context-generator plug point: a short text that situates a passage in its document.

A passage cut out of its document loses its referents ("she finally told him the truth": who?
when?). A :class:`ContextGenerator` writes, for each passage, one or two sentences (or a few
labelled facts) that put them back. The engine embeds and BM25-indexes ``context + passage``;
``Hit.text`` stays the raw passage and the context is in ``Hit.metadata["context"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..types import Chunk, Document

__all__ = ["ContextGenerator", "ContextRequest", "join_context"]


@dataclass(frozen=True)
class ContextRequest:
    """One document and its passages, in order, to situate.

    Args:
        document: The whole document (its metadata and timestamp included).
        chunks: Its passages in document order, as the chunker cut them.
        doc_hash: The document's content hash (a cache key part).
    """

    document: Document
    chunks: Sequence[Chunk]
    doc_hash: str = ""


@runtime_checkable
class ContextGenerator(Protocol):
    """Writes a situating context for every passage of a batch of documents.

    Attributes:
        name: Identifies the generator *and* everything that changes its output (model,
            prompt version, settings). It is part of the context cache key, and a store notices
            when it changes, so it must change whenever the output would.
    """

    name: str

    def generate(self, requests: Sequence[ContextRequest]) -> list[list[str]]:
        """Contexts for each request's passages, in order (``""`` where there is none).

        Returns:
            One list per request, as long as its ``chunks``.
        """
        ...


def join_context(context: str, text: str) -> str:
    """The text that is embedded and BM25-indexed: the context, a blank line, the passage."""
    return f"{context}\n\n{text}" if context else text
