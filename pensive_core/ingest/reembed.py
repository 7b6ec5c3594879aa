"""Re-embedding a store with another embedder, blue/green.

Vectors of two models cannot share an index, so changing the embedder means embedding every
passage again. :func:`reembed` does it beside the live index: the new vectors are written,
document by document, to a checkpoint (``reembed.sqlite`` in the store folder, one SQLite
transaction per batch of whole documents) while queries keep using the old index and the old
embedder; a kill or an error resumes from the checkpoint instead of restarting. On a clean
finish the shadow index (a vector folder named for the new model) is built from the checkpoint
and the store switches to it in one archive transaction (the saved ``[embedder]``, the
embedder's name and dimension, and which vector folder is live); the L1 cache is cleared.
Nothing else is recomputed: the passages, their stored contexts, BM25, the graph and the
temporal rows stay as they are (the text embedded is exactly what the original ingest
embedded: the stored context joined to the passage). The old folder is kept for
:func:`roll_back` until :func:`discard_kept`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import LOCAL_BACKENDS, EmbedderConfig, load_config, saved_config
from ..context.base import join_context
from ..embedders.base import Embedder, QueryCache, checked
from ..embedders.registry import create_embedder
from ..errors import BackendError, ConfigError, InputError, NotFoundError, PensiveError
from ..filters import backend_metadata
from .commit import Committer

if TYPE_CHECKING:
    from ..backends.base import VectorBackend
    from ..components import Components
    from ..types import Document

__all__ = [
    "CHECKPOINT",
    "check_supported",
    "discard_kept",
    "reembed",
    "reembed_status",
    "roll_back",
    "run_reembed",
]

log = logging.getLogger(__name__)

#: The checkpoint of a run, in the store folder.
CHECKPOINT = "reembed.sqlite"

Row = tuple[str, str, str, dict[str, Any], str]  # (passage id, doc id, text, doc meta, context)
Progress = Callable[[int, int], Any]  # (documents done, documents in all)


def reembed(
    comps: Components,
    committer: Committer,
    embedder: str | Embedder,
    *,
    batch_size: int,
    progress: Progress | None,
    discard: bool,
    finish: Callable[[list[Document]], Any],
) -> dict[str, Any]:
    """Embed every indexed passage with ``embedder`` into a shadow index and switch the store
    to it on a clean finish (see :meth:`Pensive.reembed <pensive_core.Pensive.reembed>`).

    Raises:
        InputError: If ``embedder`` is what the store already uses, or ``batch_size`` < 1.
        ConfigError: If the store's engine or backend cannot be re-embedded, or the embedder
            cannot be built.
        BackendError: If the shadow index does not end up holding every passage.
    """
    t0 = time.perf_counter()
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    check_supported(comps)
    section, target = _target(comps, embedder)
    ckpt_path = comps.path / CHECKPOINT
    with comps.lock:
        committer.catch_up(finish)
        committer.finish_abandoned(finish)
        run = comps.archive.get_meta("reembed")
        same_run = bool(run) and (run["name"], run["dim"]) == (target.name, target.dim)
        if not same_run:  # a run towards another model is given up: its work is of no use
            if run:
                comps.storage.drop_vectors_place(run["place"])
            ckpt_path.unlink(missing_ok=True)
            run = {
                "name": target.name,
                "dim": target.dim,
                "embedder": section,
                "place": _free_place(comps, target.name),
                "started": time.time(),
            }
            comps.archive.set_meta("reembed", run)
        rows = comps.archive.indexed_passages()
    by_doc: dict[str, list[Row]] = {}
    for r in rows:
        by_doc.setdefault(r[1], []).append(r)
    report: dict[str, Any] = {
        "from": (comps.archive.get_meta("embedder") or {}).get("name"),
        "to": target.name,
        "documents": len(by_doc),
        "passages": len(rows),
        "embedded": 0,
        "resumed_from": 0,
        "failed": [],
        "published": False,
    }
    with closing(_resumable(ckpt_path)) as db:
        done = {r[0] for r in db.execute("SELECT doc_id FROM docs WHERE status = 'done'")}
        report["resumed_from"] = len(done & by_doc.keys())
        db.execute("DELETE FROM docs WHERE status = 'failed'")  # retried now
        count = report["resumed_from"]
        if progress:
            progress(count, len(by_doc))
        todo = [d for d in by_doc if d not in done]
        for part in _batches(todo, by_doc, batch_size):
            vecs, failed = _embed_docs(target, part, by_doc)
            with db:  # one transaction: these documents are done or none of them is
                for did in part:
                    if did in failed:
                        db.execute(
                            "INSERT OR REPLACE INTO docs VALUES (?, 'failed', ?)",
                            (did, failed[did]),
                        )
                        continue
                    for r in by_doc[did]:
                        db.execute(
                            "INSERT OR REPLACE INTO vecs VALUES (?, ?, ?, ?)",
                            (r[0], did, _key(r), vecs[r[0]].tobytes()),
                        )
                    db.execute("INSERT OR REPLACE INTO docs VALUES (?, 'done', '')", (did,))
            report["embedded"] += sum(len(by_doc[d]) for d in part if d not in failed)
            report["failed"].extend({"doc_id": d, "error": e} for d, e in failed.items())
            count += len(part)
            if progress:
                progress(count, len(by_doc))
    if not report["failed"]:
        report.update(_publish(comps, committer, run, target, discard, finish))
    else:
        log.warning("reembed: %d document(s) failed; not published", len(report["failed"]))
    report["seconds"] = round(time.perf_counter() - t0, 3)
    log.info("reembed %s", {k: v for k, v in report.items() if k != "failed"})
    return report


def check_supported(comps: Components) -> None:
    """Refuse a store whose vectors re-embedding cannot build a shadow index for.

    Raises:
        ConfigError: Naming the engine or backend and what is supported.
    """
    engine, backend = comps.config.storage.engine, comps.config.backend.name
    if engine != "embedded" or backend not in LOCAL_BACKENDS:
        raise ConfigError(
            f"re-embedding is supported on the embedded engine with the faiss or memory "
            f"backends; this store uses storage.engine = {engine!r} and backend.name = "
            f"{backend!r}: `pensive reindex --to faiss` first, or ingest into a new store"
        )


def reembed_status(comps: Components) -> dict[str, Any]:
    """Where re-embedding stands: ``embedder`` live, a ``run`` in progress (its target and
    the documents its checkpoint holds) and the ``previous`` embedder a rollback returns to."""
    run = comps.archive.get_meta("reembed")
    prev = comps.archive.get_meta("reembed_previous")
    out: dict[str, Any] = {"embedder": comps.archive.get_meta("embedder"), "run": None}
    if run:
        done = failed = 0
        damaged = False
        path = comps.path / CHECKPOINT
        if path.exists():
            try:
                with closing(_checkpoint(path)) as db:
                    done, failed = db.execute(
                        "SELECT COALESCE(SUM(status = 'done'), 0), "
                        "COALESCE(SUM(status = 'failed'), 0) FROM docs"
                    ).fetchone()
            except sqlite3.DatabaseError:  # the next run starts over (see _resumable)
                damaged = True
        out["run"] = {
            "to": run["name"],
            "place": run["place"],
            "done": done,
            "failed": failed,
            "damaged": damaged,
        }
    out["previous"] = None if not prev else {"embedder": prev["meta"], "place": prev["place"]}
    return out


def roll_back(
    comps: Components, committer: Committer, finish: Callable[[list[Document]], Any]
) -> dict[str, Any]:
    """Switch back to the embedder and index the last re-embed replaced (kept until
    :func:`discard_kept`); passages changed since are embedded again with it. Rolling back
    twice goes forward again.

    Raises:
        NotFoundError: If there is no previous index to go back to.
    """
    t0 = time.perf_counter()
    check_supported(comps)
    with comps.lock, comps.storage.writing():
        committer.catch_up(finish)
        committer.finish_abandoned(finish)
        prev = comps.archive.get_meta("reembed_previous")
        if not prev or not (comps.path / prev["place"]).exists():
            raise NotFoundError(
                f"the store at {comps.path} keeps no previous index to roll back to (none was "
                "replaced by `pensive reembed`, or it was discarded with --discard-old)"
            )
        section, meta = prev["embedder"], prev["meta"]
        rows = comps.archive.indexed_passages()
        keys = _read_keys(comps.path / prev["keys"])
        # the kept index is as of the switch: passages changed since are embedded again
        stale = [r for r in rows if keys.get(r[0]) != _key(r)]
        target = None
        if stale:  # (a model load is seconds: only when something needs it)
            target = create_embedder(EmbedderConfig(**section))
            if (target.name, target.dim) != (meta["name"], meta["dim"]):
                raise ConfigError(
                    f"the previous embedder {section['name']!r} now makes {target.name!r} "
                    f"{target.dim}-d vectors, not the {meta} the kept index holds"
                )
        committer.before_change()
        dest = comps.storage.open_vectors(
            comps.config.backend.name, int(meta["dim"]), _options(comps), prev["place"]
        )
        ns = comps.config.backend.namespace
        try:
            held = dest.ids(namespace=ns)  # (None: a backend that cannot list them)
            gone = (set(keys) if held is None else held) - {r[0] for r in rows}
            if gone:
                dest.delete(sorted(gone), namespace=ns)
            for i in range(0, len(stale), 256):
                assert target is not None
                part = stale[i : i + 256]
                vecs = _row_vectors(target, part)
                _put(dest, part, vecs, ns)
            dest.persist()
            _verify(dest, ns, len(rows))
        except BaseException:
            dest.close()
            raise
        report = _switch(comps, committer, section, meta, target, dest, prev["place"], rows, False)
    report.update(embedded=len(stale), seconds=round(time.perf_counter() - t0, 3))
    return report


def discard_kept(comps: Components) -> dict[str, Any]:
    """Remove the index the last re-embed replaced (a rollback is then no longer possible)."""
    with comps.lock:
        prev = comps.archive.get_meta("reembed_previous")
        if not prev:
            return {"discarded": None}
        if prev["place"] != comps.storage.vectors_place():
            comps.storage.drop_vectors_place(prev["place"])
            (comps.path / _keys_name(prev["place"])).unlink(missing_ok=True)
        comps.archive.set_meta("reembed_previous", None)
    return {"discarded": prev["place"]}


# -- the run --------------------------------------------------------------------------------------
def _target(comps: Components, embedder: str | Embedder) -> tuple[dict[str, Any], Embedder]:
    """The new ``[embedder]`` section and the embedder itself, refused when it is the
    store's own model (checked by name before a model is loaded, then by what it reports)."""
    current = comps.config.embedder
    saved = comps.archive.get_meta("embedder")
    same = (
        f"the store at {comps.path} already uses the embedder {{}}; re-embedding into the "
        "same model changes nothing: name another model (minilm, hash, a sentence-transformers "
        "folder or module:Class)"
    )
    if isinstance(embedder, str):
        if not embedder.strip():
            raise InputError("embedder must name a model, got an empty string")
        if embedder == current.name and saved is not None:
            raise InputError(same.format(repr(embedder)))
        section = current.model_copy(update={"name": embedder}).model_dump()
        target = create_embedder(EmbedderConfig(**section))
    elif isinstance(embedder, Embedder):
        target = embedder
        section = current.model_copy(update={"name": target.name}).model_dump()
    else:
        raise InputError(
            "embedder must be a model name or path, or implement "
            f"pensive_core.embedders.Embedder, got {type(embedder).__name__}"
        )
    if saved is not None and (saved["name"], saved["dim"]) == (target.name, target.dim):
        raise InputError(same.format(repr(target.name)))
    return section, target


