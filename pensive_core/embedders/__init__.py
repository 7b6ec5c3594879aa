"""Embedders: one protocol, a bundled model, a model-free fallback."""

from .base import Embedder
from .registry import create_embedder

__all__ = ["Embedder", "create_embedder"]
