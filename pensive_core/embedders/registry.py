"""Embedders by name: ``minilm`` (bundled), ``hash`` (model-free), or a local model path."""

from __future__ import annotations

from pathlib import Path

from ..config import EmbedderConfig
from ..errors import ConfigError
from .base import Embedder

__all__ = ["create_embedder"]


def create_embedder(cfg: EmbedderConfig) -> Embedder:
    """Build the embedder a config names.

    Args:
        cfg: The ``[embedder]`` section.

    Returns:
        A ready embedder.

    Raises:
        ConfigError: If the name is neither known nor a model folder.
        MissingDependencyError: If the model needs an extra that is not installed.
    """
    name = cfg.name
    if name == "hash":
        from .hash import HashEmbedder

        return HashEmbedder(dim=cfg.dim)
    from .sentence_transformers import SentenceTransformerEmbedder, bundled_minilm_path

    if name == "minilm":
        return SentenceTransformerEmbedder(
            bundled_minilm_path(),
            "minilm",
            cfg.batch_size,
            cfg.threads,
            cfg.batch_threads,
            cfg.workers,
            cfg.query_runtime,
        )
    if Path(name).expanduser().is_dir():
        return SentenceTransformerEmbedder(
            Path(name).expanduser(),
            name,
            cfg.batch_size,
            cfg.threads,
            cfg.batch_threads,
            cfg.workers,
            cfg.query_runtime,
        )
    raise ConfigError(
        f"embedder.name {name!r} is not 'minilm', 'hash', or an existing local model folder "
        "(models are never downloaded)"
    )