def _free_place(comps: Components, name: str) -> str:
    """A vector folder named for the model, not the live one nor the one kept for rollback."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(name).name).strip("-.") or "model"
    prev = comps.archive.get_meta("reembed_previous") or {}
    taken = {comps.storage.vectors_place(), prev.get("place")}
    place, n = f"vectors.reembed-{slug}", 1
    while place in taken or (comps.path / place).exists():
        n += 1
        place = f"vectors.reembed-{slug}-{n}"
    return place


def _checkpoint(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # a checkpoint said done must survive a power cut
        db.execute(
            "CREATE TABLE IF NOT EXISTS docs (doc_id TEXT PRIMARY KEY, status TEXT, error TEXT)"
        )
        db.execute(
            "CREATE TABLE IF NOT EXISTS vecs "
            "(chunk_id TEXT PRIMARY KEY, doc_id TEXT, key TEXT, vec BLOB)"
        )
    except BaseException:
        db.close()
        raise
    return db


def _resumable(path: Path) -> sqlite3.Connection:
    """The checkpoint to resume from; one that is not a database (damaged) is of no use: the
    run starts over."""
    try:
        return _checkpoint(path)  # (reads its schema: a file that is no database fails here)
    except sqlite3.DatabaseError as exc:
        log.warning("reembed: the checkpoint %s is unreadable (%s): starting over", path, exc)
        for side in ("", "-wal", "-shm"):
            Path(f"{path}{side}").unlink(missing_ok=True)
        return _checkpoint(path)


def _key(row: Row) -> str:
    """What a stored vector was made from: the passage and its context, hashed."""
    return hashlib.sha1(join_context(row[4], row[2]).encode()).hexdigest()


def _batches(todo: list[str], by_doc: dict[str, list[Row]], size: int) -> Iterator[list[str]]:
    """Whole documents, up to ``size`` passages a batch (a longer document alone)."""
    part: list[str] = []
    n = 0
    for did in todo:
        k = len(by_doc[did])
        if part and n + k > size:
            yield part
            part, n = [], 0
        part.append(did)
        n += k
    if part:
        yield part


def _row_vectors(embedder: Embedder, rows: list[Any]) -> np.ndarray:
    """The vectors of passage rows, each embedded with its stored context as at ingest."""
    return _vectors(embedder, [join_context(r[4], r[2]) for r in rows])


def _put(dest: VectorBackend, rows: list[Any], vecs: np.ndarray, ns: str) -> None:
    """Write passage rows' vectors with their documents' metadata."""
    dest.upsert(
        [r[0] for r in rows], vecs, [backend_metadata(r[3], r[1]) for r in rows], namespace=ns
    )


def _vectors(embedder: Embedder, texts: list[str]) -> np.ndarray:
    return checked(embedder, embedder.embed(texts), len(texts))


def _embed_docs(
    embedder: Embedder, part: list[str], by_doc: dict[str, list[Row]]
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Vectors by passage id, and the documents that failed with why. A batch that fails is
    embedded again a document at a time, so that one bad document names itself and does not
    take the others with it."""
    rows = [r for d in part for r in by_doc[d]]
    try:
        vecs = _row_vectors(embedder, rows)
        return {r[0]: v for r, v in zip(rows, vecs)}, {}
    except Exception:  # (the documents are tried one by one below)
        log.info("reembed: a batch of %d document(s) failed; embedding them one by one", len(part))
    out: dict[str, np.ndarray] = {}
    failed: dict[str, str] = {}
    for did in part:
        mine = by_doc[did]
        try:
            vecs = _row_vectors(embedder, mine)
        except Exception as exc:
            failed[did] = f"{type(exc).__name__}: {exc}"
            continue
        out.update((r[0], v) for r, v in zip(mine, vecs))
    return out, failed


