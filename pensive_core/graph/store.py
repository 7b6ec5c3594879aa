"""The entity graph's storage: SQLite tables, updated per document, loaded as a sparse matrix.

Nodes are passages (chunks), entities and entity types. Edges are typed and directional, with
weights:

* passage -> entity (``mentions``, weight = times mentioned) and entity -> passage
  (``mentioned_in``, the same weight);
* entity -> type (``is_a``) and type -> entity (``has_member``), weight 1;
* passage -> next passage of its document (``next``) and back (``prev``), weight 1;
* entity <-> entity (``co_occurs``), weight = passages mentioning both (pairs are not formed in
  a passage naming more than ``max_pair_entities`` entities, where they would mean little);
* entity -> each passage of the document that is about it (``about``) and back (``subject``),
  weight 1: a document's subject is its title (``"Lilu (mythology)"`` is about ``lilu``), so a
  passage naming an entity leads to the document written about that entity, the way a
  hyperlink does.

Only passages, entities and mentions are stored; types and the derived edges are built at
:meth:`GraphStore.load`, so an update never has to touch them. Tables live in the caller's
SQLite connection (the store's archive), so graph rows commit with the documents they describe.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np
from scipy import sparse

from ..archive import write_transaction
from ..config import GRAPH_EDGES
from .extract import EntityExtractor, merge_aliases, normalize_entity

__all__ = [
    "EDGE_TYPES",
    "SCHEMA_VERSION",
    "EdgeParts",
    "DocumentPlan",
    "GraphStore",
    "GraphTables",
    "GraphView",
    "build_view",
    "pair_counts",
    "plan_document",
    "subject_key",
]

EDGE_TYPES = GRAPH_EDGES  # the config validates edge weights against the same names
#: Bumped when what is stored per document changes: a store built by another version is
#: rebuilt from its archive when opened for writing. 3: the rule extractor no longer merges a
#: sentence's opener, a time word after it or a greeting into the name that follows.
SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_entities (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0      -- passages mentioning it; 0 rows are deleted
);
CREATE TABLE IF NOT EXISTS graph_chunks (
    chunk_id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_chunks_doc ON graph_chunks(doc_id, ordinal);
CREATE TABLE IF NOT EXISTS graph_mentions (
    chunk_id TEXT NOT NULL,
    entity_id INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (chunk_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS graph_mentions_entity ON graph_mentions(entity_id);
CREATE TABLE IF NOT EXISTS graph_subjects (
    doc_id TEXT PRIMARY KEY,
    entity_id INTEGER NOT NULL             -- counted in graph_entities.chunks like a mention
) WITHOUT ROWID;
"""


