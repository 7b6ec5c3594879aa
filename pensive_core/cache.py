"""L1 hot cache: answers to repeated questions, served from memory, durable in shared rows.

Lookup order for a question:

1. **exact key**: the question normalised for case, Unicode form, whitespace and punctuation;
2. **bag key**: the same words in any order, without filler words ("the", "please", "tell me");
3. **near duplicate**: the same words but one, and that one a typo away (found through the
   question's bag of words with each word left out in turn).

Numbers, dates, identifiers, capitalised names and negations are *guards*: two questions whose
guards differ ("Q3 2024" and "Q4 2024", "INV-4471" and "INV-4472", "did X" and "did X not",
"Acme" and "Globex") never share an answer, whichever path matched. Every key also carries a
scope: ``k``, ``as_of`` and the query-time settings that shape the answer.

Each entry records what its answer depends on (the documents of its hits, the question's query
vector and the lowest score that made each retriever's candidate list), so that ingestion
invalidates exactly the entries whose answers could change; the caller decides which (see
:meth:`L1Cache.entries`) and a bulk change empties the cache. Every process that opens the store
sees the same rows; invalidations bump a commit number, and a process whose commit is
behind reloads before it serves anything.

Eviction is least-frequently-used with aging (counts halve whenever the cache fills); entries
expire after a TTL. All entries' keys and dependencies are in memory; the hits of the most used
``hot`` entries are too, the rest are read from storage on demand.

The logic lives in :class:`L1Memory`; where the rows live and how another writer's commit is
noticed is an :class:`L1Rows`: :class:`SQLiteL1Rows` (``PRAGMA data_version``, for
:class:`L1Cache`) or the Postgres one (a version row read per lookup, in
:mod:`pensive_core.storage.pg_cache`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Protocol

import numpy as np

from .timeutil import from_iso
from .tokenize import DIGIT_RE, TOKEN_RE, quoted_phrases
from .types import Hit
from .wire import hit_json

__all__ = [
    "AnswerCache",
    "Cached",
    "L1Memory",
    "L1Row",
    "L1Rows",
    "L1Writer",
    "hits_from_json",
    "hits_to_json",
    "QueryKey",
    "Deps",
    "EntryView",
    "make_key",
    "normalize_query",
    "cache_key",
    "chunk_hashes",
]

# Words whose presence or absence does not change what a question asks for retrieval. Kept small
# on purpose: tense ("is"/"was"), wh-words, negations and prepositions all change meaning.
_FILLER = frozenset("a an the of please kindly tell me us show give find".split())
_NEGATION_RE = re.compile(
    r"\b(?:not|no|never|none|nor|neither|without|cannot|nobody|nothing|nowhere)\b|n[’']t\b"
)
_NT_RE = re.compile(r"n[’']t\b")
_MINUS = "-\u2212"  # hyphen-minus and the minus sign


def _key_tokens(text: str) -> list[str]:
    """``TOKEN_RE``'s tokens, except that a number keeps a minus sign in front ("-5" is not "5").

    BM25 drops a leading sign, but a cached answer must not serve "-5" for "5"; a dash between
    two words or numbers ("2020-2024", "2020 - 2024") is not a sign.
    """
    out = []
    for m in TOKEN_RE.finditer(text):
        tok, s = m.group(), m.start()
        if (
            s
            and text[s - 1] in _MINUS
            and tok[0].isdigit()
            and (s < 2 or not (text[s - 2].isalnum() or text[s - 2] == "_"))
        ):
            tok = "-" + tok
        out.append(tok)
    return out


def normalize_query(text: str) -> str:
    """Normalise a question for exact-key caching.

    Case, Unicode compatibility forms, whitespace and punctuation between tokens are ignored;
    identifiers ("INV-4471"), numbers ("3.5", "-5", "2024"), "Q3" and negations stay whole.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _NT_RE.sub(" not", folded)  # "didn't" and "did not" are the same question
    return " ".join(_key_tokens(folded))