# -- the switch -----------------------------------------------------------------------------------
def _publish(
    comps: Components,
    committer: Committer,
    run: dict[str, Any],
    target: Embedder,
    discard: bool,
    finish: Callable[[list[Document]], Any],
) -> dict[str, Any]:
    """Build the shadow index from the checkpoint and switch to it (see :func:`_switch`).
    Passages ingested or changed while the run went on are embedded here, under the lock."""
    ckpt_path = comps.path / CHECKPOINT
    ns = comps.config.backend.namespace
    with comps.lock, comps.storage.writing():
        committer.catch_up(finish)
        committer.finish_abandoned(finish)
        rows = comps.archive.indexed_passages()
        committer.before_change()
        place = run["place"]
        comps.storage.drop_vectors_place(place)  # (what a publish killed half way wrote)
        dest = comps.storage.open_vectors(
            comps.config.backend.name, target.dim, _options(comps), place
        )
        caught_up = 0
        try:
            with closing(_checkpoint(ckpt_path)) as db:
                for i in range(0, len(rows), 512):
                    part = rows[i : i + 512]
                    have = {
                        cid: (key, vec)
                        for cid, key, vec in db.execute(
                            "SELECT chunk_id, key, vec FROM vecs WHERE chunk_id IN "
                            f"({','.join('?' * len(part))})",
                            [r[0] for r in part],
                        )
                    }
                    # (a row of the wrong size, a damaged checkpoint, is embedded again too)
                    size = target.dim * 4
                    stale = [
                        r
                        for r in part
                        if have.get(r[0], ("",))[0] != _key(r) or len(have[r[0]][1]) != size
                    ]
                    made = {}
                    if stale:
                        fresh = _row_vectors(target, stale)
                        made = {r[0]: v for r, v in zip(stale, fresh)}
                        caught_up += len(stale)
                    vecs = np.stack(
                        [
                            made[r[0]]
                            if r[0] in made
                            else np.frombuffer(have[r[0]][1], dtype=np.float32)
                            for r in part
                        ]
                    )
                    _put(dest, part, vecs, ns)
            dest.persist()
            _verify(dest, ns, len(rows))
        except BaseException:
            dest.close()
            comps.storage.drop_vectors_place(place)
            raise
        meta = {"name": target.name, "dim": target.dim}
        out = _switch(comps, committer, run["embedder"], meta, target, dest, place, rows, discard)
        ckpt_path.unlink(missing_ok=True)
        for extra in ("-wal", "-shm"):
            Path(str(ckpt_path) + extra).unlink(missing_ok=True)
    out["caught_up"] = caught_up
    return out


