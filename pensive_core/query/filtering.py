"""Metadata filters at query time: which passages a filter lets through, for BM25, the graph
and the archive (the vector backend applies the filter itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..filters import Filter, MetadataIndex, backend_metadata, canonical

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["AllowedPassages"]


class AllowedPassages:
    """Ids of the passages whose documents pass a filter, cached until the next commit (the
    metadata index of every document is made once per commit)."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        self._cache: dict[tuple[str, int], frozenset[str]] = {}
        self._rows: tuple[int, MetadataIndex, np.ndarray, np.ndarray] | None = None

    def __call__(self, where: Filter) -> frozenset[str]:
        """The passages ``where`` lets through."""
        commit = self._comps.commit_no
        key = (canonical(where), commit)
        got = self._cache.get(key)
        if got is None:
            if self._rows is None or self._rows[0] != commit:
                doc_ids, metas, chunks = self._comps.archive.filter_rows()
                pos = {d: i for i, d in enumerate(doc_ids)}
                index = MetadataIndex([backend_metadata(m, d) for d, m in zip(doc_ids, metas)])
                cids = np.array([c for c, _ in chunks], dtype=object)
                of_doc = np.array([pos[d] for _, d in chunks], dtype=np.int64)
                self._rows = (commit, index, cids, of_doc)
            _, index, cids, of_doc = self._rows
            got = frozenset(cids[index.mask(where)[of_doc]].tolist()) if len(cids) else frozenset()
            if len(self._cache) > 32:
                self._cache.clear()
            self._cache[key] = got
        return got
