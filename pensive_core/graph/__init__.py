"""The entity graph: extraction, storage and spreading activation."""

from .extract import EntityExtractor, Mention, RuleExtractor, merge_aliases, normalize_entity

__all__ = ["EntityExtractor", "Mention", "RuleExtractor", "merge_aliases", "normalize_entity"]