def _guards(text: str) -> frozenset[str]:
    """Tokens that make a question a different question: numbers, ids, names, negation, quotes."""
    nfkc = unicodedata.normalize("NFKC", text)
    out: set[str] = set()
    for i, tok in enumerate(_key_tokens(nfkc)):
        rest = tok[1:]
        if (not tok.isalpha() and DIGIT_RE.search(tok)) or (i > 0 and tok[:1].isupper()):
            out.add(tok.casefold())  # a number or identifier; a capitalised word inside: a name
        elif rest != rest.lower():
            out.add(tok.casefold())  # "iPhone", "getUserName", "HTTP"
    if _NEGATION_RE.search(nfkc.casefold()):
        out.add("<not>")
    out.update("<q>" + q for q in quoted_phrases(nfkc))
    return frozenset(out)


def _hash(*parts: Any) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


class QueryKey:
    """Everything the cache needs to know about one question (see :func:`make_key`).

    The exact key is computed at once; the rest only when the exact key missed.
    """

    def __init__(self, text: str, norm: str, k: int, as_of: str | None, scope: str) -> None:
        self.text = text
        self.norm = norm
        self.k = k
        self.as_of = as_of
        self.scope = scope
        self.exact = scope + ":" + norm  # the normal form itself: no hashing on the hot path

    @cached_property
    def words(self) -> tuple[str, ...]:
        """Content words, in order."""
        return tuple(w for w in self.norm.split() if w not in _FILLER)

    @cached_property
    def guards(self) -> frozenset[str]:
        return _guards(self.text)

    @cached_property
    def bag(self) -> tuple[str, tuple[str, ...]]:
        """The words in any order (an in-memory key, rebuilt from the text on load)."""
        return (self.scope, tuple(sorted(self.words)))

    def near_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        """The bag with each word left out in turn: a one-word difference meets one of them."""
        return _near_keys(self.scope, self.words)


def _near_keys(scope: str, words: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    if len(words) < 2:
        return []
    ordered = sorted(words)
    return [(scope, tuple(ordered[:i] + ordered[i + 1 :])) for i in range(len(ordered))]


def make_key(text: str, k: int, as_of: str | None, settings: Any) -> QueryKey:
    """The keys of a question: exact, bag-of-words, and its scope (k, as_of, settings).

    ``settings`` must have a stable ``repr`` (tuples, numbers, strings; dicts in a fixed order).
    Quoted phrases are part of the scope: the normal form drops the quotes, but ``"the cat"``
    asks for the exact phrase (a guard) and so is another question than ``the cat``.
    """
    try:
        scope = _SCOPES.get((k, as_of, settings))
    except TypeError:  # unhashable settings: hash their repr every time
        scope = _hash(k, as_of, settings)
    else:
        if scope is None:
            if len(_SCOPES) > 4096:
                _SCOPES.clear()
            scope = _SCOPES[(k, as_of, settings)] = _hash(k, as_of, settings)
    quotes = quoted_phrases(unicodedata.normalize("NFKC", text))
    if quotes:
        scope = _hash(scope, sorted(set(quotes)))
    return QueryKey(text, normalize_query(text), k, as_of, scope)


_SCOPES: dict[tuple[Any, ...], str] = {}


def cache_key(text: str, k: int, as_of: str | None, settings: Any) -> str:
    """The exact cache key of a question."""
    return make_key(text, k, as_of, settings).exact


def _close_words(a: str, b: str) -> bool:
    if a == b:
        return True
    if min(len(a), len(b)) < 5 or abs(len(a) - len(b)) > 1:
        return False  # short words must match exactly: "is"/"was", "cat"/"car"
    if DIGIT_RE.search(a) or DIGIT_RE.search(b):
        return False
    return _one_edit(a, b)


def _one_edit(a: str, b: str) -> bool:
    """One substitution, insertion, deletion or swap of neighbours turns ``a`` into ``b``."""
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) < len(b):
        return a[i:] == b[i + 1 :]
    if a[i + 1 :] == b[i + 1 :]:
        return True  # a substitution
    swapped = i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i]
    return swapped and a[i + 2 :] == b[i + 2 :]


