"""Atomic generation-numbered files: write new files, then swap a small manifest by rename."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["atomic_write_bytes", "write_manifest", "read_manifest", "load_npy"]

# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor keeps
# its recursion depth in shared state: two threads loading at once raised "SystemError: AST
# constructor recursion depth mismatch" once in CI (four sessions reopening their indexes).
# Loads are rare next to queries, so one lock for the whole process costs nothing.
_NPY_LOCK = threading.Lock()


def load_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """``np.load`` of one array, never a pickle, safe to call from many threads."""
    with _NPY_LOCK:
        return np.load(path, allow_pickle=False)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file, fsync and rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_manifest(folder: Path, name: str, payload: dict[str, Any]) -> None:
    """Atomically replace ``folder/name`` with ``payload`` as JSON."""
    atomic_write_bytes(folder / name, json.dumps(payload).encode())


def read_manifest(folder: Path, name: str) -> dict[str, Any] | None:
    """Read a manifest written by :func:`write_manifest`, or None if there is none."""
    path = folder / name
    if not path.exists():
        return None
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def remove_stale(folder: Path, prefix: str, keep: set[str]) -> None:
    """Delete ``prefix*`` files in ``folder`` that the current manifest does not reference.

    Manifests are named without the prefix's dash (``faiss.json`` beside ``faiss-3.index``),
    so they are never matched.
    """
    for p in folder.glob(prefix + "*"):
        if p.name not in keep:
            with contextlib.suppress(OSError):
                p.unlink()
