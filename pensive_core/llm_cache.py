"""A durable LLM response cache keyed with the L1 cache's near-miss-safe normalisation.

A prompt is looked up by its normal form (:func:`pensive_core.cache.normalize_query`): case,
Unicode compatibility forms, whitespace and punctuation between tokens are ignored, while
numbers, dates, identifiers and negations stay whole, so "Q3 2024" and "Q4 2024" are different
prompts. Only the exact normal form is used (no bag-of-words or typo matching): a generated
answer depends on word order in a way a retrieval result does not.

A prompt is either one text or a sequence of ``(exact, text)`` parts: ``exact`` is kept verbatim
(a chat message's role and fields), ``text`` is normalised (its content). The model's
description (``llm``) is always matched exactly. Values are JSON; nothing is pickled.

The rows themselves are an :class:`LLMCacheRecords`: :class:`SQLiteLLMCacheRecords` (one
SQLite file shared by every process) by default, or another engine's (Postgres:
:class:`pensive_core.pg_items.PostgresLLMCacheRecords`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from .cache import normalize_query
from .errors import InputError

__all__ = ["LLMCache", "LLMCacheRecords", "SQLiteLLMCacheRecords", "prompt_key"]

Prompt = str | Sequence[tuple[str, str]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY, llm TEXT NOT NULL, prompt TEXT NOT NULL,
    value TEXT NOT NULL, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_cache_llm ON llm_cache(llm);
"""


def _normal(text: str) -> str:
    norm = normalize_query(text)
    # a prompt of punctuation alone has an empty normal form: match it only as written
    return norm if norm else "\x00raw:" + text


def prompt_key(prompt: Prompt, llm: str) -> str:
    """The cache key of a prompt sent to one model.

    Args:
        prompt: One text, or ``(exact, text)`` parts where only ``text`` is normalised.
        llm: The model and its parameters, matched exactly.

    Returns:
        A hex digest: equal for case, whitespace and punctuation variants of the same prompt,
        different whenever a number, identifier, name or negation differs.

    Raises:
        InputError: If ``prompt`` or ``llm`` has the wrong type.
    """
    if not isinstance(llm, str):
        raise InputError(f"llm must be a str, got {type(llm).__name__}")
    if isinstance(prompt, str):
        parts: list[list[str]] = [["", _normal(prompt)]]
    else:
        try:
            parts = [[str(exact), _normal(text)] for exact, text in prompt]
        except (TypeError, ValueError) as e:
            raise InputError(
                f"prompt must be a str or a sequence of (exact, text) pairs, got {prompt!r}"
            ) from e
    blob = json.dumps([llm, parts], ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(blob.encode(), digest_size=20).hexdigest()


class LLMCacheRecords(Protocol):
    """Where an :class:`LLMCache` keeps its rows: one per key, with the model it was asked,
    the prompt as written and the value as JSON text. Safe to call from several threads;
    every write is committed before it returns.
    """

    def get(self, key: str) -> str | None:
        """The value stored at ``key`` (JSON text), or None."""
        ...

    def put(self, key: str, llm: str, prompt: str, value: str) -> None:
        """Store ``value`` at ``key`` (replacing what was there)."""
        ...

    def clear(self, llm: str | None = None) -> int:
        """Remove every row (of one model, if given); returns how many."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None:
        """Release the rows."""
        ...


class SQLiteLLMCacheRecords:
    """LLM cache rows in one SQLite file (WAL) shared by every process.

    Args:
        path: The SQLite file (created with its folder if missing).

    Attributes:
        path: The SQLite file.
        db: The connection, in autocommit mode.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.db = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def get(self, key: str) -> str | None:
        """The value stored at ``key`` (JSON text), or None."""
        with self._lock:
            row = self.db.execute("SELECT value FROM llm_cache WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, llm: str, prompt: str, value: str) -> None:
        """Store ``value`` at ``key`` (replacing what was there)."""
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO llm_cache VALUES (?, ?, ?, ?, ?)",
                (key, llm, prompt, value, time.time()),
            )

    def clear(self, llm: str | None = None) -> int:
        """Remove every row (of one model, if given); returns how many."""
        with self._lock:
            if llm is None:
                cur = self.db.execute("DELETE FROM llm_cache")
            else:
                cur = self.db.execute("DELETE FROM llm_cache WHERE llm=?", (llm,))
            return int(cur.rowcount)

    def __len__(self) -> int:
        with self._lock:
            return int(self.db.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self.db.close()

    def __repr__(self) -> str:
        return f"SQLiteLLMCacheRecords({str(self.path)!r})"


class LLMCache:
    """LLM responses by prompt and model, in one SQLite file shared by every process (or in
    the rows of another engine).

    Args:
        path: The SQLite file (created with its folder if missing).
        records: Or the rows to keep entries in (another engine's, e.g. Postgres); exactly
            one of ``path`` and ``records`` is given.

    Attributes:
        path: The SQLite file (None when ``records`` was given).
        records: The rows.

    Raises:
        InputError: If neither or both of ``path`` and ``records`` are given.

    Example:
        >>> c = LLMCache(tmp / "llm_cache.sqlite")            # doctest: +SKIP
        >>> c.put("What was revenue in Q3 2024?", "gpt", [{"text": "4.1bn"}])
        >>> c.get("what was revenue in q3 2024", "gpt")
        [{'text': '4.1bn'}]
    """

    def __init__(
        self, path: str | Path | None = None, *, records: LLMCacheRecords | None = None
    ) -> None:
        if (path is None) == (records is None):
            raise InputError(
                "LLMCache needs a SQLite file (path) or the rows to use (records), not "
                f"both or neither; got path={path!r}, records={records!r}"
            )
        self.path: Path | None = None
        if records is None:
            assert path is not None
            sqlite_rows = SQLiteLLMCacheRecords(path)
            self.path = sqlite_rows.path
            records = sqlite_rows
        self.records: LLMCacheRecords = records
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, prompt: Prompt, llm: str) -> Any | None:
        """The stored value for this prompt (or a variant of it) and model, or None."""
        found = self.records.get(prompt_key(prompt, llm))
        with self._lock:
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
        return json.loads(found)

    def put(self, prompt: Prompt, llm: str, value: Any) -> None:
        """Store ``value`` (anything JSON-serialisable) for this prompt and model.

        Raises:
            InputError: If ``value`` is not JSON-serialisable.
        """
        key = prompt_key(prompt, llm)
        try:
            blob = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise InputError(f"an LLM cache value must be JSON-serialisable: {e}") from e
        shown = prompt if isinstance(prompt, str) else json.dumps([list(p) for p in prompt])
        self.records.put(key, llm, shown, blob)

    def clear(self, llm: str | None = None) -> int:
        """Forget every entry (of one model, if given).

        Returns:
            How many entries were removed.
        """
        return self.records.clear(llm)

    def __len__(self) -> int:
        return len(self.records)

    def stats(self) -> dict[str, Any]:
        """Entries, and this object's hits and misses."""
        return {"entries": len(self), "hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        """Release the rows."""
        self.records.close()

    def __enter__(self) -> LLMCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else self.records
        return f"LLMCache({where!r})"
