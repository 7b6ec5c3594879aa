"""Situating contexts for passages: the plug point and its generators."""

from .base import ContextGenerator, ContextRequest, join_context
from .cache import ContextCache
from .heuristic import HeuristicContextGenerator, is_records, leading_referents
from .llm import LLMContextGenerator, as_completion

__all__ = [
    "ContextCache",
    "ContextGenerator",
    "ContextRequest",
    "HeuristicContextGenerator",
    "LLMContextGenerator",
    "as_completion",
    "is_records",
    "join_context",
    "leading_referents",
]
