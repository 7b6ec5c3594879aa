"""What the entity graph learns from use: base-level activation of passages, Hebbian edges.

Two pieces of state, each a SQLite table in the caller's connection, each pure given the
times it is told:

* :class:`BaseLevel` -- ACT-R's base-level activation per passage (chunk). ACT-R sets
  ``B = ln(sum_j (t - t_j) ** -d)`` over the past uses ``t_j``; that needs every use kept. Here
  the sum is of exponentials instead of powers, which folds into one leaky accumulator per
  passage, O(1) state ``(value, last)``::

      on a use at t:   value = value * 2 ** (-(t - last) / half_life) + 1;  last = t
      read at t:       value * 2 ** (-(t - last) / half_life)

  which equals ``sum_j 2 ** (-(t - t_j) / half_life)`` = ``sum_j exp(-lambda (t - t_j))`` with
  ``lambda = ln 2 / half_life``: every use counts, recent ones most (recency and frequency both
  raise it). :meth:`BaseLevel.boost` turns it into a score multiplier that never lowers a score.
* :class:`Hebbian` -- extra weight on the graph edges that carried activation to results that
  were used ("fire together, wire together"). Each ``(source node, target node)`` edge keeps
  ``(weight, last)``; a strengthening adds ``rate * amount`` to the decayed weight, capped at
  ``max_weight``; weights decay with ``half_life_s``; those below ``prune_below`` are left out of
  :meth:`Hebbian.as_matrix` and deleted by :meth:`Hebbian.prune`.

Time is data: every method takes ``now`` (seconds, any fixed origin, e.g. POSIX time) and
nothing here reads a clock, so the same calls give byte-identical results. Time may not run
backwards for a passage or edge: ``now`` earlier than its last use raises :class:`InputError`
(a caller whose clock can step back should pass ``max(now, last now passed)``).

Persistence: each class writes through to its table in one ``BEGIN IMMEDIATE`` transaction
per call (:func:`pensive_core.archive.write_transaction`), so the connection must be opened with
``isolation_level=None``. A table is read in full on first use and read again only when another
connection has committed to the database since (``PRAGMA data_version``), so a reader process
sees a writer's learning at its next call. With ``db=None`` the state lives in memory only;
another engine passes its own :class:`LearningRows` (the same transactions, another database).
``read_only=True`` creates no table and makes every write (:meth:`BaseLevel.use`,
:meth:`BaseLevel.forget`, :meth:`Hebbian.strengthen`, :meth:`Hebbian.prune`,
:meth:`Hebbian.forget`) raise :class:`PensiveError` rather than drop what it was told.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from scipy import sparse

from ..archive import write_transaction
from ..errors import ConfigError, InputError, PensiveError

__all__ = [
    "BaseLevel",
    "EdgeStrengths",
    "Hebbian",
    "LearningConfig",
    "LearningRows",
    "UseHistory",
]

DAY_S = 86_400.0

_BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_base_level (
    chunk_id TEXT PRIMARY KEY,
    value REAL NOT NULL,   -- the accumulator as of ``last``
    last REAL NOT NULL     -- time of the last use, seconds
);
"""

