"""The ``Pensive`` store: ingest, hybrid query, archive expansion, persistence."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .archive import ARCHIVE_ONLY, INDEXED, Archive, metadata_json
from .backends.base import VectorBackend
from .backends.registry import create_backend
from .cache import Deps, EntryView, L1Cache, QueryKey, chunk_hashes, make_key
from .chunking import chunk_text, content_hash, split_sentences
from .config import STRUCTURAL_KEYS, PensiveConfig, get_key, load_config
from .context.base import ContextGenerator, ContextRequest, join_context
from .embedders.base import Embedder, QueryCache
from .embedders.registry import create_embedder
from .errors import BackendError, ConfigError, InputError, NotFoundError, PensiveError
from .filters import Filter, MetadataIndex, backend_metadata, canonical, parse_filter
from .fusion import Fused, fuse
from .graph import (
    SCHEMA_VERSION,
    ActivationConfig,
    BaseLevel,
    GraphStore,
    GraphView,
    Hebbian,
    LearningConfig,
    RuleExtractor,
    is_aggregation,
    normalize_entity,
    parse_aggregation,
    spread,
    top_chunks,
    transition,
)
from .loaders import iter_files, load_file
from .memory.manager import Sessions
from .router import RouterStats, confidence, exact_needles, fts_all, fts_any, missing_needles
from .sparse.bm25 import BM25Index
from .temporal import SCHEMA_VERSION as TEMPORAL_VERSION
from .temporal import (
    RuleStatementExtractor,
    TemporalKnobs,
    TemporalStore,
    TemporalView,
    TimeIntent,
    parse_intent,
    resolve,
    slot_key,
    supported,
)
from .timeutil import ensure_utc, from_iso, to_iso, utcnow
from .tokenize import Tokenizer
from .types import Aggregation, Chunk, Document, Hit, IngestReport, QueryResult, TimeScope
from .validate import MAX_K as _MAX_K
from .validate import MAX_QUERY_CHARS as _MAX_QUERY_CHARS
from .validate import validate_query as _validate_query

if TYPE_CHECKING:
    from .memory.conversation import Conversation

__all__ = ["Pensive"]

log = logging.getLogger(__name__)

_INGEST_BATCH = 256
# where ingest time goes, reported in IngestReport.stages
_STAGES = (
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
_FROM_ZERO = ("graph",)  # activation: 0 is "not reached", so the graph's list is scaled by its top
_WORDS_ONLY = re.compile(r"[^\w]+")  # whole words match whole words


def _padded(key: str) -> str:
    """An entity key as whole words between spaces, for :func:`_says_any`."""
    return f" {_WORDS_ONLY.sub(' ', key).strip()} "


def _says_any(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` says one of ``names`` (:func:`_padded` keys), word for word."""
    folded = f" {_WORDS_ONLY.sub(' ', normalize_entity(text))} "
    return any(n in folded for n in names)


def _looks_like_a_name(m: Any) -> bool:
    """A name a focused hop follows: a person, place, firm or title written as one ("Hana
    Kraind", "Quorbel"), not a date, quantity, code or acronym ("MODY", "rs1934179"), which
    unrelated passages share by coincidence."""
    if m.kind not in ("name", "title"):
        return False
    first = next((w for w in m.text.split() if w[:1].isalpha()), "")
    return first[:1].isupper() and any(c.islower() for c in first)


_L3_PASSAGES = 2  # archive passages an exact-string escalation adds to L2's answer