def _same_words(a: Sequence[str], b: Sequence[str]) -> bool:
    """The words pair up one to one, each pair equal or one typo apart ("not not" != "not")."""
    if len(a) != len(b):
        return False
    rest = list(b)
    for x in sorted(a, key=lambda w: w not in rest):  # exact pairs first
        j = next((i for i, y in enumerate(rest) if _close_words(x, y)), None)
        if j is None:
            return False
        rest.pop(j)
    return True


def chunk_hashes(ids: Iterable[str]) -> np.ndarray:
    """Sorted 64-bit hashes of passage ids (a compact set for dependency checks)."""
    out = np.fromiter(
        (
            int.from_bytes(
                hashlib.blake2b(i.encode(), digest_size=8).digest(), "little", signed=True
            )
            for i in ids
        ),
        dtype=np.int64,
    )
    return np.unique(out)


@dataclass(frozen=True)
class Deps:
    """What an answer depends on.

    Args:
        docs: Ids of the documents the hits came from.
        qvec: The question's query vector (None when no dense retrieval ran).
        dense_floor: The lowest dense score in the candidate list (``-inf`` when the list was
            shorter than its depth, so any new passage could enter it).
        bm25_floor: The same for BM25 (0 when the list was short).
        cands: :func:`chunk_hashes` of every passage in either candidate list.
        bm25_scores: The BM25 candidate list's scores, best first.
        fused_gap: The smallest gap between consecutive fused scores over the hits and the
            first passage after them (how far scores must move before the answer changes).
        method: The fusion method the answer was fused with.
    """

    docs: frozenset[str] = frozenset()
    qvec: np.ndarray | None = None
    dense_floor: float = float("-inf")
    bm25_floor: float = 0.0
    cands: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bm25_scores: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    fused_gap: float = float("inf")
    method: str = "weighted"


class EntryView(NamedTuple):
    """One cache entry as seen by the code deciding what a content change invalidates."""

    key: str
    text: str
    k: int
    as_of: str | None
    scope: str
    deps: Deps
    tier: str
    confidence: float
    freq: int


@dataclass
class _Entry:
    key: str
    scope: str
    text: str
    k: int
    as_of: str | None
    guards: frozenset[str] | None  # computed on first need
    words: tuple[str, ...]
    deps: Deps
    confidence: float
    tier: str
    created: float
    freq: int
    hits: tuple[Hit, ...] | None = None  # None: not in the hot set, read from storage
    bag: tuple[str, tuple[str, ...]] = ("", ())
    row_id: int = 0  # its row's id (a row never changes once written, but for its use count)


@dataclass(frozen=True)
class Cached:
    """A cache answer: the hits, the tier that first produced them, and how the key matched."""

    hits: tuple[Hit, ...]
    confidence: float
    tier: str
    match: str  # "exact" | "bag" | "fuzzy"
    source: str  # the question the answer was computed for


def hits_to_json(hits: Sequence[Hit]) -> str:
    """Hits as the JSON text an L1 row store keeps (NUL and every other character escaped or
    kept as UTF-8: the text round-trips exactly)."""
    return json.dumps([hit_json(h) for h in hits], ensure_ascii=False)


def hits_from_json(text: str) -> tuple[Hit, ...]:
    """The hits :func:`hits_to_json` wrote."""
    return tuple(
        Hit(
            d["doc_id"],
            d["chunk_id"],
            d["text"],
            d["score"],
            d["metadata"],
            from_iso(d["timestamp"]),
            d["sources"],
            from_iso(d.get("valid_from")),
            from_iso(d.get("valid_to")),
            d.get("superseded_by"),
            d.get("match"),  # None in an entry cached before matches were measured
        )
        for d in json.loads(text)
    )


class L1Row(NamedTuple):
    """One stored L1 entry, without its hits (those are read on demand).

    ``row_id`` grows with every write, in the order writes commit: a reader that has seen the
    rows up to some id has seen every entry stored before them.
    """

    row_id: int
    key: str
    scope: str
    text: str
    k: int
    as_of: str | None
    deps: Deps
    confidence: float
    tier: str
    created: float
    freq: int