_HEBBIAN_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_hebbian (
    src TEXT NOT NULL,
    dst TEXT NOT NULL,
    weight REAL NOT NULL,  -- the extra weight as of ``last``
    last REAL NOT NULL,    -- time of the last strengthening, seconds
    PRIMARY KEY (src, dst)
);
"""


# -- argument checks ----------------------------------------------------------------------------
def _half_life(name: str, value: float) -> float:
    v = float(value)
    if math.isnan(v) or v <= 0:
        raise ConfigError(
            f"{name} must be a positive number of seconds (math.inf for no decay), got {value!r}"
        )
    return v


def _non_negative(name: str, value: float, *, error: type[ValueError] = ConfigError) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise error(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _now(now: float) -> float:
    t = float(now)
    if not math.isfinite(t):
        raise InputError(f"now must be a finite time in seconds, got {now!r}")
    return t


def _after(now: float, last: float, what: str) -> float:
    """Seconds from ``last`` to ``now``; time may not run backwards."""
    if now < last:
        raise InputError(
            f"now={now!r} is earlier than the last update of {what} ({last!r}); pass times "
            "that never decrease (e.g. max(now, the last now passed))"
        )
    return now - last


def _decay(elapsed: float, half_life: float) -> float:
    # 2 ** (-dt / h) == exp(-ln2 / h * dt), but exact at whole half-lives
    return 0.5 ** (elapsed / half_life)


# -- configuration ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearningConfig:
    """Every knob of the graph's learning (defaults are placeholders until measured).

    Attributes:
        enabled: Learn from use at all (off until a benchmark shows it helps).
        base_level_weight: The largest relative boost a passage's base level can give its
            score (0.2: at most +20%; see :meth:`BaseLevel.boost`).
        base_level_half_life_s: Seconds for a use's trace to fall to half.
        hebbian_rate: Extra edge weight per unit of activation carried (``rate * amount``).
        hebbian_half_life_s: Seconds for a learned edge weight to fall to half.
        hebbian_max: Cap on any edge's learned extra weight.
        hebbian_prune_below: Learned weights below this are ignored and pruned.

    Raises:
        ConfigError: If a knob is out of range (the message names it).
    """

    enabled: bool = False
    base_level_weight: float = 0.2
    base_level_half_life_s: float = 7 * DAY_S
    hebbian_rate: float = 0.1
    hebbian_half_life_s: float = 30 * DAY_S
    hebbian_max: float = 1.0
    hebbian_prune_below: float = 0.01

    def __post_init__(self) -> None:
        _non_negative("base_level_weight", self.base_level_weight)
        _half_life("base_level_half_life_s", self.base_level_half_life_s)
        _non_negative("hebbian_rate", self.hebbian_rate)
        _half_life("hebbian_half_life_s", self.hebbian_half_life_s)
        _check_cap(self.hebbian_max, self.hebbian_prune_below, "hebbian_max", "hebbian_prune_below")


def _check_cap(max_weight: float, prune_below: float, max_name: str, prune_name: str) -> None:
    cap = _non_negative(max_name, max_weight)
    floor = _non_negative(prune_name, prune_below)
    if cap <= 0 or floor >= cap:
        raise ConfigError(
            f"{max_name} must be > 0 and above {prune_name} (else every learned weight is "
            f"pruned), got {max_name}={max_weight!r}, {prune_name}={prune_below!r}"
        )


# -- persistence shared by both -----------------------------------------------------------------
K = TypeVar("K", str, tuple[str, str])  # a chunk id, or an edge (src, dst)
T = TypeVar("T")


class LearningRows(Protocol):
    """Where one learning table's rows live, each ``(key columns..., value, last)``: a
    :class:`BaseLevel` row is ``(chunk id, value, last)``, a :class:`Hebbian` row
    ``(src, dst, weight, last)``. The logic of both classes is the same on every engine;
    only this part differs (SQLite here, Postgres in :mod:`pensive_core.graph.pg_store`)."""

    def version(self) -> int:
        """A number that moves when another connection commits to the table (so the cache
        is read again)."""
        ...

    def read(self) -> list[tuple[Any, ...]]:
        """Every row (none when the table does not exist yet)."""
        ...

    def transact(self, work: Callable[[], T]) -> T:
        """``work()`` in one write transaction holding the table's write lock: committed
        when it returns, rolled back when it raises. ``work`` reads and writes through this
        object; an engine may run it once more after a dropped connection (it reads the
        state it changes inside, so a second run is the same change)."""
        ...

    def upsert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert or replace rows (inside :meth:`transact`)."""
        ...

    def delete(self, keys: Sequence[tuple[Any, ...]]) -> None:
        """Delete the rows with these key columns (inside :meth:`transact`)."""
        ...

    def version_after_write(self) -> int | None:
        """The version this connection's last committed write left, or None when its own
        commits do not move :meth:`version` (SQLite's ``data_version``)."""
        ...


