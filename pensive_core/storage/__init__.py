"""Storage engines: where a store's persistent parts live (see :mod:`.base`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .base import StorageEngine
from .embedded import EmbeddedStorage

__all__ = ["EmbeddedStorage", "StorageEngine", "open_storage"]


def open_storage(engine: str, path: Path, read_only: bool) -> StorageEngine:
    """The storage engine ``[storage] engine`` names, for the store at ``path``.

    Raises:
        ConfigError: If the engine is unknown.
    """
    if engine == "embedded":
        return EmbeddedStorage(path, read_only)
    raise ConfigError(f"storage.engine {engine!r} is unknown; use 'embedded'")
