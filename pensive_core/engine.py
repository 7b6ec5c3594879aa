"""The ``Pensive`` store: a thin facade over the store's parts and its two pipelines.

Opening builds the parts (:func:`~pensive_core.components.open_components`); a query goes
through the router (:class:`~pensive_core.router.Router`) and an ingest through the ingest
pipeline (:class:`~pensive_core.ingest.IngestPipeline`), whose commit and recovery protocol is
:class:`~pensive_core.ingest.Committer`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import hooks
from .components import Components, Plugins, open_components
from .context.base import ContextGenerator
from .embedders.base import Embedder
from .errors import ConfigError, NotFoundError, PensiveError
from .explain import explain_query
from .files import disk_error
from .graph.extract import EntityExtractor
from .ingest import Committer, IngestPipeline, L1Invalidation, move_vectors, run_reembed
from .ingest.files import check_paths, documents_from
from .ingest.situate import choose_generators
from .memory.manager import Sessions
from .query.escalate import window_text
from .query.request import make_request
from .rerank import Reranker
from .router import Router
from .stats import store_stats
from .temporal.statements import StatementExtractor
from .types import Document, Hit, IngestReport, QueryResult
from .validate import check_text

if TYPE_CHECKING:
    from .memory.conversation import Conversation

__all__ = ["Pensive"]


class Pensive:
    """A persistent hybrid retrieval store in one folder.

    Args:
        path: The store folder (created if missing).
        config: A dict shaped like ``pensive.toml``, a path to such a file, or None for the
            defaults. On an existing store, it overrides the saved config except for the keys the
            index depends on (embedder, backend, chunking, tokenisation), which must match.
        read_only: Open an existing store to read while another process writes to it. A
            read-only store sees each commit of the writer at its next query; ingest and delete
            raise. One writer and any number of readers may have a store open at once.
        llm: An LLM for situating contexts (``[context] generator = "auto"`` or ``"llm"``):
            any LlamaIndex LLM, LangChain chat model or LLM, or a callable ``str -> str``. Its
            contexts are cached in the store, so ingesting again costs no calls.
        context_generator: Your own :class:`~pensive_core.context.ContextGenerator`; it takes
            the place of the ``auto`` and ``llm`` generators.
        embedder: An :class:`~pensive_core.embedders.Embedder` already loaded, used instead of
            the one ``[embedder]`` names (several stores in one process can share one model).
            It must make vectors of the dimension the store holds.
        extractor: Your own :class:`~pensive_core.graph.EntityExtractor` for the entity graph,
            in place of what ``[graph] extractor`` names (the graph is rebuilt from the archive
            when the extractor's ``name`` differs from the one that built it).
        statement_extractor: Your own :class:`~pensive_core.temporal.StatementExtractor`, in
            place of what ``[temporal] extractor`` names (likewise rebuilt on a new ``name``).
        reranker: Your own :class:`~pensive_core.rerank.Reranker`; it turns the rerank stage
            on, in place of what ``[rerank] model`` names.

    Raises:
        ConfigError: On an unknown key, a value that contradicts how the store was built, or
            a plug-in that does not implement its protocol.
        SchemaVersionError: If the store was written by an incompatible version.
        PensiveError: If another process (or another ``Pensive`` object) has the store open
            for writing.
        NotFoundError: If ``read_only`` and there is no store at ``path``.

    Example:
        >>> with Pensive("./pensive-data") as p:          # doctest: +SKIP
        ...     p.ingest([Document(id="a", text="Revenue rose 12% in Q3 2024.")])
        ...     p.query("Q3 revenue", k=3).hits[0].doc_id
        'a'
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: Any = None,
        *,
        read_only: bool = False,
        llm: Any = None,
        context_generator: ContextGenerator | None = None,
        embedder: Embedder | None = None,
        extractor: EntityExtractor | None = None,
        statement_extractor: StatementExtractor | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.path = Path(path).expanduser()
        self.read_only = bool(read_only)
        self._closed = True  # until everything below has opened
        # conversation sessions (their own locks: opening one never waits for an ingest)
        self._memory = Sessions(self)
        plugins = Plugins(
            llm, context_generator, embedder, extractor, statement_extractor, reranker
        )
        self._given = (config, plugins)  # what a repair reopens the store with
        #: Documents the opening indexed again (an interrupted or failed change, a repair).
        self.recovered = 0
        try:
            self._open(config, plugins)
        except BaseException as exc:
            err = disk_error(exc, self.path, "opening the store")
            if err is None:
                raise
            raise err from exc

    def _open(self, config: Any, plugins: Plugins) -> None:
        with hooks.announce("open"):
            comps = open_components(self.path, config, self.read_only, plugins, choose_generators)
            self._comps = comps
            self._router = Router(comps)
            committer = Committer(comps, L1Invalidation(comps, lambda: self._router))
            self._committer = committer
            self._ingest = IngestPipeline(comps, committer)
            self._closed = False
            if not self.read_only:
                try:
                    # under the change lock: where several processes write, a dirty mark may
                    # be another's change in flight, not one left by a crash
                    with comps.lock, comps.storage.writing():
                        self.recovered = committer.recover(self._ingest.run)
                except BaseException:
                    self._closed = True
                    comps.close()
                    raise

    # -- what the store is made of ----------------------------------------------------------------
    @property
    def components(self) -> Components:
        """The open store's parts (archive, indexes, graph, caches...), for tools and tests
        that inspect a store; changing them bypasses the pipelines."""
        self._check_open()
        return self._comps

    @property
    def router(self) -> Router:
        """The query pipeline: its stages can be run one by one (see :class:`Router`)."""
        self._check_open()
        return self._router

    @property
    def config(self) -> Any:
        """The effective :class:`~pensive_core.config.PensiveConfig`."""
        return self._comps.config

    @property
    def embedder(self) -> Embedder:
        """The store's embedder, loaded on first use (or the one given to the constructor)."""
        self._check_open()
        return self._comps.embedder.get()

    @property
    def llm(self) -> Any:
        """The LLM given to the constructor (None when there is none)."""
        return self._comps.llm

    @property
    def commit_number(self) -> int:
        """The store's commit number: it moves with every commit of any writer process (a
        reader sees the writer's at its next query)."""
        return self._comps.commit_no

    @property
    def l3_counts(self) -> dict[str, int]:
        """L3 escalations in this process, by reason (``exact``, ``low_confidence``) and how
        many found something (``found``)."""
        return self._comps.counters["l3"]  # type: ignore[no-any-return]

    @property
    def l1_refreshed(self) -> int:
        """Cached answers computed again right after a commit invalidated them."""
        return int(self._comps.counters["l1_refreshed"])

    def _check_open(self) -> None:
        if self._closed:
            raise PensiveError(f"this Pensive store ({self.path}) is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise PensiveError(
                f"this Pensive store ({self.path}) is open read-only; open it without "
                "read_only=True (in one process at a time) to change it"
            )

    # -- ingest ---------------------------------------------------------------------------------
    def ingest(
        self, documents: Iterable[Document], *, progress: Any = None, archive_only: bool = False
    ) -> IngestReport:
        """Index documents; an id already stored is replaced, re-embedding only changed passages.

        Args:
            documents: :class:`Document` objects (any iterable; streamed in batches).
            progress: Optional callable ``(n_documents_done) -> None`` for progress display.
            archive_only: Keep these documents in the L3 archive only: not embedded, not in
                BM25, found by the router's archive search (exact identifiers and phrases,
                whole-document BM25) and by :meth:`get`. For cold material too large to embed.

        Returns:
            What was added, updated, skipped, embedded and reused.

        Raises:
            InputError: If an item is not a Document.
        """
        self._check_writable()
        return self._ingest.run(documents, progress, archive_only)

    def ingest_many(
        self, *groups: Iterable[Document], progress: Any = None, archive_only: bool = False
    ) -> list[IngestReport]:
        """Ingest several groups of documents (several callers' ingests) as one change with one
        commit, each reported as :meth:`ingest` alone would; a failing group fails alone. See
        :meth:`IngestPipeline.run_groups <pensive_core.ingest.IngestPipeline.run_groups>`."""
        self._check_writable()
        return self._ingest.run_groups(groups, progress, archive_only)

    def ingest_path(
        self, *paths: str | os.PathLike[str], progress: Any = None, archive_only: bool = False
    ) -> IngestReport:
        """Ingest files and folders (``.txt .md .jsonl .html``), skipping unreadable ones.

        Document ids are file paths relative to the folder given (JSONL lines carry their own id).

        Args:
            paths: Files or folders; folders are walked recursively, hidden entries skipped.
            progress: Optional callable ``(n_documents_done) -> None``.
            archive_only: Keep them in the L3 archive only (see :meth:`ingest`).

        Returns:
            The combined report; ``errors`` lists each skipped file or line with the reason.

        Raises:
            InputError: If a path does not exist.
        """
        check_paths(paths)
        errors: list[tuple[str, str]] = []
        report = self.ingest(
            documents_from(paths, errors), progress=progress, archive_only=archive_only
        )
        return IngestReport(**{**report.__dict__, "errors": errors})

    def delete(self, doc_id: str) -> int:
        """Delete a document and all its passages.

        Returns:
            The number of passages removed.

        Raises:
            InputError: If ``doc_id`` holds a lone surrogate.
            NotFoundError: If no document has that id.
        """
        self._check_writable()
        if isinstance(doc_id, str):  # a lone surrogate is no id (InputError, not a codec error)
            check_text(doc_id, "doc_id")
        with hooks.announce("delete"):
            return self._ingest.delete(doc_id)

    def reindex(
        self,
        to: str,
        options: Mapping[str, Any] | None = None,
        *,
        namespace: str | None = None,
        batch_size: int = 512,
        verify_timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        """Move the dense index to another vector backend, without embedding anything again.

        Every indexed passage's stored vector is read from the current backend and written,
        with its document's metadata, to the new one; the counts are then checked (waiting up
        to ``verify_timeout_s`` for an eventually consistent service). Only when they agree
        does the store switch: its saved config names the new backend, readers follow at their
        next query, and the old local index files are removed (vectors on a remote service are
        left where they were). On any failure the store stays on the old backend, unchanged.

        Args:
            to: The new backend's name (``faiss``, ``chroma``, ``pinecone``, ``weaviate``,
                ``memory`` or ``module:Class``).
            options: Settings of the new backend's config section, e.g.
                ``{"mode": "http", "port": 8000}`` for Chroma; the rest keep their values.
            namespace: The namespace to use in the new backend (default: the current one).
            batch_size: Vectors moved per request.
            verify_timeout_s: How long to wait for the new backend's count to reach the total.

        Returns:
            ``from``, ``to``, ``vectors`` moved, ``embedded`` (passages the old backend lacked,
            embedded once; normally 0), ``seconds``.

        Raises:
            ConfigError: If the backend or its options are wrong.
            BackendError: If the new backend already holds vectors in that namespace, or its
                count does not reach the total.
        """
        self._check_writable()
        return move_vectors(
            self._comps,
            self._committer,
            to,
            options,
            namespace,
            batch_size,
            verify_timeout_s,
            self._ingest.run,
        )

    def reembed(self, embedder: str | Embedder | None = None, **options: Any) -> dict[str, Any]:
        """Blue/green re-embedding with another model (:func:`~pensive_core.ingest.run_reembed`)."""
        return run_reembed(self._comps, self._committer, self._ingest.run, embedder, **options)

    # -- query ----------------------------------------------------------------------------------
    def query(
        self,
        text: str,
        k: int = 5,
        *,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        context: Sequence[str] | None = None,
        min_score: float | None = None,
        pins: Sequence[str] | None = None,
    ) -> QueryResult:
        """Answer a question through the tiers: L1 cache, L2 hybrid retrieval, L3 archive.

        L1 serves a question asked before (or a variant: case, punctuation, word order, filler
        words, a typo) whose answer no later ingest could have changed. L2 runs dense and BM25
        retrieval and fuses them. L3 searches the whole archived documents when the question
        asks for an identifier, figure or quote that no L2 passage contains (and, if configured,
        when L2's confidence is low), and returns the matching passage with its neighbours.

        Args:
            text: The question.
            k: How many passages to return.
            as_of: Only passages of documents timestamped at or before this time (documents
                without a timestamp are always eligible).
            filters: Only passages of documents whose metadata pass this Mongo-style filter,
                e.g. ``{"source": "q3.pdf"}`` or ``{"year": {"$gte": 2020}}`` (see
                :mod:`pensive_core.filters`; ``doc_id`` is a field too). Every tier applies it:
                the vector backend natively, BM25 and the archive here.
            context: Texts the question is asked in (recent conversation turns, say). With the
                entity graph on, activation spread from the entities they name multiplies the
                question's where both reach, so passages tied to the context rise; it never
                lowers a score. Answers given with a context are not cached.
            min_score: Drop hits whose ``match`` (how likely each answers, in [0, 1]) is below
                it; with none left the result is empty and ``weak``. None keeps every hit.
            pins: Document ids forced into the result, as are documents mentioned in the
                question (``@doc-id``, ``@"Title"``): each its best passage, marked
                ``pinned``, ahead of the ``k`` retrieved hits (see :mod:`.query.pins`).

        Returns:
            The hits (best first), the tier that answered, a confidence in [0, 1], ``match``
            and ``weak`` (whether the best hit is a likely answer), and latency.

        Raises:
            InputError: On an empty or over-long query, a bad ``k``, ``min_score`` or
                ``pins``, or a malformed filter.
            NotFoundError: If a pin or a quoted ``@"..."`` mention names no document.
        """
        self._check_open()
        comps = self._comps
        with hooks.announce("query"):
            if comps.backend is not None:
                comps.embedder.get()  # a one-off model load is not query latency
            t0 = time.perf_counter()
            req = make_request(text, k, as_of, filters, context, min_score, pins)
            try:
                with comps.lock:
                    comps.refresh()
                    res = self._router.route(req, t0)
            except Exception as exc:
                err = disk_error(exc, self.path, "a query")
                if err is None:
                    raise
                raise err from exc
            return self._record(res)

    explain = explain_query  # where expected items ranked in every stage, and why they were lost

    def _record(self, res: QueryResult) -> QueryResult:
        # under the lock: a flush writes to the connection an ingest may be writing to
        with self._comps.lock:
            self._comps.stats.record(res.tier, res.latency_ms, res.confidence)
        return res

    # -- archive (L3) ---------------------------------------------------------------------------
    def get(self, doc_id: str) -> Document:
        """Return a stored document whole, from the archive.

        Raises:
            InputError: If ``doc_id`` holds a lone surrogate.
            NotFoundError: If no document has that id.
        """
        self._check_open()
        if isinstance(doc_id, str):  # a lone surrogate is no id (InputError, not a codec error)
            check_text(doc_id, "doc_id")
        doc = self._comps.archive.document(doc_id)
        if doc is None:
            raise NotFoundError(f"no document with id {doc_id!r} in {self.path}")
        return doc

    def summary(self, doc_id: str) -> str:
        """A document's summary: its lead sentences (raises NotFoundError for an unknown id)."""
        return self.router.cards.summary(doc_id)

    def history(self, hit: Hit | str) -> list[Hit]:
        """How the facts a passage states changed: every statement of its slots, oldest first.

        Args:
            hit: A hit from :meth:`query`, or a passage id.

        Returns:
            The passages stating a value of the same slots (the passage itself among them),
            ordered by when each became true, with ``valid_from``, ``valid_to`` and
            ``superseded_by`` set; empty when the passage states nothing temporal resolution
            tracks.

        Raises:
            PensiveError: If temporal resolution is off for this store.
        """
        self._check_open()
        if not self._router.temporal.on:
            raise PensiveError("temporal resolution is off: open the store with temporal.enabled")
        cid = hit.chunk_id if isinstance(hit, Hit) else str(hit)
        with self._comps.lock:
            self._comps.refresh()
            return self._router.temporal.history(cid)

    def expand(self, hit: Hit, window: int | None = 1) -> str:
        """Expand a hit outward from its passage, using the archived document.

        Args:
            hit: A hit from :meth:`query`.
            window: Passages to include on each side; None for the whole document.

        Returns:
            The text of the document from the first to the last passage in the window, exactly
            as ingested (or the whole document).

        Raises:
            NotFoundError: If the hit's document or passage is no longer stored.
        """
        doc = self.get(hit.doc_id)
        if window is None:
            return doc.text
        archive = self._comps.archive
        row = archive.chunks([hit.chunk_id]).get(hit.chunk_id)
        if row is None:
            raise NotFoundError(f"passage {hit.chunk_id!r} is no longer stored (re-ingested?)")
        return window_text(archive, doc, row.ordinal, max(0, int(window)))

    # -- conversation memory --------------------------------------------------------------------
    def conversation(
        self,
        session_id: str,
        *,
        namespace: str = "default",
        user: str | None = None,
        create: bool = True,
    ) -> Conversation:
        """The persistent memory of one conversation session.

        Each session is stored in its own folder under ``conversations/`` (its own turn log and
        index), so one session's recall can never return another's turns. Asking for the same
        session again returns the same object.

        Args:
            session_id: The session's id (any string; it is never used as a path as given).
            namespace: A tenant or application namespace; sessions are per namespace.
            user: The user the session belongs to, for ``recall(..., scope="user")`` across
                that user's sessions. A session keeps the user it was first opened with.
            create: Register the session if it is new (the default). False looks an existing
                session up without creating anything, for code that only reads: an unknown id
                is then a :class:`~pensive_core.errors.NotFoundError`.

        Returns:
            A :class:`~pensive_core.memory.Conversation`: ``add``, ``recall``, ``context``,
            ``history``, ``clear`` and more.

        Raises:
            InputError: On an empty or non-string id, namespace or user, or a user that
                contradicts the session's.
            NotFoundError: With ``create=False``, if there is no such session.
        """
        self._check_open()
        return self._memory.open(session_id, namespace=namespace, user=user, create=create)

    def conversations(self, namespace: str = "default", user: str | None = None) -> list[str]:
        """The session ids stored in ``namespace`` (of one user, if given), oldest first."""
        self._check_open()
        return self._memory.ids(namespace, user)

    # -- stats and lifecycle --------------------------------------------------------------------
    def stats(self, *, disk: bool = True) -> dict[str, Any]:
        """Counts, sizes and routing figures.

        Args:
            disk: Measure the store's size on disk (a walk of its folder); False leaves
                ``disk_bytes`` None, for a caller that asks often (a dashboard).

        Returns:
            Documents, passages, vectors, BM25 terms and segments, bytes on disk; ``queries``:
            per-tier counts, shares, latency percentiles and confidence histograms over the
            store's lifetime (every process; see :class:`~pensive_core.stats.RouterStats`);
            ``l1``: cache entries, hot set, hit rate, how keys matched, evictions and
            invalidations (None when the cache is off); ``l3``: escalations by reason;
            ``graph``: passages, entities and mentions in the entity graph (None when off);
            ``rerank``: reranker runs and failures (None when off).
        """
        self._check_open()
        return store_stats(self, disk=disk)

    # -- integrity ------------------------------------------------------------------------------
    def verify(self) -> dict[str, Any]:
        """Check every file of the store on disk as a new reader would (checksums against the
        manifests, SQLite's ``quick_check``, every archived body, the counts the archive, BM25
        and the vectors must agree on). Nothing is written.

        Returns:
            The report of :func:`~pensive_core.integrity.verify_store`: ``ok``, ``damaged``
            (each part, file and problem), ``counts``...
        """
        self._check_open()
        from .integrity import verify_store

        with self._comps.lock:
            return verify_store(self.path, self._given[0])

    def repair(self) -> dict[str, Any]:
        """Rebuild what :meth:`verify` finds damaged from the archive, then reopen this
        handle on the result (see :func:`~pensive_core.integrity.repair_store`: BM25 from the
        passages, the vectors from what the damaged index holds intact plus the passages it
        lost, embedded again; a damaged cache moved aside).

        Returns:
            What was done: ``rebuilt`` (parts), ``vectors_kept``, ``reindexed`` (documents
            embedded again), ``moved_aside``, ``documents_damaged`` (to ingest again),
            ``before`` and ``after`` (verify reports).

        Raises:
            StorageError: If the archive itself is damaged (restore it from a backup).
        """
        self._check_writable()
        from .integrity import repair_files, verify_store

        t0 = time.perf_counter()
        before = self.verify()
        if before["ok"]:
            return {"store": str(self.path), "before": before, "after": before, "rebuilt": []}
        embedder = self._comps.embedder.get() if self._comps.backend is not None else None
        self.close()
        out = repair_files(self.path, self._given[0])
        config, plugins = self._given
        if embedder is not None and plugins.embedder is None:
            plugins = dataclasses.replace(plugins, embedder=embedder)  # not loaded twice
        self._memory = Sessions(self)
        self._open(config, plugins)
        out["reindexed"] = self.recovered
        out["after"] = verify_store(self.path, config)
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out

    def close(self) -> None:
        """Persist and release everything; further calls raise."""
        if getattr(self, "_closed", True):
            return
        comps = self._comps
        try:
            with hooks.announce("close"), comps.lock:
                try:
                    self._memory.close()
                    if not self.read_only:
                        if not self._committer.abandoned:  # an abandoned change never commits
                            # where several processes write, a dirty mark may be a killed
                            # writer's: finished here, never cleared by this commit (a store
                            # moved away meanwhile takes no commit at all)
                            with (
                                comps.storage.writing(),
                                self._committer.abandoning(),
                                contextlib.suppress(ConfigError),
                            ):
                                self._committer.catch_up(self._ingest.run)
                                self._committer.commit()
                            if comps.graph_views is not None:  # read by the next process
                                with contextlib.suppress(Exception):
                                    comps.graph_views.save()
                        if comps.backend is not None:
                            comps.backend.close()
                    comps.stats.flush()
                finally:
                    # released whatever failed above: this process (or another) can reopen
                    comps.close()
                    self._closed = True
        except BaseException as exc:
            err = disk_error(exc, self.path, "close")
            if err is None:
                raise
            raise err from exc

    def __enter__(self) -> Pensive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Pensive({str(self.path)!r})"
