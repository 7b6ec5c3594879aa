"""The derive stage: what the entity graph and the statements hold follows the archive.

At ingest each written document's passages are read for entity mentions and statements; when
a store opens with the graph or the statements behind the archive (the feature was off, the
last change was cut short, or they were built by another version or extractor), they are
brought level with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..types import Chunk, Document

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["derive", "sync_graph", "sync_temporal"]

log = logging.getLogger(__name__)


def derive(
    comps: Components, plans: Sequence[tuple[Document, str, list[Chunk]]], archive_only: bool
) -> tuple[float, float]:
    """Add written documents to the graph and the statements; returns the seconds each took.

    An archive-only document adds no passages (it is not in the L2 indexes), but replacing an
    indexed one with it takes the old passages out.
    """
    t = time.perf_counter()
    if comps.graph is not None:
        for doc, _, chunks in plans:
            comps.graph.add_document(
                doc.id,
                [] if archive_only else [(c.id, c.ordinal, c.text) for c in chunks],
                comps.extractor,
                doc.metadata.get("title"),
            )
    graph_s = time.perf_counter() - t
    t = time.perf_counter()
    if comps.temporal is not None:
        for doc, _, chunks in plans:
            comps.temporal.add_document(
                doc.id,
                [] if archive_only else [(c.id, c.text) for c in chunks],
                doc.timestamp,
                comps.statements,
                comps.config.temporal.relative_dates,
            )
    return graph_s, time.perf_counter() - t


def sync_graph(comps: Components) -> None:
    """Bring the graph level with the archive (it was off, or an ingest was cut short):
    documents whose passages differ are extracted again, vanished ones removed."""
    graph, archive = comps.graph, comps.archive
    assert graph is not None
    want = archive.indexed_documents()
    have = graph.documents()
    stale = [d for d in want if want[d] != have.get(d)]
    for did in set(have) - set(want):
        graph.remove_document(did)
    if stale:
        log.info("building the entity graph for %d document(s)", len(stale))
    for did in stale:
        passages = archive.doc_chunks(did)
        doc = archive.document(did)
        graph.add_document(
            did,
            [(cid, ordinal, text) for cid, ordinal, text in passages],
            comps.extractor,
            None if doc is None else doc.metadata.get("title"),
        )
    archive.set_meta("graph_synced", archive.commit_number())


def sync_temporal(comps: Components) -> None:
    """Bring statements and dates level with the archive (temporal resolution was off, or
    the store predates it): documents whose passages differ are read again."""
    temporal, archive = comps.temporal, comps.archive
    assert temporal is not None
    want = archive.indexed_documents()
    have = temporal.documents()
    for did in set(have) - set(want):
        temporal.remove_document(did)
    stale = [d for d in want if want[d] != have.get(d)]
    if stale:
        log.info("reading dates and statements of %d document(s)", len(stale))
    for did in stale:
        doc = archive.document(did)
        passages = [(cid, text) for cid, _, text in archive.doc_chunks(did)]
        temporal.add_document(
            did,
            passages,
            None if doc is None else doc.timestamp,
            comps.statements,
            comps.config.temporal.relative_dates,
        )
    archive.set_meta("temporal_synced", archive.commit_number())
