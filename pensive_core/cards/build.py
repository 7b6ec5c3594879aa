"""Building entity cards and summaries from the graph's tables, the statements and the
archive: all of them when a store opens with its cards behind (or never built), and at each
commit those of exactly the entities and documents the commit touched.

Which entities a commit touched is what the graph noted while the change wrote: the subjects
of documents added, replaced or removed, and every entity named by a passage that came or went
(:attr:`~pensive_core.graph.GraphStore.touched_names`). A card changes only through those: its
own documents and the passages naming it. Not through later use (its "most used" order is as of
its build) nor through a statement elsewhere that supersedes one of its own without naming it.

Cards are built on the embedded engine (the graph in the store's SQLite file). On the Postgres
engine there are none: entity questions go to L2, and summaries are made from the archive when
asked for.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..graph.store import GraphStore, subject_key
from ..timeutil import ensure_utc, to_iso
from .questions import entity_question
from .store import CardStatement, CardStore, EntityCard
from .summary import summarize

if TYPE_CHECKING:
    from ..components import Components
    from ..ingest.changes import ChangeSet

__all__ = [
    "CARDS_VERSION",
    "MAX_PASSAGES",
    "Verify",
    "behind",
    "build_cards",
    "document_summary",
    "open_cards",
    "phrasings",
    "rebuild_all",
    "update_cards",
]

log = logging.getLogger(__name__)

#: Passages kept per card; a card with more passages naming it is not ``complete``.
MAX_PASSAGES = 20
_MAX_STATEMENTS = 20
_BATCH = 500


#: Bumped when what a card holds or how it is judged changes: older cards are rebuilt.
CARDS_VERSION = 3

#: Asks L2 each entity's questions (entity key -> questions) and returns the passage id L2
#: puts first for all of them (None: they differ, or no answer). See
#: :meth:`~.stage.CardStage.verify`.
Verify = Callable[[dict[str, list[str]]], dict[str, "str | None"]]


def open_cards(comps: Components) -> None:
    """Open the card store when cards can be kept (embedded engine, graph on, ``[router]
    entity_cards``); :func:`behind` says whether it must be rebuilt."""
    if not comps.config.router.entity_cards or not isinstance(comps.graph, GraphStore):
        return
    db = comps.graph.db
    if comps.read_only:
        if CardStore.exists(db):
            comps.cards = CardStore(db, create=False)
        return
    comps.cards = CardStore(db)


def behind(comps: Components) -> bool:
    """Whether a writer must rebuild every card: never built, built by another version, left
    behind by commits made with cards off, or the graph was rebuilt as the store opened
    (another extractor or version: keys moved)."""
    graph = comps.graph
    if comps.cards is None or comps.read_only or not isinstance(graph, GraphStore):
        return False
    rebuilt = bool(graph.touched_names or graph.touched_subjects)
    return (
        rebuilt
        or comps.archive.get_meta("cards_synced") != comps.commit_no
        or comps.archive.get_meta("cards_version") != CARDS_VERSION
    )


def rebuild_all(comps: Components, verify: Verify | None) -> None:
    """Every card and summary again, from the tables as they are."""
    cards = comps.cards
    assert cards is not None and isinstance(comps.graph, GraphStore)
    keys = [r[0] for r in comps.graph.db.execute("SELECT key FROM graph_entities")]
    built, _ = build_cards(comps, keys, verify)
    docs = list(comps.archive.indexed_documents())
    summaries = [(d, document_summary(comps, d)) for d in docs]
    cards.write(built, (), summaries, (), everything=True)
    comps.archive.set_meta("cards_synced", comps.commit_no)
    comps.archive.set_meta("cards_version", CARDS_VERSION)


def update_cards(comps: Components, changes: ChangeSet, commit: int, verify: Verify | None) -> None:
    """After a commit: the cards of the entities it touched and the summaries of the
    documents it wrote or deleted, built again (all of them when the cards missed a commit).

    A card store that cannot be written is turned off for this process (logged); other
    processes stop serving cards, since their commit is not the store's.
    """
    cards, graph = comps.cards, comps.graph
    if cards is None or not isinstance(graph, GraphStore):
        return
    try:
        if (
            comps.archive.get_meta("cards_synced") != commit - 1
            or comps.archive.get_meta("cards_version") != CARDS_VERSION
        ):
            rebuild_all(comps, verify)  # an update failed, or a commit was made with cards off
            return
        keys = graph.touched_subjects | graph.touched_names
        built, gone = build_cards(comps, sorted(keys), verify)
        docs = sorted(changes.docs | changes.written)
        have = comps.archive.indexed_documents()
        summaries = [(d, document_summary(comps, d)) for d in docs if d in have]
        cards.write(built, gone, summaries, [d for d in docs if d not in have])
        comps.archive.set_meta("cards_synced", commit)
    except Exception as exc:  # noqa: BLE001 - a cache: the commit stands, the cards go off
        log.warning("entity cards could not be updated (%s): turned off", exc)
        comps.cards = None


def document_summary(comps: Components, doc_id: str) -> str:
    """A document's lead-sentence summary, made from the archive.

    Raises:
        NotFoundError: If no document has that id.
    """
    doc = comps.archive.document(doc_id)
    if doc is None:
        raise NotFoundError(f"no document with id {doc_id!r} in {comps.path}")
    title = doc.metadata.get("title")
    return summarize(doc.text, title if isinstance(title, str) else None)


def _in(db: sqlite3.Connection, sql: str, values: Sequence[Any]) -> list[tuple[Any, ...]]:
    """``sql`` with ``IN ({})`` filled for ``values``, in batches SQLite accepts."""
    out: list[tuple[Any, ...]] = []
    for i in range(0, len(values), _BATCH):
        part = values[i : i + _BATCH]
        out.extend(db.execute(sql.format(",".join("?" * len(part))), part).fetchall())
    return out


def build_cards(
    comps: Components, keys: Iterable[str], verify: Verify | None = None
) -> tuple[list[EntityCard], list[str]]:
    """The cards of these entities as the tables hold them now.

    A card is *confident* when exactly one document is about the entity and, with ``verify``,
    L2 puts one and the same passage of that document first for each of :func:`phrasings`
    (that passage then leads the card; without ``verify``, the document's first passage does).

    Returns:
        ``(cards, gone)``: a card per key the graph knows, and the keys it no longer knows.
    """
    graph = comps.graph
    assert isinstance(graph, GraphStore)
    db, keys = graph.db, list(dict.fromkeys(keys))
    ents = {
        int(eid): (key, kind)
        for eid, key, kind in _in(
            db, "SELECT id, key, kind FROM graph_entities WHERE key IN ({})", keys
        )
    }
    gone = sorted(set(keys) - {k for k, _ in ents.values()})
    ids = list(ents)
    docs_of: dict[int, list[str]] = {}
    for did, eid in _in(
        db, "SELECT doc_id, entity_id FROM graph_subjects WHERE entity_id IN ({})", ids
    ):
        docs_of.setdefault(int(eid), []).append(str(did))
    subject_docs = sorted({d for ds in docs_of.values() for d in ds})
    own: dict[str, list[str]] = {}
    for cid, did in _in(
        db,
        "SELECT chunk_id, doc_id FROM graph_chunks WHERE doc_id IN ({}) ORDER BY doc_id, ordinal",
        subject_docs,
    ):
        own.setdefault(str(did), []).append(str(cid))
    named: dict[int, list[tuple[str, int]]] = {}
    for eid, cid, n in _in(
        db, "SELECT entity_id, chunk_id, count FROM graph_mentions WHERE entity_id IN ({})", ids
    ):
        named.setdefault(int(eid), []).append((str(cid), int(n)))
    uses = _uses(comps, [c for ms in named.values() for c, _ in ms])
    view = comps.temporal_views.view() if comps.temporal_views is not None else None
    titles = {d: _title(comps, d) for d in subject_docs}
    summaries: dict[str, str] = {}
    names = {}
    for eid, (key, _) in ents.items():
        docs = sorted(docs_of.get(eid, []))
        aliases = tuple(sorted({t for d in docs if (t := titles.get(d)) and t != key}))
        names[eid] = (
            docs,
            aliases,
            next((_plain(t) for t in aliases if subject_key(t) == key), key),
        )
    # one document about it: does L2 put one passage of it first for each phrasing?
    # (only names a question can ask about: a long title, say, is never checked)
    single = {
        ents[e][0]: names[e][2]
        for e in ents
        if len(names[e][0]) == 1 and askable(names[e][2], ents[e][0])
    }
    leads = verify({k: list(phrasings(n)) for k, n in single.items()}) if verify and single else {}
    cards = []
    for eid, (key, kind) in ents.items():
        docs, aliases, name = names[eid]
        passages = [c for d in docs for c in own.get(d, [])]
        confident = len(docs) == 1 and bool(passages) and askable(name, key)
        if confident and verify is not None:
            lead = leads.get(key)
            confident = lead is not None and lead in passages
            if lead is not None and confident:
                passages = [lead, *(c for c in passages if c != lead)]
        # then the passages naming it: most used (learning on), most mentions, stable by id
        others = sorted(named.get(eid, []), key=lambda m: (-uses.get(m[0], 0.0), -m[1], m[0]))
        passages += [c for c, _ in others if c not in set(passages)]
        complete = len(passages) <= MAX_PASSAGES
        passages = passages[:MAX_PASSAGES]
        summary = ""
        if docs:
            if docs[0] not in summaries:
                summaries[docs[0]] = document_summary(comps, docs[0])
            summary = summaries[docs[0]]
        cards.append(
            EntityCard(
                key=key,
                name=name,
                kind=str(kind),
                aliases=aliases,
                docs=tuple(docs),
                passages=tuple(passages),
                complete=complete,
                statements=_statements(view, passages),
                summary=summary,
                confident=confident,
                commit=comps.commit_no,
            )
        )
    return cards, gone


def phrasings(name: str) -> tuple[str, str]:
    """The questions a card is checked with: an identity question and an open one (on
    HotpotQA's tune titles the open one was where L2 most often chose another passage)."""
    return (f"who is {name}?", f"tell me about {name}")


def askable(name: str, key: str) -> bool:
    """Whether an entity question can name this entity ("who is NAME?" parses to a name
    whose key is ``key``): a card no question reaches is never served, so never checked."""
    asked = entity_question(f"who is {name}?")
    return asked is not None and subject_key(asked) == key


def _plain(title: str) -> str:
    return re.sub(r"\s*\([^()]*\)\s*$", "", title.strip())


def _title(comps: Components, doc_id: str) -> str | None:
    doc = comps.archive.document(doc_id)
    title = None if doc is None else doc.metadata.get("title")
    return title if isinstance(title, str) else None


def _uses(comps: Components, chunk_ids: list[str]) -> dict[str, float]:
    """How used each passage is (ACT-R base level) when learning is on; else nothing."""
    learning = comps.learning
    if learning is None or not chunk_ids:
        return {}
    ids = list(dict.fromkeys(chunk_ids))
    values = learning.history.value(ids, learning.now(False))
    return {c: float(v) for c, v in zip(ids, values) if v > 0}


def _statements(view: Any, passages: Sequence[str]) -> tuple[CardStatement, ...]:
    """The current statements the card's passages make, in passage order."""
    if view is None:
        return ()
    out: list[CardStatement] = []
    for cid in passages:
        info = view.chunks.get(cid)
        for i in [] if info is None else info.statements:
            row = view.rows[i]
            if row.superseded_by is not None:
                continue
            vf = None if row.t is None else to_iso(ensure_utc(row.t))
            out.append(CardStatement(row.slot, row.value, cid, vf))
            if len(out) >= _MAX_STATEMENTS:
                return tuple(out)
    return tuple(out)
