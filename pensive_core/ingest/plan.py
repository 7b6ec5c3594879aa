"""The plan stage: the one place ingest input is checked, and what each document needs.

Documents stream in batches; each is compared with what the archive holds under its id (its
content hash, metadata, timestamp, how it was indexed and with which context generator): an
identical one is skipped, a new or changed one is chunked. Which passages can keep their
stored vectors is decided once their contexts are known (:func:`reuse`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..archive import ARCHIVE_ONLY, INDEXED, PENDING, metadata_json
from ..chunking import chunk_text, content_hash
from ..context.base import ContextGenerator
from ..embedders.base import Embedder
from ..errors import InputError
from ..timeutil import to_iso
from ..types import Chunk, Document
from ..validate import check_metadata
from .changes import IngestCounts

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["BATCH", "DocPlan", "batches", "plan_batch"]

BATCH = 256  # documents per batch: what is chunked, situated and embedded together


@dataclass(frozen=True)
class DocPlan:
    """A document that needs indexing.

    Attributes:
        doc: The document.
        doc_hash: Its content hash.
        chunks: Its passages.
        generator: The context generator that situates it (None: no contexts).
        old: The stored fingerprint it replaces (None: a new document).
    """

    doc: Document
    doc_hash: str
    chunks: list[Chunk]
    generator: ContextGenerator | None
    old: Any


def batches(documents: Iterable[Any]) -> Iterator[list[Document]]:
    """Documents in batches of :data:`BATCH`; the same id twice in one call: the last wins.

    Raises:
        InputError: If an item is not a :class:`~pensive_core.types.Document` (raised when
            it is reached: the batches before it are ingested).
    """
    if isinstance(documents, Document):
        documents = [documents]
    batch: dict[str, Document] = {}
    for doc in documents:
        if not isinstance(doc, Document):
            raise InputError(
                f"ingest() takes Document objects, got {type(doc).__name__}; "
                "wrap text as Document(id=..., text=...)"
            )
        batch[doc.id] = doc  # the same id twice in one call: the last one wins
        if len(batch) >= BATCH:
            yield list(batch.values())
            batch = {}
    if batch:
        yield list(batch.values())


def plan_batch(
    comps: Components,
    docs: list[Document],
    embedder: Embedder,
    generator_for: Any,
    archive_only: bool,
    counts: IngestCounts,
    chunked: Mapping[tuple[str, str], list[Chunk]] | None = None,
    settled: Collection[str] = (),
) -> list[DocPlan]:
    """The documents of a batch that need indexing, chunked (identical ones are counted as
    unchanged and left out); ``chunked``: passages already cut, by ``(document id, content
    hash)`` (the same text cut for the same embedder is cut the same way); ``settled``:
    documents an earlier batch of the same change indexed in full, whose archive rows stay
    pending until its commit: they are compared (and their passages reused) as indexed, so
    a document given again later in one change is handled as a later call would handle it."""
    ccfg = comps.config.chunking
    window = max(1, embedder.max_tokens - ccfg.reserve_tokens)
    window = min(ccfg.max_tokens or window, window)
    out: list[DocPlan] = []
    for doc in docs:
        doc_hash = content_hash(doc.text)
        old = comps.archive.fingerprint(doc.id)
        if old is not None and old[3] == PENDING and doc.id in settled:
            old = (*old[:3], INDEXED, old[4])
        want = ARCHIVE_ONLY if archive_only else INDEXED
        gen = None if archive_only else generator_for(doc)
        gen_name = gen.name if gen is not None else ""
        # checked again here: a caller can still change a Document's metadata dict after
        # it was made, and this is the last look before anything is written
        meta = metadata_json(check_metadata(doc.metadata, f"Document {doc.id!r}: metadata"))
        if old == (doc_hash, meta, to_iso(doc.timestamp), want, gen_name):
            counts.unchanged += 1
            continue
        known = chunked.get((doc.id, doc_hash)) if chunked else None
        chunks = (
            known
            if known is not None
            else chunk_text(
                doc.id,
                doc.text,
                max_tokens=window,
                count_tokens=embedder.count_tokens,
                min_tokens=ccfg.min_tokens,
                target_tokens=ccfg.target_tokens,
                method=ccfg.method,
                overlap=ccfg.overlap_sentences,
            )
        )
        out.append(DocPlan(doc, doc_hash, chunks, gen, old))
    return out
