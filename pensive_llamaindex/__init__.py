"""LlamaIndex adapters for Pensive: a retriever, node postprocessors and a memory block.

They convert between Pensive's values and LlamaIndex's types; the logic is ``pensive_core``'s.
Needs the ``llamaindex`` extra (``pip install "pensive[llamaindex]"``); importing this package
without it raises :class:`~pensive_core.errors.MissingDependencyError`.

``PensiveRetriever`` is the deprecated name of :class:`PensiveLlamaIndexRetriever` (importing
it warns; it is removed in the next release).
"""

from typing import Any

from pensive_core.deprecation import renamed

from .memory import PensiveMemoryBlock, render_turn
from .postprocessors import (
    GraphBoostPostprocessor,
    RerankPostprocessor,
    TemporalPostprocessor,
    TokenBudgetPostprocessor,
)
from .retriever import PensiveLlamaIndexRetriever, hit_to_node

__all__ = [
    "GraphBoostPostprocessor",
    "PensiveMemoryBlock",
    "PensiveLlamaIndexRetriever",
    "RerankPostprocessor",
    "TemporalPostprocessor",
    "TokenBudgetPostprocessor",
    "hit_to_node",
    "render_turn",
]


def __getattr__(name: str) -> Any:
    # the old name, kept one release: both adapter packages had a PensiveRetriever, so
    # importing both in one module silently shadowed one
    if name == "PensiveRetriever":  # renamed: both adapters had the name, so importing
        # both in one module silently shadowed one
        return renamed(__name__, name, "PensiveLlamaIndexRetriever", PensiveLlamaIndexRetriever)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