class _SqliteRows:
    """A learning table in a SQLite connection (``isolation_level=None``)."""

    def __init__(self, db: sqlite3.Connection, table: str, schema: str, keys: Sequence[str],
                 value: str, create: bool) -> None:  # fmt: skip
        if db.isolation_level is not None:
            raise ConfigError(
                f"the learning tables need a connection opened with isolation_level=None "
                f"(they open their own transactions), got {db.isolation_level!r}"
            )
        self.db = db
        self._table = table
        cols = [*keys, value, "last"]
        self._select = f"SELECT {', '.join(cols)} FROM {table} ORDER BY {', '.join(keys)}"
        self._upsert = f"INSERT OR REPLACE INTO {table} VALUES ({', '.join('?' * len(cols))})"
        self._delete = f"DELETE FROM {table} WHERE {' AND '.join(k + ' = ?' for k in keys)}"
        if create:
            db.executescript(schema)

    def version(self) -> int:
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def read(self) -> list[tuple[Any, ...]]:
        exists = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self._table,)
        ).fetchone()
        return self.db.execute(self._select).fetchall() if exists else []

    def transact(self, work: Callable[[], T]) -> T:
        with write_transaction(self.db):
            return work()

    def upsert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self.db.executemany(self._upsert, rows)

    def delete(self, keys: Sequence[tuple[Any, ...]]) -> None:
        self.db.executemany(self._delete, keys)

    def version_after_write(self) -> int | None:
        return None  # our own commit leaves data_version as it was


class _Table(Generic[K]):
    """A ``key -> (value, last)`` table cached in memory, read lazily, written through."""

    _table = ""
    _schema = ""
    _keys: tuple[str, ...] = ()
    _value = ""

    def __init__(self, db: sqlite3.Connection | LearningRows | None, read_only: bool) -> None:
        self.read_only = bool(read_only)
        self.db = db if isinstance(db, sqlite3.Connection) else None
        self._store: LearningRows | None = (
            _SqliteRows(db, self._table, self._schema, self._keys, self._value,
                        create=not self.read_only)
            if isinstance(db, sqlite3.Connection)
            else db
        )  # fmt: skip
        self._state: dict[K, tuple[float, float]] | None = None
        self._version: int | None = None

    def _rows(self) -> dict[K, tuple[float, float]]:
        """The current state: loaded on first use, again after another connection's commit."""
        if self._store is None:
            if self._state is None:
                self._state = {}
            return self._state
        version = self._store.version()
        if self._state is None or version != self._version:
            rows = self._store.read()
            self._state = {self._key(r): (float(r[-2]), float(r[-1])) for r in rows}
            self._version = version
        return self._state

    def _key(self, row: Sequence[Any]) -> K:
        raise NotImplementedError

    def _columns(self, key: K) -> tuple[str, ...]:
        raise NotImplementedError

    def close(self) -> None:
        """Close the rows' own connection, if they have one (another engine's; a SQLite
        connection is the caller's to close)."""
        close = getattr(self._store, "close", None)
        if close is not None:
            close()

    def _as_rows(self, upserts: Mapping[K, tuple[float, float]]) -> list[tuple[Any, ...]]:
        """Upserts as table rows, in key order."""
        out: list[tuple[Any, ...]] = []
        for key in sorted(upserts):
            out.append(self._columns(key) + upserts[key])
        return out

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise PensiveError(
                f"{type(self).__name__} is read-only and cannot {what}; open it with "
                "read_only=False in the process that writes the store"
            )

    def _transact(
        self,
        change: Callable[
            [Mapping[K, tuple[float, float]]], tuple[dict[K, tuple[float, float]], list[K]]
        ],
    ) -> tuple[dict[K, tuple[float, float]], list[K]]:
        """Work out ``(upserts, deletes)`` from the state and apply them: to the table in one
        transaction, then to the cache (so a failed write leaves the cache as the table)."""
        store = self._store
        if store is None:
            state = self._rows()
            upserts, deletes = change(state)
        else:

            def work() -> tuple[
                dict[K, tuple[float, float]], dict[K, tuple[float, float]], list[K]
            ]:
                # under the write lock, so another writer's commit is read before changing it
                state = self._rows()
                upserts, deletes = change(state)
                if upserts:
                    store.upsert(self._as_rows(upserts))
                if deletes:
                    store.delete([self._columns(k) for k in sorted(deletes)])
                return state, upserts, deletes

            state, upserts, deletes = store.transact(work)
            after = store.version_after_write()
            if after is not None:
                self._version = after
        for key in deletes:
            state.pop(key, None)
        state.update(upserts)
        return upserts, deletes


