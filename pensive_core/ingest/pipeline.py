"""The ingest pipeline: plan -> chunk -> situate -> embed -> index -> derive -> commit.

Per batch of documents: :mod:`.plan` skips what is unchanged and chunks the rest;
:mod:`.situate` writes each passage's context; passages whose text and context are both
unchanged keep their stored vectors, the others are embedded; vectors go to the backend and
texts to BM25, stale passages come out of both; the archive is written (rows not yet marked
indexed); :mod:`.derive` updates the graph and the statements. After the last batch,
:mod:`.commit` persists it all and marks it indexed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import hooks
from ..archive import INDEXED, metadata_json
from ..context.base import join_context
from ..embedders.base import checked
from ..errors import NotFoundError
from ..filters import backend_metadata
from ..types import Chunk, Document, IngestReport
from .changes import IngestCounts
from .commit import Committer
from .derive import derive
from .plan import batches, plan_batch
from .situate import Situate

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["STAGES", "IngestPipeline"]

#: Where ingest time goes, reported in :attr:`IngestReport.stages <pensive_core.types.IngestReport.stages>`.
STAGES = (
    "chunking",
    "contexts",
    "embedding",
    "vectors",
    "bm25",
    "archive",
    "graph",
    "temporal",
    "commit",
)


class IngestPipeline:
    """Ingest and delete, through the stages (see the module docstring)."""

    def __init__(self, comps: Components, committer: Committer) -> None:
        self.comps = comps
        self.committer = committer
        self.situate = Situate(comps)

    def run(
        self,
        documents: Iterable[Document],
        progress: Callable[[int], Any] | None = None,
        archive_only: bool = False,
    ) -> IngestReport:
        """Ingest documents, in batches, and commit (see :meth:`Pensive.ingest
        <pensive_core.Pensive.ingest>`). The caller has checked that the store is writable."""
        t0 = time.perf_counter()
        counts = IngestCounts()
        stages: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        comps = self.comps
        committer = self.committer
        with comps.lock, comps.storage.writing():
            committer.catch_up(self.run)
            committer.finish_abandoned(self.run)
            with committer.abandoning():  # its dirty mark is a write too (a full disk)
                committer.before_change()
            done = 0
            pending = iter(batches(documents))
            while True:
                try:
                    batch = next(pending, None)
                except BaseException:
                    # the input failed (not a Document, or the caller's iterator raised): the
                    # batches before it are whole, so they are committed before it propagates
                    with committer.abandoning():
                        committer.commit()
                    raise
                if batch is None:
                    break
                with committer.abandoning(), hooks.announce("ingest-batch"):
                    self.batch(batch, counts, archive_only, stages)
                done += len(batch)
                if progress:
                    progress(done)
            t_commit = time.perf_counter()
            with committer.abandoning():
                committer.commit()
            stages["commit"] = time.perf_counter() - t_commit
        return IngestReport(
            added=counts.added,
            updated=counts.updated,
            unchanged=counts.unchanged,
            chunks_embedded=counts.embedded,
            chunks_reused=counts.reused,
            chunks_deleted=counts.deleted,
            seconds=time.perf_counter() - t0,
            contexts=counts.contexts,
            contexts_cached=counts.contexts_cached,
            contexts_fallback=counts.contexts_fallback,
            llm_calls=counts.llm_calls,
            stages=stages,
        )

    def batch(
        self,
        docs: list[Document],
        counts: IngestCounts,
        archive_only: bool = False,
        stages: dict[str, float] | None = None,
    ) -> None:
        """One batch through plan, chunk, situate, embed, index and derive (not committed)."""
        stages = stages if stages is not None else dict.fromkeys(STAGES, 0.0)
        clock = time.perf_counter
        comps = self.comps
        changes = self.committer.changes
        embedder = comps.embedder.get()
        backend = comps.open_backend(embedder.dim)
        ns = comps.config.backend.namespace
        to_embed: list[Chunk] = []
        to_delete: list[str] = []
        meta_of: dict[str, dict[str, Any]] = {}  # what the backend stores beside each vector
        restamp: list[str] = []  # kept passages whose document's metadata changed
        written: list[tuple[Document, str, list[Chunk]]] = []
        t = clock()
        todo = plan_batch(comps, docs, embedder, self.situate.generator_for, archive_only, counts)
        t, stages["chunking"] = clock(), stages["chunking"] + clock() - t
        contexts, gen_of = self.situate.run(
            [(p.doc, p.doc_hash, p.chunks, p.generator) for p in todo], embedder, counts
        )
        t, stages["contexts"] = clock(), stages["contexts"] + clock() - t
        for p in todo:
            doc, old = p.doc, p.old
            # an interrupted ingest leaves indexed=0: then nothing stored can be trusted as
            # already embedded, and every passage is indexed again (upserts replace)
            trusted = bool(old and old[3] == INDEXED)
            old_ids = set(comps.archive.chunk_ids(doc.id)) if old else set()
            old_ctx = comps.archive.contexts(doc.id) if trusted else {}
            new_ids = set() if archive_only else {c.id for c in p.chunks}
            bmeta = backend_metadata(doc.metadata, doc.id)
            new_meta = old is not None and old[1] != metadata_json(doc.metadata)
            for c in [] if archive_only else p.chunks:
                meta_of[c.id] = bmeta
                # a passage is kept when its text and the context it was embedded with are
                # both unchanged
                if (
                    trusted
                    and c.id in old_ids
                    and c.id in comps.sparse
                    and old_ctx.get(c.id, "") == contexts.get(c.id, "")
                ):
                    counts.reused += 1
                    if new_meta:
                        restamp.append(c.id)
                else:
                    to_embed.append(c)
            to_delete.extend(old_ids - new_ids)
            if old:
                counts.updated += 1
                changes.docs.add(doc.id)
            else:
                counts.added += 1
            written.append((doc, p.doc_hash, p.chunks))
            changes.texts.append(doc.text)
        if written:
            # the archive first, marked pending, in one transaction: what fails after this is
            # finished from the archive by recovery, and what fails in it reached no index
            t = clock()
            comps.archive.write(
                written, archive_only=archive_only, contexts=contexts, context_gen=gen_of
            )
            changes.written.update(d.id for d, _, _ in written)
            self.committer.stuck.difference_update(changes.written)
            stages["archive"] += clock() - t
        if to_embed:
            texts = [join_context(contexts.get(c.id, ""), c.text) for c in to_embed]
            t = clock()
            vectors = checked(embedder, embedder.embed(texts), len(texts))
            t, stages["embedding"] = clock(), stages["embedding"] + clock() - t
            backend.upsert(
                [c.id for c in to_embed], vectors, [meta_of[c.id] for c in to_embed], namespace=ns
            )
            t, stages["vectors"] = clock(), stages["vectors"] + clock() - t
            for c, text in zip(to_embed, texts):
                comps.sparse.add(c.id, text)
            stages["bm25"] += clock() - t
            counts.embedded += len(to_embed)
            changes.added.extend(c.id for c in to_embed)
            changes.vectors.append(np.asarray(vectors, dtype=np.float32))
        if restamp:  # same text, new metadata: the stored vectors are written back with it
            kept = backend.fetch(restamp, namespace=ns)
            if kept:
                ids = list(kept)
                vecs = np.stack([kept[i] for i in ids]).astype(np.float32)
                backend.upsert(ids, vecs, [meta_of[i] for i in ids], namespace=ns)
                # a filtered answer may now include them: for the cache they are new passages
                changes.added.extend(ids)
                changes.vectors.append(vecs)
        if to_delete:
            backend.delete(to_delete, namespace=ns)
            comps.sparse.delete(to_delete)
            counts.deleted += len(to_delete)
            changes.removed.extend(to_delete)
        if written:
            graph_s, temporal_s = derive(comps, written, archive_only)
            stages["graph"] += graph_s
            stages["temporal"] += temporal_s
        if written or to_delete:
            changes.changed = True

    def delete(self, doc_id: str) -> int:
        """Delete a document and its passages everywhere, and commit; returns how many
        passages went.

        Raises:
            NotFoundError: If no document has that id.
        """
        comps = self.comps
        with comps.lock, comps.storage.writing():
            self.committer.catch_up(self.run)
            self.committer.finish_abandoned(self.run)
            if comps.archive.fingerprint(doc_id) is None:
                raise NotFoundError(f"no document with id {doc_id!r} in {comps.path}")
            with self.committer.abandoning():
                self.committer.before_change()
                ids = self._delete(doc_id)
                self.committer.commit()
        return len(ids)

    def _delete(self, doc_id: str) -> list[str]:
        """The archive first (its passages then no longer show), then every index."""
        comps = self.comps
        changes = self.committer.changes
        ids = comps.archive.delete(doc_id)
        changes.changed = True
        changes.docs.add(doc_id)
        changes.removed.extend(ids)
        if comps.backend is not None:
            comps.backend.delete(ids, namespace=comps.config.backend.namespace)
        comps.sparse.delete(ids)
        if comps.graph is not None:
            comps.graph.remove_document(doc_id)
        if comps.temporal is not None:
            comps.temporal.remove_document(doc_id)
        return ids
