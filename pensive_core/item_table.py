"""The SQLite table of an :class:`~pensive_core.items.ItemStore`: one file beside the store.

:class:`ItemTable` is the :class:`~pensive_core.items.ItemRecords` of the embedded storage
engine (:meth:`~pensive_core.storage.embedded.EmbeddedStorage.open_item_table`): one row per
item, its namespace kept as the JSON list of its labels, so the items under a namespace prefix
are the rows whose JSON starts with the prefix's.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from .items import Namespace, StoredItem
from .timeutil import from_iso, to_iso

__all__ = ["SCHEMA", "ItemTable"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, text TEXT, indexed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ns, key));
CREATE INDEX IF NOT EXISTS items_updated ON items (updated_at);
"""
_COLUMNS = "SELECT ns, key, value, created_at, updated_at FROM items"


class ItemTable:
    """Namespaced JSON items in one SQLite file (WAL), made on first use.

    The caller serialises access (an :class:`~pensive_core.items.ItemStore` holds its own
    lock): one connection may then serve worker threads (``asyncio.to_thread``).

    Args:
        path: The SQLite file.

    Attributes:
        path: The SQLite file.
        db: The connection, in autocommit mode (this class's own; the item store uses the
            :class:`~pensive_core.items.ItemRecords` methods).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    # -- writes -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (taken at once): committed when the block ends, rolled back
        if it raises."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def put(
        self, namespace: Namespace, key: str, value: str, text: str | None, now: datetime
    ) -> None:
        """Store an item (its creation time kept if it exists), not yet indexed.

        Args:
            namespace: Its namespace labels.
            key: Its key.
            value: Its value, as JSON text.
            text: What to index for it (None: nothing).
            now: The time of the write.
        """
        when = to_iso(now)
        self.db.execute(
            "INSERT INTO items (ns, key, value, created_at, updated_at, text, indexed)"
            " VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (ns, key) DO UPDATE SET"
            " value = excluded.value, updated_at = excluded.updated_at,"
            " text = excluded.text, indexed = 0",
            (_ns_json(namespace), key, value, when, when, text),
        )

    def delete(self, namespace: Namespace, key: str) -> None:
        """Remove an item (nothing happens if there is none)."""
        self.db.execute("DELETE FROM items WHERE ns = ? AND key = ?", (_ns_json(namespace), key))

    def mark_indexed(self, keys: Sequence[tuple[Namespace, str]]) -> None:
        """Record that the index has the items at ``keys`` that have a text."""
        self.db.executemany(
            "UPDATE items SET indexed = 1 WHERE ns = ? AND key = ? AND text IS NOT NULL",
            [(_ns_json(ns), key) for ns, key in keys],
        )

    # -- reads --------------------------------------------------------------------------------
    def indexed(self, namespace: Namespace, key: str) -> bool:
        """Whether the item exists and the index has it."""
        row = self.db.execute(
            "SELECT indexed FROM items WHERE ns = ? AND key = ?", (_ns_json(namespace), key)
        ).fetchone()
        return row is not None and bool(row[0])

    def index_text(self, namespace: Namespace, key: str) -> tuple[str, datetime] | None:
        """What to index for an item, and when it was last written (None: no such item, or
        one without a text)."""
        row = self.db.execute(
            "SELECT text, updated_at FROM items WHERE ns = ? AND key = ?",
            (_ns_json(namespace), key),
        ).fetchone()
        if row is None or row[0] is None:
            return None
        return row[0], _time(row[1])

    def unindexed(self) -> list[tuple[Namespace, str]]:
        """The namespace and key of every item with a text the index lacks."""
        rows = self.db.execute(
            "SELECT ns, key FROM items WHERE indexed = 0 AND text IS NOT NULL"
        ).fetchall()
        return [(tuple(json.loads(ns)), key) for ns, key in rows]

    def get(self, namespace: Namespace, key: str) -> StoredItem | None:
        """The item at ``namespace``/``key``, or None."""
        row = self.db.execute(
            f"{_COLUMNS} WHERE ns = ? AND key = ?", (_ns_json(namespace), key)
        ).fetchone()
        return None if row is None else _item(row)

    def newest(
        self,
        prefix: Namespace = (),
        *,
        textless: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> Iterator[StoredItem]:
        """Items under a namespace prefix, last written first (of those written at the same
        time, the one created last first), read as they are iterated.

        Args:
            prefix: Only items whose namespace starts with these labels (``()``: all).
            textless: Only items stored without a text.
            limit: At most this many (None: all).
            offset: Skip this many first.
        """
        sql = _COLUMNS
        conds: list[str] = []
        params: list[Any] = []
        if prefix:
            # JSON of a namespace under ["a", "b"] starts with '["a", "b", '
            head = _ns_json(prefix)[:-1] + ", "
            conds.append("(ns = ? OR substr(ns, 1, ?) = ?)")
            params += [_ns_json(prefix), len(head), head]
        if textless:
            conds.append("text IS NULL")
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        sql += " ORDER BY updated_at DESC, rowid DESC"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        return map(_item, self.db.execute(sql, params))

    def namespaces(self) -> list[Namespace]:
        """Every namespace holding an item, once each, in no particular order."""
        rows = self.db.execute("SELECT DISTINCT ns FROM items").fetchall()
        return [tuple(json.loads(r[0])) for r in rows]

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM items").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        self.db.close()


def _ns_json(namespace: Sequence[str]) -> str:
    return json.dumps(list(namespace))


def _time(ts: str) -> datetime:
    when = from_iso(ts)
    assert when is not None
    return when


def _item(row: Sequence[Any]) -> StoredItem:
    ns, key, value, created, updated = row
    return StoredItem(tuple(json.loads(ns)), key, json.loads(value), _time(created), _time(updated))