def _switch(
    comps: Components,
    committer: Committer,
    section: dict[str, Any],
    meta: dict[str, Any],
    target: Embedder | None,
    dest: Any,
    place: str,
    rows: list[Row],
    discard: bool,
) -> dict[str, Any]:
    """Make ``dest`` (in folder ``place``, made by the embedder ``meta`` names: ``target``, or
    None to load it from ``section`` on first use) the live index in one
    archive transaction, keep the old folder for a rollback (or drop it: ``discard``), commit
    and clear L1. The caller holds the lock and has marked the change in flight."""
    archive = comps.archive
    raw = comps.config.model_dump()
    raw["embedder"] = dict(section)
    new_cfg = load_config(raw, environ={})
    old_place = comps.storage.vectors_place()
    old_meta = archive.get_meta("embedder")
    prev = archive.get_meta("reembed_previous") or {}
    kept = None
    if not discard and old_meta is not None:
        # what the old index holds, by passage: a rollback re-embeds only what changed since
        kept = {
            "place": old_place,
            "embedder": comps.config.embedder.model_dump(),
            "meta": old_meta,
            "keys": _write_keys(comps.path, old_place, rows),
        }
    with archive.transaction():  # the switch is one write: all of it or none
        archive.set_meta("config", saved_config(new_cfg))
        archive.set_meta("embedder", {"name": meta["name"], "dim": meta["dim"]})
        archive.set_meta("dim", meta["dim"])
        archive.set_meta("vectors_dir", place)
        archive.set_meta("reembed_previous", kept)
        archive.set_meta("reembed", None)
        archive.set_meta("reembedded", True)  # (a model shared by other stores is not its own)
    if comps.backend is not None:
        comps.backend.close()
    comps.backend = dest
    comps.config = comps.config.model_copy(update={"embedder": new_cfg.embedder})
    from ..components import EmbedderSlot  # (components opens the ingest side lazily too)

    slot = EmbedderSlot(comps)
    cache = new_cfg.embedder.query_cache
    if target is not None:
        slot.share(QueryCache(target, cache) if cache > 0 else target, own=True)
    comps.embedder = slot
    committer.changes.changed = True
    committer.commit()
    if comps.l1 is not None:  # every cached answer was found with the old vectors
        comps.l1.invalidate_all(comps.commit_no)
    # only one old index is kept: the one before it goes (unless it is live again)
    for folder in {prev.get("place"), old_place if discard else None} - {None, place}:
        comps.storage.drop_vectors_place(str(folder))
        (comps.path / _keys_name(str(folder))).unlink(missing_ok=True)
    return {"published": True, "place": place, "previous": kept["place"] if kept else None}


