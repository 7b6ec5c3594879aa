"""The ingest pipeline: plan -> chunk -> situate -> embed -> index -> derive -> commit.

Per batch of documents: :mod:`.plan` skips what is unchanged and chunks the rest;
:mod:`.situate` writes each passage's context; passages whose text and context are both
unchanged keep their stored vectors, the others are embedded; vectors go to the backend and
texts to BM25, stale passages come out of both; the archive is written (rows not yet marked
indexed); :mod:`.derive` updates the graph and the statements. After the last batch,
:mod:`.commit` persists it all and marks it indexed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import hooks
from ..archive import INDEXED, metadata_json
from ..context.base import join_context
from ..embedders.base import checked
from ..errors import IngestGroupsError, InputError, NotFoundError, PensiveError
from ..filters import backend_metadata
from ..types import Chunk, Document, IngestReport
from .changes import IngestCounts
from .commit import Committer
from .derive import derive
from .plan import BATCH, DocPlan, batches, plan_batch
from .situate import Situate

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["STAGES", "IngestPipeline"]

#: Where ingest time goes, reported in :attr:`IngestReport.stages <pensive_core.types.IngestReport.stages>`.
STAGES = (
    "chunking",
    "contexts",
    "embedding",
    "embedding_wait",
    "vectors",
    "bm25",
    "archive",
    "graph",
    "temporal",
    "commit",
)


@dataclass(eq=False)
class Ahead:
    """What an ingest computed before its change lock (:meth:`IngestPipeline.prepare`).

    Attributes:
        contexts: Fitted contexts by passage id, per ``(document id, content hash,
            generator name)``.
        vectors: Vectors by the exact text embedded (context and passage).
        chunks: Passages cut, by ``(document id, content hash)``.
    """

    contexts: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    chunks: dict[tuple[str, str], list[Chunk]] = field(default_factory=dict)


def _told(progress: Callable[[int, int], Any] | None, group: int) -> Callable[[int], Any] | None:
    """One group's progress callback: ``progress`` told the group's index too."""
    return None if progress is None else functools.partial(progress, group)


class IngestPipeline:
    """Ingest and delete, through the stages (see the module docstring)."""

    #: Embed each batch in a thread beside the archive, BM25, graph and statement stages
    #: (False: one after the other, the rung benchmarks/ingest_speed compares it with).
    overlap_embedding = True

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
        # (a recovery's re-indexing stays one change: a commit between its batches would clear
        # the change's mark while documents it has not reached are still pending)
        if comps.storage.shared and not archive_only and not self.committer.recovering:
            self._run_shared(documents, progress, counts, stages)
            return self._report(time.perf_counter() - t0, counts, stages)
        with comps.lock, comps.storage.writing():
            self._begin()
            failed = self._feed(documents, progress, counts, archive_only, stages)
            # (a failed input: the batches before it are whole, committed before it propagates)
            stages["commit"] = self._commit()
        if failed is not None:
            raise failed
        return self._report(time.perf_counter() - t0, counts, stages)

    def run_groups(
        self,
        groups: Sequence[Iterable[Document]],
        progress: Callable[[int, int], Any] | None = None,
        archive_only: bool = False,
    ) -> list[IngestReport]:
        """Ingest several groups of documents (several callers' ingests) as one change with
        one commit, each group reported as :meth:`run` would report it alone.

        The groups run in order, each in its own batches with its own counts and stages, so
        a document of a later group replaces one of the same id from an earlier group just as
        a later call would. Every group's ``stages["commit"]`` holds the shared commit's
        time (or the recovery's, below), and its ``seconds`` the change's start, its own
        batches and that commit.

        A failing group fails alone: the groups before it are committed and reported, it gets
        its error, and the groups after it run as a fresh change (the same rules again):

        - Its input fails (an item that is not a :class:`Document`, or its iterator raises):
          the change is committed with the groups before it and the batches of its own that
          came before the failure, as :meth:`run` commits them alone.
        - One of its batches fails: the change is abandoned (see
          :meth:`Committer.abandoning <pensive_core.ingest.Committer.abandoning>`) and its
          recovery runs at once, indexing from the archive what the change wrote there: the
          groups before it, and whatever of its own reached the archive (which the next change
          after :meth:`run` would index too). Should that recovery fail, the groups before it
          get the recovery's error.
        - The start of the change or its commit fails: every group of that change gets the
          error (a failed commit leaves the change to recovery, as in :meth:`run`).

        A failure that is no :class:`Exception` (``KeyboardInterrupt``) propagates, after
        the commit :meth:`run` would make, and the groups after it do not run. On an engine
        several processes write (each batch is a change of its own there), or while a
        recovery runs, the groups simply run one after another through :meth:`run`.

        Args:
            groups: The groups, each an iterable of :class:`Document`.
            progress: Optional callable ``(group index, documents of that group done)``.
            archive_only: Every group's documents to the archive only (see :meth:`run`).

        Returns:
            One report per group, in order.

        Raises:
            InputError: If a group is neither a :class:`Document` nor an iterable of them (a
                string, a number, a mapping): checked before anything is written.
            IngestGroupsError: If any group failed: ``outcomes`` holds every group's report,
                or the exception it failed with.
        """
        groups = list(groups)
        for i, docs in enumerate(groups):
            if not isinstance(docs, Document) and (
                isinstance(docs, (str, bytes, bytearray, Mapping)) or not isinstance(docs, Iterable)
            ):
                raise InputError(
                    f"ingest_many() takes groups of Document objects, one per argument; group "
                    f"{i} is a {type(docs).__name__} (nothing was ingested)"
                )
        if self.comps.storage.shared or self.committer.recovering:
            outcomes: list[IngestReport | Exception] = []
            for i, docs in enumerate(groups):
                try:
                    outcomes.append(self.run(docs, _told(progress, i), archive_only))
                except Exception as exc:  # noqa: BLE001 - the group's outcome
                    outcomes.append(exc)
        else:
            outcomes = self._change(groups, progress, archive_only, 0)
        reports = [o for o in outcomes if isinstance(o, IngestReport)]
        if len(reports) < len(outcomes):
            raise IngestGroupsError(outcomes)
        return reports

    def _change(
        self,
        groups: list[Iterable[Document]],
        progress: Callable[[int, int], Any] | None,
        archive_only: bool,
        first: int,
    ) -> list[IngestReport | Exception]:
        """``groups`` (numbered from ``first``) as one change: their outcomes, the groups
        after a failing one run as a fresh change (see :meth:`run_groups`)."""
        if not groups:
            return []
        clock = time.perf_counter
        t0 = clock()
        counts = [IngestCounts() for _ in groups]
        stages = [dict.fromkeys(STAGES, 0.0) for _ in groups]
        took: list[float] = []  # the time of each group's own batches, for the groups fed
        failed: BaseException | None = None  # how the last group fed failed
        abandoned = False  # ... in a batch, abandoning the change (else its input failed)
        with self.comps.lock, self.comps.storage.writing():
            try:
                self._begin()
            except Exception as exc:  # noqa: BLE001 - every group's outcome
                return [exc] * len(groups)
            begun = clock() - t0
            for i, docs in enumerate(groups):
                t = clock()
                try:
                    failed = self._feed(
                        docs, _told(progress, first + i), counts[i], archive_only, stages[i]
                    )
                except Exception as exc:  # noqa: BLE001 - that group's outcome
                    failed, abandoned = exc, True
                took.append(clock() - t)
                if failed is not None:
                    break
            # the groups the change keeps: a group whose input failed keeps its batches
            # before the failure (as run() does); after a failed batch, the groups before it
            # are in the archive, pending, and the abandoned change's recovery indexes them
            kept = len(took) - 1 if abandoned else len(took)
            t = clock()
            try:
                if not abandoned:
                    self._commit()
                elif kept:
                    self.committer.finish_abandoned(self.run)
            except Exception as exc:  # noqa: BLE001 - left to recovery, as in run()
                outcomes: list[IngestReport | Exception] = [exc] * kept
            else:
                commit_s = clock() - t
                outcomes = []
                for c, st, own in zip(counts, stages, took[:kept]):
                    st["commit"] = commit_s
                    outcomes.append(self._report(begun + own + commit_s, c, st))
                if isinstance(failed, Exception) and not abandoned:
                    outcomes[-1] = failed  # (its batches before the failure are committed)
        if failed is None:
            return outcomes
        if not isinstance(failed, Exception):
            raise failed  # (KeyboardInterrupt: after the commit run() makes too)
        if abandoned:
            outcomes.append(failed)
        rest = len(took)
        return outcomes + self._change(groups[rest:], progress, archive_only, first + rest)

    def _feed(
        self,
        documents: Iterable[Document],
        progress: Callable[[int], Any] | None,
        counts: IngestCounts,
        archive_only: bool,
        stages: dict[str, float],
    ) -> BaseException | None:
        """Documents, batch by batch, into the change in flight (its lock held); returns the
        failure of the input (an item that is not a Document, the caller's iterator raised),
        whose batches before it are whole and stay in the change. A batch that fails abandons
        the change, and its error propagates."""
        committer = self.committer
        done = 0
        pending = iter(batches(documents))
        while True:
            try:
                batch = next(pending, None)
            except BaseException as exc:
                return exc
            if batch is None:
                return None
            with committer.abandoning(), hooks.announce("ingest-batch"):
                self.batch(batch, counts, archive_only, stages)
            done += len(batch)
            if progress:
                progress(done)

    def _commit(self) -> float:
        """Commit the change in flight (its lock held); returns the seconds it took."""
        t = time.perf_counter()
        with self.committer.abandoning():
            self.committer.commit()
        return time.perf_counter() - t

    def _run_shared(
        self,
        documents: Iterable[Document],
        progress: Callable[[int], Any] | None,
        counts: IngestCounts,
        stages: dict[str, float],
    ) -> None:
        """An ingest on an engine several processes write (Postgres replicas): each batch is
        a change of its own, and what costs time (contexts, embedding) is done before the
        store's change lock is taken, so other replicas' changes do not wait on it. Under the
        lock the batch is planned again against what is committed by then (a document another
        replica changed meanwhile is handled as it now stands) and only what the work done
        ahead does not cover is computed there."""
        comps, committer = self.comps, self.committer
        done = 0
        ran = False
        try:
            for batch in batches(documents):  # (a bad item: the batches before it are committed)
                ahead = self.prepare(batch, counts, stages)
                with comps.lock:
                    self._check_open()
                    with comps.storage.writing():
                        self._begin()
                        with committer.abandoning(), hooks.announce("ingest-batch"):
                            self.batch(batch, counts, False, stages, ahead)
                        t_commit = time.perf_counter()
                        with committer.abandoning():
                            committer.commit()
                        stages["commit"] += time.perf_counter() - t_commit
                ran = True
                done += len(batch)
                if progress:
                    progress(done)
        except BaseException as exc:
            if done:
                exc.add_note(
                    f"Pensive ({comps.path}): the first {done} document(s) of this call were "
                    f"committed before the failure (a store several processes share commits "
                    f"each batch of {BATCH} documents)."
                )
            raise
        if not ran:  # nothing to ingest: still see what others committed, as a change would
            with comps.lock:
                self._check_open()
                with comps.storage.writing():
                    self._begin()
                    with committer.abandoning():
                        committer.commit()

    def _check_open(self) -> None:
        """Between two steps of a shared engine's ingest (its lock held again): the handle
        was not closed meanwhile by another thread (close() does not wait for an ingest that
        is embedding ahead of the change lock, and nothing may be written after it returned,
        on connections reopened that nobody would close).

        Raises:
            PensiveError: If the handle was closed.
        """
        if self.comps.closed:
            raise PensiveError(f"this Pensive store ({self.comps.path}) is closed")

    def _begin(self) -> None:
        """The start of a change, its lock held: catch up with other processes, finish what
        a failure left, mark the change in flight."""
        committer = self.committer
        committer.catch_up(self.run)
        committer.finish_abandoned(self.run)
        with committer.abandoning():  # its dirty mark is a write too (a full disk)
            committer.before_change()

    def prepare(
        self, docs: list[Document], counts: IngestCounts, stages: dict[str, float]
    ) -> Ahead:
        """The slow part of a batch, done without the store's change lock: plan it against
        the last commit, situate its documents and embed the passages that will need it.
        What it computes is only a head start: the change itself plans again under the lock
        and computes what is missing (a document another replica changed meanwhile)."""
        comps = self.comps
        embedder = comps.embedder.get()
        clock = time.perf_counter
        ahead = Ahead()
        with comps.lock:  # (this process's readers and writers share the indexes)
            self._check_open()
            comps.refresh()
            t = clock()
            todo = plan_batch(
                comps, docs, embedder, self.situate.generator_for, False, IngestCounts()
            )
            t, stages["chunking"] = clock(), stages["chunking"] + clock() - t
            scratch = IngestCounts()  # (the change counts the contexts it writes)
            contexts, _ = self.situate.run(
                [(p.doc, p.doc_hash, p.chunks, p.generator) for p in todo], embedder, scratch
            )
            counts.llm_calls += scratch.llm_calls
            counts.contexts_cached += scratch.contexts_cached
            counts.contexts_fallback += scratch.contexts_fallback
            stages["contexts"] += clock() - t
            texts: list[str] = []
            for p in todo:
                ahead.chunks[(p.doc.id, p.doc_hash)] = p.chunks
                if p.generator is not None and p.chunks:
                    ahead.contexts[(p.doc.id, p.doc_hash, p.generator.name)] = {
                        c.id: contexts[c.id] for c in p.chunks if c.id in contexts
                    }
                old_ids = set(comps.archive.chunk_ids(p.doc.id)) if p.old else set()
                _, fresh = self._split(p, contexts, old_ids)
                texts.extend(join_context(contexts.get(c.id, ""), c.text) for c in fresh)
        if texts:  # no lock: queries and other replicas go on meanwhile
            t = clock()
            vectors = checked(embedder, embedder.embed(texts), len(texts))
            stages["embedding"] += clock() - t
            ahead.vectors = dict(zip(texts, np.asarray(vectors, dtype=np.float32)))
        return ahead

    def _split(
        self, p: DocPlan, contexts: dict[str, str], old_ids: set[str]
    ) -> tuple[list[Chunk], list[Chunk]]:
        """A planned document's passages: ``(kept, to embed)``. A passage keeps its stored
        vector when its text and the context it was embedded with are both unchanged and the
        document was fully indexed (an interrupted ingest leaves indexed=0: then nothing
        stored can be trusted as already embedded; upserts replace)."""
        comps = self.comps
        trusted = bool(p.old and p.old[3] == INDEXED)
        old_ctx = comps.archive.contexts(p.doc.id) if trusted else {}
        kept: list[Chunk] = []
        fresh: list[Chunk] = []
        for c in p.chunks:
            if (
                trusted
                and c.id in old_ids
                and c.id in comps.sparse
                and old_ctx.get(c.id, "") == contexts.get(c.id, "")
            ):
                kept.append(c)
            else:
                fresh.append(c)
        return kept, fresh

    @staticmethod
    def _report(seconds: float, counts: IngestCounts, stages: dict[str, float]) -> IngestReport:
        return IngestReport(
            added=counts.added,
            updated=counts.updated,
            unchanged=counts.unchanged,
            chunks_embedded=counts.embedded,
            chunks_reused=counts.reused,
            chunks_deleted=counts.deleted,
            seconds=seconds,
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
        ahead: Ahead | None = None,
    ) -> None:
        """One batch through plan, chunk, situate, embed, index and derive (not committed);
        ``ahead``: contexts and vectors computed before the change lock (:meth:`prepare`)."""
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
        todo = plan_batch(
            comps, docs, embedder, self.situate.generator_for, archive_only, counts,
            ahead.chunks if ahead is not None else None, changes.written,
        )  # fmt: skip
        t, stages["chunking"] = clock(), stages["chunking"] + clock() - t
        contexts, gen_of = self.situate.run(
            [(p.doc, p.doc_hash, p.chunks, p.generator) for p in todo],
            embedder,
            counts,
            known=ahead.contexts if ahead is not None else None,
        )
        t, stages["contexts"] = clock(), stages["contexts"] + clock() - t
        for p in todo:
            doc, old = p.doc, p.old
            old_ids = set(comps.archive.chunk_ids(doc.id)) if old else set()
            new_ids = set() if archive_only else {c.id for c in p.chunks}
            bmeta = backend_metadata(doc.metadata, doc.id)
            new_meta = old is not None and old[1] != metadata_json(doc.metadata)
            if not archive_only:
                same, fresh = self._split(p, contexts, old_ids)
                for c in p.chunks:
                    meta_of[c.id] = bmeta
                counts.reused += len(same)
                if new_meta:
                    restamp.extend(c.id for c in same)
                to_embed.extend(fresh)
            to_delete.extend(old_ids - new_ids)
            if old:
                counts.updated += 1
                changes.docs.add(doc.id)
            else:
                counts.added += 1
            written.append((doc, p.doc_hash, p.chunks))
            changes.texts.append(doc.text)
        # the passages are embedded in a thread while the archive, BM25, the graph and the
        # statements take them (none needs the vectors; PyTorch and onnxruntime leave the
        # interpreter to this thread while they compute: benchmarks/ingest_speed)
        texts = [join_context(contexts.get(c.id, ""), c.text) for c in to_embed]
        overlap = bool(to_embed) and self.overlap_embedding
        with ThreadPoolExecutor(1, "pensive-embed") if overlap else nullcontext() as pool:
            if pool is None:
                embedding: Future[tuple[np.ndarray, float]] | None = None
                if to_embed:
                    vectors, embed_s = self._timed_embed(embedder, texts, ahead)
                    stages["embedding"] += embed_s
            else:
                embedding = pool.submit(self._timed_embed, embedder, texts, ahead)
            if written:
                # the archive first, marked pending, in one transaction: what fails after this
                # is finished from the archive by recovery, and what fails in it reached no
                # index
                t = clock()
                comps.archive.write(
                    written, archive_only=archive_only, contexts=contexts, context_gen=gen_of
                )
                changes.written.update(d.id for d, _, _ in written)
                self.committer.stuck.difference_update(changes.written)
                stages["archive"] += clock() - t
            t = clock()
            for c, text in zip(to_embed, texts):
                comps.sparse.add(c.id, text)
            stages["bm25"] += clock() - t
            if written:
                graph_s, temporal_s = derive(comps, written, archive_only)
                stages["graph"] += graph_s
                stages["temporal"] += temporal_s
            if embedding is not None:
                t = clock()
                vectors, embed_s = embedding.result()
                stages["embedding"] += embed_s
                stages["embedding_wait"] += clock() - t
        if to_embed:
            t = clock()
            backend.upsert(
                [c.id for c in to_embed], vectors, [meta_of[c.id] for c in to_embed], namespace=ns
            )
            stages["vectors"] += clock() - t
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
        if written or to_delete:
            changes.changed = True

    @classmethod
    def _timed_embed(
        cls, embedder: Any, texts: list[str], ahead: Ahead | None
    ) -> tuple[np.ndarray, float]:
        t = time.perf_counter()
        vectors = cls._embed(embedder, texts, ahead)
        return vectors, time.perf_counter() - t

    @staticmethod
    def _embed(embedder: Any, texts: list[str], ahead: Ahead | None) -> np.ndarray:
        """The vectors of these texts: the ones embedded ahead of the lock, the rest now."""
        have = ahead.vectors if ahead is not None else {}
        missing = [t for t in dict.fromkeys(texts) if t not in have]
        if not missing:
            return np.stack([have[t] for t in texts])
        if not have:
            return np.asarray(checked(embedder, embedder.embed(texts), len(texts)))
        made = dict(have)
        made.update(zip(missing, checked(embedder, embedder.embed(missing), len(missing))))
        return np.stack([np.asarray(made[t], dtype=np.float32) for t in texts])

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
