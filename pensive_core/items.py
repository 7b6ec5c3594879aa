"""Namespaced key-value items with semantic search: the engine behind key-value memory adapters.

An item is a JSON object stored under a namespace (a tuple of labels, like a folder path) and a
key. Items live in a table the store's storage engine opens (:class:`ItemRecords`; the embedded
engine's is a SQLite file beside the store, ``<store>/<filename>``); an item given a text is
also indexed in the store as a :class:`~pensive_core.types.Document`, so a question finds it
through the same hybrid retrieval as any document. Its document carries ``lg_item``,
``lg_namespace``, ``lg_key``, ``lg_depth`` and one field per namespace label (``ns0``,
``ns1``, ...), which is how a search is kept inside a namespace prefix.

An item is written to the table first and indexed second; an item the index lacks (a crash in
between) is indexed when the item store next opens.

Use a Pensive store of its own for items: their documents share the store's index, so a plain
``Pensive.query`` on the same store would find them too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .errors import InputError, NotFoundError
from .timeutil import utcnow
from .types import Document
from .validate import MAX_K

if TYPE_CHECKING:
    from .engine import Pensive

__all__ = [
    "ItemRecords",
    "ItemStore",
    "ItemWrite",
    "StoredItem",
    "doc_id_for",
    "namespace_matches",
    "render_value",
    "value_matches",
]

log = logging.getLogger(__name__)

Namespace = tuple[str, ...]
_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")


@dataclass(frozen=True)
class StoredItem:
    """One item as stored.

    Args:
        namespace: Its namespace labels.
        key: Its key within the namespace.
        value: The JSON object stored.
        created_at: When it was first written (UTC).
        updated_at: When it was last written (UTC).
        score: The search score (higher is better) when a question found it, else None.
    """

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True)
class ItemWrite:
    """One write: ``value`` None deletes; ``text`` None leaves the item out of the index.

    Args:
        namespace: The item's namespace labels.
        key: The item's key.
        value: The JSON object to store, or None to delete the item.
        text: What to index for semantic search (None: not searchable by question).
    """

    namespace: Namespace
    key: str
    value: Mapping[str, Any] | None
    text: str | None = None


def doc_id_for(namespace: Sequence[str], key: str) -> str:
    """The Pensive document id of an item: ``lg:`` + JSON(namespace) + ``:`` + key."""
    return f"lg:{json.dumps(list(namespace))}:{key}"


def render_value(value: Mapping[str, Any]) -> str:
    """An item's default index text: one ``field: value`` line per field (strings as they are,
    anything else as JSON)."""
    lines = []
    for k, v in value.items():
        shown = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        lines.append(f"{k}: {shown}")
    return "\n".join(lines)


def namespace_matches(
    namespace: Sequence[str], kind: Literal["prefix", "suffix"], path: Sequence[str]
) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``path``, where a
    ``"*"`` label in ``path`` matches any one label."""
    if len(namespace) < len(path):
        return False
    if kind == "prefix":
        pairs = zip(namespace, path)
    elif kind == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise InputError(f"match type must be 'prefix' or 'suffix', got {kind!r}")
    return all(p == "*" or n == p for n, p in pairs)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _apply(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op in ("$in", "$nin"):
        if not isinstance(operand, (list, tuple)):
            raise InputError(f"filter {op} takes a list, got {operand!r}")
        return (value in operand) == (op == "$in")
    a, b = _number(value), _number(operand)
    if b is None:
        raise InputError(f"filter {op} compares numbers, got {operand!r}")
    if a is None:  # a missing or non-numeric field passes no range comparison
        return False
    return (
        (op == "$gt" and a > b)
        or (op == "$gte" and a >= b)
        or (op == "$lt" and a < b)
        or (op == "$lte" and a <= b)
    )


def _value_matches(value: Any, spec: Any) -> bool:
    if isinstance(spec, Mapping):
        ops = [k for k in spec if isinstance(k, str) and k.startswith("$")]
        if ops:
            if len(ops) != len(spec):
                raise InputError(f"filter mixes operators and fields: {dict(spec)!r}")
            for op in ops:
                if op not in _OPS:
                    raise InputError(
                        f"unknown filter operator {op!r}; use one of {', '.join(_OPS)}"
                    )
            return all(_apply(value, op, operand) for op, operand in spec.items())
        if not isinstance(value, Mapping):
            return False
        return all(_value_matches(value.get(k), v) for k, v in spec.items())
    return bool(value == spec)


def value_matches(value: Mapping[str, Any], spec: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a filter: ``{"field": v}`` is equality (nested objects
    and lists compared whole, a nested dict of fields matched field by field), ``{"field":
    {"$gt": 3}}`` applies ``$eq $ne $gt $gte $lt $lte $in $nin``. All fields must hold.

    Raises:
        InputError: On an unknown operator, or a range operator given a non-number.
    """
    if not spec:
        return True
    return all(_value_matches(value.get(k), v) for k, v in spec.items())


def _check_namespace(namespace: Sequence[str], *, empty_ok: bool = False) -> Namespace:
    ns = tuple(namespace)
    if not ns and not empty_ok:
        raise InputError("an item namespace needs at least one label, got ()")
    for label in ns:
        if not isinstance(label, str) or not label:
            raise InputError(f"namespace labels are non-empty strings, got {label!r} in {ns!r}")
    return ns


class ItemRecords(Protocol):
    """The table an :class:`ItemStore` keeps its items in, opened by the store's storage engine
    (:meth:`~pensive_core.storage.StorageEngine.open_item_table`).

    The caller serialises access (an item store holds its own lock). A write outside
    :meth:`transaction` is committed before it returns.
    """

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction: the writes inside it are committed together when the block
        ends, or none of them if it raises."""
        ...

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
        ...

    def delete(self, namespace: Namespace, key: str) -> None:
        """Remove an item (nothing happens if there is none)."""
        ...

    def mark_indexed(self, keys: Sequence[tuple[Namespace, str]]) -> None:
        """Record that the index has the items at ``keys`` that have a text."""
        ...

    def indexed(self, namespace: Namespace, key: str) -> bool:
        """Whether the item exists and the index has it."""
        ...

    def index_text(self, namespace: Namespace, key: str) -> tuple[str, datetime] | None:
        """What to index for an item, and when it was last written (None: no such item, or
        one without a text)."""
        ...

    def unindexed(self) -> list[tuple[Namespace, str]]:
        """The namespace and key of every item with a text the index lacks."""
        ...

    def get(self, namespace: Namespace, key: str) -> StoredItem | None:
        """The item at ``namespace``/``key``, or None."""
        ...

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
        ...

    def namespaces(self) -> list[Namespace]:
        """Every namespace holding an item, once each, in no particular order."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None:
        """Release the table."""
        ...


class ItemStore:
    """Namespaced JSON items beside a Pensive store, searchable by question.

    Args:
        pensive: The store whose storage engine keeps the item table and whose index holds
            the items' texts.
        filename: The table's name among the store's item tables (for the embedded engine,
            the SQLite file's name inside the store folder).

    Raises:
        PensiveError: If the store is closed.
    """

    def __init__(self, pensive: Pensive, filename: str = "items.sqlite") -> None:
        self.pensive = pensive
        self.path = pensive.path / filename
        self._lock = threading.RLock()
        # every call holds the lock: one table may serve worker threads (asyncio.to_thread)
        self._table: ItemRecords = pensive.components.storage.open_item_table(filename)
        if not pensive.read_only:
            self._recover()

    # -- writes -------------------------------------------------------------------------------
    def write(self, writes: Iterable[ItemWrite]) -> None:
        """Apply writes in order (the last write to a key wins), then update the index.

        Raises:
            InputError: On a bad namespace or key, or a value that is not a JSON object.
        """
        last: dict[tuple[Namespace, str], ItemWrite] = {}
        for w in writes:
            ns = _check_namespace(w.namespace)
            if not isinstance(w.key, str) or not w.key:
                raise InputError(f"an item key is a non-empty string, got {w.key!r}")
            if w.value is not None and not isinstance(w.value, Mapping):
                raise InputError(
                    f"an item value is a mapping or None, got {type(w.value).__name__}"
                )
            last.pop((ns, w.key), None)  # keep the order of the last writes
            last[(ns, w.key)] = w
        if not last:
            return
        table = self._table
        with self._lock:
            now = utcnow()
            index: list[tuple[Namespace, str]] = []
            unindex: list[str] = []
            with table.transaction():
                for (ns, key), w in last.items():
                    was_indexed = table.indexed(ns, key)
                    if w.value is None:
                        table.delete(ns, key)
                        if was_indexed:
                            unindex.append(doc_id_for(ns, key))
                        continue
                    try:
                        value = json.dumps(dict(w.value), ensure_ascii=False)
                    except (TypeError, ValueError) as exc:
                        raise InputError(
                            f"item {key!r} in {ns!r}: value is not JSON-serialisable ({exc})"
                        ) from exc
                    text = w.text if w.text and w.text.strip() else None
                    table.put(ns, key, value, text, now)
                    if text is not None:
                        index.append((ns, key))
                    elif was_indexed:
                        unindex.append(doc_id_for(ns, key))
            self._unindex(unindex)
            self._index(index)

    def _unindex(self, doc_ids: Sequence[str]) -> None:
        for doc_id in doc_ids:
            # a document never indexed (a crash before indexing) has nothing to remove
            with contextlib.suppress(NotFoundError):
                self.pensive.delete(doc_id)

    def _index(self, keys: Sequence[tuple[Namespace, str]]) -> None:
        if not keys:
            return
        docs = []
        for ns, key in keys:
            found = self._table.index_text(ns, key)
            if found is None:
                continue
            text, updated = found
            meta: dict[str, Any] = {
                "lg_item": True,
                "lg_namespace": "/".join(ns),
                "lg_key": key,
                "lg_depth": len(ns),
            }
            meta.update({f"ns{i}": label for i, label in enumerate(ns)})
            docs.append(
                Document(id=doc_id_for(ns, key), text=text, metadata=meta, timestamp=updated)
            )
        if docs:
            self.pensive.ingest(docs)
        with self._lock:
            self._table.mark_indexed(keys)

    def _recover(self) -> None:
        keys = self._table.unindexed()
        if keys:
            log.info("indexing %d items written but not indexed", len(keys))
            self._index(keys)

    # -- reads --------------------------------------------------------------------------------
    def get(self, namespace: Sequence[str], key: str) -> StoredItem | None:
        """The item at ``namespace``/``key``, or None."""
        ns = _check_namespace(namespace)
        with self._lock:
            return self._table.get(ns, key)

    def search(
        self,
        prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[StoredItem]:
        """Items under a namespace prefix: best first for a question, else newest first.

        Args:
            prefix: Only items whose namespace starts with these labels (``()``: all).
            query: A question: items are ranked by the Pensive store's hybrid retrieval over
                their texts, with scores; items stored without a text follow, unscored, when
                fewer than ``limit`` were found.
            filter: Only items whose value passes (:func:`value_matches`).
            limit: At most this many items.
            offset: Skip this many first.

        Returns:
            The items, with ``score`` set for those a question found.

        Raises:
            InputError: On a bad prefix, limit, offset or filter.
        """
        ns = _check_namespace(prefix, empty_ok=True)
        for name, n in (("limit", limit), ("offset", offset)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise InputError(f"{name} must be a non-negative int, got {n!r}")
        value_matches({}, filter)  # a malformed filter fails even where nothing is stored
        if limit == 0:
            return []
        if query is not None and query.strip():
            return self._ask(ns, query, filter, limit, offset)
        with self._lock:
            if not filter:
                return list(self._table.newest(ns, limit=limit, offset=offset))
            found = []
            for it in self._table.newest(ns):
                if value_matches(it.value, filter):
                    found.append(it)
                    if len(found) >= offset + limit:
                        break
            return found[offset:]

    def _ask(
        self,
        prefix: Namespace,
        query: str,
        filter: Mapping[str, Any] | None,
        limit: int,
        offset: int,
    ) -> list[StoredItem]:
        want = offset + limit
        where: dict[str, Any] = {"lg_item": True}
        where.update({f"ns{i}": label for i, label in enumerate(prefix)})
        scored: dict[tuple[Namespace, str], StoredItem] = {}
        k = min(MAX_K, max(10, 2 * want))
        while True:
            hits = self.pensive.query(query, k=k, filters=where).hits
            best: dict[str, float] = {}
            for h in hits:  # a long item has several passages: its best one counts
                if h.score > best.get(h.doc_id, float("-inf")):
                    best[h.doc_id] = h.score
            scored.clear()
            with self._lock:
                for doc_id, score in sorted(best.items(), key=lambda x: -x[1]):
                    got = self._by_doc(doc_id)
                    if got is None or not value_matches(got.value, filter):
                        continue  # deleted since, or filtered out
                    scored[(got.namespace, got.key)] = StoredItem(
                        got.namespace, got.key, got.value, got.created_at, got.updated_at, score
                    )
            if len(scored) >= want or len(hits) < k or k >= MAX_K:
                break
            k = min(MAX_K, k * 4)
        out = list(scored.values())[offset:want]
        if len(out) < limit:  # items kept out of the index come after, unscored
            with self._lock:
                for it in self._table.newest(prefix, textless=True):
                    if value_matches(it.value, filter):
                        out.append(it)
                        if len(out) >= limit:
                            break
        return out

    def _by_doc(self, doc_id: str) -> StoredItem | None:
        head, sep, rest = doc_id.partition(":")
        if head != "lg" or not sep:
            return None
        try:
            labels, end = json.JSONDecoder().raw_decode(rest)
        except ValueError:
            return None
        if not isinstance(labels, list) or rest[end : end + 1] != ":":
            return None
        return self.get(tuple(labels), rest[end + 1 :])

    def namespaces(
        self,
        conditions: Sequence[tuple[Literal["prefix", "suffix"], Sequence[str]]] = (),
        *,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces holding items, sorted.

        Args:
            conditions: ``(kind, path)`` pairs that must all hold (:func:`namespace_matches`).
            max_depth: Cut longer namespaces to this many labels (then deduplicated).
            limit: At most this many.
            offset: Skip this many first.
        """
        with self._lock:
            found = self._table.namespaces()
        found = [ns for ns in found if all(namespace_matches(ns, k, p) for k, p in conditions)]
        if max_depth is not None:
            found = list({ns[:max_depth] for ns in found})
        return sorted(found)[offset : offset + limit]

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)

    def close(self) -> None:
        """Close the item table (the Pensive store stays open)."""
        with self._lock:
            self._table.close()
