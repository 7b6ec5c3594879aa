"""Values that cross module lines: frozen dataclasses, scores higher-is-better everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import InputError
from .timeutil import ensure_utc
from .validate import check_id, check_metadata, check_text

__all__ = [
    "Aggregation",
    "Chunk",
    "Document",
    "Hit",
    "IngestReport",
    "QueryResult",
    "TimeScope",
    "VectorQuery",
]


@dataclass(frozen=True)
class Document:
    """A document as the caller gives it.

    Args:
        id: The caller's id; ingesting the same id again replaces the document.
        text: The full text (a ``str`` that encodes as UTF-8; must not be blank).
        metadata: A JSON object returned with every hit from this document: string keys;
            strings, finite numbers, booleans, None, datetimes, lists and dicts as values
            (see :mod:`pensive_core.validate`).
        timestamp: When the document was written or became true (made tz-aware UTC).

    Raises:
        InputError: On an empty id or text, an id with a NUL, a string that does not encode
            as UTF-8 (a lone surrogate) in the id, text or metadata, metadata that is not
            such a JSON object (NaN, an infinity, a set...), or a timestamp outside the
            years 1 to 9999 once in UTC.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    timestamp: datetime | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InputError(f"Document.id must be a non-empty string, got {self.id!r}")
        check_id(self.id, "Document.id")
        if not isinstance(self.text, str):
            raise InputError(
                f"Document {self.id!r}: text must be str, got {type(self.text).__name__} "
                "(decode bytes as UTF-8 first)"
            )
        if not self.text.strip():
            raise InputError(f"Document {self.id!r} has empty text; nothing to index")
        check_text(self.text, f"Document {self.id!r}: text")
        meta = check_metadata(self.metadata, f"Document {self.id!r}: metadata")
        object.__setattr__(self, "metadata", meta)
        object.__setattr__(self, "timestamp", ensure_utc(self.timestamp))


@dataclass(frozen=True)
class Chunk:
    """One passage of a document, as indexed.

    Args:
        id: Stable id: ``"{doc_id}#{content hash}"`` (plus ``~n`` for repeats in one document).
        doc_id: The owning document's id.
        ordinal: Position of the passage in its document, from 0.
        text: The raw passage, exactly as it appears in the document.
        start: Character offset of ``text`` in the document.
        end: Character offset just past ``text``.
        hash: Content hash of ``text``.
        tokens: Embedder tokens in ``text`` (the sum over its sentences; 0 when unknown).
    """

    id: str
    doc_id: str
    ordinal: int
    text: str
    start: int
    end: int
    hash: str
    tokens: int = 0


class FrozenDict(dict):  # type: ignore[type-arg]
    """A dict that refuses changes. Hits are immutable and shared: the L1 cache serves the
    same objects to every caller, so a caller's edit must not reach the next caller.

    It is still a dict (``json.dumps`` and ``isinstance(x, dict)`` work); copy it with
    ``dict(hit.metadata)`` to change it.
    """

    __slots__ = ()

    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise TypeError("hit metadata and sources are read-only; copy with dict(...) to change")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self


@dataclass(frozen=True)
class Hit:
    """One retrieved passage.

    Args:
        doc_id: The caller's document id.
        chunk_id: The passage id.
        text: The matched passage (never the head of the document unless that matched).
        score: Fused score, higher is better.
        metadata: The document's metadata.
        timestamp: The document's timestamp, if any.
        sources: Which retrievers found it and at what rank (1-based), e.g. ``{"dense": 1}``.
        valid_from: When what the passage states became true, where known (a date in its
            text, else its document's timestamp, for a passage that states a fact).
        valid_to: When it stopped being true: the time of the statement that superseded it.
        superseded_by: The passage id of that newer statement (or correction), if any.
        match: How likely this passage answers the question, in [0, 1]: a calibrated map of
            its dense cosine similarity (see :mod:`pensive_core.query.match`); None where
            not measured (dense retrieval off, conversation recall).
        pinned: True for a document the caller pinned (``query(..., pins=...)`` or an
            ``@`` mention): forced into the result, not retrieved (see
            :mod:`pensive_core.query.pins`).

    A hit is immutable, its ``metadata`` and ``sources`` too (read-only dicts).
    """

    doc_id: str
    chunk_id: str
    text: str
    score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)
    timestamp: datetime | None = None
    sources: Mapping[str, int] = field(default_factory=dict)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    match: float | None = None
    pinned: bool = False

    def __post_init__(self) -> None:
        if type(self.metadata) is not FrozenDict:
            object.__setattr__(self, "metadata", FrozenDict(self.metadata))
        if type(self.sources) is not FrozenDict:
            object.__setattr__(self, "sources", FrozenDict(self.sources))


