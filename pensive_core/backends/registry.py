"""Backends resolved by name, lazily, or as ``"module.path:Class"`` for a user's own."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import VectorBackend

__all__ = ["BACKENDS", "create_backend", "resolve_backend_class"]

BACKENDS: dict[str, str] = {
    "faiss": "pensive_core.backends.faiss:FaissBackend",
    "memory": "pensive_core.backends.memory:MemoryBackend",
    "chroma": "pensive_core.backends.chroma:ChromaBackend",
    "pinecone": "pensive_core.backends.pinecone:PineconeBackend",
    "weaviate": "pensive_core.backends.weaviate:WeaviateBackend",
}


def resolve_backend_class(name: str) -> type:
    """Turn a backend name or ``"module:Class"`` into the class.

    Raises:
        ConfigError: If the name is unknown or the class cannot be imported.
    """
    target = BACKENDS.get(name, name)
    if ":" not in target:
        raise ConfigError(
            f"backend.name {name!r} is unknown; use one of {sorted(BACKENDS)} or 'module.path:Class'"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if name in BACKENDS:
            raise  # a MissingDependencyError from inside the module already names the extra
        raise ConfigError(f"backend.name {name!r}: cannot import module {module_name!r}") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise ConfigError(f"backend.name {name!r}: {module_name!r} has no attribute {attr!r}")
    return cls  # type: ignore[no-any-return]


def create_backend(name: str, folder: Path, dim: int, options: Any = None) -> VectorBackend:
    """Open (or create) the named backend's store in ``folder`` for vectors of ``dim``.

    Raises:
        ConfigError: If the name is unknown or the class does not implement the protocol.
    """
    cls = resolve_backend_class(name)
    backend = cls(folder=folder, dim=dim, options=options)
    if not isinstance(backend, VectorBackend):
        raise ConfigError(f"backend {name!r} ({cls.__qualname__}) does not implement VectorBackend")
    return backend
