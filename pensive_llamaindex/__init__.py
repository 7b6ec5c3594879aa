"""LlamaIndex adapters for Pensive: a retriever, node postprocessors and a memory block.

They convert between Pensive's values and LlamaIndex's types; the logic is ``pensive_core``'s.
Needs the ``llamaindex`` extra (``pip install "pensive[llamaindex]"``); importing this package
without it raises :class:`~pensive_core.errors.MissingDependencyError`.
"""

from .memory import PensiveMemoryBlock, render_turn
from .postprocessors import (
    GraphBoostPostprocessor,
    RerankPostprocessor,
    TemporalPostprocessor,
    TokenBudgetPostprocessor,
)
from .retriever import PensiveRetriever, hit_to_node

__all__ = [
    "GraphBoostPostprocessor",
    "PensiveMemoryBlock",
    "PensiveRetriever",
    "RerankPostprocessor",
    "TemporalPostprocessor",
    "TokenBudgetPostprocessor",
    "hit_to_node",
    "render_turn",
]
