"""Pensive: hierarchical context retrieval and long-term memory for LLM applications.

Importing this package loads no model, opens no file and touches no network.
"""

from .cards import CardStatement, EntityCard
from .chunking import chunk_text
from .config import PensiveConfig, load_config
from .engine import Pensive
from .errors import (
    BackendError,
    ConfigError,
    CorruptStoreError,
    IngestGroupsError,
    InputError,
    MissingDependencyError,
    NotFoundError,
    PensiveError,
    SchemaVersionError,
    StorageError,
)
from .explain import ExpectedTrace, Explanation, StageInfo, StageRank
from .fusion import Fused, rrf, weighted, zscore
from .integrity import repair_store, verify_store
from .memory import (
    BuiltPrompt,
    Conversation,
    DriftDetector,
    DriftSignal,
    HypervectorSelector,
    PromptBuilder,
    PromptItem,
    PromptStrategy,
    PromptTemplate,
    Turn,
    render_turn,
    render_turns,
)
from .timeutil import ensure_utc
from .tokenize import Tokenizer
from .types import (
    Aggregation,
    Chunk,
    Document,
    Hit,
    IngestReport,
    QueryResult,
    TimeScope,
    VectorQuery,
)

__version__ = "0.1.0"

__all__ = [
    "Aggregation",
    "BackendError",
    "BuiltPrompt",
    "CardStatement",
    "Chunk",
    "ConfigError",
    "CorruptStoreError",
    "Conversation",
    "Document",
    "DriftDetector",
    "DriftSignal",
    "EntityCard",
    "ExpectedTrace",
    "Explanation",
    "Fused",
    "Hit",
    "HypervectorSelector",
    "IngestGroupsError",
    "IngestReport",
    "InputError",
    "MissingDependencyError",
    "NotFoundError",
    "Pensive",
    "PensiveConfig",
    "PensiveError",
    "PromptBuilder",
    "PromptItem",
    "PromptStrategy",
    "PromptTemplate",
    "QueryResult",
    "SchemaVersionError",
    "StageInfo",
    "StageRank",
    "StorageError",
    "TimeScope",
    "Tokenizer",
    "Turn",
    "VectorQuery",
    "chunk_text",
    "ensure_utc",
    "load_config",
    "render_turn",
    "render_turns",
    "repair_store",
    "rrf",
    "verify_store",
    "weighted",
    "zscore",
    "__version__",
]
