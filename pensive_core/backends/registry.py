"""Backends resolved by name, lazily, or as ``"module.path:Class"`` for a user's own
(through the one plug-in resolver, :mod:`pensive_core.plugins`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..plugins import PLUG_KINDS, check_plugin, resolve_class
from .base import VectorBackend

__all__ = ["BACKENDS", "create_backend", "resolve_backend_class"]

#: Built-in backend names and the classes they stand for.
BACKENDS: dict[str, str] = dict(PLUG_KINDS["backend"].names)


def resolve_backend_class(name: str) -> type:
    """Turn a backend name or ``"module:Class"`` into the class.

    Raises:
        ConfigError: If the name is unknown or the class cannot be imported.
    """
    return resolve_class("backend", name)


def create_backend(name: str, folder: Path, dim: int, options: Any = None) -> VectorBackend:
    """Open (or create) the named backend's store in ``folder`` for vectors of ``dim``.

    Raises:
        ConfigError: If the name is unknown or the class does not implement the protocol.
    """
    cls = resolve_backend_class(name)
    backend = cls(folder=folder, dim=dim, options=options)
    return check_plugin("backend", backend, f"backend {name!r} ({cls.__qualname__})")  # type: ignore[no-any-return]
