"""The graph view saved beside the store, so a new process does not build it again.

Building the traversal matrices from the graph's tables takes a second or more on a large store
(every passage, entity and mention read and indexed), and every new process paid it at its first
question. The view of a commit is saved once, as one ``.npz`` of plain arrays (no pickle), by
the process that built it (a writer at close, or the first reader to need it), and read by the
next in milliseconds. Its name carries the commit and the graph's row counts, so a view is
only ever read for the tables it was built from; anything unreadable is ignored and the view
is built from the tables as before.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from pathlib import Path

import numpy as np
from scipy import sparse

from ..files import atomic_write_bytes, load_npz
from .store import EDGE_TYPES, GraphView

__all__ = ["load_view", "save_view", "view_path"]

log = logging.getLogger(__name__)
_FORMAT = 2  # 2: each passage's document
_PREFIX = "graph-view-"


def view_path(folder: Path, commit: int, stamp: str) -> Path:
    """Where the view of ``commit`` (with the graph's row counts ``stamp``) is saved."""
    return folder / f"{_PREFIX}{_FORMAT}-{commit}-{stamp}.npz"


def save_view(path: Path, view: GraphView) -> None:
    """Save ``view`` at ``path`` (whole, by rename) and remove the views saved before it.

    Raises:
        OSError: If it cannot be written (the caller goes on without it).
    """
    arrays: dict[str, np.ndarray] = {
        "nodes": np.frombuffer(json.dumps(view.nodes).encode(), dtype=np.uint8),
        "docs": np.frombuffer(json.dumps(list(view.docs)).encode(), dtype=np.uint8),
        "shape": np.array([view.n_chunks, view.n_entities, len(view.nodes)], dtype=np.int64),
    }
    for name in EDGE_TYPES:
        m = view.edges[name].tocsr()
        arrays[f"{name}.data"] = m.data
        arrays[f"{name}.indices"] = m.indices
        arrays[f"{name}.indptr"] = m.indptr
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # (numpy's stub types **kwds poorly)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
    for old in path.parent.glob(f"{_PREFIX}*.npz"):
        if old.name != path.name:
            with contextlib.suppress(OSError):
                old.unlink()


def load_view(path: Path) -> GraphView | None:
    """The view saved at ``path``, or None (none there, or unreadable: built again)."""
    if not path.is_file():
        return None
    try:
        z = load_npz(path)  # (under the lock every .npy header parse takes: ast is not
        # thread-safe in CPython 3.11, and a reader's warm-up thread loads this view while
        # the opening thread reads the vector index)
        nodes = json.loads(z["nodes"].tobytes())
        n_chunks, n_entities, n = (int(x) for x in z["shape"])
        docs = json.loads(z["docs"].tobytes())
        if not isinstance(nodes, list) or len(nodes) != n:
            raise ValueError("node list and shape disagree")
        if not isinstance(docs, list) or len(docs) not in (0, n_chunks):
            raise ValueError("document list and shape disagree")
        edges = {
            name: sparse.csr_matrix(
                (z[f"{name}.data"], z[f"{name}.indices"], z[f"{name}.indptr"]), shape=(n, n)
            )
            for name in EDGE_TYPES
        }
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file: build from the tables
        log.warning("ignoring the saved graph view %s: %s", path, exc)
        return None
    n_types = n - n_chunks - n_entities
    kinds = ["chunk"] * n_chunks + ["entity"] * n_entities + ["type"] * n_types
    return GraphView(nodes, kinds, n_chunks, n_entities, edges, tuple(docs))
