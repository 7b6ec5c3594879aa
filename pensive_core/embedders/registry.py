"""Embedders by name: ``minilm`` (bundled), ``hash`` (model-free), a local model folder, or a
user's ``"module.path:Class"`` (through the one plug-in resolver, :mod:`pensive_core.plugins`)."""

from __future__ import annotations

from pathlib import Path

from ..config import EmbedderConfig
from ..errors import ConfigError
from ..plugins import build, is_class_path
from .base import Embedder

__all__ = ["create_embedder"]


def create_embedder(cfg: EmbedderConfig) -> Embedder:
    """Build the embedder a config names.

    Args:
        cfg: The ``[embedder]`` section. ``name`` is ``"minilm"``, ``"hash"``, the path of a
            local sentence-transformers model folder, or ``"module.path:Class"`` (a class
            implementing :class:`~pensive_core.embedders.Embedder`, called without arguments;
            pass an instance to :class:`~pensive_core.Pensive` for one that needs settings).

    Returns:
        A ready embedder.

    Raises:
        ConfigError: If the name is neither known nor a model folder nor an importable class
            that implements the protocol.
        MissingDependencyError: If the model needs an extra that is not installed.
    """
    name = cfg.name
    if name == "hash":
        return build("embedder", "hash", dim=cfg.dim)  # type: ignore[no-any-return]
    folder = None
    if name == "minilm":
        from .sentence_transformers import bundled_minilm_path

        folder = bundled_minilm_path()
    elif _is_dir(name):
        folder = Path(name).expanduser()
    elif is_class_path(name):
        return build("embedder", name)  # type: ignore[no-any-return]
    if folder is None:
        raise ConfigError(
            f"embedder.name {name!r:.200} is not 'minilm', 'hash', an existing local model folder "
            "or 'module.path:Class' (models are never downloaded)"
        )
    return build(  # type: ignore[no-any-return]
        "embedder",
        "minilm",
        path=folder,
        name=name,
        batch_size=cfg.batch_size,
        threads=cfg.threads,
        batch_threads=cfg.batch_threads,
        workers=cfg.workers,
        query_runtime=cfg.query_runtime,
        batch_runtime=cfg.batch_runtime,
        batch_dtype=cfg.batch_dtype,
    )


def _is_dir(name: str) -> bool:
    """Whether ``name`` is a folder (a name no path can be, too long say, is not one)."""
    try:
        return Path(name).expanduser().is_dir()
    except (OSError, ValueError, RuntimeError):  # (RuntimeError: "~user" with no such user)
        return False
