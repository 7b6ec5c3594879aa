"""Moving the dense index to another vector backend without embedding anything again."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backends.base import VectorBackend
from ..config import load_config, saved_config
from ..context.base import join_context
from ..embedders.base import checked
from ..errors import BackendError, ConfigError
from ..filters import backend_metadata
from .commit import Committer

if TYPE_CHECKING:
    from ..components import Components
    from ..types import Document

__all__ = ["copy_vectors", "move_vectors"]

log = logging.getLogger(__name__)


def move_vectors(
    comps: Components,
    committer: Committer,
    to: str,
    options: Mapping[str, Any] | None,
    namespace: str | None,
    batch_size: int,
    verify_timeout_s: float,
    finish: Callable[[list[Document]], Any],
) -> dict[str, Any]:
    """Copy every indexed passage's vector to backend ``to`` and switch the store to it (see
    :meth:`Pensive.reindex <pensive_core.Pensive.reindex>`). The caller has checked that the
    store is writable; ``finish`` indexes documents a failed change left pending.

    Raises:
        ConfigError: If the backend or its options are wrong.
        BackendError: If the new backend already holds vectors in that namespace, or its count
            does not reach the total.
    """
    t0 = time.perf_counter()
    storage = comps.storage
    with comps.lock, storage.writing():
        # a change that failed earlier is finished first (through ``finish``, an ingest):
        # this commit must not confirm documents whose passages no index holds
        committer.catch_up(finish)
        committer.finish_abandoned(finish)
        old_cfg = comps.config.backend
        raw = comps.config.model_dump()
        raw["backend"]["name"] = to
        if namespace is not None:
            raw["backend"]["namespace"] = namespace
        if options:
            section = raw["backend"].get(to)
            if not isinstance(section, dict):
                raise ConfigError(f"backend {to!r} has no [backend.{to}] section to set")
            section.update(options)
        new_cfg = load_config(raw, environ={})
        ns_old, ns_new = old_cfg.namespace, new_cfg.backend.namespace
        dim = comps.archive.get_meta("dim")
        # a change in flight from here: a store opened after a kill before the commit below
        # reconciles its indexes with the archive (the half-copied place is not referenced)
        committer.before_change()
        place = storage.new_vectors_place()
        report: dict[str, Any] = {"from": old_cfg.name, "to": to, "vectors": 0, "embedded": 0}
        dest = None
        if dim is not None:
            dest = storage.open_vectors(to, int(dim), getattr(new_cfg.backend, to, None), place)
            try:
                report.update(copy_vectors(comps, dest, ns_old, ns_new, batch_size))
                _verify_count(dest, ns_new, report["vectors"], verify_timeout_s)
            except BaseException:
                dest.close()
                storage.drop_vectors_place(place)
                raise
        old_place = storage.vectors_place()
        with comps.archive.transaction():  # the switch is one write: all of it or none
            comps.archive.set_meta("config", saved_config(new_cfg))
            comps.archive.set_meta("backend", to)
            comps.archive.set_meta("vectors_dir", place)
        if comps.backend is not None:
            comps.backend.close()
        comps.backend = dest
        comps.config = comps.config.model_copy(update={"backend": new_cfg.backend})
        committer.changes.changed = True
        committer.commit()
        if comps.l1 is not None:  # another index can order near-ties differently
            comps.l1.invalidate_all(comps.commit_no)
        storage.drop_vectors_place(old_place)
    report["seconds"] = round(time.perf_counter() - t0, 3)
    log.info("reindexed %s", report)
    return report


def copy_vectors(
    comps: Components, dest: VectorBackend, ns_old: str, ns_new: str, batch_size: int
) -> dict[str, int]:
    """Copy the stored vectors of every indexed passage into ``dest`` (an empty namespace),
    embedding only those the old index lacks; returns ``vectors`` copied and ``embedded``.

    Raises:
        BackendError: If ``dest`` already holds vectors in ``ns_new``.
    """
    already = dest.count(namespace=ns_new)
    if already:
        raise BackendError(
            f"the {dest.name} backend already holds {already} vectors in namespace "
            f"{ns_new!r}; reindex into an empty namespace (namespace=...) or empty it first"
        )
    rows = comps.archive.indexed_passages()
    moved = embedded = 0
    src = comps.backend
    for i in range(0, len(rows), max(1, batch_size)):
        part = rows[i : i + batch_size]
        ids = [r[0] for r in part]
        got = src.fetch(ids, namespace=ns_old) if src is not None else {}
        lost = [r for r in part if r[0] not in got]
        if lost:  # the old index lacks them (e.g. it was emptied): embed just those
            embedder = comps.embedder.get()
            texts = [join_context(r[4], r[2]) for r in lost]
            vecs = checked(embedder, embedder.embed(texts), len(texts))
            got.update(zip((r[0] for r in lost), np.asarray(vecs, dtype=np.float32)))
            embedded += len(lost)
        dest.upsert(
            ids,
            np.stack([got[c] for c in ids]).astype(np.float32),
            [backend_metadata(r[3], r[1]) for r in part],
            namespace=ns_new,
        )
        moved += len(ids)
    dest.persist()
    return {"vectors": moved, "embedded": embedded}


def _verify_count(dest: VectorBackend, namespace: str, want: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        have = dest.count(namespace=namespace)
        if have == want:
            return
        if time.monotonic() >= deadline:
            raise BackendError(
                f"reindex: the {dest.name} backend holds {have} vectors in namespace "
                f"{namespace!r}, expected {want}; the store stays on its old backend"
            )
        time.sleep(0.5)
