"""The entity graph: extraction, storage and spreading activation."""

from .activation import ActivationConfig, spread, top_chunks, transition
from .aggregate import AggregateQuery, is_aggregation, parse_aggregation
from .extract import EntityExtractor, Mention, RuleExtractor, merge_aliases, normalize_entity
from .learning import BaseLevel, EdgeStrengths, Hebbian, LearningConfig, UseHistory
from .spacy_extract import SpacyExtractor  # imports spaCy only when one is made
from .store import EDGE_TYPES, SCHEMA_VERSION, GraphStore, GraphTables, GraphView, subject_key

__all__ = [
    "BaseLevel",
    "EdgeStrengths",
    "GraphTables",
    "UseHistory",
    "Hebbian",
    "LearningConfig",
    "AggregateQuery",
    "EDGE_TYPES",
    "SCHEMA_VERSION",
    "ActivationConfig",
    "EntityExtractor",
    "GraphStore",
    "GraphView",
    "Mention",
    "RuleExtractor",
    "SpacyExtractor",
    "is_aggregation",
    "merge_aliases",
    "normalize_entity",
    "parse_aggregation",
    "spread",
    "subject_key",
    "top_chunks",
    "transition",
]