class _Answer(NamedTuple):
    hits: list[Hit]
    confidence: float
    tier: str
    deps: Deps
    scope: TimeScope | None = None
    relative: bool = False  # the question's time was relative ("last year"): depends on now


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

    Raises:
        ConfigError: On an unknown key or a value that contradicts how the store was built.
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
    ) -> None:
        self.path = Path(path).expanduser()
        self.read_only = bool(read_only)
        self._closed = True  # until everything below has opened
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"store path {self.path} exists and is not a folder")
        if self.read_only and not (self.path / "pensive.sqlite").is_file():
            raise NotFoundError(f"no Pensive store at {self.path} to open read-only")
        self.path.mkdir(parents=True, exist_ok=True)
        self._writer_lock = None if self.read_only else _lock_writer(self.path)
        self._lock = threading.RLock()
        self._embedder: Embedder | None = None
        self._llm = llm
        self._memory = Sessions(self)  # conversation sessions: nothing opens until one is asked
        self._backend: VectorBackend | None = None
        self._l1: L1Cache | None = None
        self._changed = False  # content changed since the last commit
        self._reset_changes()
        self._allowed_cache: dict[tuple[str, int], frozenset[str]] = {}
        self._filter_rows: tuple[int, MetadataIndex, np.ndarray, np.ndarray] | None = None
        self.l3_counts = {"exact": 0, "low_confidence": 0, "found": 0}
        self.l1_refreshed = 0
        try:
            self._archive = Archive(self.path / "pensive.sqlite")
        except BaseException:
            _unlock(self._writer_lock)
            raise
        try:
            saved = self._archive.get_meta("config")
            self.config: PensiveConfig = load_config(config, base=saved)
            if saved is not None:
                self._check_structural(saved)
            elif not self.read_only:
                self._archive.set_meta("config", self.config.model_dump())
            self._words = Tokenizer(stemmer="", stopwords=self.config.bm25.stopwords)
            self._commit_no = self._archive.commit_number()
            self._data_version = self._archive.data_version()
            self._load_indexes()
            self._stats = RouterStats(self._archive.db)
            self._graph: GraphStore | None = None
            self._extractor = RuleExtractor()  # no model: costs nothing until used
            self._agg_words: Tokenizer | None = None  # stemmed words of aggregation questions
            self._graph_view: (
                tuple[tuple[int, int], GraphView, Any, dict[str, int], ActivationConfig] | None
            ) = None
            built = self._archive.db.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'graph_chunks'"
            ).fetchone()
            if built and self._archive.get_meta("graph_version") != SCHEMA_VERSION:
                if self.read_only:  # built by another version: the writer rebuilds it
                    log.warning("the entity graph is from another version; open for writing")
                    built = None
                elif self.config.graph.enabled:
                    log.info("rebuilding the entity graph (built by another version)")
                    GraphStore.drop(self._archive.db)
                    built = None
            if self.config.graph.enabled and (built or not self.read_only):
                self._graph = GraphStore(
                    self._archive.db, self.config.graph.max_pair_entities, create=not built
                )
                if not self.read_only:
                    self._archive.set_meta("graph_version", SCHEMA_VERSION)
                    if not built or not self._level("graph_synced"):
                        self._sync_graph()
            self._temporal: TemporalStore | None = None
            self._tview: tuple[int, TemporalView] | None = None
            self._tsig: dict[str, tuple[str | None, ...]] | None = None  # see _commit
            self._statements = RuleStatementExtractor()
            self._intents: dict[str, TimeIntent | None] = {}
            if self.config.temporal.enabled:
                self._open_temporal()
            self._learn: tuple[BaseLevel, Hebbian] | None = None
            self._heb_version = 0  # bumped when learned edge weights change
            self._last_seeds: dict[int, float] = {}
            self._reach: tuple[GraphView, Any, Any] | None = None  # see _naming
            lc = self.config.graph.learning
            if self._graph is not None and lc.enabled:
                knobs = LearningConfig(**lc.model_dump(exclude={"deterministic"}))
                db, ro = self._archive.db, self.read_only
                self._learn = (
                    BaseLevel.from_config(knobs, db, read_only=ro),
                    Hebbian.from_config(knobs, db, read_only=ro),
                )
            if self.config.router.l1:
                r = self.config.router
                self._l1 = L1Cache(
                    self.path / "l1.sqlite", r.l1_capacity, r.l1_ttl_s, r.l1_hot, r.l1_fuzzy
                )
                if self._l1.commit != self._commit_no and not self.read_only:
                    # written before changes made with the cache off: nothing in it can be trusted
                    self._l1.invalidate_all(self._commit_no)
            self._contexts = self._open_contexts(llm, context_generator)
            if embedder is not None:
                if not isinstance(embedder, Embedder):
                    raise InputError(
                        f"embedder must implement pensive_core.embedders.Embedder, got "
                        f"{type(embedder).__name__}"
                    )
                self._share_embedder(embedder)
            self._closed = False
            if not self.read_only:
                self._recover()
        except BaseException:
            self._closed = True  # nothing half-open is left behind
            self._archive.close()
            if self._l1 is not None:
                self._l1.close()
            _unlock(self._writer_lock)
            raise

    def _load_indexes(self) -> None:
        # A reader may race the writer replacing index files: each load reads a manifest and
        # the files it names, and a file removed in between means a newer manifest exists.
        for attempt in range(50):
            try:
                self._bm25 = BM25Index(self.path / "bm25", self.config.bm25)
                self._backend = None
                dim = self._archive.get_meta("dim")
                if dim is not None:
                    self._open_backend(int(dim))
                return
            except (FileNotFoundError, ValueError, OSError):
                if not self.read_only or attempt == 49:
                    raise
                time.sleep(0.02)

    def _refresh(self) -> None:
        """Readers: reload the indexes when the writer has committed since the last query."""
        if not self.read_only:
            return
        version = self._archive.data_version()
        if version == self._data_version:
            return
        self._data_version = version
        commit = self._archive.commit_number()
        if commit != self._commit_no:
            saved = load_config(base=self._archive.get_meta("config"), environ={}).backend
            if (saved.name, saved.namespace) != (
                self.config.backend.name,
                self.config.backend.namespace,
            ):  # the writer moved the vectors to another backend (reindex): follow it
                self.config = self.config.model_copy(update={"backend": saved})
            self._load_indexes()
            self._commit_no = commit

    def _reset_changes(self) -> None:
        self._chg_docs: set[str] = set()  # documents replaced or deleted
        self._chg_removed: list[str] = []  # passages taken out of the indexes
        self._chg_added: list[str] = []  # passages put into the indexes
        self._chg_vectors: list[np.ndarray] = []  # their vectors
        self._chg_texts: list[str] = []  # texts of documents written (indexed or archive-only)
        graph: GraphStore | None = getattr(self, "_graph", None)  # None while opening
        if graph is not None:
            graph.touched_subjects.clear()
            graph.touched_names.clear()

    # -- setup --------------------------------------------------------------------------------
    def _check_structural(self, saved: Mapping[str, Any]) -> None:
        # the effective config is saved + given + environment, so a structural key differs
        # from the saved one exactly when the caller asked for a different value
        built = load_config(base=saved, environ={})
        for key in STRUCTURAL_KEYS:
            want, have = get_key(self.config, key), get_key(built, key)
            if want != have:
                raise ConfigError(
                    f"{key} = {want!r} does not match the store at {self.path}, which was built "
                    f"with {key} = {have!r}; open it without overriding {key}, or ingest into a "
                    "new folder"
                )

    def _get_embedder(self) -> Embedder:
        if self._embedder is None:
            made = create_embedder(self.config.embedder)
            if self.config.embedder.query_cache > 0:
                made = QueryCache(made, self.config.embedder.query_cache)
            self._share_embedder(made)
        assert self._embedder is not None
        return self._embedder

    def _share_embedder(self, embedder: Embedder) -> None:
        """Use an embedder already loaded (a conversation's store shares its owner's model)."""
        if self._embedder is not None:
            return
        saved = self._archive.get_meta("embedder")
        if saved is None:
            if not self.read_only:
                self._archive.set_meta("embedder", {"name": embedder.name, "dim": embedder.dim})
                self._archive.set_meta("dim", embedder.dim)
        elif saved["dim"] != embedder.dim:
            raise ConfigError(
                f"embedder {embedder.name!r} makes {embedder.dim}-d vectors but "
                f"the store at {self.path} holds {saved['dim']}-d vectors from "
                f"{saved['name']!r}"
            )
        self._embedder = embedder

    def _open_backend(self, dim: int) -> VectorBackend:
        if self._backend is None:
            name = self.config.backend.name
            options = getattr(self.config.backend, name, None)
            folder = self.path / (self._archive.get_meta("vectors_dir") or "vectors")
            self._backend = create_backend(name, folder, dim, options)
            if not self.read_only:
                self._archive.set_meta("backend", name)
        return self._backend

    @property
    def embedder(self) -> Embedder:
        """The store's embedder, loaded on first use (or the one given to the constructor)."""
        self._check_open()
        return self._get_embedder()

    @property
    def llm(self) -> Any:
        """The LLM given to the constructor (None when there is none)."""
        return self._llm

    @property
    def commit_number(self) -> int:
        """The store's commit number: it moves with every commit of any writer process (a
        reader sees the writer's at its next query)."""
        return self._commit_no

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

    # -- ingest -------------------------------------------------------------------------------
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
        if isinstance(documents, Document):
            documents = [documents]
        t0 = time.perf_counter()
        counts = {
            "added": 0,
            "updated": 0,
            "unchanged": 0,
            "embedded": 0,
            "reused": 0,
            "deleted": 0,
            "contexts": 0,
            "contexts_cached": 0,
            "contexts_fallback": 0,
            "llm_calls": 0,
        }
        stages: dict[str, float] = dict.fromkeys(_STAGES, 0.0)
        with self._lock:
            self._before_change()
            batch: dict[str, Document] = {}
            done = 0
            for doc in documents:
                if not isinstance(doc, Document):
                    raise InputError(
                        f"ingest() takes Document objects, got {type(doc).__name__}; "
                        "wrap text as Document(id=..., text=...)"
                    )
                batch[doc.id] = doc  # the same id twice in one call: the last one wins
                if len(batch) >= _INGEST_BATCH:
                    self._ingest_batch(list(batch.values()), counts, archive_only, stages)
                    done += len(batch)
                    batch = {}
                    if progress:
                        progress(done)
            if batch:
                self._ingest_batch(list(batch.values()), counts, archive_only, stages)
                done += len(batch)
                if progress:
                    progress(done)
            t_commit = time.perf_counter()
            self._commit()
            stages["commit"] = time.perf_counter() - t_commit
        return IngestReport(
            added=counts["added"],
            updated=counts["updated"],
            unchanged=counts["unchanged"],
            chunks_embedded=counts["embedded"],
            chunks_reused=counts["reused"],
            chunks_deleted=counts["deleted"],
            seconds=time.perf_counter() - t0,
            contexts=counts["contexts"],
            contexts_cached=counts["contexts_cached"],
            contexts_fallback=counts["contexts_fallback"],
            llm_calls=counts["llm_calls"],
            stages=stages,
        )

    def _ingest_batch(
        self,
        docs: list[Document],
        counts: dict[str, int],
        archive_only: bool = False,
        stages: dict[str, float] | None = None,
    ) -> None:
        stages = stages if stages is not None else dict.fromkeys(_STAGES, 0.0)
        clock = time.perf_counter
        embedder = self._get_embedder()
        backend = self._open_backend(embedder.dim)
        ccfg = self.config.chunking
        window = max(1, embedder.max_tokens - ccfg.reserve_tokens)
        window = min(ccfg.max_tokens or window, window)
        ns = self.config.backend.namespace
        plans: list[tuple[Document, str, list[Chunk]]] = []
        to_embed: list[Chunk] = []
        to_delete: list[str] = []
        meta_of: dict[str, dict[str, Any]] = {}  # what the backend stores beside each vector
        restamp: list[str] = []  # kept passages whose document's metadata changed
        # (document, hash, passages, its context generator, its stored fingerprint)
        todo: list[tuple[Document, str, list[Chunk], ContextGenerator | None, Any]] = []
        t = clock()
        for doc in docs:
            doc_hash = content_hash(doc.text)
            old = self._archive.fingerprint(doc.id)
            want = ARCHIVE_ONLY if archive_only else INDEXED
            gen = None if archive_only else self._context_for(doc)
            gen_name = gen.name if gen is not None else ""
            meta = metadata_json(doc.metadata)
            if old == (doc_hash, meta, to_iso(doc.timestamp), want, gen_name):
                counts["unchanged"] += 1
                continue
            chunks = chunk_text(
                doc.id,
                doc.text,
                max_tokens=window,
                count_tokens=embedder.count_tokens,
                min_tokens=ccfg.min_tokens,
                target_tokens=ccfg.target_tokens,
                method=ccfg.method,
                overlap=ccfg.overlap_sentences,
            )
            todo.append((doc, doc_hash, chunks, gen, old))
        t, stages["chunking"] = clock(), stages["chunking"] + clock() - t
        contexts, gen_of = self._make_contexts(
            [(d, h, c, g) for d, h, c, g, _ in todo], embedder, counts
        )
        t, stages["contexts"] = clock(), stages["contexts"] + clock() - t
        for doc, doc_hash, chunks, _, old in todo:
            # an interrupted ingest leaves indexed=0: then nothing stored can be trusted as
            # already embedded, and every passage is indexed again (upserts replace)
            trusted = bool(old and old[3] == INDEXED)
            old_ids = set(self._archive.chunk_ids(doc.id)) if old else set()
            old_ctx = self._archive.contexts(doc.id) if trusted else {}
            new_ids = set() if archive_only else {c.id for c in chunks}
            bmeta = backend_metadata(doc.metadata, doc.id)
            new_meta = old is not None and old[1] != metadata_json(doc.metadata)
            for c in [] if archive_only else chunks:
                meta_of[c.id] = bmeta
                # a passage is kept when its text and the context it was embedded with are
                # both unchanged
                if (
                    trusted
                    and c.id in old_ids
                    and c.id in self._bm25
                    and old_ctx.get(c.id, "") == contexts.get(c.id, "")
                ):
                    counts["reused"] += 1
                    if new_meta:
                        restamp.append(c.id)
                else:
                    to_embed.append(c)
            to_delete.extend(old_ids - new_ids)
            counts["updated" if old else "added"] += 1
            plans.append((doc, doc_hash, chunks))
            if old:
                self._chg_docs.add(doc.id)
            self._chg_texts.append(doc.text)
        if to_embed:
            texts = [join_context(contexts.get(c.id, ""), c.text) for c in to_embed]
            t = clock()
            vectors = embedder.embed(texts)
            t, stages["embedding"] = clock(), stages["embedding"] + clock() - t
            backend.upsert(
                [c.id for c in to_embed], vectors, [meta_of[c.id] for c in to_embed], namespace=ns
            )
            t, stages["vectors"] = clock(), stages["vectors"] + clock() - t
            for c, text in zip(to_embed, texts):
                self._bm25.add(c.id, text)
            stages["bm25"] += clock() - t
            counts["embedded"] += len(to_embed)
            self._chg_added.extend(c.id for c in to_embed)
            self._chg_vectors.append(np.asarray(vectors, dtype=np.float32))
        if restamp:  # same text, new metadata: the stored vectors are written back with it
            kept = backend.fetch(restamp, namespace=ns)
            if kept:
                ids = list(kept)
                vecs = np.stack([kept[i] for i in ids]).astype(np.float32)
                backend.upsert(ids, vecs, [meta_of[i] for i in ids], namespace=ns)
                # a filtered answer may now include them: for the cache they are new passages
                self._chg_added.extend(ids)
                self._chg_vectors.append(vecs)
        if to_delete:
            backend.delete(to_delete, namespace=ns)
            self._bm25.delete(to_delete)
            counts["deleted"] += len(to_delete)
            self._chg_removed.extend(to_delete)
        if plans:
            t = clock()
            self._archive.write(
                plans, archive_only=archive_only, contexts=contexts, context_gen=gen_of
            )
            t, stages["archive"] = clock(), stages["archive"] + clock() - t
            if self._graph is not None:
                for doc, _, chunks in plans:
                    self._graph.add_document(
                        doc.id,
                        [] if archive_only else [(c.id, c.ordinal, c.text) for c in chunks],
                        self._extractor,
                        doc.metadata.get("title"),
                    )
            t, stages["graph"] = clock(), stages["graph"] + clock() - t
            if self._temporal is not None:
                for doc, _, chunks in plans:
                    self._temporal.add_document(
                        doc.id,
                        [] if archive_only else [(c.id, c.text) for c in chunks],
                        doc.timestamp,
                        self._statements,
                        self.config.temporal.relative_dates,
                    )
            stages["temporal"] += clock() - t
        if plans or to_delete:
            self._changed = True

    # -- situating contexts ---------------------------------------------------------------------
    def _open_contexts(
        self, llm: Any, given: ContextGenerator | None
    ) -> dict[str, ContextGenerator | None]:
        """The context generators for prose and for records documents, as ``[context]`` says."""
        from .context.cache import ContextCache
        from .context.heuristic import HeuristicContextGenerator
        from .context.llm import LLMContextGenerator

        cfg = self.config.context
        if given is not None and not isinstance(given, ContextGenerator):
            raise InputError(
                f"context_generator must have a name and a generate(requests) method, got "
                f"{type(given).__name__}"
            )
        made: dict[str, ContextGenerator] = {}

        def cache() -> ContextCache | None:  # its table is made only when an LLM is in use
            return None if self.read_only else ContextCache(self._archive.db)

        def make(choice: str) -> ContextGenerator | None:
            if choice == "none":
                return None
            if choice == "heuristic" or (choice == "auto" and llm is None and given is None):
                return made.setdefault("heuristic", HeuristicContextGenerator())
            if given is not None:
                if getattr(given, "cache", False) is None and not self.read_only:
                    given.use_cache(cache())  # type: ignore[attr-defined]
                return given
            if llm is None:
                raise ConfigError(
                    "[context] asks for the 'llm' context generator but no LLM was given; "
                    "pass Pensive(path, llm=...) (a LlamaIndex LLM, a LangChain chat model or a "
                    'callable str -> str), or set generator = "heuristic"'
                )
            if "llm" not in made:
                made["llm"] = LLMContextGenerator(
                    llm,
                    cache=cache(),
                    concurrency=cfg.concurrency,
                    document_chars=cfg.document_chars,
                )
            return made["llm"]

        prose = make(cfg.generator)
        records = prose if cfg.records == "same" else make(cfg.records)
        return {"prose": prose, "records": records}

    def _context_for(self, doc: Document) -> ContextGenerator | None:
        prose, records = self._contexts["prose"], self._contexts["records"]
        if prose is records:
            return prose
        from .context.heuristic import is_records

        return records if is_records(doc) else prose

    def _make_contexts(
        self,
        todo: Sequence[tuple[Document, str, list[Chunk], ContextGenerator | None]],
        embedder: Embedder,
        counts: dict[str, int],
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Situating contexts of the passages of these documents, fitted to the window.

        Returns:
            ``(context by passage id, generator name by document id)``.
        """
        contexts: dict[str, str] = {}
        gen_of: dict[str, str] = {}
        groups: dict[int, tuple[ContextGenerator, list[ContextRequest]]] = {}
        for doc, doc_hash, chunks, gen in todo:
            if gen is None or not chunks:
                continue
            gen_of[doc.id] = gen.name
            groups.setdefault(id(gen), (gen, []))[1].append(ContextRequest(doc, chunks, doc_hash))
        for gen, requests in groups.values():
            before = dict(getattr(gen, "counts", {}))
            made = gen.generate(requests)
            if len(made) != len(requests) or any(
                len(m) != len(r.chunks) for m, r in zip(made, requests)
            ):
                raise PensiveError(
                    f"context generator {gen.name!r} returned the wrong number of contexts"
                )
            after = getattr(gen, "counts", {})
            for key, out in (
                ("cached", "contexts_cached"),
                ("fallback", "contexts_fallback"),
                ("llm_calls", "llm_calls"),
            ):
                counts[out] += int(after.get(key, 0)) - int(before.get(key, 0))
            for request, texts in zip(requests, made):
                for chunk, text in zip(request.chunks, texts):
                    contexts[chunk.id] = text
        fitted = self._fit_contexts(contexts, todo, embedder)
        counts["contexts"] += sum(1 for t in fitted.values() if t)
        return fitted, gen_of

    def _fit_contexts(
        self,
        contexts: dict[str, str],
        todo: Sequence[tuple[Document, str, list[Chunk], ContextGenerator | None]],
        embedder: Embedder,
    ) -> dict[str, str]:
        """Clip each context, at a word, so that it and its passage fit the embedder's window
        (and ``[context] max_tokens``): the passage is never what gets truncated."""
        cap = self.config.context.max_tokens
        room = {c.id: min(cap, embedder.max_tokens - c.tokens) for _, _, cs, _ in todo for c in cs}
        ids = [i for i, t in contexts.items() if t.strip()]
        out = {i: " ".join(contexts[i].split()) for i in ids}
        for _ in range(4):  # a few rounds of proportional cuts converge
            if not ids:
                break
            sizes = embedder.count_tokens([out[i] for i in ids])
            over = []
            for i, n in zip(ids, sizes):
                budget = max(0, room.get(i, cap))
                if n <= budget:
                    continue
                words = out[i].split()
                keep = min(len(words) - 1, int(len(words) * budget / max(n, 1)))
                out[i] = " ".join(words[: max(0, keep)])
                if out[i]:
                    over.append(i)
            ids = over
        return {i: t for i, t in out.items() if t}

    def _before_change(self) -> None:
        """Before content changes: know which passages are superseded now, so the commit can
        tell which ones it superseded (or freed) and drop the cached answers holding them.

        Also marks a change in flight in the archive (cleared when it commits): a store opened
        with the mark set reconciles its indexes with the archive (see :meth:`_recover`)."""
        self._archive.mark_dirty()
        if (
            self._temporal is not None
            and self._l1 is not None
            and self._tsig is None
            and self._l1.stats().get("entries")
        ):
            self._tsig = self._temporal.load().signature()

    def _commit(self) -> None:
        # The archive rows are written first with indexed=0, then the indexes are persisted,
        # then the rows are marked indexed. A crash in between leaves indexed=0 rows, which the
        # next open re-indexes from the archive; a passage the indexes know but the archive does
        # not is dropped at query time, never shown.
        self._bm25.commit()
        if self._backend is not None:
            self._backend.persist()
        if self._learn is not None and self._chg_removed:
            gone = list(self._chg_removed)  # passages that no longer exist have no history
            self._learn[0].forget(gone)
            self._learn[1].forget(gone)
            self._learn[1].prune(self._learn_now(False))
            self._heb_version += 1
        commit = self._archive.mark_indexed(self._changed)
        # the graph and statements were kept in step by this change: opening needs no scan
        for name, kept in (("graph_synced", self._graph), ("temporal_synced", self._temporal)):
            if kept is not None:
                self._archive.set_meta(name, commit)
        # the new commit number first: answers refreshed below must see this commit's graph
        # and filter caches (they are keyed by it), not the ones from before the ingest
        self._commit_no = commit
        if self._l1 is not None and self._changed:
            self._invalidate_l1(commit)
        self._changed = False
        self._reset_changes()

    def _invalidate_l1(self, commit: int) -> None:
        """Drop exactly the cached answers this commit could change (all, for a bulk change).

        An answer can change when: a document it returned was replaced or deleted; a passage in
        either of its candidate lists was removed; a new passage scores at or above the lowest
        score in its dense or BM25 candidate list (so it would enter the list, and fusion would
        see it); a new document contains an identifier, figure or quote the question asks for
        (the archive search would find it); or it came from the archive or was escalated for low
        confidence (archive searches depend on every document). A commit that changes more than
        ``router.l1_bulk_fraction`` of the passages, rebuilds BM25 segments (length norms of
        old passages move), or changes an HNSW index (an insert moves other queries' search
        paths) affects every entry.
        """
        assert self._l1 is not None
        router = self.config.router
        changed = len(self._chg_added) + len(self._chg_removed)
        # an approximate index (HNSW, IVF, a service's ANN): inserts move search paths; a
        # backend that does not say it is exact ("flat") is taken to be approximate
        approximate = getattr(self._backend, "kind", None) != "flat"
        approximate = approximate or not self._graph_is_local()
        bulk = changed > router.l1_bulk_fraction * max(1, self._bm25.n_live)
        if self._bm25.rebuilt or bulk or approximate:
            self._refresh_l1(self._l1.entries(), None, commit)  # every entry is affected
            return
        victims = self._l1.keys_for_docs(self._chg_docs)
        entries = self._l1.entries()
        victims.update(self._l1_affected([e for e in entries if e.key not in victims]))
        self._refresh_l1([e for e in entries if e.key in victims], victims, commit)

    def _refresh_l1(self, affected: list[EntryView], victims: set[str] | None, commit: int) -> None:
        """Drop the affected entries, then answer the most used of them again at once.

        Up to ``router.l1_refresh`` entries (most used first) are recomputed with their stored
        query vectors (no embedding) and stored under the new commit: popular questions stay
        cached through ingestion, with answers that reflect it.
        """
        assert self._l1 is not None
        self._l1.invalidate(victims, commit)
        budget = self.config.router.l1_refresh
        # a time budget too: a small ingest into a store with a warm cache must not hold the
        # writer for seconds answering hundreds of questions again (the rest are just dropped)
        deadline = time.perf_counter() + self.config.router.l1_refresh_ms / 1000.0
        settings = self._query_settings()
        dense = self.config.fusion.weights.get("dense", 0.0) > 0 and self._backend is not None
        for e in sorted(affected, key=lambda e: -e.freq):
            if budget <= 0 or time.perf_counter() > deadline:
                break
            qk = make_key(e.text, e.k, e.as_of, settings)
            if qk.scope != e.scope or (dense and e.deps.qvec is None):
                continue  # asked under other settings, or would need the embedder
            ans = self._answer(e.text, e.k, from_iso(e.as_of), {}, e.deps.qvec)
            self._l1.put(qk, ans.hits, ans.confidence, ans.tier, ans.deps, commit, e.freq)
            self.l1_refreshed += 1
            budget -= 1

    def _graph_is_local(self) -> bool:
        """Whether the graph's part of an answer can change only through passages it already
        depends on: off, or activation that only goes from candidate passages to the
        passages about the entities they name (the default; the focused hop also goes to the
        passages naming a rare name they name, and a commit touching such a name drops the
        answers whose candidates name it). Otherwise, spreading from the question's names or
        along every mention can reach anything."""
        if self._graph is None or self.config.graph.weight == 0:
            return True
        g = self.config.graph
        spreading = {name for name, w in g.edges.items() if w > 0}
        return g.query_entities == 0 and spreading <= {"mentions", "about"}

    def _l1_affected(self, entries: list[EntryView]) -> set[str]:
        removed_ids = list(self._chg_removed)
        if self._temporal is not None:
            # passages a new statement superseded, or whose superseder went: answers that
            # held them (or fused them) would now order differently
            removed_ids += self._superseded_changes()
        if self._graph is not None and self._graph.touched_subjects:
            # a document about an entity came or went: passages naming it now lead elsewhere
            removed_ids += self._graph.mentioning(self._graph.touched_subjects)
        g = self.config.graph
        names: list[str] = []
        if self._graph is not None and g.focus > 0 and self._graph.touched_names:
            # a passage naming a rare name came or went: the focused hop from any passage
            # naming it may now lead elsewhere, and a question saying it lists the passages
            # naming it (one more passage: it may have just become rare)
            rare = self._graph.rare(self._graph.touched_names, g.bridge_max + 1)
            removed_ids += self._graph.mentioning(rare)
            names = [_padded(k) for k in rare]
        removed = chunk_hashes(removed_ids)
        vectors = np.concatenate(self._chg_vectors) if self._chg_vectors else None
        texts = [t.casefold() for t in self._chg_texts]
        return {
            e.key
            for e in entries
            if self._could_change(e, removed, vectors, texts)
            or (names and _says_any(e.text, names))
        }

    def _could_change(
        self, e: EntryView, removed: np.ndarray, vectors: np.ndarray | None, texts: list[str]
    ) -> bool:
        d = e.deps
        if e.tier == "L3" or e.confidence < self.config.router.l3_below:
            return True  # archive searches depend on every document
        if len(removed) and np.isin(removed, d.cands).any():
            return True  # a candidate it was fused from is gone
        if texts and any(n in t for n in exact_needles(e.text) for t in texts):
            return True  # a new document holds what it asks for verbatim
        if self._order_could_change(d, self._bm25.idf_shift(e.text)):
            return True  # document frequencies moved enough to reorder its passages
        if not self._chg_added:
            return False
        # would a new passage enter either candidate list?
        if d.dense_floor == float("-inf") and self._backend is not None:
            return True  # the dense list was short: every new passage enters it
        if (
            vectors is not None
            and d.qvec is not None
            and len(vectors)
            and float(np.max(vectors @ d.qvec)) >= d.dense_floor
        ):
            return True
        scores = self._bm25.scores_for(e.text, self._chg_added)
        return any(s > 0 and s >= d.bm25_floor for s in scores.values())

    def _order_could_change(self, d: Deps, delta: float) -> bool:
        """Whether BM25 scores moving by up to ``delta`` could reorder a cached answer."""
        scores = np.asarray(d.bm25_scores, dtype=np.float64)
        if delta <= 0 or len(scores) < 2:
            return False  # one passage normalises to a constant whatever its score
        if d.method == "rrf":  # fused from ranks: any swap in the BM25 list counts
            return 2 * delta >= float(np.min(-np.diff(scores)))
        w = self.config.fusion.weights.get("bm25", 1.0)
        if d.method == "zscore":
            std = float(scores.std())
            zmax = float(np.max(np.abs(scores - scores.mean()))) / std if std > 0 else 0.0
            eps = w * (2 + zmax) * delta / max(std - delta, 1e-12)
        else:  # min-max normalised: every normalised score moves by at most this
            eps = w * 4 * delta / max(float(scores.max() - scores.min()) - 2 * delta, 1e-12)
        return 2 * eps >= d.fused_gap

    def _recover(self) -> int:
        """Finish what a killed process left half done; returns how many documents were
        indexed again.

        A change (ingest, replacement, delete) marks the archive dirty before it starts and
        its commit clears the mark, so a clean store costs one meta read here. A dirty one is
        reconciled (:meth:`_reconcile`); then documents left unconfirmed (indexed=0) are
        indexed again from the archive, and the commit persists it all and clears the mark.
        """
        dirty = self._archive.is_dirty()
        if dirty:
            self._reconcile()
        pending = self._archive.unindexed()
        if not pending:
            if dirty:
                self._commit()
            return 0
        log.warning("re-indexing %d document(s) left by an interrupted ingest", len(pending))
        docs = [d for d in (self._archive.document(i) for i in pending) if d is not None]
        self.ingest(docs)
        return len(docs)

    def _reconcile(self) -> None:
        """Bring BM25 and the vectors level with the archive after an interrupted change.

        Passages either index holds that no indexed or pending document lists (a delete or
        a replacement whose archive side committed before the index files did) are removed;
        a document whose passages either index lacks is marked pending, to be indexed again.
        Cached answers may name passages that are gone or hold what changed: all are dropped,
        and the commit number moves so readers reload.
        """
        listed = self._archive.index_chunks()
        ns = self.config.backend.namespace
        sparse = self._bm25.ids()
        gone = sparse - listed.keys()
        dense: set[str] = set()
        if self._backend is not None:
            lister = getattr(self._backend, "ids", None)
            if lister is not None:
                dense = lister(namespace=ns)
            else:  # a backend that cannot list its ids: ask for the ones that should be there
                want = sorted(listed)
                for i in range(0, len(want), 1000):
                    dense.update(self._backend.fetch(want[i : i + 1000], namespace=ns))
            gone |= dense - listed.keys()
            if gone:
                self._backend.delete(sorted(gone), namespace=ns)
        if gone:
            self._bm25.delete(sorted(gone))
            self._chg_removed.extend(sorted(gone))
        missing = {
            did
            for cid, (did, flag) in listed.items()
            if flag == INDEXED and (cid not in sparse or cid not in dense)
        }
        if missing:
            self._archive.mark_pending(missing)
        log.warning(
            "recovering from an interrupted change: %d stray passage(s) removed, %d document(s) "
            "to index again",
            len(gone),
            len(missing),
        )
        if self._l1 is not None:
            self._l1.invalidate_all(self._commit_no)
        self._changed = True

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
        if not paths:
            raise InputError("ingest_path() needs at least one file or folder")
        errors: list[tuple[str, str]] = []

        def docs() -> Iterable[Document]:
            for raw in paths:
                root = Path(raw).expanduser()
                for f in iter_files(root):
                    try:
                        for item in load_file(f, root):
                            if isinstance(item, InputError):
                                errors.append((str(f), str(item)))
                            else:
                                yield item
                    except (InputError, OSError) as exc:
                        errors.append((str(f), str(exc)))

        for raw in paths:
            if not Path(raw).expanduser().exists():
                raise InputError(f"no such file or folder: {raw}")
        report = self.ingest(docs(), progress=progress, archive_only=archive_only)
        return IngestReport(**{**report.__dict__, "errors": errors})

    # -- query --------------------------------------------------------------------------------
    def query(
        self,
        text: str,
        k: int = 5,
        *,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        context: Sequence[str] | None = None,
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

        Returns:
            The hits (best first), the tier that answered, a confidence in [0, 1], and latency.

        Raises:
            InputError: On an empty or over-long query, a bad ``k`` or a malformed filter.
        """
        self._check_open()
        if self._backend is not None:
            self._get_embedder()  # a one-off model load is not query latency
        t0 = time.perf_counter()
        text = _validate_query(text)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= _MAX_K:
            raise InputError(f"k must be an int between 1 and {_MAX_K}, got {k!r}")
        cutoff = ensure_utc(as_of)
        where = parse_filter(filters)
        context = _validate_context(context)
        learning = self._learn is not None  # answers change as they are used: not cached
        timings: dict[str, float] = {}
        with self._lock:
            self._refresh()
            qk: QueryKey | None = None
            l1 = self._l1
            if l1 is not None and l1.commit != self._commit_no:
                l1.sync()  # another process committed: catch up with its invalidations
            if l1 is not None and l1.commit == self._commit_no and not context and not learning:
                settings = self._query_settings()
                if where is not None:  # a filtered answer is another question's answer
                    settings = (*settings, canonical(where))
                qk = make_key(text, k, to_iso(cutoff), settings)
                cached = l1.get(qk)
                if cached is not None:
                    hits = list(cached.hits)  # immutable hits: shared, never copied
                    scope = None
                    if self._temporal is not None:
                        intent = self._intent(cached.source or text)  # a variant: its source's
                        scope = self._time_scope(intent, cutoff, hits)
                    res = QueryResult(
                        hits,
                        "L1",
                        cached.confidence,
                        _ms(t0),
                        text,
                        cached_from=cached.source,
                        time_scope=scope,
                    )
                    return self._record(res)
            # (after L1: the check costs more than a cache hit, and counts are never cached)
            if self._graph is not None and self.config.graph.aggregate and is_aggregation(text):
                counted = self._aggregate(text, cutoff, where, timings)
                if counted is not None:  # every occurrence, counted: never cached
                    hits, agg = counted
                    res = QueryResult(hits, "L2", 1.0, _ms(t0), text, timings, aggregation=agg)
                    return self._record(res)
            ans = self._answer(text, k, cutoff, timings, where=where, context=context)
            if learning and not self.read_only and ans.hits:
                self._learn_from(ans.hits)
            if qk is not None and l1 is not None and not ans.relative:
                l1.put(qk, ans.hits, ans.confidence, ans.tier, ans.deps, self._commit_no)
        res = QueryResult(
            ans.hits, ans.tier, ans.confidence, _ms(t0), text, timings, time_scope=ans.scope
        )
        return self._record(res)

    def _answer(
        self,
        text: str,
        k: int,
        cutoff: datetime | None,
        timings: dict[str, float],
        qvec: np.ndarray | None = None,
        where: Filter | None = None,
        context: Sequence[str] | None = None,
    ) -> _Answer:
        """L2, then L3 if called for: the answer to a question that L1 did not have."""
        fused: list[Fused] = []
        lists: dict[str, list[tuple[str, float]]] = {}
        allowed = None if where is None else self._allowed(where)
        intent = self._intent(text)
        if self._bm25.n_live and (allowed is None or allowed):
            # every indexed passage is in both indexes: no count asked of a remote backend
            fused, lists, qvec = self._retrieve(text, timings, qvec, where, allowed, context)
            fused = self._resolve_time(text, fused, intent, cutoff, timings)
            if allowed is not None:  # a surfaced statement must pass the filter too
                fused = [f for f in fused if f.id in allowed]
        t = time.perf_counter()
        hits = self._hits(fused, k, cutoff)
        timings["fetch_ms"] = _ms(t)
        conf = confidence(fused, lists)
        tier = "L2"
        escalated = self._escalate(text, hits, conf, k, cutoff, timings, allowed)
        if escalated is not None:
            hits, conf = escalated
            tier = "L3"
        deps = self._deps(hits, fused, lists, qvec) if self._l1 is not None else Deps()
        scope = self._time_scope(intent, cutoff, hits)
        return _Answer(hits, conf, tier, deps, scope, bool(intent and intent.relative))

    def _allowed(self, where: Filter) -> frozenset[str]:
        """Ids of the passages whose documents pass ``where`` (cached until the next commit)."""
        key = (canonical(where), self._commit_no)
        got = self._allowed_cache.get(key)
        if got is None:
            if self._filter_rows is None or self._filter_rows[0] != self._commit_no:
                doc_ids, metas, chunks = self._archive.filter_rows()
                pos = {d: i for i, d in enumerate(doc_ids)}
                index = MetadataIndex([backend_metadata(m, d) for d, m in zip(doc_ids, metas)])
                cids = np.array([c for c, _ in chunks], dtype=object)
                of_doc = np.array([pos[d] for _, d in chunks], dtype=np.int64)
                self._filter_rows = (self._commit_no, index, cids, of_doc)
            _, index, cids, of_doc = self._filter_rows
            got = frozenset(cids[index.mask(where)[of_doc]].tolist()) if len(cids) else frozenset()
            if len(self._allowed_cache) > 32:
                self._allowed_cache.clear()
            self._allowed_cache[key] = got
        return got

    def _query_settings(self) -> tuple[Any, ...]:
        # everything besides the question that changes the answer belongs in the cache key
        f, b, r = self.config.fusion, self.config.bm25, self.config.router
        return (
            (f.method, f.k, f.depth, tuple(sorted(f.weights.items()))),
            (b.method, b.k1, b.b, b.stemmer, b.stopwords),
            (r.l3_exact, r.l3_below),
            self._temporal_settings(),
        )

    def _temporal_settings(self) -> tuple[Any, ...]:
        if self._temporal is None:
            return ()
        t = self.config.temporal  # attribute reads: a model_dump costs an L1 hit its budget
        return (t.demote, t.surface, t.interval_gain, t.when_gain, t.slot_gain, t.question_dates)

    def _deps(
        self,
        hits: list[Hit],
        fused: list[Fused],
        lists: Mapping[str, list[tuple[str, float]]],
        qvec: np.ndarray | None,
    ) -> Deps:
        depth = self.config.fusion.depth
        dense, bm25 = lists.get("dense", []), lists.get("bm25", [])
        return Deps(
            docs=frozenset(h.doc_id for h in hits),
            qvec=None if qvec is None else np.asarray(qvec, dtype=np.float32),
            dense_floor=dense[-1][1] if len(dense) >= depth else float("-inf"),
            bm25_floor=bm25[-1][1] if len(bm25) >= depth else 0.0,
            cands=chunk_hashes({i for lst in lists.values() for i, _ in lst}),
            bm25_scores=np.asarray([sc for _, sc in bm25], dtype=np.float32),
            fused_gap=_min_gap([f.score for f in fused[: len(hits) + 1]]),
            method=self.config.fusion.method,
        )

    def _record(self, res: QueryResult) -> QueryResult:
        # under the lock: a flush writes to the connection an ingest may be writing to
        with self._lock:
            self._stats.record(res.tier, res.latency_ms, res.confidence)
        return res

    def _retrieve(
        self,
        text: str,
        timings: dict[str, float],
        qvec: np.ndarray | None = None,
        where: Filter | None = None,
        allowed: frozenset[str] | None = None,
        context: Sequence[str] | None = None,
    ) -> tuple[list[Fused], dict[str, list[tuple[str, float]]], np.ndarray | None]:
        cfg = self.config.fusion
        depth = cfg.depth
        lists: dict[str, list[tuple[str, float]]] = {}
        weights = {name: cfg.weights.get(name, 1.0) for name in ("dense", "bm25")}
        if weights["dense"] > 0 and self._backend is not None:
            if qvec is None:
                t = time.perf_counter()
                qvec = self._get_embedder().embed_query(text)
                timings["embed_ms"] = _ms(t)
            t = time.perf_counter()
            lists["dense"] = self._backend.search(
                qvec, depth, where=where, namespace=self.config.backend.namespace
            )
            timings["dense_ms"] = _ms(t)
        if weights["bm25"] > 0:
            t = time.perf_counter()
            lists["bm25"] = self._bm25.search(text, depth, allowed)
            timings["bm25_ms"] = _ms(t)
        t = time.perf_counter()
        fused = fuse(cfg.method, lists, weights, cfg.k)
        timings["fusion_ms"] = _ms(t)
        if self._graph is not None and self.config.graph.weight > 0:
            t = time.perf_counter()
            weights["graph"] = self.config.graph.weight
            seeds: dict[int, float] = {}
            ctx = self._context_activation(context) if context else None
            for _ in range(self.config.graph.cycles):
                # each cycle seeds from what the last one recalled
                graph_list, grown = self._activate(text, fused, depth, allowed, seeds, ctx)
                lists["graph"] = graph_list
                fused = fuse(cfg.method, lists, weights, cfg.k, _FROM_ZERO)
                if len(grown) == len(seeds):
                    break  # nothing new recalled: another cycle would change nothing
                seeds = grown
            self._last_seeds = seeds or grown
            timings["graph_ms"] = _ms(t)
        if self._learn is not None and fused:
            fused = self._boost_by_use(fused)
        return fused, lists, qvec

    # -- the entity graph ------------------------------------------------------------------
    def _level(self, key: str) -> bool:
        """Whether an index the archive feeds (graph, statements) was left level with it by
        the last commit: then opening skips the scan of every passage (seconds at 10M tokens).
        """
        return (
            self._archive.get_meta(key) == self._archive.commit_number()
            and not self._archive.is_dirty()
        )

    def _sync_graph(self) -> None:
        """Bring the graph level with the archive (it was off, or an ingest was cut short):
        documents whose passages differ are extracted again, vanished ones removed."""
        assert self._graph is not None
        db = self._archive.db
        want: dict[str, set[str]] = {}
        for cid, did in db.execute(
            "SELECT c.id, c.doc_id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.indexed = 1"
        ):
            want.setdefault(did, set()).add(cid)
        have: dict[str, set[str]] = {}
        for cid, did in db.execute("SELECT chunk_id, doc_id FROM graph_chunks"):
            have.setdefault(did, set()).add(cid)
        stale = [d for d in want if want[d] != have.get(d)]
        for did in set(have) - set(want):
            self._graph.remove_document(did)
        if stale:
            log.info("building the entity graph for %d document(s)", len(stale))
        for did in stale:
            passages = self._archive.doc_chunks(did)
            doc = self._archive.document(did)
            self._graph.add_document(
                did,
                [(cid, ordinal, text) for cid, ordinal, text in passages],
                self._extractor,
                None if doc is None else doc.metadata.get("title"),
            )
        self._archive.set_meta("graph_synced", self._archive.commit_number())

    # -- temporal resolution -----------------------------------------------------------------
    def _open_temporal(self) -> None:
        db = self._archive.db
        built = db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'temporal_statements'"
        ).fetchone()
        if self.read_only:
            if built and self._archive.get_meta("temporal_version") == TEMPORAL_VERSION:
                self._temporal = TemporalStore(db, create=False)
            elif built:
                log.warning("the temporal index is from another version; open for writing")
            return
        if built and self._archive.get_meta("temporal_version") != TEMPORAL_VERSION:
            log.info("rebuilding the temporal index (built by another version)")
            TemporalStore.drop(db)
            built = None
        self._temporal = TemporalStore(db)
        self._archive.set_meta("temporal_version", TEMPORAL_VERSION)
        if not built or not self._level("temporal_synced"):
            self._sync_temporal()

    def _sync_temporal(self) -> None:
        """Bring statements and dates level with the archive (temporal resolution was off, or
        the store predates it): documents whose passages differ are read again."""
        assert self._temporal is not None
        want: dict[str, set[str]] = {}
        for cid, did in self._archive.db.execute(
            "SELECT c.id, c.doc_id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.indexed = 1"
        ):
            want.setdefault(did, set()).add(cid)
        have = self._temporal.documents()
        for did in set(have) - set(want):
            self._temporal.remove_document(did)
        stale = [d for d in want if want[d] != have.get(d)]
        if stale:
            log.info("reading dates and statements of %d document(s)", len(stale))
        for did in stale:
            doc = self._archive.document(did)
            passages = [(cid, text) for cid, _, text in self._archive.doc_chunks(did)]
            self._temporal.add_document(
                did,
                passages,
                None if doc is None else doc.timestamp,
                self._statements,
                self.config.temporal.relative_dates,
            )
        self._archive.set_meta("temporal_synced", self._archive.commit_number())

    def _superseded_changes(self) -> list[str]:
        """Passages whose supersession this commit changed (compared with before it)."""
        before = self._tsig
        self._tview = None
        self._temporal_view()  # loads this commit's view and sets its signature
        after = self._tsig or {}
        if before is None:
            # nothing was cached when the change began (or the view was never loaded): every
            # passage that is superseded now counts as changed
            return [c for c, sig in after.items() if any(x is not None for x in sig)]
        return [c for c in set(before) | set(after) if before.get(c) != after.get(c)]

    def _temporal_view(self) -> TemporalView:
        """Statements with supersession computed, loaded once per commit."""
        assert self._temporal is not None
        if self._tview is None or self._tview[0] != self._commit_no:
            view = self._temporal.load()
            self._tview = (self._commit_no, view)
            self._tsig = view.signature()
        return self._tview[1]

    def _intent(self, text: str) -> TimeIntent | None:
        """The time the question asks about (relative phrases read against now); remembered
        per question, so an L1 answer does not parse it again."""
        if text in self._intents:
            return self._intents[text]
        intent = self._read_intent(text)
        if intent is None or not intent.relative:  # "last week" moves with the clock
            if len(self._intents) >= 8192:
                self._intents.clear()
            self._intents[text] = intent
        return intent

    def _read_intent(self, text: str) -> TimeIntent | None:
        if self._temporal is None:
            return None
        if self.config.temporal.question_dates:
            return parse_intent(text, utcnow())
        # dates in the question ignored: still tell "now" and "how did it change"
        intent = parse_intent(text, None)
        return intent if intent is not None and intent.start is intent.end is None else None

    def _time_scope(
        self, intent: TimeIntent | None, cutoff: datetime | None, hits: Sequence[Hit]
    ) -> TimeScope | None:
        if self._temporal is None or (intent is None and cutoff is None):
            return None
        n = supported(self._temporal_view(), [h.chunk_id for h in hits], intent, _at(cutoff))
        if cutoff is not None:
            return TimeScope("as_of", None, cutoff, "as_of", n)
        assert intent is not None
        return TimeScope(intent.kind, intent.start, intent.end, "question", n)

    def _resolve_time(
        self,
        text: str,
        fused: list[Fused],
        intent: TimeIntent | None,
        cutoff: datetime | None,
        timings: dict[str, float],
    ) -> list[Fused]:
        """Demote what does not hold at the time asked about, surface what does."""
        if self._temporal is None or not fused:
            return fused
        t = time.perf_counter()
        c = self.config.temporal
        knobs = TemporalKnobs(c.demote, c.surface, c.interval_gain, c.when_gain, c.slot_gain)
        depth = self.config.fusion.depth
        words = frozenset(slot_key(text).split())
        res = resolve(self._temporal_view(), fused[:depth], intent, _at(cutoff), knobs, words)
        timings["temporal_ms"] = _ms(t)
        return res.fused + fused[depth:]

    def _graph_state(self) -> tuple[GraphView, Any, dict[str, int], ActivationConfig]:
        """The loaded graph, its transition matrix, node index and activation settings,
        reloaded after each commit."""
        assert self._graph is not None
        if self._graph_view is None or self._graph_view[0][0] != self._commit_no:
            view = self._graph.load()
            cfg = self._activation_config()
            self._graph_view = ((self._commit_no, -1), view, None, view.index(), cfg)
        version, view, matrix, index, cfg = self._graph_view
        if version != (self._commit_no, self._heb_version):
            # the graph is loaded once per commit; learned weights only redo the matrix
            extra = None
            if self._learn is not None:  # edges that led to used passages weigh more
                extra = self._learn[1].as_matrix(index, len(view.nodes), self._learn_now(False))
            matrix = transition(view, cfg, extra)
            self._graph_view = ((self._commit_no, self._heb_version), view, matrix, index, cfg)
        return view, matrix, index, cfg

    # -- learning from use -------------------------------------------------------------------
    def _learn_now(self, tick: bool) -> float:
        """The learning clock: seconds of wall time, or with ``deterministic`` a count of
        learning steps (``tick`` advances it), never going back."""
        if self.config.graph.learning.deterministic:
            n = float(self._archive.get_meta("learning_clock") or 0)
            if tick and not self.read_only:
                n += 1
                self._archive.set_meta("learning_clock", n)
            return n
        now = max(time.time(), getattr(self, "_learn_last", 0.0))
        self._learn_last = now
        return now

    def _boost_by_use(self, fused: list[Fused]) -> list[Fused]:
        """Raise passages used often and lately (ACT-R base level); never lowers a score."""
        assert self._learn is not None
        boosted = self._learn[0].boost([(f.id, f.score) for f in fused], self._learn_now(False))
        ranks = {f.id: f.ranks for f in fused}
        return [Fused(c, sc, ranks[c]) for c, sc in boosted]

    def _learn_from(self, hits: list[Hit]) -> None:
        """Returned passages count as used; the graph edges that led to them strengthen."""
        assert self._learn is not None and self._graph is not None
        base, hebbian = self._learn
        try:
            now = self._learn_now(True)
            base.use([h.chunk_id for h in hits], now)
            view, _, index, _ = self._graph_state()
            reach = self._naming(view)[1]
            mentions = view.edges["mentions"]
            seeds = [s for s in self._last_seeds if s < view.n_chunks]
            paths: list[tuple[str, str]] = []
            for h in hits:
                row = index.get(h.chunk_id)
                if "graph" not in h.sources or row is None:
                    continue
                into = set(reach.getcol(row).indices.tolist())  # entities leading to it
                for s in seeds:
                    for e in sorted(into & set(mentions.getrow(s).indices.tolist())):
                        paths += [(view.nodes[s], view.nodes[e]), (view.nodes[e], h.chunk_id)]
            if paths and hebbian.strengthen(paths, now=now):
                self._heb_version += 1
        except InputError as e:  # a clock another process moved ahead: skip this once
            log.debug("learning skipped: %s", e)

    def _activation_config(self) -> ActivationConfig:
        g = self.config.graph
        return ActivationConfig(
            decay=g.decay,
            hops=g.hops,
            threshold=g.threshold,
            convergence=g.convergence,
            edge_weights=dict(g.edges),
            type_weights={"chunk": 1.0, "entity": g.entity_weight, "type": 0.0},
        )

    def _question_seeds(
        self, text: str, index: Mapping[str, int], weight: float
    ) -> dict[int, float]:
        """Entity nodes whose names ``text`` says (runs of up to four words), at ``weight``."""
        seeds: dict[int, float] = {}
        words = normalize_entity(text).split() if weight > 0 else []
        for n in range(1, min(4, len(words)) + 1):
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i : i + n]).strip('.,;:!?"()')
                gram = gram.removesuffix("'s").removesuffix("\u2019s")  # "Hana Kraind's"
                row = index.get("e:" + gram)
                if row is not None and (n > 1 or gram not in self._words._stop):
                    seeds[row] = weight
        return seeds

    def _context_activation(self, context: Sequence[str]) -> np.ndarray | None:
        """Activation spread from the entities the context (recent turns, say) names, scaled
        to a maximum of 1; None when it names none the graph knows."""
        view, matrix, index, act_cfg = self._graph_state()
        seeds: dict[int, float] = {}
        for piece in context:
            seeds.update(self._question_seeds(piece, index, 1.0))
        if not seeds:
            return None
        act = spread(view, seeds, act_cfg, matrix)
        top = float(act.max())
        return act / top if top > 0 else None

    def _activate(
        self,
        text: str,
        fused: list[Fused],
        depth: int,
        allowed: frozenset[str] | None,
        seeds: Mapping[int, float],
        context: np.ndarray | None = None,
    ) -> tuple[list[tuple[str, float]], dict[int, float]]:
        """Passages the graph reaches from the question's entities and L2's top passages not
        yet seeds; returns them ranked, and the seeds used."""
        view, matrix, index, act_cfg = self._graph_state()
        g = self.config.graph
        grown = dict(seeds) or self._question_seeds(text, index, g.query_entities)
        new = [f for f in fused if f.id in index and index[f.id] not in grown][: g.seed_hits]
        if new and fused[0].score > 0:
            for f in new:
                row = index[f.id]
                grown[row] = max(grown.get(row, 0.0), max(0.0, f.score / fused[0].score))
        focus: dict[int, float] = {}
        direct: list[int] = []
        if fused and fused[0].score > 0 and g.focus > 0:
            said = self._names_said(text, index, view)
            read = [
                (f.id, f.score / fused[0].score)
                for f in [f for f in fused if f.id in index][: max(g.seed_hits, g.focus_hits)]
            ]
            # a rare name the question says: the few passages naming it are read too, and
            # listed, whatever L2 made of them (a short fact in a long passage ranks low)
            naming = view.edges["mentioned_in"]
            for n in said:
                rows = naming.indices[naming.indptr[n] : naming.indptr[n + 1]]
                if len(rows) <= g.bridge_max:
                    direct += [int(r) for r in rows if r < view.n_chunks and r not in grown]
            read += [(view.nodes[r], 1.0) for r in direct]
            names, sources = self._focus_seeds(text, read, index, view, said)
            focus = {row: g.focus * w for row, w in names.items() if row not in grown}
        if not grown and not focus:
            return [], grown
        # a seed passage L2 already found scores only by what other seeds spread to it
        act = spread(view, grown, act_cfg, matrix, include_seeds=False)
        if focus:
            seeds_l2 = {r for r in grown if r < view.n_chunks}
            reached = self._focused_hop(view, focus, sources, seeds_l2)
            act = 1.0 - (1.0 - act) * (1.0 - reached)
            grown.update(focus)
        if direct:
            act[direct] = np.maximum(act[direct], g.focus * act_cfg.decay)
        if context is not None:
            # where the context's activation meets the question's, raise it (never lower it)
            act = act * (1.0 + g.context_gain * context)
        ranked = top_chunks(view, act, depth if allowed is None else 10 * depth)
        if allowed is not None:
            ranked = [(c, s) for c, s in ranked if c in allowed][:depth]
        return ranked, grown

    def _focused_hop(
        self,
        view: GraphView,
        focus: Mapping[int, float],
        sources: Mapping[int, set[int]],
        seeds: set[int],
    ) -> np.ndarray:
        """One hop from each focused name to the *other* passages it leads to (not the ones it
        was read in, ``sources``, nor L2's ``seeds``): those about it or, when no document is
        about it and at most ``bridge_max`` passages name it, those naming it (at ``bridge``).
        Each gets ``decay x`` the name's weight, shared among them; arrivals combine as
        ``1 - prod(1 - a)``."""
        g = self.config.graph
        about, naming = view.edges["about"], view.edges["mentioned_in"]
        miss = np.ones(len(view.nodes), dtype=np.float64)
        for n, w in focus.items():
            to = about.indices[about.indptr[n] : about.indptr[n + 1]]
            share = 1.0
            if not len(to) and g.bridge > 0:
                named = naming.indices[naming.indptr[n] : naming.indptr[n + 1]]
                if 2 <= len(named) <= g.bridge_max:
                    to, share = named, g.bridge
            skip = seeds | sources.get(n, set())
            to = [int(t) for t in to if t < view.n_chunks and int(t) not in skip]
            if to:
                a = min(1.0, g.decay * w * share / len(to))
                miss[to] *= 1.0 - a
        return 1.0 - miss

    def _names_said(self, text: str, index: Mapping[str, int], view: GraphView) -> set[int]:
        """Entity nodes the question names as names: written with capitals or digits past its
        first word ("the Quorbel project", "ticket 4471"), not common words the graph knows."""
        marked = {
            w.casefold()
            for w in _WORDS_ONLY.split(text)[1:]
            if w.lower() != w or any(c.isdigit() for c in w)
        }
        return {
            n
            for n in self._question_seeds(text, index, 1.0)
            if marked & set(_WORDS_ONLY.split(view.nodes[n][2:]))
        }

    def _focus_seeds(
        self,
        text: str,
        seeds: Sequence[tuple[str, float]],
        index: Mapping[str, int],
        view: GraphView,
        said: set[int],
    ) -> tuple[dict[int, float], dict[int, set[int]]]:
        """The names a reader would look up next: in each ``(passage id, weight)`` of
        ``seeds``, the sentences that name something the question names (``said``) and, of
        those, share the most words with it; the other names there, written as names, as
        entity nodes at the passage's weight (the best over passages), with the passages each
        was read in. "The leader of the Quorbel project" -> "Quorbel is led by Hana Kraind"
        -> Hana Kraind."""
        asked = set(self._words.tokenize(text))
        if not said or not asked:
            return {}, {}
        said_keys = [_padded(view.nodes[n][2:]) for n in said]
        rows = self._archive.chunks([cid for cid, _ in seeds])
        out: dict[int, float] = {}
        read_in: dict[int, set[int]] = {}
        for cid, weight in seeds:
            row = rows.get(cid)
            if row is None:
                continue
            found: list[tuple[int, list[int]]] = []
            for a, b, _ in split_sentences(row.text):
                sentence = row.text[a:b]
                if not _says_any(sentence, said_keys):
                    continue  # cannot name what the question names (extracting costs more)
                mentions = [(index.get("e:" + m.key), m) for m in self._extractor.extract(sentence)]
                if any(n in said for n, _ in mentions):
                    n_words = len(asked & set(self._words.tokenize(sentence)))
                    names = [
                        n
                        for n, m in mentions
                        if n is not None and n not in said and _looks_like_a_name(m)
                    ]
                    found.append((n_words, names))
            best = max((n for n, _ in found), default=0)
            for n_words, nodes in found:
                if n_words == best:
                    for node in nodes:
                        out[node] = max(out.get(node, 0.0), max(0.0, weight))
                        read_in.setdefault(node, set()).add(index[cid])
        return out, read_in

    def _naming(self, view: GraphView) -> tuple[Any, Any]:
        """Entity -> the passages naming it or about it, as CSR (rows: an entity's passages)
        and CSC (columns: a passage's entities), made once per loaded graph."""
        if self._reach is None or self._reach[0] is not view:
            linked = (view.edges["mentioned_in"] + view.edges["about"]).tocsr()
            self._reach = (view, linked, linked.tocsc())
        return self._reach[1], self._reach[2]

    def _aggregate(
        self,
        text: str,
        cutoff: datetime | None,
        where: Filter | None,
        timings: dict[str, float],
    ) -> tuple[list[Hit], Aggregation] | None:
        """Every passage naming the entities an aggregation question names, oldest first,
        with their count; None when the question names no entity the graph knows."""
        t = time.perf_counter()
        view, _, index, _ = self._graph_state()
        if self._agg_words is None:
            self._agg_words = Tokenizer(self.config.bm25.stemmer, self.config.bm25.stopwords)
        words = self._agg_words
        ask = parse_aggregation(
            text, lambda key: "e:" + key in index, words.tokenize, self._words._stop
        )
        if ask is None:
            return None
        linked = self._naming(view)[0]
        found: set[int] | None = None
        for key in ask.entities:
            row = linked.getrow(index["e:" + key])
            cols = set(row.indices[row.data > 0].tolist())
            found = cols if found is None else found & cols
        ids = sorted(view.nodes[i] for i in found or ())
        if where is not None:
            allowed = self._allowed(where)
            ids = [c for c in ids if c in allowed]
        rows = self._archive.chunks(ids)
        kept = []
        for cid in ids:
            row = rows.get(cid)
            if row is None or row.archive_only:
                continue
            if cutoff is not None and row.timestamp is not None and row.timestamp > cutoff:
                continue
            if ask.terms and not set(ask.terms) <= set(words.tokenize(row.text)):
                continue
            kept.append(row)
        never = datetime.max.replace(tzinfo=timezone.utc)
        kept.sort(key=lambda r: (r.timestamp or never, r.doc_id, r.ordinal))
        mentions = view.edges["mentions"]
        total = 0
        for r in kept:
            i = index[r.id]
            total += int(sum(mentions[i, index["e:" + key]] for key in ask.entities))
        limit = self.config.graph.aggregate_limit
        hits = [
            Hit(
                doc_id=r.doc_id,
                chunk_id=r.id,
                text=r.text,
                score=1.0,
                metadata=r.metadata,
                timestamp=r.timestamp,
                sources={"graph": n},
            )
            for n, r in enumerate(kept[:limit], start=1)
        ]
        agg = Aggregation(
            entities=ask.entities,
            terms=ask.terms,
            count=len(kept),
            documents=len({r.doc_id for r in kept}),
            mentions=total,
            truncated=len(kept) > limit,
        )
        timings["aggregate_ms"] = _ms(t)
        return hits, agg

    def _escalate(
        self,
        text: str,
        hits: list[Hit],
        conf: float,
        k: int,
        cutoff: datetime | None,
        timings: dict[str, float],
        allowed: frozenset[str] | None = None,
    ) -> tuple[list[Hit], float] | None:
        """L3: search whole archived documents when L2 lacks what was asked or is unsure."""
        router = self.config.router
        missing = missing_needles(exact_needles(text), hits) if router.l3_exact else []
        low = not hits or conf < router.l3_below
        if not missing and not low:
            return None
        t = time.perf_counter()
        words = self._words.tokenize(text)
        limit = k if allowed is None else 10 * k  # room for documents the filter removes
        if missing:
            self.l3_counts["exact"] += 1
            # documents holding every missing string, ranked by BM25 over the whole question
            # (the needles are among the words, so no needle-holding document is excluded)
            rank_by = f" AND ({fts_any(words)})" if words else ""
            found = self._archive.search_documents(fts_all(missing) + rank_by, limit)
            if not found and len(missing) > 1:
                found = self._archive.search_documents(f"({fts_any(missing)}){rank_by}", limit)
        else:
            self.l3_counts["low_confidence"] += 1
            found = self._archive.search_documents(fts_any(words), limit) if words else []
        l3: list[Hit] = []
        for doc_id, score in found:
            hit = self._archive_hit(doc_id, score, len(l3) + 1, missing, words, cutoff)
            if hit is not None and (allowed is None or hit.chunk_id in allowed):
                l3.append(hit)
                if len(l3) == k:
                    break
        timings["l3_ms"] = _ms(t)
        if not l3:
            return None
        self.l3_counts["found"] += 1
        l2 = {h.chunk_id: h for h in hits}
        # a passage both tiers found keeps the archive's expanded text and both sets of ranks
        l3 = [_with_sources(h, l2[h.chunk_id].sources) if h.chunk_id in l2 else h for h in l3]
        if missing:
            # the archive's best passages holding what was asked: first when L2 was unsure,
            # after L2's top passage when it was confident (a confident L2 answer usually
            # names the thing differently: SciFact, benchmarks/results/tune_router.md)
            lead = l3[:_L3_PASSAGES]
            seen = {h.chunk_id for h in lead}
            rest = [h for h in hits if h.chunk_id not in seen]
            at = 0 if conf < router.l3_first_below else 1
            merged = (rest[:at] + lead + rest[at:])[:k]
            verified = not missing_needles(missing, lead[:1])
            return merged, max(conf, 0.9 if verified else 0.6)
        # low confidence: interleave by reciprocal rank; agreement on the top raises confidence
        rrf: dict[str, float] = {}
        by_id = {h.chunk_id: h for h in hits} | {h.chunk_id: h for h in l3}
        for lst in (hits, l3):
            for r, h in enumerate(lst, 1):
                rrf[h.chunk_id] = rrf.get(h.chunk_id, 0.0) + 1.0 / (60 + r)
        order = sorted(rrf, key=lambda c: -rrf[c])[:k]
        agree = bool(hits) and hits[0].doc_id in {h.doc_id for h in l3[:3]}
        return [by_id[c] for c in order], min(1.0, conf + 0.25) if agree else conf

    def _archive_hit(
        self,
        doc_id: str,
        score: float,
        rank: int,
        needles: list[str],
        words: list[str],
        cutoff: datetime | None,
    ) -> Hit | None:
        """The passage of an archived document that holds what was asked, with its neighbours."""
        passages = self._archive.doc_chunks(doc_id)
        if not passages:
            return None
        folded = [unicodedata.normalize("NFKC", t).casefold() for _, _, t in passages]

        def fit(i: int) -> tuple[int, int]:
            exact = sum(1 for n in needles if n in folded[i])
            return exact, sum(1 for w in words if w in folded[i])

        best = max(range(len(passages)), key=fit)
        cid = passages[best][0]
        row = self._archive.chunks([cid]).get(cid)
        if row is None or (cutoff is not None and row.timestamp and row.timestamp > cutoff):
            return None
        doc = self._archive.document(doc_id)
        text = self._window(doc, row.ordinal, 1) if doc is not None else row.text
        return Hit(doc_id, cid, text, score, row.metadata, row.timestamp, {"archive": rank})

    def _hits(self, fused: list[Fused], k: int, cutoff: datetime | None) -> list[Hit]:
        hits: list[Hit] = []
        view = self._temporal_view() if self._temporal is not None else None
        start = 0
        while len(hits) < k and start < len(fused):
            # usually the first k fused ids all qualify; fetch more only when some did not
            window = fused[start : start + (k - len(hits)) + (k if cutoff is not None else 0)]
            start += len(window)
            rows = self._archive.chunks(f.id for f in window)
            for f in window:
                row = rows.get(f.id)
                if row is None or row.archive_only:
                    continue  # indexed but not archived (an interrupted ingest): never shown
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

    # -- archive (L3) -------------------------------------------------------------------------
    def get(self, doc_id: str) -> Document:
        """Return a stored document whole, from the archive.

        Raises:
            NotFoundError: If no document has that id.
        """
        self._check_open()
        doc = self._archive.document(doc_id)
        if doc is None:
            raise NotFoundError(f"no document with id {doc_id!r} in {self.path}")
        return doc

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
        if self._temporal is None:
            raise PensiveError("temporal resolution is off: open the store with temporal.enabled")
        cid = hit.chunk_id if isinstance(hit, Hit) else str(hit)
        with self._lock:
            self._refresh()
            view = self._temporal_view()
            info = view.chunks.get(cid)
            if info is None or not info.statements:
                return []
            members = sorted(
                {j for i in info.statements for j in view.chains[view.rows[i].chain]},
                key=lambda j: (view.rows[j].t if view.rows[j].t is not None else float("inf"), j),
            )
            ids = list(dict.fromkeys(view.rows[j].chunk for j in members))
            rows = self._archive.chunks(ids)
            out = []
            for n, c in enumerate(ids, start=1):
                row = rows.get(c)
                if row is None:
                    continue
                vf, vt, by = view.validity(c)
                out.append(
                    Hit(
                        row.doc_id,
                        c,
                        row.text,
                        0.0,
                        row.metadata,
                        row.timestamp,
                        sources={"temporal": n},
                        valid_from=vf,
                        valid_to=vt,
                        superseded_by=by,
                    )
                )
            return out

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
        row = self._archive.chunks([hit.chunk_id]).get(hit.chunk_id)
        if row is None:
            raise NotFoundError(f"passage {hit.chunk_id!r} is no longer stored (re-ingested?)")
        return self._window(doc, row.ordinal, max(0, int(window)))

    def _window(self, doc: Document, ordinal: int, window: int) -> str:
        """The document's text from ``window`` passages before ``ordinal`` to as many after."""
        spans = self._archive.neighbours(doc.id, ordinal, window)
        return doc.text[spans[0][1] : spans[-1][2]] if spans else doc.text

    # -- moving the vectors --------------------------------------------------------------------
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
        t0 = time.perf_counter()
        with self._lock:
            old_cfg = self.config.backend
            raw = self.config.model_dump()
            raw["backend"]["name"] = to
            if namespace is not None:
                raw["backend"]["namespace"] = namespace
            if options:
                section = raw["backend"].get(to)
                if not isinstance(section, dict):
                    raise ConfigError(f"backend {to!r} has no [backend.{to}] section to set")
                section.update(options)
            new_cfg = load_config(raw, environ={})
            ns_old, ns_new = old_cfg.namespace, new_cfg.backend.namespace
            dim = self._archive.get_meta("dim")
            n = 1
            while (self.path / f"vectors.{n}").exists():
                n += 1
            folder_name = f"vectors.{n}"
            report: dict[str, Any] = {"from": old_cfg.name, "to": to, "vectors": 0, "embedded": 0}
            dest = None
            if dim is not None:
                dest = create_backend(
                    to, self.path / folder_name, int(dim), getattr(new_cfg.backend, to, None)
                )
                try:
                    report.update(self._copy_vectors(dest, ns_old, ns_new, batch_size))
                    self._verify_count(dest, ns_new, report["vectors"], verify_timeout_s)
                except BaseException:
                    dest.close()
                    if (self.path / folder_name).exists():
                        shutil.rmtree(self.path / folder_name, ignore_errors=True)
                    raise
            old_folder = self.path / (self._archive.get_meta("vectors_dir") or "vectors")
            self._archive.set_meta("config", new_cfg.model_dump())
            self._archive.set_meta("backend", to)
            self._archive.set_meta("vectors_dir", folder_name)
            if self._backend is not None:
                self._backend.close()
            self._backend = dest
            self.config = self.config.model_copy(update={"backend": new_cfg.backend})
            self._changed = True
            self._commit()
            if self._l1 is not None:  # another index can order near-ties differently
                self._l1.invalidate_all(self._commit_no)
            if old_folder.exists():
                shutil.rmtree(old_folder, ignore_errors=True)
        report["seconds"] = round(time.perf_counter() - t0, 3)
        log.info("reindexed %s", report)
        return report

    def _copy_vectors(
        self, dest: VectorBackend, ns_old: str, ns_new: str, batch_size: int
    ) -> dict[str, int]:
        already = dest.count(namespace=ns_new)
        if already:
            raise BackendError(
                f"the {dest.name} backend already holds {already} vectors in namespace "
                f"{ns_new!r}; reindex into an empty namespace (namespace=...) or empty it first"
            )
        rows = self._archive.db.execute(
            "SELECT c.id, c.doc_id, c.text, d.metadata, c.context FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE d.indexed = 1 "
            "ORDER BY c.doc_id, c.ordinal"
        ).fetchall()
        moved = embedded = 0
        src = self._backend
        for i in range(0, len(rows), max(1, batch_size)):
            part = rows[i : i + batch_size]
            ids = [r[0] for r in part]
            got = src.fetch(ids, namespace=ns_old) if src is not None else {}
            lost = [r for r in part if r[0] not in got]
            if lost:  # the old index lacks them (e.g. it was emptied): embed just those
                vecs = self._get_embedder().embed([join_context(r[4], r[2]) for r in lost])
                got.update(zip((r[0] for r in lost), np.asarray(vecs, dtype=np.float32)))
                embedded += len(lost)
            dest.upsert(
                ids,
                np.stack([got[c] for c in ids]).astype(np.float32),
                [backend_metadata(json.loads(r[3]), r[1]) for r in part],
                namespace=ns_new,
            )
            moved += len(ids)
        dest.persist()
        return {"vectors": moved, "embedded": embedded}

    @staticmethod
    def _verify_count(dest: VectorBackend, namespace: str, want: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            have = dest.count(namespace=namespace)
            if have == want:
                return
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"reindex: the {dest.name} backend holds {have} vectors in namespace "
                    f"{namespace!r}, expected {want}; the store stays on its old backend"
                )
            time.sleep(0.5)

    # -- delete, stats, lifecycle -------------------------------------------------------------
    def delete(self, doc_id: str) -> int:
        """Delete a document and all its passages.

        Returns:
            The number of passages removed.

        Raises:
            NotFoundError: If no document has that id.
        """
        self._check_writable()
        with self._lock:
            if self._archive.fingerprint(doc_id) is None:
                raise NotFoundError(f"no document with id {doc_id!r} in {self.path}")
            self._before_change()
            ids = self._archive.delete(doc_id)
            self._changed = True
            self._chg_docs.add(doc_id)
            self._chg_removed.extend(ids)
            if self._backend is not None:
                self._backend.delete(ids, namespace=self.config.backend.namespace)
            self._bm25.delete(ids)
            if self._graph is not None:
                self._graph.remove_document(doc_id)
            if self._temporal is not None:
                self._temporal.remove_document(doc_id)
            self._commit()
        return len(ids)

    # -- conversation memory ----------------------------------------------------------------
    def conversation(
        self, session_id: str, *, namespace: str = "default", user: str | None = None
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

        Returns:
            A :class:`~pensive_core.memory.Conversation`: ``add``, ``recall``, ``context``,
            ``history``, ``clear`` and more.

        Raises:
            InputError: On an empty or non-string id, namespace or user, or a user that
                contradicts the session's.
        """
        self._check_open()
        return self._memory.open(session_id, namespace=namespace, user=user)

    def conversations(self, namespace: str = "default", user: str | None = None) -> list[str]:
        """The session ids stored in ``namespace`` (of one user, if given), oldest first."""
        self._check_open()
        return self._memory.ids(namespace, user)

    def stats(self, *, disk: bool = True) -> dict[str, Any]:
        """Counts, sizes and routing figures.

        Args:
            disk: Measure the store's size on disk (a walk of its folder); False leaves
                ``disk_bytes`` None, for a caller that asks often (a dashboard).

        Returns:
            Documents, passages, vectors, BM25 terms and segments, bytes on disk; ``queries``:
            per-tier counts, shares, latency percentiles and confidence histograms over the
            store's lifetime (every process; see :class:`~pensive_core.router.RouterStats`);
            ``l1``: cache entries, hot set, hit rate, how keys matched, evictions and
            invalidations (None when the cache is off); ``l3``: escalations by reason;
            ``graph``: passages, entities and mentions in the entity graph (None when off).
        """
        self._check_open()
        docs, chunks = self._archive.counts()
        size = sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file()) if disk else None
        return {
            "path": str(self.path),
            "read_only": self.read_only,
            "commit": self._commit_no,
            "documents": docs,
            "chunks": chunks,
            "vectors": (
                self._backend.count(namespace=self.config.backend.namespace) if self._backend else 0
            ),
            "namespace": self.config.backend.namespace,
            "backend": self.config.backend.name,
            "index": getattr(self._backend, "kind", None),
            "embedder": self.config.embedder.name,
            "bm25_terms": len(self._bm25.vocab),
            "bm25_segments": len(self._bm25.segments),
            "fusion": self.config.fusion.method,
            "disk_bytes": size,
            "queries": self._stats.summary(),
            "l1": None
            if self._l1 is None
            else {**self._l1.stats(), "refreshed": self.l1_refreshed},
            "l3": dict(self.l3_counts),
            "graph": None if self._graph is None else self._graph.counts(),
            "temporal": None if self._temporal is None else self._temporal.counts(),
            "context": {
                kind: None if gen is None else gen.name for kind, gen in self._contexts.items()
            },
        }

    def close(self) -> None:
        """Persist and release everything; further calls raise."""
        if getattr(self, "_closed", True):
            return
        with self._lock:
            self._memory.close()
            if not self.read_only:
                self._commit()
                if self._backend is not None:
                    self._backend.close()
            self._stats.flush()
            if self._l1 is not None:
                self._l1.close()
            self._archive.close()
            _unlock(self._writer_lock)
            self._closed = True

    def __enter__(self) -> Pensive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Pensive({str(self.path)!r})"


def _at(cutoff: datetime | None) -> float | None:
    """``as_of`` as the resolver's exclusive bound (POSIX seconds): as_of itself is included."""
    return None if cutoff is None else cutoff.timestamp() + 1e-6


def _min_gap(scores: list[float]) -> float:
    return min((a - b for a, b in zip(scores, scores[1:])), default=float("inf"))


def _with_sources(h: Hit, more: Mapping[str, int]) -> Hit:
    return Hit(
        h.doc_id, h.chunk_id, h.text, h.score, h.metadata, h.timestamp, {**more, **h.sources}
    )


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def _validate_context(context: Any) -> tuple[str, ...]:
    """A query's context: a sequence of strings (a bare string is one piece), each limited
    like a query; None is no context."""
    if context is None:
        return ()
    if isinstance(context, str):
        context = [context]
    if not isinstance(context, (list, tuple)) or not all(isinstance(c, str) for c in context):
        raise InputError("context must be a str or a list of str")
    if len(context) > 100 or any(len(c) > _MAX_QUERY_CHARS for c in context):
        raise InputError(f"context is limited to 100 pieces of {_MAX_QUERY_CHARS} characters each")
    return tuple(c for c in context if c.strip())


def _lock_writer(path: Path) -> Any:
    """Take the store's writer lock (released by :func:`_unlock` or when the process ends)."""
    try:
        import fcntl
    except ImportError:  # no advisory locks (Windows): one writer is the caller's job
        return None
    handle = open(path / "writer.lock", "a+")  # noqa: SIM115 - held open for the store's life
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise PensiveError(
            f"the store at {path} is open for writing (pid {holder}); a store has one writer at "
            "a time: close the other Pensive, or open this one with read_only=True"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _unlock(handle: Any) -> None:
    if handle is not None:
        handle.close()  # closing the file releases the flock
