"""The commit and recovery protocol: how a change becomes durable, and how a store opened
after a crash finishes what was left half done.

A change (ingest, replacement, delete) marks the archive dirty before it starts
(:meth:`Committer.before_change`). Its archive rows are written with ``indexed=0``; the commit
persists BM25 and the vectors, then marks the rows indexed and clears the dirty mark in one
transaction, moving the commit number (readers reload when it moves), then drops exactly the
cached answers the change could alter (:mod:`.invalidate`). A crash anywhere leaves either the
old commit or the new one: a store opened dirty is reconciled (strays out of the indexes,
documents the indexes lack marked pending) and its pending documents are indexed again from
the archive. A passage the indexes know but the archive does not is never shown.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .. import hooks
from ..archive import INDEXED
from ..cards.build import update_cards
from ..errors import BackendError, StorageError
from ..files import disk_error
from ..types import Document
from .changes import ChangeSet
from .invalidate import L1Invalidation

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["Committer"]

log = logging.getLogger(__name__)


class Committer:
    """Commits the writer's changes and recovers from interrupted ones.

    Attributes:
        changes: What changed since the last commit.
        invalidation: Drops (and refreshes) the cached answers a commit could change.
    """

    def __init__(self, comps: Components, invalidation: L1Invalidation) -> None:
        self.comps = comps
        self.changes = ChangeSet()
        self.invalidation = invalidation
        #: A change failed part way in this process: it is finished from the archive before
        #: the next change (or when the store next opens for writing), and never committed
        #: as it stands.
        self.abandoned = False
        #: Documents the archive holds that could not be indexed again on their own (the
        #: embedder refuses them, say): left pending, never shown, skipped by recovery in this
        #: process (retried when the store next opens), and out of the way of other changes:
        #: deleting or replacing one works. :meth:`Pensive.verify` lists pending documents.
        self.stuck: set[str] = set()
        # the archive confirmed this commit (set between its mark and the end of the commit)
        self._committed: int | None = None
        self._catching_up = False  # recovery started by catch_up runs changes of its own

    @contextmanager
    def abandoning(self) -> Iterator[None]:
        """Run a step of a change; if it raises, the change is abandoned (see :meth:`abandon`)
        and the error goes on, with a note saying what became of the change.

        The disk failing (full, read-only, an I/O error, a damaged SQLite page) goes on as one
        :class:`~pensive_core.errors.StorageError` naming the store and the fix, with the same
        note, and ``stored`` listing the documents the archive kept (pending: indexed in full
        before the next change or when the store next opens for writing; the call's other
        documents are absent)."""
        try:
            yield
        except BaseException as exc:
            pending = self.abandon(exc)
            err = disk_error(exc, self.comps.path, "a change (ingest, delete or commit)")
            if err is None or pending is None:  # (None: committed, the note says so)
                raise
            err.stored = tuple(pending)
            err.args = (
                f"{err.args[0]}. Nothing of the change is searchable; "
                + (
                    f"{len(pending)} document(s) it wrote to the archive are kept (their ids "
                    "in StorageError.stored) and will be indexed in full before the next change "
                    "or when the store next opens for writing; the call's other documents are "
                    "absent"
                    if pending
                    else "none of its documents was stored"
                ),
            )
            for note in getattr(exc, "__notes__", ()):
                err.add_note(note)
            raise err from exc

    def abandon(self, exc: BaseException) -> list[str] | None:
        """A change failed part way: the indexes are reloaded as of the last commit (what
        they held in memory of the change is dropped, so no passage of it is searchable), the
        graph and statement rows of its documents go, and the archive keeps its rows marked
        pending and the store dirty, so that recovery finishes the change from the archive
        before the next change or when the store next opens for writing.

        Returns:
            The ids of the documents left pending in the archive; None when the archive had
            already confirmed the change (only what follows the commit point failed).
        """
        comps = self.comps
        if self._committed is not None:
            # the archive had confirmed the change: it stands, only what follows the commit
            # point (the cache's update) failed; the cache is set aside until the next commit
            commit, self._committed = self._committed, None
            comps.commit_no = commit
            self._distrust_cache()
            self.clear()
            exc.add_note(
                f"Pensive ({comps.path}): the change was committed (commit {commit}); what "
                "failed came after it (the L1 cache update), and the cache is not used until "
                "the next commit."
            )
            return None
        pending: list[str] = []
        try:
            pending = comps.archive.unindexed()
            for did in pending:
                if comps.graph is not None:
                    comps.graph.remove_document(did)
                if comps.temporal is not None:
                    comps.temporal.remove_document(did)
            comps.load_indexes()
        except Exception as inner:  # noqa: BLE001 - the first failure is the one to report
            log.warning("after a failed change the indexes could not be reloaded: %s", inner)
        # answers cached before the change may hold what it removed from the archive (a
        # delete's document): nobody serves them until the next commit
        self._distrust_cache()
        self.clear()
        self.abandoned = True
        exc.add_note(
            f"Pensive ({comps.path}): the change was not committed. Searches see the store as "
            f"of its last commit; {len(pending)} document(s) the change wrote to the archive "
            "are pending and will be indexed again from it before the next change, or when "
            "the store next opens for writing."
        )
        return pending

    def _distrust_cache(self) -> None:
        """Empty L1 and set its commit one behind the store's: no process serves from it
        (each checks the cache's commit against the store's), and the next commit, seeing it
        missed one, starts it afresh."""
        comps = self.comps
        if comps.l1 is None:
            return
        try:
            comps.l1.invalidate_all(comps.commit_no - 1)
        except Exception as inner:  # noqa: BLE001 - a cache: turned off rather than trusted
            log.warning("the L1 cache could not be emptied (%s): turned off", inner)
            with contextlib.suppress(Exception):
                comps.l1.close()
            comps.l1 = None

    def catch_up(self, reindex: Callable[[list[Document]], Any]) -> None:
        """At the start of a change, on an engine several processes write (its change lock
        held): see what other processes committed, and finish a change one of them left
        half done when it died (its dirty mark outlived its lock), as an embedded store's
        next open does."""
        comps = self.comps
        if not comps.storage.shared or self._catching_up:
            return
        self._catching_up = True
        try:
            from ..components import check_not_moved

            check_not_moved(comps.archive, comps.path)  # (a replica open since the migration)
            comps.refresh()
            if comps.archive.is_dirty():
                log.warning("another process left a change half done: finishing it")
                self.recover(reindex)
        finally:
            self._catching_up = False

    @property
    def recovering(self) -> bool:
        """A recovery (or a catch-up that may start one) is running: its re-indexing is one
        change under the lock it holds, committed once at its end."""
        return self._catching_up

    def finish_abandoned(self, reindex: Callable[[list[Document]], Any]) -> None:
        """Before a new change: finish one a failure left (through ``reindex``)."""
        if self.abandoned:
            self.abandoned = False
            log.warning("finishing a change that failed earlier in this process")
            self.recover(reindex)

    def before_change(self) -> None:
        """Before content changes: know which passages are superseded now, so the commit can
        tell which ones it superseded (or freed) and drop the cached answers holding them.

        Also marks a change in flight in the archive (cleared when it commits): a store opened
        with the mark set reconciles its indexes with the archive (see :meth:`recover`)."""
        comps = self.comps
        comps.archive.mark_dirty()
        if (
            comps.temporal_views is not None
            and comps.l1 is not None
            and comps.temporal_views.signature is None
            and comps.l1.stats().get("entries")
        ):
            comps.temporal_views.snapshot()

    def commit(self) -> None:
        """Persist the indexes, mark the archive indexed, move the commit number and
        invalidate L1 (see the module docstring)."""
        comps, changes = self.comps, self.changes
        self._committed = None
        if changes.changed:
            comps.storage.check_writing()  # several writers: the change lock is still ours
        with hooks.announce("commit"):
            # the vectors first: the largest files, so the likeliest to meet a full disk, and
            # one failing then leaves BM25's files as of the last commit too (either way no
            # passage of the change is shown before the archive marks it indexed below)
            if comps.backend is not None:
                comps.backend.persist()
            comps.sparse.commit()
            if comps.learning is not None and changes.removed:
                comps.learning.forget(changes.removed)
            log_changes = getattr(comps.graph, "log_changes", None)
            if log_changes is not None and changes.changed:  # what readers must read again
                log_changes(comps.archive.commit_number() + 1)
            # the graph and statements were kept in step by this change: opening needs no
            # scan (noted in the commit's own transaction: nothing is written after it)
            synced = [
                name
                for name, kept in (
                    ("graph_synced", comps.graph),
                    ("temporal_synced", comps.temporal),
                )
                if kept is not None
            ]
            commit = comps.archive.mark_indexed(changes.changed, changes.written, synced)
            self._committed = commit
            # the new commit number first: answers refreshed below must see this commit's
            # graph and filter caches (they are keyed by it), not the ones from before
            comps.commit_no = commit
            if comps.l1 is not None and changes.changed:
                with hooks.announce("l1-invalidate"):
                    try:
                        self.invalidation.invalidate(commit, changes)
                    except (sqlite3.Error, OSError, BackendError) as exc:
                        # the change is committed: a cache that cannot be written (a full
                        # disk) must not make it look failed; this process stops using the
                        # cache, and others never serve it (its commit is not the store's)
                        log.warning("the L1 cache could not be updated (%s): turned off", exc)
                        with contextlib.suppress(Exception):
                            comps.l1.close()
                        comps.l1 = None
            if changes.changed:  # the cards of exactly the entities the change touched
                update_cards(comps, changes, commit, self.invalidation.router().cards.verify)
            self.clear()
            self._committed = None

    def clear(self) -> None:
        """Forget the changes (and what the graph noted as touched)."""
        self.changes.clear()
        graph = self.comps.graph
        if graph is not None:
            graph.touched_subjects.clear()
            graph.touched_names.clear()

    def recover(self, reindex: Callable[[list[Document]], Any]) -> int:
        """Finish what a killed process left half done; returns how many documents were
        indexed again (through ``reindex``, the ingest pipeline).

        A clean store costs one meta read here. A dirty one is reconciled
        (:meth:`reconcile`); then documents left unconfirmed (indexed=0) are indexed again
        from the archive, and the commit persists it all and clears the mark.
        """
        catching_up, self._catching_up = self._catching_up, True  # its changes need no catch-up
        try:
            return self._recover(reindex)
        finally:
            self._catching_up = catching_up

    def _recover(self, reindex: Callable[[list[Document]], Any]) -> int:
        comps = self.comps
        with hooks.announce("recover"):
            dirty = comps.archive.is_dirty()
            if not dirty and not self.counts_level():
                log.warning("the indexes do not hold what the archive lists: reconciling")
                comps.archive.mark_dirty()
                dirty = True
            if dirty:
                self.reconcile()
            pending = [d for d in comps.archive.unindexed() if d not in self.stuck]
            if not pending:
                if dirty:
                    self.commit()
                return 0
            log.warning("re-indexing %d document(s) left by an interrupted ingest", len(pending))
            docs = [d for d in (comps.archive.document(i) for i in pending) if d is not None]
            return self._index_again(reindex, docs)

    def _index_again(self, reindex: Callable[[list[Document]], Any], docs: list[Document]) -> int:
        """Index pending documents again; when that fails, halves are tried in turn, so that
        one document the embedder always refuses is set aside (:attr:`stuck`) instead of
        failing every later change and every open for writing. The disk failing is no
        document's fault: that goes on as the error it is."""
        try:
            reindex(docs)
            return len(docs)
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - narrowed down below, reported per document
            self.abandoned = False  # this attempt's state is already undone (abandon)
            if len(docs) == 1:
                self.stuck.add(docs[0].id)
                log.warning(
                    "document %r could not be indexed again (%s: %s); it stays pending and "
                    "is not shown: replace or delete it",
                    docs[0].id,
                    type(exc).__name__,
                    exc,
                )
                return 0
            mid = len(docs) // 2
            return self._index_again(reindex, docs[:mid]) + self._index_again(reindex, docs[mid:])

    def counts_level(self) -> bool:
        """Whether BM25 and the vectors each hold as many passages as the archive's indexed
        documents have (a cheap check on every open for writing: a difference means a change
        was cut short where no dirty mark says so)."""
        comps = self.comps
        want = comps.archive.indexed_passage_count()
        if comps.sparse.n_live != want:
            return False
        if comps.backend is None:
            return want == 0
        return comps.backend.count(namespace=comps.config.backend.namespace) == want

    def reconcile(self) -> None:
        """Bring BM25 and the vectors level with the archive after an interrupted change.

        Passages either index holds that no indexed or pending document lists (a delete or
        a replacement whose archive side committed before the index files did) are removed;
        a document whose passages either index lacks is marked pending, to be indexed again.
        Cached answers may name passages that are gone or hold what changed: all are dropped,
        and the commit number moves so readers reload.
        """
        comps = self.comps
        listed = comps.archive.index_chunks()
        ns = comps.config.backend.namespace
        sparse = comps.sparse.ids()
        gone = sparse - listed.keys()
        dense: set[str] = set()
        if comps.backend is not None:
            have = comps.backend.ids(namespace=ns)
            if have is not None:
                dense = have
            else:  # a backend that cannot list its ids: ask for the ones that should be there
                want = sorted(listed)
                for i in range(0, len(want), 1000):
                    dense.update(comps.backend.fetch(want[i : i + 1000], namespace=ns))
            gone |= dense - listed.keys()
            if gone:
                comps.backend.delete(sorted(gone), namespace=ns)
        if gone:
            comps.sparse.delete(sorted(gone))
            self.changes.removed.extend(sorted(gone))
        missing = {
            did
            for cid, (did, flag) in listed.items()
            if flag == INDEXED and (cid not in sparse or cid not in dense)
        }
        if missing:
            comps.archive.mark_pending(missing)
        log.warning(
            "recovering from an interrupted change: %d stray passage(s) removed, %d document(s) "
            "to index again",
            len(gone),
            len(missing),
        )
        if comps.l1 is not None:
            comps.l1.invalidate_all(comps.commit_no)
        self.changes.changed = True