def _keys_name(place: str) -> str:
    return f"{place}.keys.sqlite"


def _write_keys(folder: Path, place: str, rows: list[Row]) -> str:
    """What the index in ``place`` was made from, by passage (a rollback to it re-embeds what
    changed since), in a file beside it: written whole under a temporary name, then renamed,
    so the archive's switch never names a torn file. Returns the file's name."""
    name = _keys_name(place)
    tmp = folder / f"{name}.tmp"
    tmp.unlink(missing_ok=True)
    with closing(sqlite3.connect(tmp)) as db:
        db.execute("CREATE TABLE keys (chunk_id TEXT PRIMARY KEY, key TEXT)")
        with db:
            db.executemany("INSERT INTO keys VALUES (?, ?)", ((r[0], _key(r)) for r in rows))
    tmp.replace(folder / name)
    return name


def _read_keys(path: Path) -> dict[str, str]:
    if not path.is_file():  # (lost: every passage is embedded again, nothing is trusted)
        return {}
    try:
        with closing(sqlite3.connect(path)) as db:
            return dict(db.execute("SELECT chunk_id, key FROM keys"))
    except sqlite3.DatabaseError as exc:  # damaged: trusted for nothing, as when lost
        log.warning("reembed: %s is unreadable (%s): every passage is embedded again", path, exc)
        return {}


