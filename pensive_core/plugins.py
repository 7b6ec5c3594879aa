"""One resolver for every plug point: a name from the registry, ``"module.path:Class"``, or an
instance passed in.

Each plug kind is one :class:`typing.Protocol`, owned by the module of its concern, declaring
every member the engine uses:

============== ================================================ ========================
kind           protocol                                         built-in names
============== ================================================ ========================
``backend``    :class:`~pensive_core.backends.VectorBackend`    faiss, memory, chroma,
                                                                pinecone, weaviate
``embedder``   :class:`~pensive_core.embedders.Embedder`        minilm, hash (or a local
                                                                model folder)
``context``    :class:`~pensive_core.context.ContextGenerator`  heuristic (llm: from an
                                                                LLM given to Pensive)
``extractor``  :class:`~pensive_core.graph.EntityExtractor`     rules, spacy
``statements`` :class:`~pensive_core.temporal.StatementExtractor` rules
``reranker``   :class:`~pensive_core.rerank.Reranker`           a local cross-encoder folder
``strategy``   :class:`~pensive_core.memory.PromptStrategy`     concatenate, weighted,
                                                                recency, template
============== ================================================ ========================

A name the registry knows maps to ``"module:Class"`` and is imported only when used (a missing
optional dependency raises :class:`~pensive_core.errors.MissingDependencyError` naming its
extra). Anything else with a colon is imported as a user's class. What the class is called with
is the kind's factory's business (a backend gets its folder, dimension and options; the others
their config section's settings); the result is checked against the kind's protocol.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = ["PLUG_KINDS", "PlugKind", "build", "check_plugin", "is_class_path", "resolve_class"]


@dataclass(frozen=True)
class PlugKind:
    """One plug point.

    Args:
        kind: Its name (``"backend"``, ``"embedder"``...).
        key: The config key that names it (for error messages).
        protocol: The protocol an instance must satisfy (``runtime_checkable``).
        names: Built-in names and the ``"module:Class"`` each stands for.
    """

    kind: str
    key: str
    protocol: Callable[[], type]
    names: Mapping[str, str]


def _protocol(module: str, name: str) -> Callable[[], type]:
    def load() -> type:
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]

    return load


PLUG_KINDS: dict[str, PlugKind] = {
    "backend": PlugKind(
        "backend",
        "backend.name",
        _protocol("pensive_core.backends.base", "VectorBackend"),
        {
            "faiss": "pensive_core.backends.faiss:FaissBackend",
            "memory": "pensive_core.backends.memory:MemoryBackend",
            "chroma": "pensive_core.backends.chroma:ChromaBackend",
            "pinecone": "pensive_core.backends.pinecone:PineconeBackend",
            "weaviate": "pensive_core.backends.weaviate:WeaviateBackend",
            "pgvector": "pensive_core.backends.pgvector:PgvectorBackend",
        },
    ),
    "embedder": PlugKind(
        "embedder",
        "embedder.name",
        _protocol("pensive_core.embedders.base", "Embedder"),
        {
            "hash": "pensive_core.embedders.hash:HashEmbedder",
            "minilm": "pensive_core.embedders.sentence_transformers:SentenceTransformerEmbedder",
        },
    ),
    "context": PlugKind(
        "context",
        "context.generator",
        _protocol("pensive_core.context.base", "ContextGenerator"),
        {"heuristic": "pensive_core.context.heuristic:HeuristicContextGenerator"},
    ),
    "extractor": PlugKind(
        "extractor",
        "graph.extractor",
        _protocol("pensive_core.graph.extract", "EntityExtractor"),
        {
            "rules": "pensive_core.graph.extract:RuleExtractor",
            "spacy": "pensive_core.graph.spacy_extract:SpacyExtractor",
        },
    ),
    "statements": PlugKind(
        "statements",
        "temporal.extractor",
        _protocol("pensive_core.temporal.statements", "StatementExtractor"),
        {"rules": "pensive_core.temporal.statements:RuleStatementExtractor"},
    ),
    "reranker": PlugKind(
        "reranker",
        "rerank.model",
        _protocol("pensive_core.rerank", "Reranker"),
        {"cross-encoder": "pensive_core.rerank:CrossEncoderReranker"},
    ),
    "strategy": PlugKind(
        "strategy",
        "memory.prompt_strategy",
        _protocol("pensive_core.memory.strategies", "PromptStrategy"),
        {
            "concatenate": "pensive_core.memory.strategies:Concatenate",
            "weighted": "pensive_core.memory.strategies:Weighted",
            "recency": "pensive_core.memory.strategies:Recency",
            "template": "pensive_core.memory.strategies:LineTemplate",
        },
    ),
}


def is_class_path(spec: str) -> bool:
    """Whether ``spec`` reads as ``"module.path:Class"`` (not a Windows drive like ``C:\\``)."""
    module, sep, attr = spec.partition(":")
    return bool(sep) and bool(module) and attr.isidentifier() and "/" not in module


def resolve_class(kind: str, spec: str) -> type:
    """The class a built-in name or ``"module.path:Class"`` stands for.

    Args:
        kind: A key of :data:`PLUG_KINDS`.
        spec: A built-in name of that kind, or ``"module.path:Class"``.

    Returns:
        The class (not yet instantiated).

    Raises:
        ConfigError: If the name is unknown, the module cannot be imported or has no such
            attribute.
        MissingDependencyError: If a built-in's optional dependency is not installed.
    """
    plug = PLUG_KINDS[kind]
    target = plug.names.get(spec, spec)
    if not is_class_path(target):
        raise ConfigError(
            f"{plug.key} {spec!r} is unknown; use one of {sorted(plug.names)} or "
            "'module.path:Class'"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if spec in plug.names:
            raise  # a MissingDependencyError from inside the module already names the extra
        raise ConfigError(f"{plug.key} {spec!r}: cannot import module {module_name!r}") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise ConfigError(f"{plug.key} {spec!r}: {module_name!r} has no attribute {attr!r}")
    return cls  # type: ignore[no-any-return]


def check_plugin(kind: str, obj: Any, what: str = "") -> Any:
    """``obj`` if it satisfies the kind's protocol.

    Args:
        kind: A key of :data:`PLUG_KINDS`.
        obj: The instance.
        what: How the caller named it, for the message (default: the config key).

    Returns:
        ``obj``.

    Raises:
        ConfigError: If it lacks a member the protocol declares.
    """
    plug = PLUG_KINDS[kind]
    protocol = plug.protocol()
    if not isinstance(obj, protocol):
        members = set(getattr(protocol, "__annotations__", {}))
        members |= {n for n, v in vars(protocol).items() if callable(v)}
        wanted = sorted(n for n in members if not n.startswith("_"))
        raise ConfigError(
            f"{what or plug.key}: {type(obj).__qualname__} does not implement "
            f"{protocol.__qualname__} (it needs {', '.join(wanted) or 'its members'})"
        )
    return obj


def build(kind: str, spec: str, **kwargs: Any) -> Any:
    """Resolve ``spec`` and call the class with ``kwargs``; the result is checked.

    Raises:
        ConfigError: As :func:`resolve_class` and :func:`check_plugin`, and when the class
            cannot be called with ``kwargs``.
    """
    cls = resolve_class(kind, spec)
    what = f"{PLUG_KINDS[kind].key} {spec!r}"
    if not callable(cls):
        raise ConfigError(f"{what}: {type(cls).__name__} is not a class")
    try:
        made = cls(**kwargs)
    except TypeError as exc:  # it does not take what this kind is built with
        raise ConfigError(
            f"{what}: cannot be built with {sorted(kwargs) or 'no arguments'}: {exc}"
        ) from exc
    return check_plugin(kind, made, what)
