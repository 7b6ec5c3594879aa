"""The entity graph: extraction, storage and spreading activation."""

from .activation import ActivationConfig, spread, top_chunks, transition
from .extract import EntityExtractor, Mention, RuleExtractor, merge_aliases, normalize_entity
from .spacy_extract import SpacyExtractor  # imports spaCy only when one is made
from .store import EDGE_TYPES, GraphStore, GraphView

__all__ = [
    "EDGE_TYPES",
    "ActivationConfig",
    "EntityExtractor",
    "GraphStore",
    "GraphView",
    "Mention",
    "RuleExtractor",
    "SpacyExtractor",
    "merge_aliases",
    "normalize_entity",
    "spread",
    "top_chunks",
    "transition",
]
