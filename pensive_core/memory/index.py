"""A session's indexes: small Pensive stores of its own, in its folder.

``index/`` holds one document per turn, embedded with its speaker as situating context, so
turns are found by the same hybrid machinery as documents (dense + BM25 fusion, the entity
graph, temporal resolution). ``windows/`` holds, for every turn, the trailing window of
``[memory] window_turns`` turns ending with it, the speakers named: a short turn ("yes, the
red one") is found by the exchange around it. Both are opened through the session's host, so
they share its model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import LOCAL_BACKENDS
from ..types import Document
from .turns import Turn, TurnContext, TurnStore, speaker

if TYPE_CHECKING:
    from ..engine import Pensive
    from .host import SessionHost

__all__ = ["SessionIndex", "session_config"]


def session_config(parent: Any) -> dict[str, Any]:
    """A session store's config: the owner's, with the hot cache off (every turn would
    invalidate it), the turn-speaker context, and a local vector index.

    Args:
        parent: The owner's :class:`~pensive_core.config.PensiveConfig`.

    Returns:
        The config of a session's turn index, as a dict.
    """
    cfg = parent.model_dump()
    backend = dict(cfg["backend"])
    if backend["name"] not in LOCAL_BACKENDS:
        backend["name"] = "faiss"  # a session is small and local: no managed index per session
    return {
        "backend": backend,
        "embedder": cfg["embedder"],
        "chunking": cfg["chunking"],
        "bm25": cfg["bm25"],
        "fusion": cfg["fusion"],
        "router": {**cfg["router"], "l1": False},
        # the graph's relay was measured on stores of documents and of turns
        # (benchmarks/multihop), not on session recall (benchmarks/memory): sessions keep
        # the graph as it was until it is
        "graph": {**cfg["graph"], "relay": 0.0},
        "temporal": cfg["temporal"],
        "context": {**cfg["context"], "generator": "auto", "records": "same"},
    }


class SessionIndex:
    """The turn index and the window index of one session, each opened on first use.

    The caller serialises access (a session holds its own lock).

    Args:
        host: The session's host (opens the stores, gives the config).
        folder: The session's folder.
        session_id: The session's id (written into every turn's metadata).
    """

    def __init__(self, host: SessionHost, folder: Path, session_id: str) -> None:
        self._host = host
        self.folder = folder
        self.session_id = session_id
        self._turns: Pensive | None = None
        self._windows: Pensive | None = None

    def turns(self) -> Pensive | None:
        """The store of turns (None for a read-only session that has never been written)."""
        if self._turns is None:
            folder = self.folder / "index"
            cfg = session_config(self._host.config)
            if self._host.read_only and not self._host.store_exists(folder, cfg):
                return None
            self._turns = self._host.open_store(folder, cfg, context_generator=TurnContext())
        return self._turns

    def windows(self, log: TurnStore) -> Pensive | None:
        """The store of trailing windows (None when ``[memory] window_turns`` is 0 or 1, or
        for a read-only session that has none). Opening it writable indexes the windows of
        turns logged before it existed (or lost in an interrupted add).

        Args:
            log: The session's log.
        """
        cfg = self._host.config.memory
        if cfg.window_turns <= 1:
            return None
        if self._windows is None:
            folder = self.folder / "windows"
            read_only = self._host.read_only
            wcfg = session_config(self._host.config)
            wcfg.update(
                graph={"enabled": False},
                temporal={"enabled": False},
                context={**wcfg["context"], "generator": "none"},
            )
            if read_only and not self._host.store_exists(folder, wcfg):
                return None
            self._windows = self._host.open_store(folder, wcfg)
            if not read_only:
                made = self._windows.stats(disk=False).get("documents", 0)
                if made < len(log):  # made before windows existed, or an interrupted add
                    self._index_windows(log, log.turns())
        return self._windows

    def ingest(self, log: TurnStore, turns: Sequence[Turn]) -> None:
        """Index logged turns: each one, and the window it ends (the session is writable)."""
        store = self.turns()
        assert store is not None
        store.ingest([self._document(t) for t in turns])
        self._index_windows(log, turns)

    def close(self) -> None:
        """Close both stores (they reopen on next use)."""
        if self._turns is not None:
            self._turns.close()
            self._turns = None
        if self._windows is not None:
            self._windows.close()
            self._windows = None

    def _index_windows(self, log: TurnStore, turns: Sequence[Turn]) -> None:
        store = self.windows(log)
        if store is None or not turns:
            return
        n = self._host.config.memory.window_turns
        first = turns[0].seq
        known = {t.seq: t for t in turns}
        known.update(log.by_seq(range(max(0, first - n + 1), first)))
        docs = []
        for t in turns:
            lines = [
                f"{speaker(u.role, u.metadata)}: {u.text}"
                for s in range(max(0, t.seq - n + 1), t.seq + 1)
                if (u := known.get(s)) is not None
            ]
            docs.append(Document(f"w{t.seq:06d}", "\n".join(lines), {"seq": t.seq}, t.timestamp))
        store.ingest(docs)

    def _document(self, turn: Turn) -> Document:
        meta = {**turn.metadata, "role": turn.role, "session_id": self.session_id, "seq": turn.seq}
        return Document(turn.id, turn.text, meta, turn.timestamp)