class L1Writer(Protocol):
    """One write transaction on an :class:`L1Rows`, serialized against every other writer of
    the same cache (any process, any machine); committed when the ``with`` block ends."""

    def commit(self) -> int:
        """The cache's commit number."""
        ...

    def others_wrote(self) -> bool:
        """Whether another writer committed since this reader last caught up."""
        ...

    def rows_after(self, row_id: int) -> list[L1Row]:
        """Rows stored with ids above ``row_id``."""
        ...

    def keys_after(self, row_id: int) -> list[str]:
        """Keys of the rows stored with ids above ``row_id``."""
        ...

    def store(self, row: L1Row, hits: str) -> int:
        """Store (or replace) an entry and its dependency index rows; returns its new id."""
        ...

    def delete(self, keys: list[str]) -> None:
        """Delete these entries (and their dependency index rows)."""
        ...

    def delete_all(self) -> int:
        """Delete every entry; returns how many there were."""
        ...

    def set_commit(self, commit: int) -> None:
        """Record the cache's new commit number."""
        ...

    def caught_up(self) -> None:
        """Note that the reader's memory now holds every row this transaction can see, so
        only later commits by others count as :meth:`L1Rows.changed`."""
        ...


class L1Rows(Protocol):
    """Where an :class:`L1Memory` keeps its entries: the row storage and the "did another
    writer commit?" check, the only parts that differ between storage engines.
    :class:`SQLiteL1Rows` is the embedded one."""

    def load(self, have: Mapping[str, int]) -> tuple[int, list[L1Row], dict[str, int]]:
        """From one snapshot: the cache's commit, the rows the reader does not hold, and the
        id of every row by key; the reader is caught up.

        Args:
            have: The ids of the rows the reader holds, by key (those are not read again:
                a row never changes once written, and ids are never reused).
        """
        ...

    def changed(self) -> int | None:
        """None when no other writer committed since the reader last caught up; else the
        cache's commit number now (and the reader counts as caught up with that commit's
        writes once it has read :meth:`rows_after`)."""
        ...

    def rows_after(self, row_id: int, commit: int) -> list[L1Row]:
        """Rows with ids above ``row_id``, if the cache is still at ``commit`` (else none)."""
        ...

    def hits(self, key: str) -> str | None:
        """An entry's hits (as :func:`hits_to_json` wrote them), or None if it is gone."""
        ...

    def keys_for_docs(self, doc_ids: list[str]) -> set[str]:
        """Keys of the entries with a hit from any of these documents."""
        ...

    def write(self) -> contextlib.AbstractContextManager[L1Writer]:
        """One write transaction."""
        ...

    def save_freqs(self, freqs: list[tuple[str, int]]) -> None:
        """Persist use counts (best effort: a failure is ignored)."""
        ...

    def close(self) -> None:
        """Release the storage."""
        ...


