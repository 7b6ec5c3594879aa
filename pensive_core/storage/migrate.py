"""Move a store between storage engines without embedding anything again.

``pensive migrate --to postgres`` (and ``--to embedded``): every document whole, its passages
with their situating contexts, the vectors (fetched from the old backend, not re-embedded),
BM25 (rebuilt from the passages: no model), the embedder and the store's config, the item
tables' rows; the graph and the statements are derived from the archive; each conversation
session is replayed turn by turn with its pins (its turns are embedded again: they are short);
the L1 and LLM caches start empty. Then the two stores are compared: their counts, and the top hits of
questions made from the store's own passages. Only when both agree is the old store marked
as moved (``moved_to`` in its metadata): it still opens to read, and refuses writers with a
message naming where the store went, so no write lands in the copy left behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..archive import ARCHIVE_ONLY, INDEXED
from ..chunking import content_hash
from ..config import LOCAL_BACKENDS, saved_config
from ..context.base import join_context
from ..errors import InputError, PensiveError
from ..timeutil import to_iso, utcnow
from ..types import Chunk, Document

__all__ = ["MigrationError", "migrate_store"]

log = logging.getLogger(__name__)

# the item tables Pensive's own adapters make (the LangGraph store's, ItemStore's default)
_ITEM_TABLES = ("langgraph_store.sqlite", "items.sqlite")


class MigrationError(PensiveError):
    """The copy does not match the original; the original was left as it was."""


def _dest_config(
    src_saved: dict[str, Any], given: dict[str, Any], to: str, storage: dict[str, Any]
) -> dict[str, Any]:
    cfg = {k: v for k, v in src_saved.items() if k != "storage"}
    # where the copy goes: the caller's [storage] keys (dsn, schema_name), then the options
    cfg["storage"] = {**given, **storage, "engine": to}
    backend = dict(cfg.get("backend", {}))
    if to == "postgres" and backend.get("name") in LOCAL_BACKENDS:
        backend["name"] = "pgvector"
    elif to == "embedded" and backend.get("name") == "pgvector":
        backend["name"] = "faiss"
    cfg["backend"] = backend
    return cfg


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def migrate_store(
    path: str | Path,
    to: str,
    *,
    config: Any = None,
    storage: dict[str, Any] | None = None,
    batch_size: int = 256,
    questions: int = 20,
) -> dict[str, Any]:
    """Copy the store at ``path`` into the ``to`` engine, check the copy, and mark the
    original as moved.

    Args:
        path: The store's folder (for Postgres, the folder that names its namespace).
        to: ``"postgres"`` or ``"embedded"``.
        config: The config that opens the original (its ``[storage]`` says where it is).
        storage: The new engine's ``[storage]`` keys besides ``engine`` (``dsn``,
            ``schema_name``); for ``"embedded"`` nothing.
        batch_size: Documents (and vectors) copied per batch.
        questions: How many questions, made from the store's passages, both stores answer
            before the switch.

    Returns:
        What was copied and checked: documents, passages, vectors, embedded (0 unless the
        old index lacked vectors), questions, seconds.

    Raises:
        InputError: If ``to`` is the engine the store is already on, or unknown.
        MigrationError: If the destination already holds a store, or the copy's counts or
            answers differ from the original's (the original is then left unmarked).
    """
    from ..engine import Pensive

    if to not in ("postgres", "embedded"):
        raise InputError(f"migrate to {to!r}: use 'postgres' or 'embedded'")
    t0 = time.perf_counter()
    folder = Path(path)
    with Pensive(folder, config=config) as src:
        sc = src.components
        if sc.storage.name == to:
            raise InputError(f"the store at {folder} is already on the {to} engine")
        given = sc.config.storage.model_dump(exclude={"engine"})
        dest_cfg = _dest_config(saved_config(sc.config), given, to, dict(storage or {}))
        if to == "embedded" and (folder / "pensive.sqlite").exists():
            raise MigrationError(
                f"{folder} already holds an embedded store (perhaps the copy an earlier "
                "migration left behind): migrate into another folder, or remove that one first"
            )
        dest = Pensive(folder, config=dest_cfg)
        try:
            dc = dest.components
            held = _held(dc)
            if held:
                raise MigrationError(
                    f"the {to} engine already holds a store for {folder} ({held}), perhaps "
                    f"from a migration that stopped half way: migrate into an empty one "
                    f"({_how_to_empty(dc)})"
                )
            report = _copy(sc, dc, batch_size)
            report.update(_copy_items(sc, dc))
            report["turns"] = _copy_conversations(src, dest)
        except BaseException:
            dest.close()
            raise
        dest.close()
        with Pensive(folder, config=dest_cfg) as copy:  # opening derives graph and statements
            report["questions"] = _compare(src, copy, questions)
            where = copy.components.storage.location
        sc.archive.set_meta("moved_to", {"engine": to, "where": where, "at": to_iso(utcnow())})
    report["seconds"] = round(time.perf_counter() - t0, 2)
    log.info("migrated %s to %s: %s", folder, to, report)
    return report


def _held(dc: Any) -> str:
    """What a destination already holds (documents, sessions, items), or ''."""
    parts = []
    documents = dc.archive.counts()[0]
    if documents:
        parts.append(f"{documents} documents")
    catalog = dc.storage.open_session_catalog()
    try:
        sessions = sum(len(catalog.sessions(ns)) for ns in catalog.namespaces())
    finally:
        catalog.close()
    if sessions:
        parts.append(f"{sessions} conversation sessions")
    return ", ".join(parts)


def _how_to_empty(dc: Any) -> str:
    storage = dc.storage
    if storage.name == "postgres":
        return f'DROP SCHEMA "{storage.schema}" CASCADE at {storage.address}'
    return f"remove the folder {storage.path}"


def _copy(sc: Any, dc: Any, batch_size: int) -> dict[str, Any]:
    """Archive rows, then vectors and BM25, then one commit that confirms them."""
    from ..ingest.reindex import copy_vectors

    src, dst = sc.archive, dc.archive
    ids = sorted(src.filter_rows()[0])
    dst.mark_dirty()  # a crash from here leaves a store its next open finishes
    indexed: list[str] = []
    for part in _batches(ids, max(1, batch_size)):
        rows: dict[bool, list[tuple[Document, str, list[Chunk]]]] = {True: [], False: []}
        contexts: dict[str, str] = {}
        gens: dict[str, str] = {}
        for did in part:
            doc, fp = src.document(did), src.fingerprint(did)
            if doc is None or fp is None:
                continue
            doc_hash, _, _, flag, gen = fp
            spans = {o: (s, e) for o, s, e in src.neighbours(did, 0, 1 << 30)}
            chunks = [
                Chunk(cid, did, o, text, *spans.get(o, (0, len(text))), content_hash(text))
                for cid, o, text in src.doc_chunks(did)
            ]
            rows[flag == ARCHIVE_ONLY].append((doc, doc_hash, chunks))
            contexts.update(src.contexts(did))
            gens[did] = gen
            if flag == INDEXED:
                indexed.append(did)
        for archive_only, docs in rows.items():
            if docs:
                dst.write(docs, archive_only=archive_only, contexts=contexts, context_gen=gens)
    for key in ("embedder", "dim"):
        value = src.get_meta(key)
        if value is not None:
            dst.set_meta(key, value)
    out: dict[str, Any] = {"documents": len(ids), "passages": src.counts()[1]}
    dim = src.get_meta("dim")
    if dim is not None and sc.backend is not None:
        backend = dc.open_backend(int(dim))
        ns = sc.config.backend.namespace
        out.update(copy_vectors(sc, backend, ns, dc.config.backend.namespace, batch_size))
    else:
        out.update(vectors=0, embedded=0)
    for cid, _did, text, _meta, context in src.indexed_passages():
        dc.sparse.add(cid, join_context(context, text))
    dc.sparse.commit()
    dst.mark_indexed(True, indexed)
    # the graph and the statements follow the archive now (closing marks them level)
    from ..ingest.derive import sync_graph, sync_temporal

    if dc.graph is not None:
        sync_graph(dc)
    if dc.temporal is not None:
        sync_temporal(dc)
    return out


def _copy_items(sc: Any, dc: Any) -> dict[str, int]:
    """The rows of the item tables (their documents came with the archive)."""
    import json

    copied = 0
    for name in _ITEM_TABLES:
        if sc.storage.name == "embedded" and not (sc.storage.path / name).is_file():
            continue
        src = sc.storage.open_item_table(name)
        try:
            if not len(src):
                continue
            dst = dc.storage.open_item_table(name)
            try:
                with dst.transaction():
                    done = []
                    for item in src.newest(()):
                        found = src.index_text(item.namespace, item.key)
                        text = None if found is None else found[0]
                        value = json.dumps(item.value, ensure_ascii=False, sort_keys=True)
                        dst.put(item.namespace, item.key, value, text, item.updated_at)
                        if src.indexed(item.namespace, item.key):
                            done.append((item.namespace, item.key))
                        copied += 1
                    dst.mark_indexed(done)
            finally:
                dst.close()
        finally:
            src.close()
    return {"items": copied}


def _copy_conversations(src: Any, dest: Any) -> int:
    """Each session replayed turn by turn into the new store, with its pins: its index is
    made again there (turns are embedded again: they are short; documents are not)."""
    catalog = src.components.storage.open_session_catalog()
    turns = 0
    try:
        for ns in catalog.namespaces():
            for info in catalog.sessions(ns):
                old = src.conversation(info.session_id, namespace=ns, create=False)
                new = dest.conversation(info.session_id, namespace=ns, user=info.user)
                rows = [(t.role, t.text, t.timestamp, dict(t.metadata)) for t in old.turns()]
                if rows:
                    new.add_many(rows)
                for text in old.pins():
                    new.pin(text)
                turns += len(rows)
    finally:
        catalog.close()
    return turns


def _compare(a: Any, b: Any, n: int) -> int:
    """Both stores' counts, and their top hits for ``n`` questions made from passages."""
    sa, sb = a.stats(), b.stats()
    for key in ("documents", "chunks", "vectors"):
        if sa.get(key) != sb.get(key):
            raise MigrationError(
                f"the copy holds {sb.get(key)} {key}, the original {sa.get(key)}: the "
                "original is left as it was (drop the copy and migrate again)"
            )
    rows = a.components.archive.indexed_passages()
    step = max(1, len(rows) // max(1, n))
    asked = 0
    for cid, _did, text, _meta, _ctx in rows[::step][:n]:
        question = " ".join(text.split()[:12])
        if not question:
            continue
        got_a = [h.chunk_id for h in a.query(question, k=3).hits]
        got_b = [h.chunk_id for h in b.query(question, k=3).hits]
        if got_a[:1] != got_b[:1]:
            raise MigrationError(
                f"the copy answers {question!r} with {got_b[:1]}, the original with "
                f"{got_a[:1]} (passage {cid}): the original is left as it was"
            )
        asked += 1
    return asked