def _ids(values: Iterable[str], name: str) -> list[str]:
    """Distinct string ids, first occurrence first."""
    if isinstance(values, str):
        raise InputError(f"{name} must be a collection of ids, not one string ({values!r})")
    out: dict[str, None] = {}
    for v in values:
        if not isinstance(v, str):
            raise InputError(f"{name} must hold strings, got {v!r} ({type(v).__name__})")
        out.setdefault(v, None)
    return list(out)


# -- base-level activation ----------------------------------------------------------------------
class BaseLevel(_Table[str]):
    """ACT-R-style base-level activation of passages, one leaky accumulator each.

    Args:
        db: The store's connection (``isolation_level=None``), another engine's table
            (:class:`LearningRows`), or None to keep the state in memory only.
        half_life_s: Seconds for a use's trace to fall to half (``math.inf``: never fades).
        weight: The largest relative boost a score can get (see :meth:`boost`).
        read_only: Create no table; :meth:`use` and :meth:`forget` raise.

    Raises:
        ConfigError: If a knob is out of range or ``db`` opens its own transactions.
    """

    _table = "graph_base_level"
    _schema = _BASE_SCHEMA
    _keys = ("chunk_id",)
    _value = "value"

    def __init__(
        self,
        db: sqlite3.Connection | LearningRows | None = None,
        *,
        half_life_s: float = 7 * DAY_S,
        weight: float = 0.2,
        read_only: bool = False,
    ) -> None:
        self.half_life_s = _half_life("half_life_s", half_life_s)
        self.weight = _non_negative("weight", weight)
        super().__init__(db, read_only)

    @classmethod
    def from_config(
        cls,
        cfg: LearningConfig,
        db: sqlite3.Connection | LearningRows | None = None,
        *,
        read_only: bool = False,
    ) -> BaseLevel:
        """A :class:`BaseLevel` with ``cfg``'s ``base_level_*`` knobs."""
        return cls(
            db,
            half_life_s=cfg.base_level_half_life_s,
            weight=cfg.base_level_weight,
            read_only=read_only,
        )

    def _key(self, row: Sequence[Any]) -> str:
        return str(row[0])

    def _columns(self, key: str) -> tuple[str, ...]:
        return (key,)

    def __len__(self) -> int:
        """Passages with a trace (used and not forgotten)."""
        return len(self._rows())

    def use(self, chunk_ids: Iterable[str], now: float) -> None:
        """Record one use of each passage at ``now``.

        A passage listed twice in one call is used once.

        Args:
            chunk_ids: The passages used (e.g. the results a caller acted on).
            now: The time of the use, seconds; not earlier than any of their last uses.

        Raises:
            PensiveError: If read-only.
            InputError: If ``now`` is not finite or earlier than a passage's last use, or an
                id is not a string.
        """
        self._check_writable("record uses")
        t = _now(now)
        ids = _ids(chunk_ids, "chunk_ids")
        if not ids:
            return
        self._transact(lambda state: (self._used(state, ids, t), []))

    def _used(
        self, state: Mapping[str, tuple[float, float]], ids: Sequence[str], t: float
    ) -> dict[str, tuple[float, float]]:
        changes: dict[str, tuple[float, float]] = {}
        for cid in ids:
            value, last = state.get(cid, (0.0, t))
            dt = _after(t, last, f"chunk {cid!r}")
            changes[cid] = (value * _decay(dt, self.half_life_s) + 1.0, t)
        return changes

    def value(self, chunk_ids: Sequence[str], now: float) -> np.ndarray:
        """Each passage's base level at ``now``: ``sum_j 2 ** (-(now - t_j) / half_life)``.

        Args:
            chunk_ids: The passages, in the order wanted.
            now: The time to read at, seconds.

        Returns:
            One float64 per id, in ``chunk_ids`` order; 0.0 for a passage never used.

        Raises:
            InputError: If ``now`` is not finite or earlier than a passage's last use.
        """
        t = _now(now)
        if isinstance(chunk_ids, str):
            raise InputError(f"chunk_ids must be a sequence of ids, not one string ({chunk_ids!r})")
        state = self._rows()
        out = np.zeros(len(chunk_ids), dtype=np.float64)
        for i, cid in enumerate(chunk_ids):
            hit = state.get(cid)
            if hit is not None:
                value, last = hit
                out[i] = value * _decay(_after(t, last, f"chunk {cid!r}"), self.half_life_s)
        return out

    def boost(self, scores: Sequence[tuple[str, float]], now: float) -> list[tuple[str, float]]:
        """Scores raised by their passages' base levels, best first.

        With ``L = log1p(value)`` (ACT-R's logarithm of the summed traces, 0 for an unused
        passage) squashed to ``x = L / (1 + L)`` in ``[0, 1)``, a score ``s`` becomes::

            s + |s| * weight * x

        i.e. ``s * (1 + weight * x)`` for ``s >= 0``. It is never lower than ``s``, is below
        ``s * (1 + weight)`` however often a passage was used, grows with ``value`` (so with
        recency and frequency), and leaves the scores of unused passages as they were. The
        input is not changed.

        Args:
            scores: ``(chunk id, score)`` pairs, higher is better.
            now: The time to read base levels at, seconds.

        Returns:
            ``(chunk id, boosted score)`` sorted by boosted score, best first; ties keep the
            input order, so a best-first list with no used passage comes back as it was.

        Raises:
            InputError: If ``now`` is not finite or earlier than a passage's last use.
        """
        pairs = [(str(cid), float(s)) for cid, s in scores]
        values = self.value([cid for cid, _ in pairs], now)
        boosted = []
        for (cid, s), v in zip(pairs, values.tolist()):
            if v > 0.0:
                level = math.log1p(v)
                s = s + abs(s) * self.weight * (level / (1.0 + level))
            boosted.append((cid, s))
        order = sorted(range(len(boosted)), key=lambda i: -boosted[i][1])
        return [boosted[i] for i in order]

    def forget(self, chunk_ids: Iterable[str]) -> int:
        """Drop the traces of passages (e.g. deleted ones).

        Args:
            chunk_ids: The passages.

        Returns:
            How many had a trace.

        Raises:
            PensiveError: If read-only.
        """
        self._check_writable("forget passages")
        ids = _ids(chunk_ids, "chunk_ids")
        _, gone = self._transact(lambda state: ({}, [cid for cid in ids if cid in state]))
        return len(gone)