def _options(comps: Components) -> Any:
    return getattr(comps.config.backend, comps.config.backend.name, None)


def _verify(dest: Any, namespace: str, want: int) -> None:
    have = dest.count(namespace=namespace)
    if have != want:
        raise BackendError(
            f"reembed: the new index holds {have} vectors, expected {want}; the store stays "
            "on its old embedder and index (run it again to retry)"
        )


def run_reembed(
    comps: Components,
    committer: Committer,
    finish: Callable[[list[Document]], Any],
    embedder: str | Embedder | None = None,
    *,
    batch_size: int = 256,
    progress: Progress | None = None,
    discard_old: bool = False,
    rollback: bool = False,
) -> dict[str, Any]:
    """:meth:`Pensive.reembed(embedder, ...) <pensive_core.Pensive.reembed>`: re-embed every
    passage with another model, blue/green (docs/reembed.md).

    The new vectors are checkpointed per document beside the live index, which keeps
    answering (in this process and in readers) until one atomic switch on a clean finish;
    the L1 cache is then cleared. A kill or an error resumes from the checkpoint when called
    again with the same embedder. Nothing but the vectors is recomputed.

    Args:
        comps: The open store's parts. (``committer`` and ``finish``, an ingest that finishes
            documents a failed change left pending, come from the store.)
        embedder: The new model: ``"minilm"``, ``"hash"``, a sentence-transformers folder,
            ``"module:Class"``, or an :class:`~pensive_core.embedders.Embedder` instance.
            None with ``rollback`` or ``discard_old``.
        batch_size: Passages embedded per checkpointed batch (whole documents).
        progress: Called as ``progress(documents done, documents in all)`` after each batch.
        discard_old: Drop the replaced index at the switch (no rollback); with no
            ``embedder``, drop the index kept by the last re-embed.
        rollback: Switch back to the index (and embedder) the last re-embed replaced.

    Returns:
        ``from``, ``to``, ``documents``, ``passages``, ``embedded`` (this call),
        ``resumed_from`` (documents the checkpoint already held), ``failed`` (``doc_id`` and
        ``error`` of each document the embedder refused: then nothing is published),
        ``published``, ``seconds``; a rollback reports ``published``, ``embedded`` and
        ``previous``; a discard ``discarded``.

    Raises:
        InputError: If ``embedder`` is the model the store already uses (nothing changes), or
            the arguments ask for nothing or for two things at once.
        ConfigError: If the store is not the embedded engine with faiss or memory vectors, or
            the model cannot be built.
        NotFoundError: On a rollback with no replaced index kept.
        PensiveError: If the store is open read-only.
    """
    if comps.closed:
        raise PensiveError(f"this Pensive store ({comps.path}) is closed")
    if comps.read_only:
        raise PensiveError(
            f"this Pensive store ({comps.path}) is open read-only; open it without "
            "read_only=True (in one process at a time) to re-embed it"
        )
    if rollback:
        if embedder is not None or discard_old:
            raise InputError("rollback=True takes no embedder and no discard_old")
        return roll_back(comps, committer, finish)
    if embedder is None:
        if not discard_old:
            raise InputError(
                "reembed needs an embedder (a model name, path or instance), or "
                "rollback=True, or discard_old=True"
            )
        check_supported(comps)
        return discard_kept(comps)
    return reembed(
        comps,
        committer,
        embedder,
        batch_size=batch_size,
        progress=progress,
        discard=discard_old,
        finish=finish,
    )