class L1Memory:
    """The L1 logic over any row storage: keys, near matching, the hot set, eviction, and the
    rules that keep every process's memory level with the shared rows.

    Every entry's key and dependencies are in memory. A ``get`` is served after a freshness
    check made no earlier than the previous ``get``: the caller's :meth:`sync` (the query stage
    calls it first), or the ``get``'s own.

    Args:
        rows: Where the entries are kept.
        capacity: Most entries kept; past it, the least frequently used tenth is evicted.
        ttl_s: Seconds an entry stays valid.
        hot: Most entries whose hits are held in memory.
        fuzzy: Whether near-duplicate (typo-level) matching is on.
    """

    def __init__(
        self,
        rows: L1Rows,
        capacity: int = 10_000,
        ttl_s: float = 86_400.0,
        hot: int = 2_000,
        fuzzy: bool = True,
    ) -> None:
        self.rows = rows
        self.capacity = capacity
        self.ttl_s = ttl_s
        self.hot = max(1, min(hot, capacity))
        self.fuzzy = fuzzy
        self.hits = self.misses = self.evictions = self.invalidated = 0
        self.matches = {"exact": 0, "bag": 0, "fuzzy": 0}
        self._fresh = False
        try:
            self._load_all()
        except BaseException:
            rows.close()  # the caller may move a damaged file aside and start again
            raise

    # -- loading and cross-process sync -------------------------------------------------------
    def _load_all(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._bags: dict[tuple[str, tuple[str, ...]], str] = {}
        self._near: dict[tuple[str, tuple[str, ...]], set[str]] = {}
        self._aliases: dict[str, tuple[str, str]] = {}  # exact key -> (entry key, match)
        self._max_rowid = 0
        self._reload()

    def _reload(self) -> None:
        """Level memory with the rows as they are now, at whatever commit: what is held and
        still stored stays (with its hits, if hot), what is gone goes, the rest is read."""
        have = {k: e.row_id for k, e in self._entries.items()}
        commit, rows, present = self.rows.load(have)
        for key, e in list(self._entries.items()):
            if present.get(key) != e.row_id:
                self._unindex(e)  # invalidated or replaced since
        self._aliases = {}
        self._examined = 0
        self.commit = commit
        self._max_rowid = max(self._max_rowid, max(present.values(), default=0))
        self._add_rows(rows)

    def _add_rows(self, rows: Iterable[L1Row]) -> None:
        for r in rows:
            self._max_rowid = max(self._max_rowid, r.row_id)
            self._index(
                _Entry(
                    r.key, r.scope, r.text, r.k, r.as_of, None, (), r.deps, r.confidence,
                    r.tier, r.created, r.freq, row_id=r.row_id,
                )
            )  # fmt: skip

    def _load_new_rows(self) -> None:
        """Entries other processes stored since this one last looked, if they belong to the
        commit this process's cache is at (none of a later commit: :meth:`sync` reloads)."""
        self._add_rows(self.rows.rows_after(self._max_rowid, self.commit))

    def _index(self, e: _Entry) -> None:
        old = self._entries.get(e.key)
        if old is not None:
            self._unindex(old)
        if not e.words:
            e.words = tuple(w for w in normalize_query(e.text).split() if w not in _FILLER)
        e.bag = (e.scope, tuple(sorted(e.words)))
        self._entries[e.key] = e
        self._bags[e.bag] = e.key
        if self.fuzzy:
            for nk in _near_keys(e.scope, e.words):
                self._near.setdefault(nk, set()).add(e.key)

    def _unindex(self, e: _Entry) -> None:
        self._entries.pop(e.key, None)
        if self._bags.get(e.bag) == e.key:
            del self._bags[e.bag]
        if self.fuzzy:
            for nk in _near_keys(e.scope, e.words):
                keys = self._near.get(nk)
                if keys is not None:
                    keys.discard(e.key)
                    if not keys:
                        del self._near[nk]

    def _catch_up(self) -> None:
        commit = self.rows.changed()
        if commit is None:
            return
        if commit != self.commit:
            self._reload()  # another process invalidated: keep only what it kept
        else:
            self._load_new_rows()

    def sync(self) -> None:
        """Catch up with other processes: reload after their invalidations, add their entries.

        The next :meth:`get` relies on this check instead of making its own.
        """
        self._catch_up()
        self._fresh = True

    # -- lookup -------------------------------------------------------------------------------
    def get(self, qk: QueryKey, *, peek: bool = False) -> Cached | None:
        """The cached answer for a question, or None.

        Served from memory, after catching up with other processes unless :meth:`sync` was
        called since the last ``get``. ``peek``: only look (explain): no hit or miss counted,
        no frequency, alias or expiry recorded.
        """
        if not self._fresh:
            self._catch_up()
        self._fresh = False
        match = "exact"
        entry = self._entries.get(qk.exact)
        if entry is None:
            # this exact text matched by bag or typo before: go straight to that entry
            alias = self._aliases.get(qk.exact)
            if alias is not None:
                entry = self._entries.get(alias[0])
                match = alias[1]
        if entry is None:
            match = "bag"
            key = self._bags.get(qk.bag)
            entry = self._entries.get(key) if key is not None else None
            if entry is not None and entry.scope != qk.scope:
                entry = None
        if entry is None and self.fuzzy and qk.words:
            match = "fuzzy"
            entry = self._fuzzy(qk)
        expired = entry is not None and time.time() - entry.created > self.ttl_s
        if peek:
            if entry is None or expired:
                return None
            hits = entry.hits if entry.hits is not None else self._load_hits(entry)
            return (
                None
                if hits is None
                else Cached(hits, entry.confidence, entry.tier, match, entry.text)
            )
        if entry is None:
            self.misses += 1
            return None
        if expired:
            self._drop([entry.key])
            self.misses += 1
            return None
        hits = entry.hits if entry.hits is not None else self._load_hits(entry)
        if hits is None:
            self.misses += 1
            return None
        if match != "exact" and qk.exact not in self._aliases:
            if len(self._aliases) >= 4 * self.capacity:
                self._aliases.clear()  # aliases of dropped entries dangle harmlessly until now
            self._aliases[qk.exact] = (entry.key, match)
        entry.freq += 1
        self.hits += 1
        self.matches[match] += 1
        return Cached(hits, entry.confidence, entry.tier, match, entry.text)

    def _fuzzy(self, qk: QueryKey) -> _Entry | None:
        for nk in qk.near_keys():
            for key in self._near.get(nk, ()):
                e = self._entries.get(key)
                if e is None or e.scope != qk.scope or not _same_words(e.words, qk.words):
                    continue
                if e.guards is None:
                    e.guards = _guards(e.text)
                if e.guards == qk.guards:
                    return e
        return None

    def _load_hits(self, entry: _Entry) -> tuple[Hit, ...] | None:
        text = self.rows.hits(entry.key)
        if text is None:  # evicted by another process
            self._unindex(entry)
            return None
        entry.hits = hits_from_json(text)
        hot = [e for e in self._entries.values() if e.hits is not None]
        if len(hot) > self.hot:  # keep the most used in memory; the rest stay in storage
            hot.sort(key=lambda e: (e.freq, e.created))
            for e in hot[: len(hot) - self.hot + max(1, self.hot // 10)]:
                if e is not entry:
                    e.hits = None
        return entry.hits

    # -- writing ------------------------------------------------------------------------------
    def put(
        self,
        qk: QueryKey,
        hits: Sequence[Hit],
        confidence: float,
        tier: str,
        deps: Deps,
        commit: int,
        freq: int = 1,
    ) -> bool:
        """Store an answer computed at store commit ``commit``.

        ``freq`` carries a refreshed entry's use count over, so it stays hot.

        Returns:
            False if the store changed since (the answer may be stale and is not kept).
        """
        entry = _Entry(
            qk.exact,
            qk.scope,
            qk.text,
            qk.k,
            qk.as_of,
            qk.guards,
            qk.words,
            deps,
            confidence,
            tier,
            time.time(),
            freq,
            tuple(hits),
        )
        row = L1Row(
            0, entry.key, entry.scope, entry.text, entry.k, entry.as_of, deps, confidence, tier,
            entry.created, freq,
        )  # fmt: skip
        with self.rows.write() as w:
            if w.commit() != commit:
                return False
            if w.others_wrote() and self.commit == commit:
                # take their entries in first: this one's row id comes after theirs, and a
                # later sync only looks past it (their entries would be missed for good, and
                # never examined when this process invalidates: served stale elsewhere)
                self._add_rows(w.rows_after(self._max_rowid))
                w.caught_up()
            rowid = w.store(row, hits_to_json(hits))
        entry.row_id = rowid
        self._max_rowid = max(self._max_rowid, rowid)
        self._index(entry)
        if len(self._entries) > self.capacity:
            self._evict()
        return True

    def _evict(self) -> None:
        # LFU with aging: the least used tenth goes (oldest first among equals), and every
        # surviving count halves so that yesterday's favourites do not stay forever
        victims = sorted(self._entries.values(), key=lambda e: (e.freq, e.created))
        n = max(1, len(self._entries) // 10)
        self._drop([e.key for e in victims[:n]])
        self.evictions += n
        for e in self._entries.values():
            e.freq = max(1, e.freq // 2)

    def _drop(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        self._forget(keys)
        with self.rows.write() as w:
            w.delete(keys)

    def _forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            e = self._entries.get(key)
            if e is not None:
                self._unindex(e)

    # -- invalidation -------------------------------------------------------------------------
    def entries(self) -> list[EntryView]:
        """Every entry, for the caller to decide what a content change invalidates."""
        self._catch_up()
        self._examined = self._max_rowid  # what :meth:`invalidate` may assume was looked at
        return [
            EntryView(e.key, e.text, e.k, e.as_of, e.scope, e.deps, e.tier, e.confidence, e.freq)
            for e in self._entries.values()
        ]

    def keys_for_docs(self, doc_ids: Iterable[str]) -> set[str]:
        """Keys of entries with a hit from any of these documents."""
        return self.rows.keys_for_docs(list(doc_ids))

    def invalidate(self, keys: Iterable[str] | None, commit: int) -> int:
        """Drop these entries (all of them when ``keys`` is None) and record the new commit.

        Entries stored since the last :meth:`entries` (by any process) are dropped too:
        nobody examined them against this change, so they cannot be carried past it.

        Returns:
            How many entries were dropped.
        """
        with self.rows.write() as w:
            if keys is None:
                n = w.delete_all()
            else:
                keys = list(dict.fromkeys([*keys, *w.keys_after(self._examined)]))
                n = len(keys)
                w.delete(keys)
                w.caught_up()  # inside the transaction: nothing missed
            w.set_commit(commit)
        if keys is None:
            self._load_all()
        else:
            self._forget(keys)
            self.commit = commit
        self.invalidated += n
        return n

    def invalidate_all(self, commit: int) -> int:
        """Forget every answer (a bulk change)."""
        return self.invalidate(None, commit)

    # -- state --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, Any]:
        """Entries, hot set, hits and misses (with how keys matched), evictions, invalidations."""
        total = self.hits + self.misses
        return {
            "entries": len(self._entries),
            "hot": sum(1 for e in self._entries.values() if e.hits is not None),
            "capacity": self.capacity,
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": round(self.hits / total, 4) if total else 0.0,
            "matches": dict(self.matches),
            "evictions": self.evictions,
            "invalidated": self.invalidated,
            "commit": self.commit,
        }

    def close(self) -> None:
        """Persist entry frequencies and release the storage."""
        self.rows.save_freqs([(k, e.freq) for k, e in self._entries.items()])
        self.rows.close()


class AnswerCache(Protocol):
    """The L1 hot cache's persistent part, as the engine uses it. :class:`L1Cache` (its own
    SQLite file beside the store) is the embedded implementation;
    :class:`~pensive_core.storage.pg_cache.PostgresL1Cache` the Postgres one.

    Attributes:
        commit: The store commit the cache's entries were last brought level with.
    """

    commit: int

    def sync(self) -> None:
        """Catch up with invalidations another process made."""
        ...

    def get(self, qk: QueryKey, *, peek: bool = False) -> Cached | None:
        """The cached answer to the question (or a variant of it), or None (``peek``: look
        without counting or recording anything)."""
        ...

    def put(
        self,
        qk: QueryKey,
        hits: Sequence[Hit],
        confidence: float,
        tier: str,
        deps: Deps,
        commit: int,
        freq: int = 1,
    ) -> bool:
        """Store an answer computed at store commit ``commit``; False if it is stale."""
        ...

    def entries(self) -> list[EntryView]:
        """Every entry's key, question and dependencies."""
        ...

    def keys_for_docs(self, doc_ids: Iterable[str]) -> set[str]:
        """Keys of the entries whose hits come from these documents."""
        ...

    def invalidate(self, keys: Iterable[str] | None, commit: int) -> int:
        """Drop these entries (None: all) and move to store commit ``commit``."""
        ...

    def invalidate_all(self, commit: int) -> int:
        """Drop every entry and move to store commit ``commit``."""
        ...

    def stats(self) -> dict[str, Any]:
        """Entries, hot set, hit rate, matches, evictions, invalidations."""
        ...

    def close(self) -> None:
        """Persist and release the cache."""
        ...


def __getattr__(name: str) -> Any:
    # the SQLite cache lives with the embedded engine's parts; its old import path still works
    if name in ("L1Cache", "SQLiteL1Rows"):
        from .storage import sqlite_l1

        return getattr(sqlite_l1, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
