"""LangChain adapters for Pensive: retriever, chat history, LLM cache, store, agent memory.

The adapters only convert between Pensive's types and LangChain's; the logic is in
``pensive_core``. Install with ``pip install "pensive[langchain]"``.

``PensiveRetriever`` is the deprecated name of :class:`PensiveLangChainRetriever` (importing it
warns; it is removed in the next release).
"""

from __future__ import annotations

import importlib
from typing import Any

from pensive_core.deprecation import renamed
from pensive_core.errors import MissingDependencyError

try:
    import langchain_core  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised with the extra uninstalled
    raise MissingDependencyError("langchain_core", "langchain", "The LangChain adapters") from e

from .cache import PensiveCache
from .history import PensiveChatMessageHistory
from .retriever import PensiveLangChainRetriever

__all__ = [
    "PensiveLangChainRetriever",
    "PensiveChatMessageHistory",
    "PensiveCache",
    "PensiveStore",
    "PensiveMemoryMiddleware",
]

# imported on first use: the LangGraph store and the agent middleware need langgraph/langchain
_LAZY = {
    "PensiveStore": ".store",
    "PensiveMemoryMiddleware": ".middleware",
}


def __getattr__(name: str) -> Any:
    if name == "PensiveRetriever":  # renamed: both adapters had the name, so importing
        # both in one module silently shadowed one
        return renamed(__name__, name, "PensiveLangChainRetriever", PensiveLangChainRetriever)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        mod = importlib.import_module(module, __name__)
    except ModuleNotFoundError as e:
        if e.name == __name__ + module:  # the module itself is absent, not one of its imports
            raise AttributeError(
                f"module {__name__!r} has no attribute {name!r} ({__name__}{module} is missing)"
            ) from e
        raise
    value = getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
