"""What a change (ingest, replacement, delete, recovery) did since the last commit: what the
commit's L1 invalidation reads, cleared when it commits."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ChangeSet", "IngestCounts"]


@dataclass(eq=False)
class ChangeSet:
    """The writer's changes since the last commit.

    Attributes:
        changed: Content changed (the commit moves the commit number).
        docs: Documents replaced or deleted.
        removed: Passages taken out of the indexes.
        added: Passages put into the indexes.
        vectors: Their vectors, one array per batch.
        texts: Texts of documents written (indexed or archive-only).
        written: Ids of documents written to the archive (pending until the commit).
    """

    changed: bool = False
    docs: set[str] = field(default_factory=set)
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    written: set[str] = field(default_factory=set)

    def clear(self) -> None:
        """Forget everything (after a commit)."""
        self.changed = False
        self.docs = set()
        self.removed = []
        self.added = []
        self.vectors = []
        self.texts = []
        self.written = set()


@dataclass(eq=False)
class IngestCounts:
    """Running counts of one ingest call (what :class:`~pensive_core.types.IngestReport`
    reports)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    embedded: int = 0
    reused: int = 0
    deleted: int = 0
    contexts: int = 0
    contexts_cached: int = 0
    contexts_fallback: int = 0
    llm_calls: int = 0