# -- Hebbian edges ------------------------------------------------------------------------------
class Hebbian(_Table[tuple[str, str]]):
    """Learned extra weight on directed graph edges, by node name (``GraphView.nodes``).

    Args:
        db: The store's connection (``isolation_level=None``), another engine's table
            (:class:`LearningRows`), or None to keep the state in memory only.
        rate: Extra weight per unit of activation carried (a strengthening adds
            ``rate * amount``).
        half_life_s: Seconds for a learned weight to fall to half (``math.inf``: never).
        max_weight: Cap on any edge's learned weight.
        prune_below: Learned weights below this are left out of :meth:`as_matrix` and
            deleted by :meth:`prune`.
        read_only: Create no table; :meth:`strengthen`, :meth:`prune` and :meth:`forget`
            raise.

    Raises:
        ConfigError: If a knob is out of range or ``db`` opens its own transactions.
    """

    _table = "graph_hebbian"
    _schema = _HEBBIAN_SCHEMA
    _keys = ("src", "dst")
    _value = "weight"

    def __init__(
        self,
        db: sqlite3.Connection | LearningRows | None = None,
        *,
        rate: float = 0.1,
        half_life_s: float = 30 * DAY_S,
        max_weight: float = 1.0,
        prune_below: float = 0.01,
        read_only: bool = False,
    ) -> None:
        self.rate = _non_negative("rate", rate)
        self.half_life_s = _half_life("half_life_s", half_life_s)
        _check_cap(max_weight, prune_below, "max_weight", "prune_below")
        self.max_weight = float(max_weight)
        self.prune_below = float(prune_below)
        super().__init__(db, read_only)

    @classmethod
    def from_config(
        cls,
        cfg: LearningConfig,
        db: sqlite3.Connection | LearningRows | None = None,
        *,
        read_only: bool = False,
    ) -> Hebbian:
        """A :class:`Hebbian` with ``cfg``'s ``hebbian_*`` knobs."""
        return cls(
            db,
            rate=cfg.hebbian_rate,
            half_life_s=cfg.hebbian_half_life_s,
            max_weight=cfg.hebbian_max,
            prune_below=cfg.hebbian_prune_below,
            read_only=read_only,
        )

    def _key(self, row: Sequence[Any]) -> tuple[str, str]:
        return (str(row[0]), str(row[1]))

    def _columns(self, key: tuple[str, str]) -> tuple[str, ...]:
        return key

    def __len__(self) -> int:
        """Edges with a stored learned weight (pruned or not yet)."""
        return len(self._rows())

    def _at(self, edge: tuple[str, str], held: tuple[float, float], t: float) -> float:
        w, last = held
        dt = _after(t, last, f"edge {edge[0]!r} -> {edge[1]!r}")
        return min(self.max_weight, w * _decay(dt, self.half_life_s))

    def weight(self, src: str, dst: str, now: float) -> float:
        """The learned extra weight of ``src -> dst`` at ``now`` (0.0 if none).

        Raises:
            InputError: If ``now`` is not finite or earlier than the edge's last update.
        """
        t = _now(now)
        held = self._rows().get((src, dst))
        return 0.0 if held is None else self._at((src, dst), held, t)

    def strengthen(
        self, paths: Iterable[tuple[str, str]], amount: float = 1.0, *, now: float
    ) -> int:
        """Add ``rate * amount`` to each edge's decayed weight, capped at ``max_weight``.

        An edge listed twice in one call is strengthened once.

        Args:
            paths: ``(source node, target node)`` edges that carried activation to a result
                that was used.
            amount: How much activation they carried (>= 0, e.g. in [0, 1]).
            now: The time, seconds; not earlier than any of the edges' last updates.

        Returns:
            How many edges were strengthened.

        Raises:
            PensiveError: If read-only.
            InputError: If ``amount`` is negative or not finite, ``now`` is not finite or
                earlier than an edge's last update, or an edge is malformed or a self-loop.
        """
        self._check_writable("strengthen edges")
        t = _now(now)
        inc = self.rate * _non_negative("amount", amount, error=InputError)
        edges: dict[tuple[str, str], None] = {}
        for path in paths:
            if (
                not isinstance(path, (tuple, list))
                or len(path) != 2
                or not all(isinstance(n, str) for n in path)
            ):
                raise InputError(f"paths must hold (src, dst) pairs of node names, got {path!r}")
            if path[0] == path[1]:
                raise InputError(f"paths may not hold a self-loop, got {path!r}")
            edges.setdefault((path[0], path[1]), None)
        if not edges:
            return 0
        self._transact(lambda state: (self._strengthened(state, edges, inc, t), []))
        return len(edges)

    def _strengthened(
        self,
        state: Mapping[tuple[str, str], tuple[float, float]],
        edges: Iterable[tuple[str, str]],
        inc: float,
        t: float,
    ) -> dict[tuple[str, str], tuple[float, float]]:
        changes = {}
        for edge in edges:
            held = state.get(edge)
            w = 0.0 if held is None else self._at(edge, held, t)
            changes[edge] = (min(self.max_weight, w + inc), t)
        return changes

    def as_matrix(self, index: Mapping[str, int], n: int, now: float) -> sparse.csr_matrix:
        """The learned weights at ``now`` as an ``n x n`` matrix to add to the adjacency.

        Edges below ``prune_below`` are left out, as are edges with an end not in ``index``
        (a node the graph no longer has).

        Args:
            index: Node name -> row (``GraphView.index()``).
            n: Rows and columns (``len(GraphView.nodes)``).
            now: The time to read weights at, seconds.

        Returns:
            A float32 CSR matrix; ``[i, j]`` is the learned weight of ``node i -> node j``.

        Raises:
            InputError: If ``now`` is not finite or earlier than an edge's last update, or a
                row in ``index`` is outside ``[0, n)``.
        """
        t = _now(now)
        if n < 0:
            raise InputError(f"n must be >= 0, got {n!r}")
        rows: list[int] = []
        cols: list[int] = []
        ws: list[float] = []
        for edge, held in sorted(self._rows().items()):
            w = self._at(edge, held, t)
            i, j = index.get(edge[0]), index.get(edge[1])
            if w < self.prune_below or i is None or j is None:
                continue
            for r in (i, j):
                if not 0 <= r < n:
                    raise InputError(f"index maps a node to row {r}, outside [0, {n})")
            rows.append(i)
            cols.append(j)
            ws.append(w)
        m = sparse.csr_matrix(
            (np.asarray(ws, dtype=np.float32), (rows, cols)), shape=(n, n), dtype=np.float32
        )
        m.sum_duplicates()
        return m

    def prune(self, now: float) -> int:
        """Delete the edges whose learned weight at ``now`` is below ``prune_below``.

        Returns:
            How many were deleted.

        Raises:
            PensiveError: If read-only.
            InputError: If ``now`` is not finite or earlier than an edge's last update.
        """
        self._check_writable("prune edges")
        t = _now(now)
        _, weak = self._transact(
            lambda state: (
                {},
                [e for e, h in state.items() if self._at(e, h, t) < self.prune_below],
            )
        )
        return len(weak)

    def forget(self, node_names: Iterable[str]) -> int:
        """Delete every learned edge from or to any of these nodes (e.g. deleted passages).

        Returns:
            How many edges were deleted.

        Raises:
            PensiveError: If read-only.
        """
        self._check_writable("forget nodes")
        names = set(_ids(node_names, "node_names"))
        _, gone = self._transact(
            lambda state: ({}, [e for e in state if e[0] in names or e[1] in names])
        )
        return len(gone)


