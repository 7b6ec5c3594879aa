"""Configuration: one pydantic model, loaded from a TOML file, a dict, or ``PENSIVE_*`` variables.

A partial config overrides only the keys it names; unknown keys are an error, naming the
nearest valid key ("did you mean 'fusion.method'?").
Environment overrides use double underscores between levels, e.g.
``PENSIVE_FUSION__METHOD=zscore`` or ``PENSIVE_EMBEDDER__NAME=hash``; values are read as JSON
when they parse as JSON, else as strings.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError

__all__ = [
    "LOCAL_BACKENDS",
    "PensiveConfig",
    "local_backend_refused",
    "BackendConfig",
    "FaissConfig",
    "EmbedderConfig",
    "ChunkingConfig",
    "ContextConfig",
    "MemoryConfig",
    "BM25Config",
    "FusionConfig",
    "RouterConfig",
    "load_config",
    "saved_config",
    "shared_backend",
    "STRUCTURAL_KEYS",
    "ChromaConfig",
    "GraphConfig",
    "TemporalConfig",
    "ServerConfig",
    "RerankConfig",
    "StorageConfig",
    "redacted",
]


RETRIEVERS = frozenset({"dense", "bm25"})


class _Section(BaseModel):
    # NaN and infinities are refused in every number of the config (a weight of inf or NaN
    # would make every fused score NaN)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class FaissConfig(_Section):
    """FAISS index shape. ``auto`` is exact inner product up to ``hnsw_threshold`` vectors,
    HNSW beyond. ``ivfpq`` compresses vectors (product quantisation) for corpora that do not
    fit in memory as floats; it is exact until ``ivf_train_min`` vectors exist to train it."""

    index: Literal["auto", "flat", "hnsw", "ivfpq"] = "auto"
    # exact search costs ~0.17 ms per 1,000 vectors on one thread (14.4 ms p50 at 84k): above
    # 20k vectors HNSW answers in ~1 ms with recall@10 1.0000 at 100k (benchmarks/backends.md)
    hnsw_threshold: int = Field(20_000, ge=1)
    hnsw_m: int = Field(32, ge=4, le=128)
    ef_construction: int = Field(80, ge=8)
    ef_search: int = Field(128, ge=8)
    ivf_nlist: int = Field(0, ge=0)  # inverted lists; 0: about 4 * sqrt(n) at training
    ivf_nprobe: int = Field(32, ge=1)  # lists searched per query
    pq_m: int = Field(0, ge=0)  # bytes per vector; 0: dim / 2 (192 for 384-d MiniLM)
    ivf_train_min: int = Field(10_000, ge=256)
    exact_filter_below: int = Field(4096, ge=0)  # filters passing fewer: exact search
    # OpenMP threads for one query's search (0: FAISS's default, every core). One measured
    # 1.6 ms p50 against 2.3-8 ms for two on a flat index of 8k vectors with the other core busy
    search_threads: int = Field(1, ge=0, le=256)


class ChromaConfig(_Section):
    """Chroma: embedded (``persistent``, files in the store folder) or a server (``http``)."""

    mode: Literal["persistent", "http"] = "persistent"
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    ssl: bool = False
    collection: str = Field("pensive", min_length=3, max_length=63)  # one per store on a server


class PineconeConfig(_Section):
    """Pinecone (official SDK, REST data plane). The API key is read from the environment
    variable named by ``api_key_env``, never from the config file."""

    index: str = Field("pensive", min_length=1, max_length=45)
    host: str = ""  # the index's data-plane URL; empty: looked up from the index name
    api_key_env: str = "PINECONE_API_KEY"
    cloud: str = "aws"  # where a missing serverless index is created
    region: str = "us-east-1"
    create: bool = True  # create the index when it does not exist
    batch_size: int = Field(100, ge=1, le=1000)
    retries: int = Field(5, ge=0, le=20)  # transient errors (429, 5xx, connection) retried
    backoff_s: float = Field(0.5, ge=0.0, le=60.0)  # first wait; doubles per retry
    timeout_s: float = Field(30.0, gt=0)


class WeaviateConfig(_Section):
    """Weaviate (official v4 client: REST for schema, gRPC for batch and search). Namespaces
    are tenants of one multi-tenant collection. The API key (if any) comes from the environment
    variable named by ``api_key_env``."""

    url: str = "http://localhost:8080"
    grpc_port: int = Field(50051, ge=1, le=65535)  # gRPC on the same host as ``url``
    api_key_env: str = "WEAVIATE_API_KEY"
    collection: str = Field("Pensive", pattern=r"^[A-Z][A-Za-z0-9_]{0,63}$")
    batch_size: int = Field(200, ge=1, le=10000)
    retries: int = Field(5, ge=0, le=20)
    backoff_s: float = Field(0.5, ge=0.0, le=60.0)
    timeout_s: float = Field(30.0, gt=0)


class PgvectorConfig(_Section):
    """Postgres with pgvector (psycopg 3): one table per namespace, an HNSW index (cosine).
    The DSN is ``dsn`` without a password (libpq reads it from ``PGPASSWORD`` or
    ``~/.pgpass``) or the whole DSN from the environment variable named by ``dsn_env``."""

    dsn: str = ""  # "host=db.internal dbname=pensive user=app" or postgresql://app@db/pensive
    dsn_env: str = "PENSIVE_PGVECTOR_DSN"
    # table of the default namespace; another's is "{table}__{namespace}": at most 13
    # characters (13 + 2 + 48 fit Postgres's 63), no "__" and no "_" at the end (so one table
    # name never reads as another table's namespace)
    table: str = Field("pensive_vec", pattern=r"^[a-z][a-z0-9_]{0,12}$")
    # exact scans up to this many rows in a namespace; past it an HNSW index is built once
    # (as FAISS "auto"): on SciFact's 13,431 passages upserts ran 225 vectors/s into an HNSW
    # graph against 6,910 without, and queries 2.4 against 16.9 ms p50
    # (benchmarks/results/postgres_parts.md); 0: an index from the start
    hnsw_threshold: int = Field(20_000, ge=0)
    m: int = Field(16, ge=2, le=100)  # HNSW links per node (pgvector's default)
    ef_construction: int = Field(64, ge=4, le=1000)  # pgvector's default
    ef_search: int = Field(100, ge=1, le=1000)  # candidates an unfiltered search walks (>= k)
    connect_timeout_s: float = Field(10.0, gt=0, le=600)

    @field_validator("table")
    @classmethod
    def _one_reading(cls, v: str) -> str:
        if "__" in v or v.endswith("_"):
            raise ValueError(
                "no '__' and no trailing '_': '{table}__{namespace}' names a namespace"
            )
        return v


class BackendConfig(_Section):
    """Which vector backend holds the dense vectors (``faiss``, ``chroma``, ``pinecone``,
    ``weaviate``, ``pgvector``, ``memory`` or ``module:Class``), and the namespace this store uses in it
    (stores sharing one service index or collection stay apart by namespace)."""

    name: str = "faiss"
    namespace: str = Field("", pattern=r"^(|[A-Za-z0-9][A-Za-z0-9_-]{0,47})$")
    faiss: FaissConfig = FaissConfig()
    chroma: ChromaConfig = ChromaConfig()
    pinecone: PineconeConfig = PineconeConfig()
    weaviate: WeaviateConfig = WeaviateConfig()
    pgvector: PgvectorConfig = PgvectorConfig()


class EmbedderConfig(_Section):
    """Which embedder: ``minilm`` (bundled), ``hash`` (model-free) or a sentence-transformers path."""

    name: str = "minilm"
    # passages per forward pass at ingest; 0: the fastest measured for the path, 32 for
    # bfloat16 batches (69.5 passages/s against 59.1 for 16 and 64.7 for 64) and 16 for float32
    # ones (onnxruntime 33.0 against 30.0 for 32; benchmarks/ingest_speed, quiet machine)
    batch_size: int = Field(0, ge=0, le=4096)
    # torch threads for one query: 1 measured 30 ms idle and stays flat under load, where the
    # default (all cores) went 10x slower; batches at ingest use all cores (13.7 vs 8.3 passages/s).
    threads: int = Field(1, ge=0, le=256)
    batch_threads: int = Field(0, ge=0, le=256)  # 0: every core
    # worker processes embedding ingest batches (each with batch_threads // workers threads);
    # 0: in this process (two workers measured 33.1 passages/s, no faster than one process on
    # 2 cores). Queries and token counts always stay in this process.
    workers: int = Field(0, ge=0, le=64)
    dim: int = Field(384, ge=8, le=8192)  # the hash embedder's dimension; models report their own
    # query vectors remembered for repeated questions (least recently used out); 0: off
    query_cache: int = Field(1024, ge=0, le=1_000_000)
    # how one query is embedded: "auto" = onnxruntime on the exported model when it reproduces
    # PyTorch's vectors (10-11 ms against 26-29 ms p50 for torch, one thread, machine loaded)
    query_runtime: Literal["auto", "torch", "onnx"] = "auto"
    # how passages are embedded at ingest: "auto" = onnxruntime on the same verified export,
    # batches sorted by length (benchmarks/embed_speed); "torch" = sentence-transformers
    batch_runtime: Literal["auto", "torch", "onnx"] = "auto"
    # the arithmetic of PyTorch's passage batches: "auto" = bfloat16 where the CPU has it
    # natively (AMX / AVX-512 BF16: 2x float32, cosine >= 0.9999; benchmarks/ingest_speed),
    # used for a call of 256+ passages or once the model is loaded; else float32
    batch_dtype: Literal["auto", "float32", "bfloat16"] = "auto"


class ChunkingConfig(_Section):
    """How documents are cut into passages; sizes are in the embedder's own tokens (word
    pieces). ``cdc`` (content-defined) picks cut points from the content of the sentences
    around them, so editing one paragraph changes about one passage; ``greedy`` packs sentences
    up to the window. Passages are exact slices of the document, cut at sentence ends."""

    method: Literal["cdc", "greedy"] = "cdc"
    max_tokens: int = Field(0, ge=0)  # 0: the embedder's window less reserve_tokens
    target_tokens: int = Field(0, ge=0)  # the mean size aimed at (cdc); 0: half of max_tokens
    min_tokens: int = Field(32, ge=0)
    # window tokens no passage takes, so its situating context always fits beside it
    reserve_tokens: int = Field(16, ge=0, le=256)
    overlap_sentences: int = Field(0, ge=0, le=8)  # sentences repeated from the previous passage


class ContextConfig(_Section):
    """Contextual embedding: each passage is embedded and BM25-indexed with a short context
    that situates it in its document (``Hit.text`` stays the raw passage; the context is in
    ``Hit.metadata["context"]``). ``generator`` serves prose; ``records`` serves documents
    that are rows of fields (JSON, CSV, ``key: value`` lines), told apart by
    ``metadata["doc_type"]`` or, without it, by their shape."""

    # "module.path:Class" for a generator of your own (called without arguments)
    generator: str = "auto"  # "auto" | "none" | "heuristic" | "llm" | "module.path:Class"
    records: str = "same"  # same: as prose; else as generator
    max_tokens: int = Field(64, ge=0, le=512)  # most context tokens embedded with a passage
    concurrency: int = Field(4, ge=1, le=64)  # LLM calls in flight
    document_chars: int = Field(24_000, ge=1_000)  # longer documents reach the LLM as a summary

    @field_validator("generator", "records")
    @classmethod
    def _known_generator(cls, v: str, info: Any) -> str:
        names = {"auto", "none", "heuristic", "llm"} | (
            {"same"} if info.field_name == "records" else set()
        )
        if v in names or _is_class_path(v):
            return v
        raise ValueError(f"use one of {sorted(names)} or 'module.path:Class'")


class BM25Config(_Section):
    """Sparse retrieval on bm25s."""

    method: Literal["lucene", "robertson", "atire"] = "lucene"
    # k1/b chosen on the SciFact tune split (benchmarks/tune_scifact): 0.9/0.4 beat 1.2/0.75
    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)
    stemmer: str = "english"  # a PyStemmer algorithm, or "" for none
    stopwords: Literal["en", "none"] = "en"
    merge_ratio: float = Field(0.1, gt=0, le=1)  # merge delta segments past this share of docs


class FusionConfig(_Section):
    """How dense and sparse rankings are fused."""

    # weighted min-max fusion, dense 0.7 / bm25 1.0, chosen on the even SciFact ids. Re-measured
    # for issue 25 on a new half (benchmarks/results/tune_scifact_fusion.md): equal weights or
    # "zscale" gain SciFact nDCG@10 (+0.01 on the half chosen on) but lose needles (identifier
    # recall@1 1.0 -> 0.41 at 1M with equal weights; multihop recall@5 0.95 -> 0.77 at 100k with
    # "zscale"), so the default stays. "zscale" (z-scores anchored at each list's lowest) keeps
    # one retriever's clear match from being outscored by passages middling in both lists
    method: Literal["rrf", "weighted", "zscore", "zscale"] = "weighted"
    k: int = Field(60, ge=1)  # the RRF constant, used when method = "rrf"
    weights: dict[str, float] = Field(default_factory=lambda: {"dense": 0.7, "bm25": 1.0})
    depth: int = Field(100, ge=1, le=10_000)  # candidates taken from each retriever
    # a question asked with ``context=`` that names nothing itself ("Where did she grow up?")
    # is retrieved with up to this many names the context says appended (0: off)
    context_names: int = Field(3, ge=0, le=20)

    @field_validator("weights")
    @classmethod
    def _known_retrievers(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - RETRIEVERS)
        if unknown:
            raise ValueError(f"unknown retriever(s) {unknown}; known: {sorted(RETRIEVERS)}")
        if any(w < 0 for w in value.values()):
            raise ValueError("weights must be >= 0")
        return value


class RouterConfig(_Section):
    """Tier routing: the L1 hot cache in front of L2, and when to escalate to the L3 archive."""

    l1: bool = True  # the hot cache in front of L2 (benchmarks/results/router.md)
    l1_capacity: int = Field(10_000, ge=1)  # entries kept in SQLite
    l1_hot: int = Field(2_000, ge=1)  # entries whose answers are also held in memory
    l1_ttl_s: float = Field(86_400.0, gt=0)
    l1_fuzzy: bool = True  # near-duplicate (typo-level) matches after the exact and bag keys
    # entity questions ("who is X") about one known entity answered from its L1 card
    # (pensive_core.cards; benchmarks/results/entity_cards.md); the embedded engine only
    entity_cards: bool = True
    # a commit changing more than this share of the passages empties L1 instead of checking each
    # entry (corpus statistics moved for every question)
    l1_bulk_fraction: float = Field(0.05, gt=0, le=1)
    # after a commit, this many of the cached answers it affects (most used first) are answered
    # again at once from their stored query vectors; the rest are dropped
    l1_refresh: int = Field(256, ge=0)
    l1_refresh_ms: float = Field(250.0, ge=0)  # and at most this long per commit
    # escalate to the archive when the question asks for an identifier, figure or quote that the
    # top passages do not contain
    l3_exact: bool = True
    # ... and puts the archive's passages first when L2's confidence is below this, else after
    # L2's top passage
    l3_first_below: float = Field(0.7, ge=0, le=1)  # chosen in benchmarks/tune_router
    # ... and when the L2 confidence is below this (0: never for confidence alone)
    l3_below: float = Field(0.0, ge=0, le=1)
    # a read-only store makes ready what its first question needs (the query model, the graph
    # and statement views) in a background thread while it opens (benchmarks/first_query)
    warm: bool = True


#: Edge types of the entity graph (``pensive_core.graph.store`` builds one matrix per type).
GRAPH_EDGES = (
    "mentions",
    "mentioned_in",
    "is_a",
    "has_member",
    "next",
    "prev",
    "co_occurs",
    "about",
    "subject",
)


class LearningSection(_Section):
    """Learning from use (off by default: benchmarks measure a store that does not change as
    it is queried; turn it on for memory). Every passage returned is a use."""

    enabled: bool = False
    base_level_weight: float = Field(0.2, ge=0.0)  # most a much-used passage's score rises
    base_level_half_life_s: float = Field(7 * 86400.0, gt=0.0)
    hebbian_rate: float = Field(0.1, ge=0.0)  # added to an edge that led to a used passage
    hebbian_half_life_s: float = Field(30 * 86400.0, gt=0.0)
    hebbian_max: float = Field(1.0, gt=0.0)
    hebbian_prune_below: float = Field(0.01, ge=0.0)
    deterministic: bool = False  # a query counter for the clock instead of the wall clock


class GraphConfig(_Section):
    """The entity graph: built at ingest when enabled, spread from L2's top passages (and,
    when ``query_entities`` > 0, from the entity names the question says) at query time, its
    passages fused as a third list (``weight``).

    The defaults are the best setting measured (``benchmarks/multihop``) on the first half of
    HotpotQA-100 that costs SciFact nothing: activation goes from L2's top passages to the
    entities they name and from there to the passages *about* those entities (``about``), the
    way a reader follows a link. Spreading also to every passage that merely names an entity
    (``mentioned_in``) found no more two-hop pairs in the top 5 on HotpotQA and cost SciFact
    0.024 nDCG@10. The focused hop (``focus``) follows only the names beside what the question
    names, in the sentence that names it, to the other passages they lead to; at 0.01 of a
    passage's score it costs HotpotQA and SciFact little and finds the second fact of two-hop
    needles that no document is about (``benchmarks/niah``, tuned on needles of another seed);
    at 1.0 it outweighed the passages the ``about`` edges find (HotpotQA tune all@5 0.78 ->
    0.68). It follows only what is written as a name, shared by two passages: bridges of names
    up to 3 passages share, or of codes and acronyms too, cost SciFact about twice as much.
    The relay (``relay``) adds what activation cannot: it scores each passage a name leads to
    by the passage's own likeness to the question, and follows names to the passages naming
    them where no document has a title. Its share (0.25) was chosen on the same tune half
    (all@2 0.48 -> 0.52, all@5 unchanged; 1.0 gave 0.54) and SciFact's tune claims (1.0 cost
    0.004 nDCG@10 there, 0.25 nothing); reported on HotpotQA without titles, LoCoMo, needles.
    """

    enabled: bool = True
    # what finds entity mentions at ingest: "rules" (no model), "spacy" (the pipeline
    # ``spacy_model`` names, topped up by the rules) or "module.path:Class"; changing it
    # rebuilds the graph from the archive at the next open for writing
    extractor: str = "rules"
    spacy_model: str = "en_core_web_sm"  # an installed pipeline package or a saved folder
    weight: float = Field(1.0, ge=0.0)  # fusion weight of the graph's list
    hops: int = Field(2, ge=1, le=6)
    decay: float = Field(0.5, gt=0.0, le=1.0)
    threshold: float = Field(0.001, ge=0.0, lt=1.0)
    convergence: float = Field(0.5, ge=0.0)
    seed_hits: int = Field(3, ge=0, le=100)  # L2's top passages that seed activation
    query_entities: float = Field(0.0, ge=0.0, le=1.0)  # seed weight of names in the question
    cycles: int = Field(1, ge=1, le=5)  # recall cycles: each seeds from the last one's top
    # with ``context=``: each fused score x (1 + gain * the context's activation of it)
    context_gain: float = Field(1.0, ge=0.0)
    entity_weight: float = Field(0.3, ge=0.0)  # entity nodes relative to passages (1.0)
    # the focused hop, at this share of a passage's score (0: off): in L2's top ``focus_hits``
    # passages and those naming a rare name the question says, the names beside it in the
    # sentence that says it ("the leader of the Quorbel project" -> "Quorbel is led by Hana
    # Kraind") lead to the other passages about them or, where at most ``bridge_max`` passages
    # name one and no document is about it, to the other passages naming it (at ``bridge``)
    focus: float = Field(0.01, ge=0.0, le=1.0)
    focus_hits: int = Field(3, ge=0, le=100)  # L2's top passages read for the focused hop
    bridge: float = Field(1.0, ge=0.0)
    bridge_max: int = Field(2, ge=2, le=1000)
    # the relay (0: off): from L2's top ``relay_seeds`` passages, each name they give that the
    # question does not say leads to the passages about it and, when at most ``relay_fanout``
    # passages name it, to those naming it (at ``relay_naming``); a passage reached scores
    # (its seed's share of the top score) x (its own cosine with the question / L2's best)
    # and ranks at least at ``relay`` x that x the top score, so at <= 1 never above its seed;
    # ``relay_rounds`` > 1 relays again from the best reached
    relay: float = Field(0.25, ge=0.0, le=1.0)
    relay_seeds: int = Field(5, ge=1, le=100)
    relay_fanout: int = Field(5, ge=0, le=10_000)
    relay_naming: float = Field(0.5, ge=0.0, le=1.0)  # a naming link's weight (about: 1)
    relay_rounds: int = Field(1, ge=1, le=4)
    max_pair_entities: int = Field(30, ge=2)  # busier passages add no co-occurrence edges
    learning: LearningSection = LearningSection()
    aggregate: bool = True  # "how many times ...?" / "list every ..." answered from the graph
    aggregate_limit: int = Field(100, ge=1, le=10_000)  # most passages such an answer returns
    edges: dict[str, float] = Field(
        default_factory=lambda: {
            "mentions": 1.0,
            "mentioned_in": 0.0,
            "is_a": 0.0,
            "has_member": 0.0,
            "next": 0.0,
            "prev": 0.0,
            "co_occurs": 0.0,
            "about": 1.0,
            "subject": 0.0,
        }
    )

    @field_validator("edges")
    @classmethod
    def _known_edges(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(GRAPH_EDGES))
        if unknown:
            raise ValueError(f"unknown edge type(s) {unknown}; known: {list(GRAPH_EDGES)}")
        if any(not (w >= 0) for w in v.values()):
            raise ValueError("edge weights must be >= 0")
        defaults = cls.model_fields["edges"].get_default(call_default_factory=True)
        return {**defaults, **v}  # a partial table overrides only the edges it names


class TemporalConfig(_Section):
    """Temporal resolution: statements about the same slot (a subject's attribute) supersede
    older ones; questions with a time in them favour passages true at that time.

    Scores are multiplied, never replaced: a superseded passage by ``demote``, a passage whose
    dates overlap the time a question asks about by ``1 + interval_gain``, a passage holding a
    date by ``1 + when_gain`` for a "when ...?" question, a passage whose statement holds and
    fills the slot the question names (its rare words weigh most) by ``1 + slot_gain * match``.
    """

    enabled: bool = True
    # what reads statements at ingest: "rules" or "module.path:Class"; changing it rebuilds
    # the statements from the archive at the next open for writing
    extractor: str = "rules"
    demote: float = Field(0.5, ge=0.0, le=1.0)  # score factor of a superseded passage
    surface: bool = True  # a superseded passage brings the passage that superseded it
    interval_gain: float = Field(2.0, ge=0.0)  # dates overlapping the question's time
    when_gain: float = Field(0.0, ge=0.0)  # any date, for "when did ...?" questions
    slot_gain: float = Field(2.0, ge=0.0)  # a statement filling the slot the question names
    question_dates: bool = True  # "as of 2015" / "in 1990" in the question act like as_of
    relative_dates: bool = True  # "yesterday" in a document resolved against its timestamp
    # subjects: passages about the same subject, whatever their wording (a rare question term
    # in both, embeddings close), ordered by valid time (their documents' timestamps); for a
    # question about now (or as of a date) the newest that answers the question about as well
    # stands in for the older ones, which are demoted (x ``demote``); only for a question
    # about now or one time (not a span, a past "when did", a claim). Off: it also demotes
    # still-true passages (changed-facts controls, dated SciFact asked as questions, dated
    # LoCoMo), see benchmarks/results/changed_facts.md; undated passages never take part.
    subjects: bool = False
    subject_window: int = Field(10, ge=2, le=1000)  # top fused candidates compared
    # passage-to-passage cosine at or above which two passages can be about one subject
    subject_similarity: float = Field(0.5, ge=-1.0, le=1.0)
    # the newer passage's fused score must be at least this fraction of the older one's
    # (both chosen on the choosing split of benchmarks/data/changed_facts.jsonl)
    subject_relevance: float = Field(0.5, ge=0.0, le=10.0)


class MemoryConfig(_Section):
    """Conversation memory (``Pensive.conversation``): each session is its own small store of
    turns; ``context()`` builds a prompt from recalled turns, a rolling summary of older ones,
    the recent turns verbatim and (optionally) passages from the main store, within a budget.

    After a topic shift (drift) retrieval adapts for ``shift_turns`` turns: the recency boost
    becomes ``shift_recency_weight``, recall widens to ``shift_scope`` and the main store gives
    ``shift_documents_k`` passages.
    """

    recent_turns: int = Field(6, ge=0, le=1000)  # shown verbatim in context()
    recall_k: int = Field(8, ge=1, le=1000)  # older turns recalled into context()
    recency_weight: float = Field(0.1, ge=0.0)  # score x (1 + w * 2^(-age / half_life))
    recency_half_life: float = Field(20.0, gt=0.0)  # in turns
    # chosen on the tune half of LoCoMo's questions (benchmarks/memory):
    neighbour_weight: float = Field(0.5, ge=0.0)  # a turn gains w x its best neighbour's score
    question_gain: float = Field(0.5, ge=0.0)  # ... x (1 + gain) when that neighbour asked it
    speaker_weight: float = Field(0.25, ge=0.0)  # x (1 + w) for turns by a speaker the query names
    window_turns: int = Field(5, ge=0, le=50)  # trailing windows indexed beside turns (0/1: off)
    window_weight: float = Field(1.5, ge=0.0)  # a turn gains w x its best window's score
    documents_k: int = Field(0, ge=0, le=1000)  # main-store passages in context()
    drift: bool = True  # topic-shift detection between consecutive turns
    # tuned on TIAGE's train split (benchmarks/memory_tiage.py); the score is 1 - similarity to
    # the recent window + novelty_weight x lexical novelty + question cues
    drift_window: int = Field(2, ge=1, le=100)
    drift_threshold: float = 0.84
    drift_novelty_weight: float = Field(0.0, ge=0.0)
    shift_turns: int = Field(2, ge=0)  # turns after a shift that retrieval stays adapted
    shift_recency_weight: float = Field(0.0, ge=0.0)
    shift_scope: Literal["session", "user"] = "user"  # "user": the user's other sessions too
    shift_documents_k: int = Field(2, ge=0, le=1000)
    segment_max_turns: int = Field(40, ge=2)  # a segment this long is closed and summarised
    summary: Literal["auto", "extractive", "llm", "none"] = "auto"  # auto: llm if given
    summary_tokens: int = Field(120, ge=16, le=4000)  # per segment
    followup_reuse: bool = True  # "and her?" reuses the last recall instead of searching
    followup_max_words: int = Field(6, ge=1, le=50)
    max_open_sessions: int = Field(32, ge=1)  # past this, idle sessions release their files
    hv_dim: int = Field(2048, ge=64)  # hypervector selector (recall(method="hypervector"))
    hv_seed: int = 0
    tokenizer: str = "cl100k_base"  # tiktoken encoding for prompt budgets (bundled offline)
    summaries_share: float = Field(0.10, ge=0.0, le=1.0)
    retrieved_share: float = Field(0.60, ge=0.0, le=1.0)
    history_share: float = Field(0.20, ge=0.0, le=1.0)
    headroom: float = Field(0.10, ge=0.0, lt=1.0)  # of the budget, left for the answer
    # how context() shows retrieved items (memory/strategies.py: concatenate | weighted |
    # recency | template | a line template with {text} | module:Class) and lays out the
    # prompt (memory/templates.py: "" for ## sections | qa | research | conversational |
    # template text with {query} | a file path)
    prompt_strategy: str = "concatenate"
    prompt_template: str = ""
    # a main-store document of at most this many tokens is shown whole; a longer one as its
    # matched passages, each widened by document_window passages a side, merged (0: never whole)
    document_whole_tokens: int = Field(300, ge=0)
    document_window: int = Field(1, ge=0, le=20)

    @field_validator("prompt_strategy")
    @classmethod
    def _known_strategy(cls, v: str) -> str:
        from .memory.strategies import resolve_strategy

        resolve_strategy(v, error=ValueError)
        return v

    @field_validator("prompt_template")
    @classmethod
    def _valid_template(cls, v: str) -> str:
        from .memory.templates import resolve_template

        resolve_template(v, error=ValueError)
        return v


class RerankConfig(_Section):
    """The rerank stage: a cross-encoder reads the question with each of L2's top candidates
    and orders them by its score. Off unless ``model`` names a local sentence-transformers
    CrossEncoder folder (or ``"module.path:Class"``, a
    :class:`~pensive_core.rerank.Reranker` called without arguments). A query asking for
    ``k`` passages reranks the best ``max(k, candidates)`` fused candidates and returns the
    best ``k``; a reranker that fails leaves L2's order (counted in ``stats()["rerank"]``)."""

    model: str = ""
    candidates: int = Field(40, ge=1, le=1000)
    batch_size: int = Field(32, ge=1, le=4096)
    max_length: int = Field(0, ge=0, le=8192)  # longest (question, passage) pair; 0: the model's


class ServerConfig(_Section):
    """``pensive serve``: where it listens and what it accepts. API keys never live here: they
    come from a keys file (``--keys``) or the ``PENSIVE_API_KEYS`` environment variable."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    max_body_bytes: int = Field(8 * 2**20, ge=1024)  # larger requests: 413
    max_document_chars: int = Field(2_000_000, ge=1)  # per document, after decoding
    max_documents: int = Field(1000, ge=1)  # per ingest request
    max_query_chars: int = Field(4000, ge=1, le=20_000)
    max_k: int = Field(100, ge=1, le=1000)
    max_json_depth: int = Field(32, ge=2, le=1000)  # nesting of a JSON body
    query_timeout_s: float = Field(30.0, gt=0)  # a query running longer: 504
    ingest_wait_s: float = Field(60.0, ge=0)  # an ingest still running after this: 202 + job
    # read-only store handles per namespace: on 2 cores, 1 answered 31.5 queries/s (17.1 with
    # 10% ingests) against 22.9 (11.5) with 2 and 23.3 (10.1) with 4 (benchmarks/reliability)
    readers: int = Field(1, ge=1, le=64)
    # when the writer answers again the cached answers a commit dropped: "commit" (inside it,
    # before the ingest is acknowledged), "idle" (once no write waits) or "off" (never: the
    # next asker answers and caches it). At the same offered load (benchmarks/reliability
    # --rate) idle cut ingest p50 4x for 2-5 ms of query p50: see docs/speed.md
    cache_refresh: Literal["commit", "idle", "off"] = "idle"
    cors_origins: list[str] = []  # empty: no CORS headers (browsers refuse other origins)
    recent_queries: int = Field(50, ge=0, le=10_000)  # kept for the dashboard


class StorageConfig(_Section):
    """Where the store's persistent parts live: ``"embedded"`` (SQLite and files in the store
    folder, one writer process) or ``"postgres"`` (every part in one Postgres with pgvector,
    shared by any number of processes; see :mod:`pensive_core.storage.postgres`).

    ``dsn`` is never saved with the store (it says where the store is, and may hold a
    password when it comes from ``PENSIVE_STORAGE__DSN``); put the password in
    ``PGPASSWORD`` or ``~/.pgpass`` rather than in a config file."""

    engine: Literal["embedded", "postgres"] = "embedded"
    dsn: str = ""  # "host=db.internal dbname=pensive user=app" or postgresql://app@db/pensive
    # the default namespace's Postgres schema; another namespace's is "{schema}__{namespace}"
    schema_name: str = Field("pensive", pattern=r"^[a-z][a-z0-9_]{0,39}$")
    connect_timeout_s: float = Field(10.0, gt=0, le=600)

    @field_validator("schema_name")
    @classmethod
    def _one_reading(cls, v: str) -> str:
        if "__" in v or v.endswith("_"):
            raise ValueError("no '__' and no trailing '_': '{schema}__{namespace}' names one")
        return v


class PensiveConfig(_Section):
    """The whole configuration. Every key has a default (the docs' reference lists them)."""

    storage: StorageConfig = StorageConfig()
    backend: BackendConfig = BackendConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    bm25: BM25Config = BM25Config()
    fusion: FusionConfig = FusionConfig()
    router: RouterConfig = RouterConfig()
    graph: GraphConfig = GraphConfig()
    temporal: TemporalConfig = TemporalConfig()
    context: ContextConfig = ContextConfig()
    rerank: RerankConfig = RerankConfig()
    memory: MemoryConfig = MemoryConfig()
    server: ServerConfig = ServerConfig()


# Keys a built store depends on: opening a store with a different value would be silent garbage.
STRUCTURAL_KEYS = (
    "backend.name",
    "backend.namespace",
    "embedder.name",
    "embedder.dim",
    "chunking.method",
    "chunking.max_tokens",
    "chunking.target_tokens",
    "chunking.min_tokens",
    "chunking.reserve_tokens",
    "chunking.overlap_sentences",
    "bm25.stemmer",
    "bm25.stopwords",
)


def _is_class_path(spec: str) -> bool:
    from .plugins import is_class_path

    return is_class_path(spec)


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("PENSIVE_") or "__" not in name:
            continue  # PENSIVE_HOME and friends are not config keys
        path = name[len("PENSIVE_") :].lower().split("__")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def closest_key(loc: Sequence[Any]) -> str | None:
    """The valid key nearest an unknown one, as a dotted path, or None when none is near.

    Args:
        loc: The unknown key's path, e.g. ``("fusion", "methd")``.

    Returns:
        E.g. ``"fusion.method"``; None when ``loc`` is inside a free-form table (a dict of
        weights) or no valid key there is close (difflib's ratio below 0.6).
    """
    model: type[BaseModel] = PensiveConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        section = field.annotation if field is not None else None
        if not (isinstance(section, type) and issubclass(section, BaseModel)):
            return None
        model = section
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return ".".join([*(str(p) for p in loc[:-1]), close[0]]) if close else None


def _format_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            near = closest_key(err["loc"])
            hint = f" (did you mean '{near}'?)" if near else ""
            parts.append(f"unknown config key '{where}'{hint}")
        else:
            parts.append(f"'{where}': {err['msg']} (got {err.get('input')!r})")
    return "; ".join(parts)


def read_config_source(config: Mapping[str, Any] | str | os.PathLike[str] | None) -> dict[str, Any]:
    """Read a config source (dict, TOML path, or None) into a plain dict, unvalidated.

    Raises:
        ConfigError: If the file is missing or not valid TOML, or the type is wrong.
    """
    if config is None:
        return {}
    if isinstance(config, PensiveConfig):
        return config.model_dump()
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        try:
            with path.open("rb") as fh:
                return tomllib.load(fh)
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    raise ConfigError(
        f"config must be a dict, a path to a TOML file, or None; got {type(config).__name__}"
    )


def load_config(
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    base: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> PensiveConfig:
    """Build a validated config: defaults, then ``base``, then ``config``, then environment.

    Args:
        config: A dict of the same shape as ``pensive.toml``, a path to such a file, or None.
        base: A config to start from instead of the defaults (e.g. the one saved in a store).
        environ: Environment to read ``PENSIVE_*`` overrides from (default ``os.environ``).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: On an unknown key, a wrong value, or an unreadable file.
    """
    merged = _deep_merge(PensiveConfig().model_dump(), base or {})
    merged = _deep_merge(merged, read_config_source(config))
    merged = _deep_merge(merged, env_overrides(os.environ if environ is None else environ))
    try:
        return PensiveConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration: {_format_validation(exc)}") from None


def saved_config(cfg: PensiveConfig) -> dict[str, Any]:
    """The config as a store saves it: everything but where the store is (``storage.dsn``,
    which may hold a password and differs between machines)."""
    out = cfg.model_dump()
    out["storage"]["dsn"] = ""
    return out


#: Vector backends whose index lives in the store's local folder.
LOCAL_BACKENDS = ("faiss", "memory")


def local_backend_refused(name: str, engine: str) -> ConfigError:
    """The error for a local-folder vector backend on an engine several processes share."""
    return ConfigError(
        f"backend.name = {name!r} keeps vectors in the local folder, which replicas do not "
        f'share: with storage.engine = "{engine}" use "pgvector" (the default there) or a '
        "managed backend"
    )


def shared_backend(cfg: PensiveConfig, given: Any) -> PensiveConfig:
    """A new store of an engine several processes share keeps its vectors in that engine
    (``pgvector``) unless the caller's config or environment names a backend: the default
    FAISS files would live in one machine's folder.

    Args:
        cfg: The effective config of a store being created.
        given: What the caller passed (dict, TOML path, None).
    """
    named = read_config_source(given).get("backend", {})
    from_env = env_overrides(os.environ).get("backend", {})
    if (isinstance(named, Mapping) and "name" in named) or "name" in from_env:
        if cfg.backend.name in LOCAL_BACKENDS:  # refused before the store saves it
            raise local_backend_refused(cfg.backend.name, cfg.storage.engine)
        return cfg
    return cfg.model_copy(update={"backend": cfg.backend.model_copy(update={"name": "pgvector"})})


def get_key(cfg: PensiveConfig, dotted: str) -> Any:
    """Read a dotted key (``"embedder.name"``) from a config."""
    node: Any = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


_SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "credential", "auth")


def redacted(value: Any, _name: str = "") -> Any:
    """A config (model or dict) as a plain dict with secrets masked, safe to show or log.

    A value is masked when its key names a secret (``api_key``, ``token``, ...) unless the key
    only names where the secret lives (``api_key_env``); a URL loses its ``user:password@``.
    """
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): redacted(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v, _name) for v in value]
    name = _name.lower()
    names_secret = any(w in name for w in _SECRET_WORDS)
    names_other = name.endswith(("_env", "_tokens", "tokenizer"))  # where a secret lives; sizes
    if isinstance(value, str) and value and names_secret and not names_other:
        return "***"
    if isinstance(value, str):
        # a connection string's password, however spelled: libpq's keyword, a URL parameter
        value = _KEYWORD_PASSWORD.sub(r"\1***", value)
    if isinstance(value, str) and "://" in value and "@" in value.split("://", 1)[1]:
        scheme, rest = value.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return value


_KEYWORD_PASSWORD = re.compile(
    r"""((?:^|[\s?&])password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&]+)""", re.IGNORECASE
)