#: Which documents each commit changed in the graph, kept for the last LOG_KEEP commits, and
#: the oldest commit whose view can be brought forward with it (a view of an earlier commit
#: may hold changes nobody logged: a writer that died, a rebuild): readers that loaded the
#: view of a commit read only the documents changed since (:mod:`.incremental`).
_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_log (
    commit_no INTEGER NOT NULL,
    doc_id TEXT NOT NULL,
    PRIMARY KEY (commit_no, doc_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS graph_log_from (id INTEGER PRIMARY KEY CHECK (id = 1), since INTEGER);
"""
LOG_KEEP = 1000


def subject_key(title: str | None) -> str:
    """The entity a document titled ``title`` is about: its normal form, without a trailing
    parenthesised qualifier (``"Lilu (mythology)"`` -> ``"lilu"``); "" for no title."""
    if not title or not isinstance(title, str):
        return ""
    return normalize_entity(re.sub(r"\s*\([^()]*\)\s*$", "", title.strip()))


@dataclass(frozen=True)
class GraphView:
    """The graph loaded for traversal.

    Attributes:
        nodes: Node names, passages first (their ids), then entities (``"e:" + key``), then
            types (``"t:" + kind``).
        kinds: ``"chunk"``, ``"entity"`` or ``"type"`` per node.
        n_chunks: How many of the first nodes are passages.
        n_entities: How many entity nodes follow them.
        edges: One matrix per edge type (``EDGE_TYPES``), same shape.
        docs: The document of each passage node (empty when not known): what lets a later
            commit's view be made from this one (:func:`~.incremental.update_view`).
    """

    nodes: list[str]
    kinds: list[str]
    n_chunks: int
    n_entities: int
    edges: dict[str, sparse.csr_matrix]
    docs: tuple[str, ...] = ()

    @cached_property
    def adjacency(self) -> sparse.csr_matrix:
        """``adjacency[i, j]`` is the weight of the edge ``i -> j`` summed over types (made
        on first use: queries weigh the types, and summing them was a fifth of a new
        process's first question at 10M tokens)."""
        n = len(self.nodes)
        return sum(self.edges.values(), sparse.csr_matrix((n, n), dtype=np.float32)).tocsr()

    def index(self) -> dict[str, int]:
        """Node name -> row."""
        return dict(zip(self.nodes, range(len(self.nodes))))


@dataclass(frozen=True)
class DocumentPlan:
    """What one document adds to the graph, worked out before any row is written (the same
    for every engine: only where the rows go differs).

    Attributes:
        chunks: ``(passage id, ordinal)`` of each passage, in the order given.
        mentions: Per passage (same order), entity key -> how often it is named there.
        kinds: Entity key -> the kind it has when this document creates it (the kind named
            in the first passage naming it; ``"name"`` for a subject no passage names).
        subject: The key of what the document is about ("" for none).
    """

    chunks: list[tuple[str, int]]
    mentions: list[dict[str, int]]
    kinds: dict[str, str]
    subject: str


def plan_document(
    chunks: Sequence[tuple[str, int, str]], extractor: EntityExtractor, subject: str | None
) -> DocumentPlan:
    """Extract a document's mentions (aliases merged over the whole document) and count them
    per passage.

    Args:
        chunks: ``(chunk id, ordinal, text)`` of each passage.
        extractor: What finds the mentions.
        subject: The document's title (see :func:`subject_key`), or None.

    Returns:
        The plan the engine writes.
    """
    per_chunk = [extractor.extract(text) for _, _, text in chunks]
    merged = merge_aliases([m for ms in per_chunk for m in ms])
    at = 0
    plan = DocumentPlan([], [], {}, subject_key(subject) if chunks else "")
    for (cid, ordinal, _), ms in zip(chunks, per_chunk):
        keyed = [(m.key, m.kind) for m in merged[at : at + len(ms)]]
        at += len(ms)
        kind_of = dict(keyed)  # a key named twice in a passage: its last kind there
        counts = dict(Counter(key for key, _ in keyed))
        for key in counts:
            plan.kinds.setdefault(key, kind_of[key])
        plan.chunks.append((cid, ordinal))
        plan.mentions.append(counts)
    if plan.subject:
        plan.kinds.setdefault(plan.subject, "name")
    return plan


class EdgeParts:
    """Edges gathered per type as arrays, then made into one matrix per type: how a view is
    built whole (:func:`build_view`) and how the changed documents' part of a view brought
    forward is (:func:`~.incremental.update_view`). Arrays, not edge by edge: readers make
    views after every commit of the writer, and per-edge Python calls made a view of 1,000
    abstracts take half a second."""

    def __init__(self) -> None:
        self.parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
            t: [] for t in EDGE_TYPES
        }

    def add(self, kind: str, rows: Any, cols: Any, ws: Any = None) -> None:
        """Edges ``rows[i] -> cols[i]`` of type ``kind`` (weight 1 unless ``ws``)."""
        r = np.asarray(rows, dtype=np.int64)
        c = np.asarray(cols, dtype=np.int64)
        w = np.ones(len(r), np.float32) if ws is None else np.asarray(ws, dtype=np.float32)
        self.parts[kind].append((r, c, w))

    def chains(
        self, chunks: Iterable[tuple[str, str, int]], row: dict[str, int]
    ) -> dict[str, list[int]]:
        """``next``/``prev`` along each document's passages in ordinal order; returns each
        document's passage rows."""
        docs: dict[str, list[tuple[int, int]]] = {}
        for cid, did, ordinal in chunks:
            docs.setdefault(did, []).append((ordinal, row[cid]))
        a_list: list[int] = []
        b_list: list[int] = []
        for seq in docs.values():
            seq.sort()
            a_list += [x for _, x in seq[:-1]]
            b_list += [x for _, x in seq[1:]]
        self.add("next", a_list, b_list)
        self.add("prev", b_list, a_list)
        return {did: [c for _, c in seq] for did, seq in docs.items()}

    def about(self, pairs: Iterable[tuple[int, list[int]]]) -> None:
        """``about`` from each subject entity row to its document's passage rows, and
        ``subject`` back."""
        s_e: list[int] = []
        s_c: list[int] = []
        for e, of_doc in pairs:
            s_e += [e] * len(of_doc)
            s_c += of_doc
        self.add("about", s_e, s_c)
        self.add("subject", s_c, s_e)

    def co_occurs(self, m_c: np.ndarray, m_e: np.ndarray, n: int, max_pair_entities: int) -> None:
        """Entity pairs of every passage (mention rows ``m_c`` -> ``m_e``) naming
        2..``max_pair_entities`` entities, one per passage, summed per pair."""
        if len(m_c):
            inc = sparse.csr_matrix((np.ones(len(m_c), np.float32), (m_c, m_e)), shape=(n, n))
            co = pair_counts(inc, max_pair_entities)
            self.add("co_occurs", co.row, co.col, co.data)

    def matrices(self, n: int) -> dict[str, sparse.csr_matrix]:
        """One ``n`` x ``n`` matrix per edge type, duplicates summed."""
        mats = {}
        for t in EDGE_TYPES:
            got = self.parts[t]
            rows = np.concatenate([g[0] for g in got]) if got else np.zeros(0, np.int64)
            cols = np.concatenate([g[1] for g in got]) if got else np.zeros(0, np.int64)
            ws = np.concatenate([g[2] for g in got]) if got else np.zeros(0, np.float32)
            m = sparse.csr_matrix((ws, (rows, cols)), shape=(n, n), dtype=np.float32)
            m.sum_duplicates()
            mats[t] = m
        return mats


def pair_counts(inc: sparse.csr_matrix, max_pair_entities: int) -> sparse.coo_matrix:
    """Co-occurrence counts of the passages (rows) of an incidence matrix: one per passage
    naming 2..``max_pair_entities`` entities (however often it names them), summed per pair,
    diagonal removed (the incidence matrix's Gram)."""
    inc = inc.tocsr().astype(np.float32)
    inc.data[:] = 1.0
    per = np.diff(inc.indptr)
    keep = (per > 1) & (per <= max_pair_entities)
    inc = sparse.diags(keep.astype(np.float32)) @ inc
    co = (inc.T @ inc).tocoo()
    off = (co.row != co.col) & (co.data != 0)
    n = inc.shape[1]
    return sparse.coo_matrix((co.data[off], (co.row[off], co.col[off])), shape=(n, n))


def build_view(
    chunks: Iterable[tuple[str, str, int]],
    entities: Iterable[tuple[Any, str, str]],
    mentions: Iterable[tuple[str, Any, int]],
    subjects: Iterable[tuple[str, Any]],
    max_pair_entities: int,
) -> GraphView:
    """The traversal structure from the stored rows (whatever engine holds them).

    Deterministic: nodes are ordered by passage id, then entity key (code point order), so
    equal contents give equal matrices whatever order the rows come in.

    Args:
        chunks: ``(passage id, document id, ordinal)`` rows.
        entities: ``(entity id, key, kind)`` rows; the id is the engine's own.
        mentions: ``(passage id, entity id, count)`` rows.
        subjects: ``(document id, entity id)`` rows.
        max_pair_entities: Passages naming more entities than this add no co-occurrence.

    Returns:
        Every node and typed edge as sparse matrices.
    """
    # sorted here, not by the caller's SQL: every engine's rows give the same view
    chunks = sorted(((str(c), str(d), int(o)) for c, d, o in chunks), key=lambda r: r[0])
    entities = sorted(((e, str(k), str(t)) for e, k, t in entities), key=lambda r: r[1])
    types = sorted({kind for _, _, kind in entities})
    nodes = (
        [c for c, _, _ in chunks] + [f"e:{k}" for _, k, _ in entities] + [f"t:{t}" for t in types]
    )
    kinds = ["chunk"] * len(chunks) + ["entity"] * len(entities) + ["type"] * len(types)
    c_row = {c: i for i, (c, _, _) in enumerate(chunks)}
    e_row = {eid: len(chunks) + i for i, (eid, _, _) in enumerate(entities)}
    t_row = {t: len(chunks) + len(entities) + i for i, t in enumerate(types)}
    n = len(nodes)
    edges = EdgeParts()
    found = [(c_row.get(cid), e_row.get(eid), count) for cid, eid, count in mentions]
    found = [f for f in found if f[0] is not None and f[1] is not None]
    m_c = np.fromiter((f[0] for f in found), np.int64, len(found))
    m_e = np.fromiter((f[1] for f in found), np.int64, len(found))
    m_w = np.fromiter((f[2] for f in found), np.float32, len(found))
    edges.add("mentions", m_c, m_e, m_w)
    edges.add("mentioned_in", m_e, m_c, m_w)
    e_nodes = np.fromiter((e_row[eid] for eid, _, _ in entities), np.int64, len(entities))
    t_nodes = np.fromiter((t_row[kind] for _, _, kind in entities), np.int64, len(entities))
    edges.add("is_a", e_nodes, t_nodes)
    edges.add("has_member", t_nodes, e_nodes)
    docs = edges.chains(chunks, c_row)
    edges.about(
        (e_row[eid], docs.get(did, [])) for did, eid in subjects if e_row.get(eid) is not None
    )
    edges.co_occurs(m_c, m_e, n, max_pair_entities)
    mats = edges.matrices(n)
    docs_of = tuple(d for _, d, _ in chunks)
    return GraphView(nodes, kinds, len(chunks), len(entities), mats, docs_of)


class GraphStore:
    """Entity graph tables in a SQLite database.

    Args:
        db: An open connection (``isolation_level=None``: this class opens its own
            transactions).
        max_pair_entities: Passages naming more entities than this add no co-occurrence edges.
        create: Create the tables if missing (False for a read-only store).
    """

    def __init__(
        self, db: sqlite3.Connection, max_pair_entities: int = 30, create: bool = True
    ) -> None:
        self.db = db
        self.max_pair_entities = max_pair_entities
        #: Subject keys of documents added, replaced or removed since the caller last cleared
        #: it (what a commit may have changed for passages that name those entities).
        self.touched_subjects: set[str] = set()
        #: Keys of entities named by passages added or removed since the caller last cleared
        #: it (a rare one leads somewhere new from every passage naming it).
        self.touched_names: set[str] = set()
        #: Documents whose part of the graph was written since the last :meth:`log_changes`.
        self.changed_docs: set[str] = set()
        self.logging = False  # (set by start_log: only a writer logs)
        if create:
            db.executescript(_SCHEMA)

    @staticmethod
    def drop(db: sqlite3.Connection) -> None:
        """Delete the graph's tables (to rebuild them from the archive)."""
        with write_transaction(db):
            for table in (
                "graph_entities",
                "graph_chunks",
                "graph_mentions",
                "graph_subjects",
                "graph_log",
                "graph_log_from",
            ):
                db.execute(f"DROP TABLE IF EXISTS {table}")

    # -- writing --------------------------------------------------------------------------
    def add_document(
        self,
        doc_id: str,
        chunks: Sequence[tuple[str, int, str]],
        extractor: EntityExtractor,
        subject: str | None = None,
    ) -> int:
        """Replace a document's part of the graph with its passages' mentions.

        Aliases are merged over the whole document ("Smith" in one passage is the "John Smith"
        of another).

        Args:
            doc_id: The document.
            chunks: ``(chunk id, ordinal, text)`` of each passage.
            extractor: What finds the mentions.
            subject: What the document is about, usually its title; a trailing parenthesised
                qualifier is dropped ("Lilu (mythology)" is about "Lilu"). None or blank: none.

        Returns:
            The number of mentions stored.
        """
        plan = plan_document(chunks, extractor, subject)
        stored = 0
        with self._noting(), write_transaction(self.db):
            self._remove(doc_id)
            for (cid, ordinal), counts in zip(plan.chunks, plan.mentions):
                self.db.execute(
                    "INSERT OR REPLACE INTO graph_chunks VALUES (?, ?, ?)", (cid, doc_id, ordinal)
                )
                self.touched_names.update(counts)
                for key, n in counts.items():
                    eid = self._entity(key, plan.kinds[key])
                    self.db.execute(
                        "INSERT INTO graph_mentions VALUES (?, ?, ?) ON CONFLICT DO UPDATE "
                        "SET count = count + excluded.count",
                        (cid, eid, n),
                    )
                    self.db.execute(
                        "UPDATE graph_entities SET chunks = chunks + 1 WHERE id = ?", (eid,)
                    )
                    stored += n
            if plan.subject:
                self.touched_subjects.add(plan.subject)
                eid = self._entity(plan.subject, plan.kinds[plan.subject])
                self.db.execute("INSERT INTO graph_subjects VALUES (?, ?)", (doc_id, eid))
                self.db.execute(
                    "UPDATE graph_entities SET chunks = chunks + 1 WHERE id = ?", (eid,)
                )
        return stored

    def remove_document(self, doc_id: str) -> None:
        """Take a document's passages and their mentions out of the graph."""
        with self._noting(), write_transaction(self.db):
            self._remove(doc_id)

    @contextlib.contextmanager
    def _noting(self) -> Iterator[None]:
        """Keep what a write notes in the touched sets only if it commits (a rolled-back
        write changed nothing a cached answer holds)."""
        names, subjects = set(self.touched_names), set(self.touched_subjects)
        try:
            yield
        except BaseException:
            self.touched_names.intersection_update(names)  # in place: callers hold the sets
            self.touched_subjects.intersection_update(subjects)
            raise

    def _entity(self, key: str, kind: str) -> int:
        row = self.db.execute("SELECT id FROM graph_entities WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return int(row[0])
        cur = self.db.execute(
            "INSERT INTO graph_entities (key, kind, chunks) VALUES (?, ?, 0)", (key, kind)
        )
        return int(cur.lastrowid or 0)

    def _remove(self, doc_id: str) -> None:
        self.changed_docs.add(doc_id)
        self.touched_subjects.update(
            r[0]
            for r in self.db.execute(
                "SELECT e.key FROM graph_subjects s JOIN graph_entities e ON e.id = s.entity_id "
                "WHERE s.doc_id = ?",
                (doc_id,),
            )
        )
        chunk_ids = [
            r[0]
            for r in self.db.execute(
                "SELECT chunk_id FROM graph_chunks WHERE doc_id = ?", (doc_id,)
            )
        ]
        for cid in chunk_ids:
            self.touched_names.update(
                r[0]
                for r in self.db.execute(
                    "SELECT e.key FROM graph_mentions m JOIN graph_entities e "
                    "ON e.id = m.entity_id WHERE m.chunk_id = ?",
                    (cid,),
                )
            )
            self.db.execute(
                "UPDATE graph_entities SET chunks = chunks - 1 WHERE id IN "
                "(SELECT entity_id FROM graph_mentions WHERE chunk_id = ?)",
                (cid,),
            )
            self.db.execute("DELETE FROM graph_mentions WHERE chunk_id = ?", (cid,))
        self.db.execute("DELETE FROM graph_chunks WHERE doc_id = ?", (doc_id,))
        self.db.execute(
            "UPDATE graph_entities SET chunks = chunks - 1 WHERE id IN "
            "(SELECT entity_id FROM graph_subjects WHERE doc_id = ?)",
            (doc_id,),
        )
        self.db.execute("DELETE FROM graph_subjects WHERE doc_id = ?", (doc_id,))
        self.db.execute("DELETE FROM graph_entities WHERE chunks <= 0")

    # -- the change log ----------------------------------------------------------------------
    def start_log(self, commit: int) -> None:
        """A writer opening: views of ``commit`` or earlier are not brought forward with the
        log (a writer before this one may have died with its changes unlogged)."""
        self.db.executescript(_LOG_SCHEMA)
        self.logging = True
        with write_transaction(self.db):
            self.db.execute("INSERT OR REPLACE INTO graph_log_from VALUES (1, ?)", (commit + 1,))
            # rows of a commit that never happened (a writer that died after logging it)
            self.db.execute("DELETE FROM graph_log WHERE commit_no > ?", (commit,))

    def log_changes(self, commit: int) -> None:
        """Before ``commit`` is marked: log the documents written since the last call (a
        reader at an earlier commit reads them again; logged early is harmless, since a
        document read again that did not change gives the same view)."""
        if not self.logging:  # (no writer started the log: it is not read)
            self.changed_docs.clear()
            return
        try:
            self.db.execute("SELECT 1 FROM graph_log LIMIT 1")
        except sqlite3.OperationalError:  # the log was dropped or damaged: start it again, and
            self.start_log(commit - 1)  # views of before this commit are built whole
        with write_transaction(self.db):
            # the row of doc "" says this commit was logged (even with nothing changed): a
            # commit made by a writer that logs nothing (an earlier release) has none, and
            # a view is not brought forward over it
            self.db.executemany(
                "INSERT OR IGNORE INTO graph_log VALUES (?, ?)",
                [(commit, d) for d in ["", *sorted(self.changed_docs)]],
            )
            self.db.execute("DELETE FROM graph_log WHERE commit_no <= ?", (commit - LOG_KEEP,))
            self.db.execute(
                "UPDATE graph_log_from SET since = MAX(since, ?) WHERE id = 1",
                (commit - LOG_KEEP + 1,),
            )
        self.changed_docs.clear()

    def changed_since(self, commit: int, upto: int) -> list[str] | None:
        """Documents whose part of the graph changed after ``commit`` (those of commits after
        ``upto`` too, when they are already there), or None when not known for every commit
        up to ``upto``: build the view whole."""
        try:
            row = self.db.execute("SELECT since FROM graph_log_from WHERE id = 1").fetchone()
            if row is None or row[0] is None or commit < int(row[0]):
                return None
            (logged,) = self.db.execute(
                "SELECT COUNT(*) FROM graph_log WHERE doc_id = '' AND commit_no > ? "
                "AND commit_no <= ?",
                (commit, upto),
            ).fetchone()
            if logged != max(0, upto - commit):
                return None  # a commit nobody logged (a writer of an earlier release)
            return [
                r[0]
                for r in self.db.execute(
                    "SELECT DISTINCT doc_id FROM graph_log WHERE commit_no > ? AND doc_id != ''",
                    (commit,),
                )
            ]
        except sqlite3.OperationalError:  # no log (a store no writer of this release opened)
            return None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Read in one transaction (one snapshot of the tables): the log and the rows it
        names must not straddle a commit of another process."""
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            self.db.execute("COMMIT")

    def rows_of(
        self, doc_ids: Sequence[str]
    ) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, str, int]], list[Any]]:
        """The graph rows of these documents: ``(passage, document, ordinal)``, ``(passage,
        entity key, kind, count)`` and ``(document, subject key, kind)``."""
        chunks: list[Any] = []
        mentions: list[Any] = []
        subjects: list[Any] = []
        for i in range(0, len(doc_ids), 500):
            part = list(doc_ids[i : i + 500])
            marks = ",".join("?" * len(part))
            q = self.db.execute
            chunks += q(
                f"SELECT chunk_id, doc_id, ordinal FROM graph_chunks WHERE doc_id IN ({marks})",
                part,
            ).fetchall()
            mentions += q(
                "SELECT m.chunk_id, e.key, e.kind, m.count FROM graph_chunks c "
                "JOIN graph_mentions m ON m.chunk_id = c.chunk_id "
                f"JOIN graph_entities e ON e.id = m.entity_id WHERE c.doc_id IN ({marks})",
                part,
            ).fetchall()
            subjects += q(
                "SELECT s.doc_id, e.key, e.kind FROM graph_subjects s "
                f"JOIN graph_entities e ON e.id = s.entity_id WHERE s.doc_id IN ({marks})",
                part,
            ).fetchall()
        return chunks, mentions, subjects

    def kinds_of(self, keys: Sequence[str]) -> dict[str, str]:
        """The kind of each of ``keys`` the graph holds."""
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            out.update(
                self.db.execute(
                    f"SELECT key, kind FROM graph_entities WHERE key IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
            )
        return out

    # -- reading --------------------------------------------------------------------------
    def documents(self) -> dict[str, set[str]]:
        """Document -> the passage ids the graph holds (to bring it level with the archive)."""
        out: dict[str, set[str]] = {}
        for cid, did in self.db.execute("SELECT chunk_id, doc_id FROM graph_chunks"):
            out.setdefault(did, set()).add(cid)
        return out

    def counts(self) -> dict[str, int]:
        """Passages, entities and mentions stored."""
        one = self.db.execute
        return {
            "chunks": int(one("SELECT COUNT(*) FROM graph_chunks").fetchone()[0]),
            "entities": int(one("SELECT COUNT(*) FROM graph_entities").fetchone()[0]),
            "mentions": int(
                one("SELECT COALESCE(SUM(count), 0) FROM graph_mentions").fetchone()[0]
            ),
        }

    def entities_of(self, chunk_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        """Entity keys (with mention counts) of each passage."""
        out: dict[str, dict[str, int]] = {}
        for cid in chunk_ids:
            rows = self.db.execute(
                "SELECT e.key, m.count FROM graph_mentions m JOIN graph_entities e "
                "ON e.id = m.entity_id WHERE m.chunk_id = ? ORDER BY e.key",
                (cid,),
            ).fetchall()
            out[cid] = {k: int(n) for k, n in rows}
        return out

    def mentioning(self, keys: Iterable[str]) -> set[str]:
        """Passages that name any of the entities with these normal forms."""
        out: set[str] = set()
        for key in keys:
            out.update(self.chunks_of(key))
        return out

    def rare(self, keys: Iterable[str], most: int) -> set[str]:
        """Those of ``keys`` that at most ``most`` passages name (entities that are gone
        left out: their passages are gone too)."""
        keys = list(keys)
        out: set[str] = set()
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            out.update(
                r[0]
                for r in self.db.execute(
                    f"SELECT key FROM graph_entities WHERE key IN ({','.join('?' * len(part))}) "
                    "AND chunks <= ?",
                    (*part, most),
                )
            )
        return out

    def chunks_of(self, key: str) -> list[str]:
        """Passages mentioning the entity with this normal form, in a stable order."""
        return [
            r[0]
            for r in self.db.execute(
                "SELECT m.chunk_id FROM graph_mentions m JOIN graph_entities e "
                "ON e.id = m.entity_id WHERE e.key = ? ORDER BY m.chunk_id",
                (key,),
            )
        ]

    def load(self) -> GraphView:
        """Build the traversal structure: every node and typed edge as sparse matrices.

        Deterministic: nodes are ordered by id, so equal contents give equal matrices.
        """
        chunks = self.db.execute(
            "SELECT chunk_id, doc_id, ordinal FROM graph_chunks ORDER BY chunk_id"
        ).fetchall()
        entities = self.db.execute(
            "SELECT id, key, kind FROM graph_entities ORDER BY key"
        ).fetchall()
        mentions = self.db.execute("SELECT chunk_id, entity_id, count FROM graph_mentions")
        subjects = self.db.execute("SELECT doc_id, entity_id FROM graph_subjects")
        return build_view(chunks, entities, mentions, subjects, self.max_pair_entities)


class GraphTables(Protocol):
    """The entity graph's persistent part, as the engine uses it. :class:`GraphStore` (tables
    in the store's SQLite file) is the embedded implementation.

    Attributes:
        touched_subjects: Subject keys of documents added, replaced or removed since the
            caller last cleared it.
        touched_names: Keys of entities named by passages added or removed since the caller
            last cleared it.
    """

    touched_subjects: set[str]
    touched_names: set[str]

    def add_document(
        self,
        doc_id: str,
        chunks: Sequence[tuple[str, int, str]],
        extractor: EntityExtractor,
        subject: str | None = None,
    ) -> int:
        """Replace a document's part of the graph with its passages' mentions."""
        ...

    def remove_document(self, doc_id: str) -> None:
        """Take a document's passages and their mentions out of the graph."""
        ...

    def documents(self) -> dict[str, set[str]]:
        """Document -> the passage ids the graph holds."""
        ...

    def mentioning(self, keys: Iterable[str]) -> set[str]:
        """Passages naming any of the entity keys."""
        ...

    def rare(self, keys: Iterable[str], most: int) -> set[str]:
        """Of ``keys``, those named by at most ``most`` passages."""
        ...

    def load(self) -> GraphView:
        """The whole graph as sparse matrices."""
        ...

    def counts(self) -> dict[str, int]:
        """Passages, entities and mentions."""
        ...
