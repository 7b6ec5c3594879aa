"""Checking a store's files and rebuilding its indexes from the archive (``pensive verify``,
``pensive repair``).

:func:`verify_store` reads every part of an embedded store as a new reader would, without
writing anything: the archive (SQLite's ``quick_check`` and every document body), the BM25
segments and the vector files (each against the size and CRC-32 its manifest recorded), the L1
cache, the counts the archive, BM25 and the vectors must agree on, and the conversations: the
session registry, each session's turn log, and its turn and window indexes (small stores of
their own, checked the same way).

:func:`repair_store` rebuilds what is damaged from the archive, which holds every passage
with its situating context: BM25 from the passages (no embedding), the vectors from what the
damaged index still holds intact (each vector is checked against the fingerprint recorded
beside it) plus the passages it lost, embedded again when the store next opens. A damaged
cache is moved aside. A document whose archived body is damaged cannot be rebuilt from
anything: it is listed, to be ingested again (its passages, stored apart, stay searchable). A
session's damaged indexes are rebuilt the same way from their own archives; a damaged session
registry or turn log holds what nothing else does, and is only reported (a backup is the way
back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .archive import Archive
from .backends.registry import create_backend, resolve_backend_class
from .config import load_config
from .context.base import join_context
from .errors import CorruptStoreError, NotFoundError, StorageError
from .files import connect_read_only
from .filters import backend_metadata
from .memory.turns import TurnContext
from .sparse.bm25 import BM25Index
from .storage.embedded import ARCHIVE_FILE, EmbeddedStorage, move_aside

__all__ = ["repair_files", "repair_store", "verify_store"]

log = logging.getLogger(__name__)

LOCAL_BACKENDS = ("faiss", "memory")  # whose files are in the store folder


def _problem(part: str, file: Path | str, why: str) -> dict[str, str]:
    return {"part": part, "file": str(file), "problem": why}


@contextmanager
def _caught(damaged: list[dict[str, str]], part: str, file: Path) -> Iterator[None]:
    try:
        yield
    except CorruptStoreError as exc:
        damaged.append(_problem(part, exc.filename or file, str(exc)))
    except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes a reader raise
        damaged.append(_problem(part, file, f"{type(exc).__name__}: {exc}"))


def verify_store(path: str | Path, config: Any = None) -> dict[str, Any]:
    """Check every file of the embedded store at ``path`` (read only: it may be open by a
    writer, and nothing is written).

    Args:
        path: The store folder.
        config: The config the store is opened with (only ``[bm25]`` and the backend's
            options matter here), or None for the saved one.

    Returns:
        ``ok`` (nothing damaged), ``store``, ``damaged`` (each ``part``, ``file`` and
        ``problem``), ``checked`` (the parts checked), ``counts`` (passages the archive lists
        as indexed, and what BM25 and the vectors hold), ``documents_damaged`` (ids whose
        archived body is damaged) and ``seconds``.

    Raises:
        NotFoundError: If there is no store at ``path``.
    """
    t0 = time.perf_counter()
    folder = Path(path).expanduser()
    db_path = folder / ARCHIVE_FILE
    if not db_path.is_file():
        raise NotFoundError(f"no Pensive store at {folder} to verify")
    damaged: list[dict[str, str]] = []
    checked: list[str] = []
    counts: dict[str, int | None] = {"archive": None, "bm25": None, "vectors": None}
    bad_docs: list[str] = []
    archive: Archive | None = None
    with _caught(damaged, "archive", db_path):
        checked.append("archive")
        archive = Archive(db_path, read_only=True)
        rows = [r[0] for r in archive.db.execute("PRAGMA quick_check")]
        if rows != ["ok"]:
            damaged.append(_problem("archive", db_path, "; ".join(map(str, rows[:5]))))
        bad_docs = archive.damaged_documents()
        if bad_docs:
            damaged.append(
                _problem(
                    "archive",
                    db_path,
                    f"{len(bad_docs)} document(s) damaged (body, metadata or a passage's "
                    "text): "
                    f"{', '.join(map(repr, bad_docs[:5]))}; ingest them again",
                )
            )
        counts["archive"] = archive.indexed_passage_count()
    if archive is None:  # nothing else can be checked against an archive that does not open
        return _report(folder, damaged, checked, counts, bad_docs, t0)
    try:
        cfg = load_config(config, base=archive.get_meta("config"))
        with _caught(damaged, "bm25", folder / "bm25"):
            checked.append("bm25")
            counts["bm25"] = BM25Index(folder / "bm25", cfg.bm25).n_live
        name, dim = cfg.backend.name, archive.get_meta("dim")
        place = folder / str(archive.get_meta("vectors_dir") or "vectors")
        if dim is not None and name in LOCAL_BACKENDS:
            with _caught(damaged, "vectors", place):
                checked.append("vectors")
                backend = create_backend(name, place, int(dim), getattr(cfg.backend, name, None))
                counts["vectors"] = backend.count(namespace=cfg.backend.namespace)
        elif dim is None:
            counts["vectors"] = 0
    finally:
        archive.close()
    l1 = folder / "l1.sqlite"
    if l1.exists():
        with _caught(damaged, "l1 cache", l1):
            checked.append("l1 cache")
            _quick_check(l1, damaged, "l1 cache")
    _verify_conversations(folder, damaged, checked)
    want = counts["archive"]
    for part in ("bm25", "vectors"):
        have = counts[part]
        if have is not None and want is not None and have != want:
            damaged.append(
                _problem(
                    part,
                    folder / part,
                    f"holds {have} passages where the archive lists {want} as indexed",
                )
            )
    return _report(folder, damaged, checked, counts, bad_docs, t0)


def _quick_check(
    path: Path, damaged: list[dict[str, str]], part: str, sql: str | None = None
) -> list[Any]:
    """SQLite's ``quick_check`` of a file, read only; a failed check is added to ``damaged``.

    Returns:
        The rows of ``sql`` read on the same connection when the file is sound (else none).
    """
    db = connect_read_only(path)
    try:
        rows = [str(r[0]) for r in db.execute("PRAGMA quick_check")]
        if rows != ["ok"]:
            damaged.append(_problem(part, path, "; ".join(rows[:5])))
            return []
        return db.execute(sql).fetchall() if sql else []
    finally:
        db.close()


def _verify_conversations(folder: Path, damaged: list[dict[str, str]], checked: list[str]) -> None:
    """The conversations of the store at ``folder``: the session registry, each registered
    session's turn log, and its turn and window indexes (stores of their own, verified as
    such; a problem found there names that store in ``store``, for :func:`repair_files`)."""
    root = folder / "conversations"
    registry = root / "sessions.sqlite"
    if not registry.is_file():
        return
    checked.append("conversations")
    sessions: list[Any] = []
    with _caught(damaged, "conversations", registry):
        sql = "SELECT namespace, session_id, folder FROM sessions"
        sessions = _quick_check(registry, damaged, "conversations", sql)
    for namespace, session_id, rel in sessions:
        part = f"conversation {session_id!r} (namespace {namespace!r})"
        where = root / rel
        if not where.resolve().is_relative_to(root.resolve()):  # never read or repaired
            why = f"the session registry names a folder outside {root}: {rel!r}"
            damaged.append(_problem(part, registry, why))
            continue
        log_file = where / "memory.sqlite"
        if not log_file.is_file():
            damaged.append(
                _problem(
                    part,
                    log_file,
                    "the session is registered but its turn log is missing: its turns are "
                    "lost (restore the file from a backup, or clear the session)",
                )
            )
        else:
            with _caught(damaged, part, log_file):
                _quick_check(log_file, damaged, part)
        for sub in ("index", "windows"):
            store = where / sub
            if not (store / ARCHIVE_FILE).is_file():
                continue  # (not made yet: a session without turns, or windows turned off)
            for d in verify_store(store)["damaged"]:
                damaged.append({**d, "part": f"{part} {sub}: {d['part']}", "store": str(store)})


def _report(
    folder: Path,
    damaged: list[dict[str, str]],
    checked: list[str],
    counts: dict[str, int | None],
    bad_docs: list[str],
    t0: float,
) -> dict[str, Any]:
    return {
        "store": str(folder),
        "ok": not damaged,
        "damaged": damaged,
        "checked": checked,
        "counts": counts,
        "documents_damaged": bad_docs,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def repair_store(path: str | Path, config: Any = None, *, embedder: Any = None) -> dict[str, Any]:
    """Rebuild the damaged indexes of the embedded store at ``path`` from its archive.

    Takes the writer lock (no other process may write meanwhile). BM25 is rebuilt from the
    archived passages (nothing embedded); the vectors are rebuilt in a new folder from those
    the damaged index still holds intact, and the documents that lost any are indexed again
    (embedding just their passages) by opening the store for writing once at the end. A
    damaged L1 cache is moved aside (and answers cached on the damaged indexes with it).
    Nothing is done to a store that verifies clean.

    Args:
        path: The store folder.
        config: As for :func:`verify_store` (and given to the store when it is opened).
        embedder: An :class:`~pensive_core.embedders.Embedder` already loaded, for what must
            be embedded again (default: the one the store's config names).

    Returns:
        ``before`` and ``after`` (:func:`verify_store` reports), ``rebuilt`` (the parts),
        ``vectors_kept`` (salvaged), ``reindexed`` (documents indexed again),
        ``moved_aside`` (files), ``documents_damaged`` (to ingest again), ``sessions``
        (each session store repaired, with what was rebuilt there) and ``seconds``.

    Raises:
        NotFoundError: If there is no store at ``path``.
        StorageError: If the archive itself is damaged beyond its document bodies (a
            backup is the only way back), or the disk fails.
        PensiveError: If another process has the store open for writing.
    """
    from .engine import Pensive

    t0 = time.perf_counter()
    out = repair_files(path, config)
    if out["rebuilt"]:
        with Pensive(path, config=config, embedder=embedder) as p:
            out["reindexed"] = p.recovered
            embedder = p.embedder
    for session in out["sessions"]:  # opened as the session opens them, to index what is owed
        store = Path(session["store"])
        context = TurnContext() if store.name == "index" else None
        with Pensive(store, embedder=embedder, context_generator=context) as p:
            out["reindexed"] += p.recovered
            embedder = p.embedder
    out["after"] = verify_store(path, config)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def repair_files(path: str | Path, config: Any = None) -> dict[str, Any]:
    """The file side of :func:`repair_store` (the store is not opened: the documents whose
    vectors were lost are left pending, for the next open for writing to index)."""
    t0 = time.perf_counter()
    folder = Path(path).expanduser()
    before = verify_store(folder, config)
    out: dict[str, Any] = {
        "store": str(folder),
        "before": before,
        "rebuilt": [],
        "vectors_kept": 0,
        "to_embed": 0,
        "reindexed": 0,
        "moved_aside": [],
        "documents_damaged": before["documents_damaged"],
    }
    out["sessions"] = []  # a session's indexes repaired (their stores), and what was rebuilt
    parts = {d["part"] for d in before["damaged"] if "store" not in d}
    if "archive" in parts and not before["documents_damaged"]:
        raise StorageError(
            f"the archive of the store at {folder} ({folder / ARCHIVE_FILE}) is damaged: "
            f"{before['damaged'][0]['problem']}. The indexes are rebuilt from it, so it cannot "
            "be repaired from them: restore it from a backup",
            file=str(folder / ARCHIVE_FILE),
        )
    storage = EmbeddedStorage(folder, read_only=False)
    storage.lock_writer()
    try:
        archive = storage.open_archive()
        cfg = load_config(config, base=archive.get_meta("config"))
        # documents whose passages' text a damaged page garbled cannot be indexed or shown:
        # they go (reported, to ingest again), and the next writer drops their passages
        out["removed"] = archive.drop_unreadable() if before["documents_damaged"] else []
        if out["removed"]:  # the indexes still hold their passages: rebuilt without them
            parts.add("bm25")
            if cfg.backend.name in LOCAL_BACKENDS:
                parts.add("vectors")
        rows = archive.indexed_passages()
        if "bm25" in parts:
            _rebuild_bm25(folder, cfg, rows)
            out["rebuilt"].append("bm25")
        if "vectors" in parts:
            kept, lost_docs = _rebuild_vectors(storage, archive, cfg, rows)
            out["rebuilt"].append("vectors")
            out["vectors_kept"], out["to_embed"] = kept, len(lost_docs)
        if "l1 cache" in parts or out["rebuilt"]:
            l1 = folder / "l1.sqlite"
            if l1.exists():  # answers computed on the damaged indexes are not kept either
                out["moved_aside"].append(str(move_aside(l1)))
        if out["rebuilt"] or out["removed"]:
            archive.mark_dirty()  # the next writer reconciles and indexes what is pending
    finally:
        storage.close()
        storage.unlock_writer()
    for store in sorted({d["store"] for d in before["damaged"] if "store" in d}):
        done = repair_files(store)  # a session's indexes: the same repair, on their archives
        out["sessions"].append({"store": store, "rebuilt": done["rebuilt"]})
        out["moved_aside"] += done["moved_aside"]
    out["seconds"] = round(time.perf_counter() - t0, 3)
    log.warning("repaired %s: %s", folder, {k: v for k, v in out.items() if k != "before"})
    return out


def _rebuild_bm25(folder: Path, cfg: Any, rows: list[tuple[str, str, str, Any, str]]) -> None:
    index = BM25Index(folder / "bm25", cfg.bm25, load=False)
    for cid, _did, text, _meta, context in rows:
        index.add(cid, join_context(context, text))
    index.commit()


def _rebuild_vectors(
    storage: EmbeddedStorage, archive: Archive, cfg: Any, rows: list[tuple[str, str, str, Any, str]]
) -> tuple[int, set[str]]:
    """Salvage the intact vectors into a new folder; returns how many were kept and the
    documents marked to index again (those that lost any)."""
    name, ns = cfg.backend.name, cfg.backend.namespace
    dim = int(archive.get_meta("dim"))
    old_place = storage.vectors_place()
    salvaged: dict[str, np.ndarray] = {}
    cls = resolve_backend_class(name)
    if hasattr(cls, "salvage"):
        salvaged = cls.salvage(storage.path / old_place, dim, [r[0] for r in rows], ns)
    place = storage.new_vectors_place()
    dest = storage.open_vectors(name, dim, getattr(cfg.backend, name, None), place)
    keep = [r for r in rows if r[0] in salvaged]
    for i in range(0, len(keep), 1024):
        part = keep[i : i + 1024]
        dest.upsert(
            [r[0] for r in part],
            np.stack([salvaged[r[0]] for r in part]).astype(np.float32),
            [backend_metadata(r[3], r[1]) for r in part],
            namespace=ns,
        )
    dest.persist()
    lost = {r[1] for r in rows if r[0] not in salvaged}
    if lost:
        archive.mark_pending(lost)
    archive.set_meta("vectors_dir", place)
    storage.drop_vectors_place(old_place)
    return len(keep), lost