class UseHistory(Protocol):
    """When each passage was used, persisted (ACT-R base level). :class:`BaseLevel` (a table
    in the store's SQLite file) is the embedded implementation."""

    def use(self, chunk_ids: Iterable[str], now: float) -> None:
        """Record one use of each passage at ``now``."""
        ...

    def boost(self, scores: Sequence[tuple[str, float]], now: float) -> list[tuple[str, float]]:
        """Scores raised by their passages' base levels, best first."""
        ...

    def value(self, chunk_ids: Sequence[str], now: float) -> np.ndarray:
        """Each passage's base level at ``now`` (0.0 for one never used), in order."""
        ...

    def forget(self, chunk_ids: Iterable[str]) -> int:
        """Drop the traces of passages."""
        ...


class EdgeStrengths(Protocol):
    """Learned extra weights of graph edges, persisted (Hebbian). :class:`Hebbian` (a table in
    the store's SQLite file) is the embedded implementation."""

    def strengthen(
        self, paths: Iterable[tuple[str, str]], amount: float = 1.0, *, now: float
    ) -> int:
        """Strengthen each edge; returns how many changed."""
        ...

    def as_matrix(self, index: Mapping[str, int], n: int, now: float) -> sparse.csr_matrix:
        """The learned weights at ``now`` as an ``n x n`` matrix."""
        ...

    def prune(self, now: float) -> int:
        """Delete edges whose weight decayed below the floor."""
        ...

    def forget(self, node_names: Iterable[str]) -> int:
        """Delete every learned edge from or to these nodes."""
        ...
