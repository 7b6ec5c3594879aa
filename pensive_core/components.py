"""The parts of an open store, built once when it opens and handed to every stage.

:func:`open_components` does what opening a store takes: the storage engine and its writer
lock, the archive, the saved config checked against the given one, the sparse index, the
vector backend (once the store knows its dimension), the entity graph and the statements
(rebuilt from the archive when they were built by another version or another extractor, and
brought level with it when the last change was cut short), what the graph learns from use,
the L1 cache, the context generators, the entity and statement extractors and the reranker.
:class:`Components` holds them; the query stages (:mod:`pensive_core.query`) and the ingest
stages (:mod:`pensive_core.ingest`) read what they need from it. Tools and tests may read it
too (``Pensive.components``); the stages are the only writers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .archive import DocumentStore
from .backends.base import VectorBackend
from .cache import AnswerCache
from .cards.build import open_cards
from .cards.store import CardStore
from .config import (
    STRUCTURAL_KEYS,
    PensiveConfig,
    get_key,
    load_config,
    saved_config,
    shared_backend,
)
from .context.base import ContextGenerator
from .embedders.base import Embedder, QueryCache
from .embedders.registry import create_embedder
from .errors import ConfigError, InputError, NotFoundError
from .graph import SCHEMA_VERSION as GRAPH_VERSION
from .graph.extract import EntityExtractor
from .graph.learning import LearningConfig
from .graph.store import GraphTables
from .plugins import build, check_plugin, is_class_path
from .query.learning import Learning
from .rerank import Reranker
from .sparse.base import SparseIndex
from .stats import QueryStats
from .storage import StorageEngine, open_storage
from .temporal import SCHEMA_VERSION as TEMPORAL_VERSION
from .temporal.statements import StatementExtractor
from .temporal.store import TemporalTables
from .tokenize import Tokenizer
from .views import GraphViews, TemporalViews
from .warm import Warmer

if TYPE_CHECKING:
    from .ingest.invalidate import L1Invalidation

__all__ = ["Components", "EmbedderSlot", "Plugins", "check_not_moved", "open_components"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plugins:
    """Instances passed to :class:`~pensive_core.Pensive` in place of what the config names.

    Args:
        llm: An LLM for situating contexts (any LlamaIndex LLM, LangChain model or
            ``str -> str`` callable).
        context_generator: A :class:`~pensive_core.context.ContextGenerator`.
        embedder: An :class:`~pensive_core.embedders.Embedder` already loaded.
        extractor: An :class:`~pensive_core.graph.EntityExtractor`.
        statements: A :class:`~pensive_core.temporal.StatementExtractor`.
        reranker: A :class:`~pensive_core.rerank.Reranker` (turns the rerank stage on).
    """

    llm: Any = None
    context_generator: Any = None
    embedder: Any = None
    extractor: Any = None
    statements: Any = None
    reranker: Any = None


class EmbedderSlot:
    """The store's embedder, made on first use (a model load is seconds) or given.

    The first embedder a store meets fixes its vector dimension (saved in the archive); one
    that makes vectors of another dimension is refused.
    """

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        self.loaded: Embedder | None = None
        #: The embedder a read-only store's warm-up is making (see :mod:`.warm`), or None.
        self.pending: Future[Embedder] | None = None

    def make(self) -> Embedder:
        """A new embedder from ``[embedder]`` (behind the query cache when one is set)."""
        cfg = self._comps.config.embedder
        made = create_embedder(cfg)
        return QueryCache(made, cfg.query_cache) if cfg.query_cache > 0 else made

    def get(self) -> Embedder:
        """The embedder, made from ``[embedder]`` if none is loaded yet."""
        if self.loaded is None:
            warmed = None
            pending, self.pending = self.pending, None
            if pending is not None:  # made in the background: waited for, not made twice
                with contextlib.suppress(Exception):  # (its failure: made again, raised here)
                    warmed = pending.result()
            # under the store's lock: the first use saves the embedder's name and dimension
            # through the archive, whose one connection two threads must not write at once
            # (two ingests, or an ingest and a query, meeting a fresh handle: a shared
            # engine's ingest asks for the embedder ahead of that lock)
            with self._comps.lock:
                if self.loaded is None:
                    self.share(warmed if warmed is not None else self.make(), own=True)
        assert self.loaded is not None
        return self.loaded

    def share(self, embedder: Embedder, *, own: bool = False) -> None:
        """Use an embedder already loaded (a no-op when one is); ``own``: made from this
        store's config (a shared one is passed over when the store was re-embedded to another).

        Raises:
            ConfigError: If its dimension differs from the store's vectors.
        """
        if self.loaded is not None:
            return
        comps = self._comps
        saved = comps.archive.get_meta("embedder")
        if saved is None:
            if not comps.read_only:
                comps.archive.set_meta("embedder", {"name": embedder.name, "dim": embedder.dim})
                comps.archive.set_meta("dim", embedder.dim)
        elif not own and saved["name"] != embedder.name and comps.archive.get_meta("reembedded"):
            # a model shared by several stores (the server's) where this one was re-embedded
            # to another: not shared, the store's own is made from its saved [embedder]
            log.info("not sharing %r with %s, re-embedded with %r", embedder.name, comps.path,
                     saved["name"])  # fmt: skip
            return
        elif saved["dim"] != embedder.dim:
            raise ConfigError(
                f"embedder {embedder.name!r} makes {embedder.dim}-d vectors but "
                f"the store at {comps.path} holds {saved['dim']}-d vectors from "
                f"{saved['name']!r}"
            )
        self.loaded = embedder


@dataclass(eq=False)
class Components:
    """Everything an open store is made of.

    Attributes:
        path: The store folder.
        config: The effective config (saved, then given, then environment).
        read_only: Whether the store is open to read only.
        storage: The storage engine the parts below were opened from.
        archive: Documents, passages and metadata (L3).
        sparse: The BM25 index.
        backend: The vector backend; None until the store knows its dimension.
        embedder: The embedder slot (loaded on first use).
        graph: The entity graph (None when off).
        temporal: Statements and dates (None when off).
        learning: Use history and learned edge weights (None unless learning is on).
        l1: The hot cache (None when off).
        cards: Entity cards and summaries (None when off, or not on this engine).
        stats: Per-tier query statistics.
        contexts: The context generator for ``"prose"`` and for ``"records"`` documents.
        llm: The LLM given to the store, or None.
        extractor: Finds entity mentions (graph).
        statements: Finds statements (temporal).
        reranker: Reranks L2's candidates (None: the stage is off).
        words: Unstemmed tokenizer with the store's stopwords.
        graph_views: The loaded graph, once per commit (None when the graph is off).
        temporal_views: The loaded statements, once per commit (None when off).
        warmer: A read-only store's warm-up for its first question (None when off).
        invalidation: What a commit drops from L1 and answers again (a writer's; None on a
            read-only store).
        lock: Held by every read and write of the store's state.
        commit_no: The store's commit number as this process last saw it.
        data_version: The archive's data version as this process last saw it.
        closed: Set by :meth:`close` (under ``lock``): an ingest that left the lock between
            two steps (a shared engine's, embedding ahead of the change lock) stops there.
        counters: Figures of this process: ``l3`` escalations by reason, ``l1_refreshed``,
            ``rerank`` runs and failures.
    """

    path: Path
    config: PensiveConfig
    read_only: bool
    storage: StorageEngine
    archive: DocumentStore
    stats: QueryStats
    words: Tokenizer
    sparse: SparseIndex = field(init=False)
    backend: VectorBackend | None = None
    embedder: EmbedderSlot = field(init=False)
    graph: GraphTables | None = None
    temporal: TemporalTables | None = None
    learning: Learning | None = None
    l1: AnswerCache | None = None
    cards: CardStore | None = None
    contexts: dict[str, ContextGenerator | None] = field(default_factory=dict)
    llm: Any = None
    extractor: EntityExtractor = field(init=False)
    statements: StatementExtractor = field(init=False)
    reranker: Reranker | None = None
    graph_views: GraphViews | None = None
    temporal_views: TemporalViews | None = None
    warmer: Warmer | None = None
    invalidation: L1Invalidation | None = None
    lock: Any = field(default_factory=threading.RLock)
    commit_no: int = 0
    data_version: int = 0
    closed: bool = False
    counters: dict[str, Any] = field(
        default_factory=lambda: {
            "l3": {"exact": 0, "low_confidence": 0, "found": 0},
            "l1_refreshed": 0,
            "rerank": {"runs": 0, "failed": 0},
        }
    )

    def __post_init__(self) -> None:
        self.embedder = EmbedderSlot(self)

    # -- indexes ------------------------------------------------------------------------------
    def open_backend(self, dim: int) -> VectorBackend:
        """The vector backend, opened on first need (when the dimension is known)."""
        if self.backend is None:
            name = self.config.backend.name
            options = getattr(self.config.backend, name, None)
            self.backend = self.storage.open_vectors(
                name, dim, options, self.storage.vectors_place()
            )
            if not self.read_only:
                self.archive.set_meta("backend", name)
        return self.backend

    def load_indexes(self) -> None:
        """(Re)load the sparse index and the vector backend as of the last commit.

        A reader may race the writer replacing index files: each load reads a manifest and
        the files it names, and a file removed in between means a newer manifest exists.
        """
        for attempt in range(50):
            try:
                # a reader following commits reads only what changed (a writer's own
                # index is never handed on: it changes in place)
                before = getattr(self, "sparse", None) if self.read_only else None
                self.sparse = self.storage.open_sparse(self.config.bm25, previous=before)
                vectors, self.backend = getattr(self, "backend", None), None
                dim = self.archive.get_meta("dim")
                if dim is not None:
                    if self.read_only and self._follows(vectors, int(dim)):
                        self.backend = vectors  # caught up in place with the new commits
                    else:
                        self.open_backend(int(dim))
                return
            except (FileNotFoundError, ValueError, OSError):
                if not self.read_only or attempt == 49:
                    raise
                time.sleep(0.02)

    def _follows(self, backend: Any, dim: int) -> bool:
        """Whether a reader's open backend caught up with the last commit in place (a local
        index that keeps its writes in logs reads only the new ones); False: open it anew."""
        follow = getattr(backend, "follow", None)
        path = getattr(self.storage, "path", None)
        if follow is None or path is None or getattr(backend, "dim", None) != dim:
            return False
        if backend.name != self.config.backend.name:
            return False
        if getattr(backend, "folder", None) != Path(path) / self.storage.vectors_place():
            return False
        return bool(follow())

    def refresh(self) -> None:
        """Reload the indexes when another process has committed since the last look: a
        reader of the embedded engine (its one writer is elsewhere), and every process of an
        engine several processes write (Postgres replicas)."""
        if not self.read_only and not self.storage.shared:
            return
        version = self.archive.data_version()
        if version == self.data_version:
            return
        commit = self.archive.commit_number()
        if commit != self.commit_no:
            built = load_config(base=self.archive.get_meta("config"), environ={})
            saved = built.backend
            if (saved.name, saved.namespace) != (
                self.config.backend.name,
                self.config.backend.namespace,
            ):  # the writer moved the vectors to another backend (reindex): follow it
                self.config = self.config.model_copy(update={"backend": saved})
            if built.embedder != self.config.embedder:
                # the writer re-embedded the store (reembed): query with the new model
                self.config = self.config.model_copy(update={"embedder": built.embedder})
                self.embedder = EmbedderSlot(self)
            self.load_indexes()
            self.commit_no = commit
        # seen only once loaded: a load that failed (a damaged file) is tried again by the
        # next query, which refuses too, instead of answering without the vector index
        self.data_version = version

    def level(self, key: str) -> bool:
        """Whether an index the archive feeds (graph, statements) was left level with it by
        the last commit: then opening skips the scan of every passage (seconds at 10M tokens).
        """
        return (
            self.archive.get_meta(key) == self.archive.commit_number()
            and not self.archive.is_dirty()
        )

    def check_structural(self, saved: Mapping[str, Any]) -> None:
        """Refuse a config that contradicts how the store was built.

        Raises:
            ConfigError: Naming the key, both values and what to do.
        """
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

    def close(self) -> None:
        """Release what opening took (indexes were persisted by the caller's commit)."""
        self.closed = True
        if self.warmer is not None:
            self.warmer.stop()
        if self.l1 is not None:
            self.l1.close()
        self.storage.close()
        self.storage.unlock_writer()


def check_not_moved(archive: DocumentStore, path: Path) -> None:
    """Refuse to write a store ``pensive migrate`` moved to another engine.

    Raises:
        ConfigError: Naming where it went and how to open it there.
    """
    moved = archive.get_meta("moved_to")
    if moved:
        raise ConfigError(
            f"the store at {path} was moved to the {moved.get('engine')} engine "
            f"({moved.get('where')}) by `pensive migrate` at {moved.get('at')}: open it "
            f'with [storage] engine = "{moved.get("engine")}"; this copy opens read-only'
        )


# -- plugins ------------------------------------------------------------------------------------
def make_extractor(config: PensiveConfig, given: Any) -> EntityExtractor:
    """The entity extractor: ``given``, or what ``[graph] extractor`` names."""
    if given is not None:
        return check_plugin("extractor", given, "extractor")  # type: ignore[no-any-return]
    spec = config.graph.extractor
    if spec == "rules":
        return build("extractor", "rules")  # type: ignore[no-any-return]
    if spec == "spacy":
        return build("extractor", "spacy", nlp_or_model=config.graph.spacy_model)  # type: ignore[no-any-return]
    return build("extractor", spec)  # type: ignore[no-any-return]


def make_statements(config: PensiveConfig, given: Any) -> StatementExtractor:
    """The statement extractor: ``given``, or what ``[temporal] extractor`` names."""
    if given is not None:
        return check_plugin("statements", given, "statements")  # type: ignore[no-any-return]
    return build("statements", config.temporal.extractor)  # type: ignore[no-any-return]


def make_reranker(config: PensiveConfig, given: Any) -> Reranker | None:
    """The reranker: ``given``, a local cross-encoder folder or ``module:Class`` that
    ``[rerank] model`` names, or None (off)."""
    if given is not None:
        return check_plugin("reranker", given, "reranker")  # type: ignore[no-any-return]
    r = config.rerank
    if not r.model:
        return None
    if is_class_path(r.model) and not Path(r.model).expanduser().exists():
        return build("reranker", r.model)  # type: ignore[no-any-return]
    return build(  # type: ignore[no-any-return]
        "reranker",
        "cross-encoder",
        path=Path(r.model).expanduser(),
        num_labels=1,
        max_length=r.max_length or None,
        batch_size=r.batch_size,
    )


# -- opening ------------------------------------------------------------------------------------
def open_components(
    path: Path, config: Any, read_only: bool, plugins: Plugins, make_contexts: Any
) -> Components:
    """Open every part of the store at ``path`` (see the module docstring).

    Args:
        path: The store folder.
        config: What the caller gave :class:`~pensive_core.Pensive` (dict, TOML path, None).
        read_only: Open to read only.
        plugins: Instances given in place of configured ones.
        make_contexts: ``(components, llm, generator) -> {"prose": ..., "records": ...}``,
            the ingest side's choice of context generators.

    Raises:
        InputError: If ``path`` exists and is not a folder.
        NotFoundError: If ``read_only`` and there is no store at ``path``.
        ConfigError: On an unknown key, a value that contradicts the store, or a plug-in
            that does not implement its protocol.
        PensiveError: If another writer holds the store.
    """
    if path.exists() and not path.is_dir():
        raise InputError(f"store path {path} exists and is not a folder")
    given = load_config(config)  # the given config (and environment) say where the store is
    storage = open_storage(given.storage, path, read_only)
    if read_only and not storage.exists():
        there = "" if storage.location == str(path) else f" ({storage.location})"
        storage.close()
        raise NotFoundError(f"no Pensive store at {path}{there} to open read-only")
    path.mkdir(parents=True, exist_ok=True)
    # where several processes write one store, opening for writing (which may rebuild the
    # graph or statements from the archive) waits for another's change in flight
    opening = storage.writing() if not read_only else contextlib.nullcontext()
    try:
        with opening:
            return _open_parts(storage, path, config, read_only, plugins, make_contexts)
    except BaseException:
        storage.close()  # (closing twice is harmless)
        raise


def _open_parts(
    storage: StorageEngine,
    path: Path,
    config: Any,
    read_only: bool,
    plugins: Plugins,
    make_contexts: Any,
) -> Components:
    storage.lock_writer()
    try:
        archive = storage.open_archive()
    except BaseException:
        storage.unlock_writer()
        raise
    comps: Components | None = None
    try:
        saved = archive.get_meta("config")
        if not read_only:
            check_not_moved(archive, path)
        cfg = load_config(config, base=saved)
        if saved is None and storage.shared:
            cfg = shared_backend(cfg, config)
        comps = Components(
            path=path,
            config=cfg,
            read_only=read_only,
            storage=storage,
            archive=archive,
            stats=storage.open_query_stats(),
            words=Tokenizer(stemmer="", stopwords=cfg.bm25.stopwords),
        )
        if saved is not None:
            comps.check_structural(saved)
        if read_only and cfg.router.warm:  # the query model loads while the indexes do
            given = plugins.embedder if isinstance(plugins.embedder, Embedder) else None
            comps.warmer = Warmer(comps, given)
        comps.commit_no = archive.commit_number()
        comps.data_version = archive.data_version()
        comps.extractor = make_extractor(cfg, plugins.extractor)
        comps.statements = make_statements(cfg, plugins.statements)
        if not read_only:  # a writer may sync the graph and statements with the archive
            comps.load_indexes()
        _open_graph(comps)
        if cfg.temporal.enabled:
            _open_temporal(comps)
        if comps.warmer is not None:  # its views load beside the indexes
            comps.warmer.ready()
        if read_only:
            comps.load_indexes()
        lc = cfg.graph.learning
        if comps.graph is not None and lc.enabled:
            knobs = LearningConfig(**lc.model_dump(exclude={"deterministic"}))
            history, edges = storage.open_learning(knobs, read_only)
            comps.learning = Learning(
                history, edges, archive, deterministic=lc.deterministic, read_only=read_only
            )
        open_cards(comps)
        if cfg.router.l1:
            comps.l1 = storage.open_answer_cache(cfg.router)
            if comps.l1.commit != comps.commit_no and not read_only:
                # written before changes made with the cache off: nothing in it can be trusted
                comps.l1.invalidate_all(comps.commit_no)
        comps.llm = plugins.llm
        comps.contexts = make_contexts(comps, plugins.llm, plugins.context_generator)
        comps.reranker = make_reranker(cfg, plugins.reranker)
        if plugins.embedder is not None:
            if not isinstance(plugins.embedder, Embedder):
                raise InputError(
                    f"embedder must implement pensive_core.embedders.Embedder, got "
                    f"{type(plugins.embedder).__name__}"
                )
            comps.embedder.share(plugins.embedder)
        if saved is None and not read_only:
            # saved last: a config refused above (a plug-in that cannot be built) is not kept
            archive.set_meta("config", saved_config(cfg))
        return comps
    except BaseException:
        if comps is not None and comps.warmer is not None:
            comps.warmer.stop()
        if comps is not None and comps.l1 is not None:
            comps.l1.close()
        storage.close()
        storage.unlock_writer()
        raise


def _open_graph(comps: Components) -> None:
    from .ingest.derive import sync_graph

    storage, archive, cfg = comps.storage, comps.archive, comps.config
    built = storage.graph_exists()
    name = comps.extractor.name
    # a graph built by another version, or another extractor, is rebuilt from the archive
    stale = built and (
        archive.get_meta("graph_version") != GRAPH_VERSION
        or (archive.get_meta("graph_extractor") or "rules") != name
    )
    if stale:
        if comps.read_only:  # the writer rebuilds it
            log.warning(
                "the entity graph was built by another version or extractor; open for writing"
            )
            built = False
        elif cfg.graph.enabled:
            log.info("rebuilding the entity graph (built by another version or extractor)")
            storage.drop_graph()
            built = False
    if cfg.graph.enabled and (built or not comps.read_only):
        comps.graph = storage.open_graph(cfg.graph.max_pair_entities, create=not built)
        comps.graph_views = GraphViews(comps)
        if not comps.read_only:
            archive.set_meta("graph_version", GRAPH_VERSION)
            archive.set_meta("graph_extractor", name)
            if not built or not comps.level("graph_synced"):
                sync_graph(comps)
            start_log = getattr(comps.graph, "start_log", None)
            if start_log is not None:  # (the embedded engine's: readers follow its commits)
                start_log(archive.commit_number())


def _open_temporal(comps: Components) -> None:
    from .ingest.derive import sync_temporal

    storage, archive = comps.storage, comps.archive
    built = storage.temporal_exists()
    current = (
        archive.get_meta("temporal_version") == TEMPORAL_VERSION
        and (archive.get_meta("temporal_extractor") or "rules") == comps.statements.name
    )
    if comps.read_only:
        if built and current:
            comps.temporal = storage.open_temporal(create=False)
            comps.temporal_views = TemporalViews(comps)
        elif built:
            log.warning("the temporal index is from another version or extractor; open for writing")
        return
    if built and not current:
        log.info("rebuilding the temporal index (built by another version or extractor)")
        storage.drop_temporal()
        built = False
    comps.temporal = storage.open_temporal(create=True)
    comps.temporal_views = TemporalViews(comps)
    archive.set_meta("temporal_version", TEMPORAL_VERSION)
    archive.set_meta("temporal_extractor", comps.statements.name)
    if not built or not comps.level("temporal_synced"):
        sync_temporal(comps)
