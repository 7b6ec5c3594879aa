"""Entity cards and document summaries, kept in the store's SQLite file (L1).

A card is built from the entity graph's tables and the statements (no LLM) at each commit for
exactly the entities the commit touched (see :mod:`.build`), and read by the router for an
entity question (see :mod:`.stage`). Cards are a row per entity key holding JSON; summaries a
row per document.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from ..archive import write_transaction

__all__ = ["CardStatement", "CardStore", "EntityCard"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entity_cards (
    key TEXT PRIMARY KEY,      -- the entity's normal form (graph_entities.key)
    card TEXT NOT NULL         -- the card as JSON
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS doc_summaries (
    doc_id TEXT PRIMARY KEY,
    summary TEXT NOT NULL
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class CardStatement:
    """A current statement about an entity (one no later statement superseded).

    Attributes:
        slot: What it is about (the statement extractor's slot).
        value: What it says.
        chunk_id: The passage stating it.
        valid_from: When it became true (ISO 8601), where known.
    """

    slot: str
    value: str
    chunk_id: str
    valid_from: str | None = None


@dataclass(frozen=True)
class EntityCard:
    """What L1 knows of one entity the graph knows.

    Attributes:
        key: The entity's normal form (what questions are matched against).
        name: How it is written: its document's title without a parenthesised qualifier, else
            the key.
        kind: The extractor's kind (``"name"``, ``"title"``, ...).
        aliases: Other ways it is written: its documents' titles as given.
        docs: The documents about it (whose title names it), in id order.
        passages: Passage ids, best first: its own documents' passages in order, then the
            passages naming it, most used first (when learning is on), then most mentions.
        complete: Every passage naming it is in ``passages`` (none was left out for length).
        statements: Its current statements with valid times, from those passages.
        summary: The summary of its (first) document; "" without one.
        confident: A card an entity question may be answered from: exactly one document is
            about the entity, so its passages lead the card.
        commit: The commit the card was built at.
    """

    key: str
    name: str
    kind: str
    aliases: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    passages: tuple[str, ...] = ()
    complete: bool = True
    statements: tuple[CardStatement, ...] = ()
    summary: str = ""
    confident: bool = False
    commit: int = 0

    def to_json(self) -> str:
        """The card as one JSON text (how it is stored)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["statements"] = [vars(s) for s in self.statements]  # (asdict deep-copies: slow)
        return json.dumps(d, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> EntityCard:
        """A card from :meth:`to_json`'s text."""
        d = json.loads(text)
        d["statements"] = tuple(CardStatement(**s) for s in d.get("statements", ()))
        for name in ("aliases", "docs", "passages"):
            d[name] = tuple(d.get(name, ()))
        return cls(**d)


class CardStore:
    """Cards and summaries in a SQLite connection (the store's archive file).

    Args:
        db: An open connection (``isolation_level=None``).
        create: Create the tables if missing (False for a read-only store).
    """

    def __init__(self, db: sqlite3.Connection, create: bool = True) -> None:
        self.db = db
        if create:
            db.executescript(_SCHEMA)

    @staticmethod
    def exists(db: sqlite3.Connection) -> bool:
        """Whether the tables are there (a read-only store cannot create them)."""
        row = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entity_cards'"
        ).fetchone()
        return row is not None

    def get(self, key: str) -> EntityCard | None:
        """The card of the entity with this normal form, or None."""
        row = self.db.execute("SELECT card FROM entity_cards WHERE key = ?", (key,)).fetchone()
        return None if row is None else EntityCard.from_json(row[0])

    def summary(self, doc_id: str) -> str | None:
        """A document's stored summary, or None."""
        row = self.db.execute(
            "SELECT summary FROM doc_summaries WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def keys(self) -> set[str]:
        """Every entity with a card."""
        return {r[0] for r in self.db.execute("SELECT key FROM entity_cards")}

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM entity_cards").fetchone()[0])

    def write(
        self,
        cards: Iterable[EntityCard],
        gone: Iterable[str],
        summaries: Iterable[tuple[str, str]],
        no_summary: Iterable[str],
        everything: bool = False,
    ) -> None:
        """Store cards and summaries in one transaction.

        Args:
            cards: Cards to put (replacing the entity's old one).
            gone: Entity keys whose cards go (the graph no longer knows them).
            summaries: ``(doc id, summary)`` to put.
            no_summary: Documents whose summaries go (deleted).
            everything: Empty both tables first (a full rebuild).
        """
        with write_transaction(self.db):
            if everything:
                self.db.execute("DELETE FROM entity_cards")
                self.db.execute("DELETE FROM doc_summaries")
            _many(self.db, "DELETE FROM entity_cards WHERE key = ?", [(k,) for k in gone])
            _many(self.db, "DELETE FROM doc_summaries WHERE doc_id = ?", [(d,) for d in no_summary])
            _many(
                self.db,
                "INSERT OR REPLACE INTO entity_cards VALUES (?, ?)",
                [(c.key, c.to_json()) for c in cards],
            )
            _many(self.db, "INSERT OR REPLACE INTO doc_summaries VALUES (?, ?)", list(summaries))


def _many(db: sqlite3.Connection, sql: str, rows: Sequence[tuple[str, ...]]) -> None:
    if rows:
        db.executemany(sql, rows)
