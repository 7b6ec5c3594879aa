"""Hits from fused candidates: each passage read from the archive, with its document's
metadata, its situating context and, with temporal resolution on, when it held."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from ..fusion import Fused
from ..types import Hit

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["HitBuilder"]


class HitBuilder:
    """Turns fused candidates into up to ``k`` :class:`~pensive_core.types.Hit` objects."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps

    def build(self, fused: list[Fused], k: int, cutoff: datetime | None) -> list[Hit]:
        """The first ``k`` candidates the archive holds (and, with ``cutoff``, that are not
        newer than it), in order.

        A passage the indexes hold but the archive does not (an interrupted ingest) is never
        shown.
        """
        comps = self._comps
        hits: list[Hit] = []
        view = comps.temporal_views.view() if comps.temporal_views is not None else None
        start = 0
        while len(hits) < k and start < len(fused):
            # usually the first k fused ids all qualify; fetch more only when some did not
            window = fused[start : start + (k - len(hits)) + (k if cutoff is not None else 0)]
            start += len(window)
            rows = comps.archive.chunks(f.id for f in window)
            for f in window:
                row = rows.get(f.id)
                if row is None or row.archive_only or row.pending:
                    # indexed but not archived, or archived by a change that has not committed
                    # (an interrupted or failed ingest): never shown
                    continue
                if cutoff is not None and row.timestamp is not None and row.timestamp > cutoff:
                    continue
                valid = (None, None, None) if view is None else view.validity(row.id)
                hits.append(
                    Hit(
                        doc_id=row.doc_id,
                        chunk_id=row.id,
                        text=row.text,
                        score=f.score,
                        metadata={**row.metadata, "context": row.context}
                        if row.context
                        else row.metadata,
                        timestamp=row.timestamp,
                        sources=f.ranks,
                        valid_from=valid[0],
                        valid_to=valid[1],
                        superseded_by=valid[2],
                    )
                )
                if len(hits) == k:
                    break
        return hits
