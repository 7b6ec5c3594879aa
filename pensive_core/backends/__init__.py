"""Vector backends: one protocol, resolved by name from a lazy registry."""

from .base import VectorBackend
from .registry import BACKENDS, create_backend, resolve_backend_class

__all__ = ["BACKENDS", "VectorBackend", "create_backend", "resolve_backend_class"]