@dataclass(frozen=True)
class Aggregation:
    """The count behind an aggregation question ("how many times did X ...?", "list every
    time Y was mentioned"), answered from the entity graph rather than by top-k retrieval.

    Args:
        entities: The entities every counted passage names (normal forms).
        terms: Other words of the question every counted passage contains (stemmed).
        count: Passages counted (each is one occurrence).
        documents: Distinct documents among them.
        mentions: Times the entities are named in them, all told.
        truncated: True when more passages were counted than returned as hits.
    """

    entities: tuple[str, ...]
    terms: tuple[str, ...]
    count: int
    documents: int
    mentions: int
    truncated: bool = False


@dataclass(frozen=True)
class TimeScope:
    """The time a question asks about, as the temporal resolver understood it.

    Args:
        kind: ``"as_of"`` (true at a time: ``as_of=`` or "as of 2015"), ``"during"`` (in or
            between dates: "in 1990", "from 1811 to 1827"), ``"before"``, ``"after"``,
            ``"latest"`` (now / current / latest), ``"when"`` ("when did ...?") or
            ``"change"`` (how something changed: superseded statements are shown too).
        start: Start of the time asked about (inclusive), if it has one.
        end: End of it (exclusive), if it has one.
        source: ``"question"`` when read from the question's words, ``"as_of"`` when given.
        supported: How many returned hits have a date or a validity span that fits the time
            asked about. 0 with ``start``/``end`` set means nothing found was true then: an
            application should abstain rather than answer from those hits.
    """

    kind: str
    start: datetime | None = None
    end: datetime | None = None
    source: str = "question"
    supported: int = 0


@dataclass(frozen=True)
class QueryResult:
    """What :meth:`Pensive.query` returns.

    Args:
        hits: Best first.
        tier: ``"L1"``, ``"L2"`` or ``"L3"``: the tier that answered.
        confidence: In [0, 1]; from the score margin and retriever agreement.
        latency_ms: Wall time of the query, embedding included.
        query: The query text.
        timings: Milliseconds per stage (``embed_ms``, ``dense_ms``, ``bm25_ms``, ...).
        cached_from: On an L1 answer, the question it was first computed for (a variant of
            this one: case, punctuation, word order, filler words or a typo); else None.
        aggregation: For an aggregation question answered from the entity graph, the count
            (the hits are then every counted passage, oldest first); else None.
        time_scope: The time the question asks about, when it asks about one (or ``as_of``
            was given) and temporal resolution is on; else None.
        match: How likely the best hit answers the question, in [0, 1]: the highest
            ``Hit.match`` of the answer (before ``min_score`` dropped any), calibrated on
            SciFact with the bundled MiniLM embedder (see :mod:`pensive_core.query.match`);
            None when not measured (dense retrieval off). It tells a question the store has
            nothing on from one it covers; a question on a covered topic whose own answer is
            missing still scores high.
        weak: True when no hit is a likely match: ``match`` below
            :data:`~pensive_core.query.match.WEAK_BELOW`, or no hits left. An application
            should then abstain or say the store does not seem to hold the answer.
        card: On an answer from an entity card (an entity question, tier ``"L1"``), the
            entity's key (see :mod:`pensive_core.cards`); else None.
    """

    hits: list[Hit]
    tier: str
    confidence: float
    latency_ms: float
    query: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)
    cached_from: str | None = None
    aggregation: Aggregation | None = None
    time_scope: TimeScope | None = None
    match: float | None = None
    weak: bool = False
    card: str | None = None


@dataclass(frozen=True)
class IngestReport:
    """What an ingest did.

    Args:
        added: Documents new to the store.
        updated: Documents replaced because their text or metadata changed.
        unchanged: Documents skipped because nothing changed.
        chunks_embedded: Passages embedded in this call.
        chunks_reused: Passages whose embedding was kept because their content hash matched.
        chunks_deleted: Passages removed because their document changed.
        errors: ``(source, message)`` for inputs that were skipped, e.g. unreadable files.
        seconds: Wall time.
        contexts: Passages given a situating context in this call (embedded with it).
        contexts_cached: Contexts taken from the store's context cache (no LLM call).
        contexts_fallback: Passages whose LLM context failed and the model-free one stood in.
        llm_calls: Calls made to the context LLM (document summaries included).
        stages: Seconds spent in each stage of the pipeline (``chunking``, ``contexts``,
            ``embedding``, ``vectors``, ``bm25``, ``archive``, ``graph``, ``temporal``,
            ``commit``), for profiling where ingest time goes. Embedding runs in a thread
            beside ``archive``, ``bm25``, ``graph`` and ``temporal``, so the stages add up
            to more than ``seconds``; ``embedding_wait`` is how long the ingest then waited
            for the vectors.
    """

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    chunks_deleted: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    contexts: int = 0
    contexts_cached: int = 0
    contexts_fallback: int = 0
    llm_calls: int = 0
    stages: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class VectorQuery:
    """A dense search request to a vector backend.

    Args:
        vector: The L2-normalised query embedding.
        k: How many results.
    """

    vector: Any
    k: int
