"""LangGraph item tables and the LLM cache's rows in Postgres: :class:`PostgresItemTable` (an
:class:`~pensive_core.items.ItemRecords`) and :class:`PostgresLLMCacheRecords` (an
:class:`~pensive_core.llm_cache.LLMCacheRecords`).

Parts of the Postgres storage engine (:mod:`pensive_core.storage.postgres`); they pass
:class:`pensive_core.testing.ItemRecordsTests` and
:class:`pensive_core.testing.LLMCacheRecordsTests`, the suites the SQLite ones pass.

Differences from the SQLite ones, by design:

* an item table is ``{prefix}_{table}`` (the embedded engine's is a file named by the item
  store; :func:`table_for` turns that name into a table name); its namespace is kept as the
  JSON list of its labels, as in SQLite, so a namespace prefix is a prefix of that text;
* keys, values and texts are UTF-8 ``bytea`` (a text column holds no NUL; a key or a label
  may); times are ``timestamptz`` read back as UTC; "created last first" among items written
  at the same time is by a ``bigserial`` (SQLite's rowid);
* :meth:`PostgresItemTable.newest` reads its rows before it returns (SQLite's streams them);
* several replicas may write one item at once: each write is an upsert, the last one wins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from .errors import ConfigError
from .items import Namespace, StoredItem
from .storage.pg_tables import PgTables, from_bytes, to_bytes, utc
from .timeutil import ensure_utc, utcnow

__all__ = ["PostgresItemTable", "PostgresLLMCacheRecords", "table_for"]

# {prefix}_{table}_ts stays within Postgres's 63 characters of a name (a prefix has up to 40)
_TABLE = re.compile(r"^[a-z][a-z0-9_]{0,18}$")


def table_for(filename: str) -> str:
    """The table name for an item table the embedded engine would keep in ``filename``
    (``"items.sqlite"`` -> ``"items"``): its stem, lower-cased, other characters as ``_``.

    Raises:
        ConfigError: If nothing usable is left (or it is over 19 characters).
    """
    stem = filename.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    name = re.sub(r"[^a-z0-9_]", "_", stem)
    if not _TABLE.match(name):
        raise ConfigError(
            f"item table name {filename!r} gives the table {name!r}, which is not a lower-case "
            "identifier of 1 to 19 characters starting with a letter; choose another filename"
        )
    return name


def _ns(namespace: Sequence[str]) -> str:
    """A namespace as stored: the JSON of its labels, ASCII only (a label's NUL escaped)."""
    return json.dumps(list(namespace))


class PostgresItemTable:
    """Namespaced JSON items in one Postgres table, made on first use.

    The caller serialises access to one object (an item store holds its own lock); other
    replicas may use the same table at the same time. A write outside :meth:`transaction`
    is committed before it returns.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The store's table prefix (a lower-case identifier of at most 40 characters).
        table: The table's name after the prefix (see :func:`table_for`).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix or the table name is not valid.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self, dsn: str, prefix: str, table: str = "items", *, timeout_s: float = 10
    ) -> None:
        if not isinstance(table, str) or not _TABLE.match(table):
            raise ConfigError(
                f"item table name {table!r} is not valid: use 1 to 19 lower-case letters, "
                "digits or '_', starting with a letter"
            )
        self.table = table
        self._t = PgTables(
            dsn, prefix, {"items": table, "updated": f"{table}_ts"}, "item table", timeout_s
        )
        if not self._t.exists("items"):
            self._t.create(
                [
                    "CREATE TABLE IF NOT EXISTS {items} (id bigserial NOT NULL, ns text NOT NULL, "
                    "key bytea NOT NULL, value bytea NOT NULL, created_at timestamptz NOT NULL, "
                    "updated_at timestamptz NOT NULL, text bytea, "
                    "indexed boolean NOT NULL DEFAULT false, PRIMARY KEY (ns, key))",
                    "CREATE INDEX IF NOT EXISTS {updated} ON {items} (updated_at DESC, id DESC)",
                ]
            )

    # -- writes -------------------------------------------------------------------------------

    @property
    def tables(self) -> PgTables:
        """The tables and their connection (tools and tests reach the connection here)."""
        return self._t

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction: committed when the block ends, rolled back whole if it
        raises (a nested one joins the outer)."""
        return self._t.transaction()

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
        when = ensure_utc(now)
        self._t.run(
            "store an item",
            "INSERT INTO {items} (ns, key, value, created_at, updated_at, text, indexed) "
            "VALUES (%s, %s, %s, %s, %s, %s, false) ON CONFLICT (ns, key) DO UPDATE SET "
            "value = EXCLUDED.value, updated_at = EXCLUDED.updated_at, text = EXCLUDED.text, "
            "indexed = false",
            (_ns(namespace), to_bytes(key), to_bytes(value), when, when,
             None if text is None else to_bytes(text)),
        )  # fmt: skip

    def delete(self, namespace: Namespace, key: str) -> None:
        """Remove an item (nothing happens if there is none)."""
        self._t.run(
            "delete an item",
            "DELETE FROM {items} WHERE ns = %s AND key = %s",
            (_ns(namespace), to_bytes(key)),
        )

    def mark_indexed(self, keys: Sequence[tuple[Namespace, str]]) -> None:
        """Record that the index has the items at ``keys`` that have a text."""
        if not keys:
            return
        self._t.run(
            "mark items indexed",
            "UPDATE {items} AS i SET indexed = true FROM unnest(%s::text[], %s::bytea[]) "
            "AS u(ns, key) WHERE i.ns = u.ns AND i.key = u.key AND i.text IS NOT NULL",
            ([_ns(ns) for ns, _ in keys], [to_bytes(key) for _, key in keys]),
        )

    # -- reads --------------------------------------------------------------------------------
    def indexed(self, namespace: Namespace, key: str) -> bool:
        """Whether the item exists and the index has it."""
        rows = self._t.run(
            "read an item",
            "SELECT indexed FROM {items} WHERE ns = %s AND key = %s",
            (_ns(namespace), to_bytes(key)),
        )
        return bool(rows) and bool(rows[0][0])

    def index_text(self, namespace: Namespace, key: str) -> tuple[str, datetime] | None:
        """What to index for an item, and when it was last written (None: no such item, or
        one without a text)."""
        rows = self._t.run(
            "read an item",
            "SELECT text, updated_at FROM {items} WHERE ns = %s AND key = %s",
            (_ns(namespace), to_bytes(key)),
        )
        if not rows or rows[0][0] is None:
            return None
        return from_bytes(rows[0][0]), utc(rows[0][1])

    def unindexed(self) -> list[tuple[Namespace, str]]:
        """The namespace and key of every item with a text the index lacks."""
        rows = self._t.run(
            "list unindexed items",
            "SELECT ns, key FROM {items} WHERE NOT indexed AND text IS NOT NULL",
        )
        return [(tuple(json.loads(ns)), from_bytes(key)) for ns, key in rows]

    def get(self, namespace: Namespace, key: str) -> StoredItem | None:
        """The item at ``namespace``/``key``, or None."""
        rows = self._t.run(
            "read an item",
            "SELECT ns, key, value, created_at, updated_at FROM {items} WHERE ns = %s AND key = %s",
            (_ns(namespace), to_bytes(key)),
        )
        return _item(rows[0]) if rows else None

    def newest(
        self,
        prefix: Namespace = (),
        *,
        textless: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> Iterator[StoredItem]:
        """Items under a namespace prefix, last written first (of those written at the same
        time, the one created last first).

        Args:
            prefix: Only items whose namespace starts with these labels (``()``: all).
            textless: Only items stored without a text.
            limit: At most this many (None: all).
            offset: Skip this many first.
        """
        stmt = "SELECT ns, key, value, created_at, updated_at FROM {items}"
        conds: list[str] = []
        params: list[Any] = []
        if prefix:
            # the JSON of a namespace under ["a", "b"] starts with '["a", "b", '
            whole = _ns(prefix)
            head = whole[:-1] + ", "
            conds.append("(ns = %s OR starts_with(ns, %s))")
            params += [whole, head]
        if textless:
            conds.append("text IS NULL")
        if conds:
            stmt += " WHERE " + " AND ".join(conds)
        stmt += " ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s"
        params += [None if limit is None else max(0, int(limit)), max(0, int(offset))]
        return iter([_item(r) for r in self._t.run("list items", stmt, params)])

    def namespaces(self) -> list[Namespace]:
        """Every namespace holding an item, once each, in no particular order."""
        rows = self._t.run("list namespaces", "SELECT DISTINCT ns FROM {items}")
        return [tuple(json.loads(r[0])) for r in rows]

    def __len__(self) -> int:
        return int(self._t.run("count items", "SELECT count(*) FROM {items}")[0][0])

    def close(self) -> None:
        """Close the connection."""
        self._t.close()

    def __repr__(self) -> str:
        return f"PostgresItemTable({self._t.address!r}, {self._t.prefix}_{self.table})"


def _item(row: Sequence[Any]) -> StoredItem:
    ns, key, value, created, updated = row
    return StoredItem(
        tuple(json.loads(ns)), from_bytes(key), json.loads(from_bytes(value)), utc(created),
        utc(updated),
    )  # fmt: skip


class PostgresLLMCacheRecords:
    """The LLM cache's rows in one Postgres table (``{prefix}_llm_cache``), made on first use
    and shared by every replica. Safe to call from several threads (one connection, one call
    at a time); every write is committed before it returns.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The store's table prefix (a lower-case identifier of at most 40 characters).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not valid.
        BackendError: If Postgres cannot be reached (host and database named).

    Example:
        >>> from pensive_core.llm_cache import LLMCache
        >>> cache = LLMCache(records=PostgresLLMCacheRecords(dsn, "pensive"))  # doctest: +SKIP
    """

    def __init__(self, dsn: str, prefix: str, *, timeout_s: float = 10) -> None:
        self._t = PgTables(dsn, prefix, ("llm_cache", "llm_cache_llm"), "LLM cache", timeout_s)
        if not self._t.exists("llm_cache"):
            self._t.create(
                [
                    "CREATE TABLE IF NOT EXISTS {llm_cache} (key text PRIMARY KEY, "
                    "llm bytea NOT NULL, prompt bytea NOT NULL, value bytea NOT NULL, "
                    "created timestamptz NOT NULL)",
                    "CREATE INDEX IF NOT EXISTS {llm_cache_llm} ON {llm_cache} (llm)",
                ]
            )

    @property
    def tables(self) -> PgTables:
        """The tables and their connection (tools and tests reach the connection here)."""
        return self._t

    def get(self, key: str) -> str | None:
        """The value stored at ``key`` (JSON text), or None."""
        rows = self._t.run(
            "read the LLM cache", "SELECT value FROM {llm_cache} WHERE key = %s", (key,)
        )
        return from_bytes(rows[0][0]) if rows else None

    def put(self, key: str, llm: str, prompt: str, value: str) -> None:
        """Store ``value`` at ``key`` (replacing what was there)."""
        self._t.run(
            "write the LLM cache",
            "INSERT INTO {llm_cache} (key, llm, prompt, value, created) VALUES (%s, %s, %s, %s, "
            "%s) ON CONFLICT (key) DO UPDATE SET llm = EXCLUDED.llm, prompt = EXCLUDED.prompt, "
            "value = EXCLUDED.value, created = EXCLUDED.created",
            (key, to_bytes(llm), to_bytes(prompt), to_bytes(value), utcnow()),
        )

    def clear(self, llm: str | None = None) -> int:
        """Remove every row (of one model, if given); returns how many."""
        if llm is None:
            rows = self._t.run("clear the LLM cache", "DELETE FROM {llm_cache} RETURNING 1")
        else:
            rows = self._t.run(
                "clear the LLM cache",
                "DELETE FROM {llm_cache} WHERE llm = %s RETURNING 1",
                (to_bytes(llm),),
            )
        return len(rows)

    def __len__(self) -> int:
        return int(self._t.run("count the LLM cache", "SELECT count(*) FROM {llm_cache}")[0][0])

    def close(self) -> None:
        """Close the connection."""
        self._t.close()

    def __repr__(self) -> str:
        return f"PostgresLLMCacheRecords({self._t.address!r}, prefix={self._t.prefix!r})"
