"""Storage engines: where a store's persistent parts live (see :mod:`.base`)."""

from __future__ import annotations

from pathlib import Path

from ..config import StorageConfig
from ..errors import ConfigError
from .base import StorageEngine
from .embedded import EmbeddedStorage

__all__ = ["EmbeddedStorage", "StorageEngine", "open_storage", "store_exists"]


def open_storage(cfg: StorageConfig, path: Path, read_only: bool) -> StorageEngine:
    """The storage engine ``[storage] engine`` names, for the store at ``path``.

    Raises:
        ConfigError: If the engine is unknown.
    """
    if cfg.engine == "embedded":
        return EmbeddedStorage(path, read_only)
    if cfg.engine == "postgres":
        from .postgres import PostgresStorage

        return PostgresStorage(path, read_only, cfg)
    raise ConfigError(f"storage.engine {cfg.engine!r} is unknown; use 'embedded' or 'postgres'")


def store_exists(cfg: StorageConfig, path: Path) -> bool:
    """Whether a store exists for ``path`` on the engine ``cfg`` names (for Postgres, in its
    schema: the folder itself may be empty). Creates nothing."""
    if cfg.engine == "embedded":
        return (path / "pensive.sqlite").is_file()
    storage = open_storage(cfg, path, read_only=True)
    try:
        return storage.exists()
    finally:
        storage.close()
