"""BM25 in Postgres: a postings table scored in SQL, the same BM25 as bm25s computes.

Not ``ts_rank``: Postgres full-text ranking is not BM25, and its parser and stemmer are not
Pensive's. Here each passage is tokenised by Pensive's own :class:`~pensive_core.tokenize.
Tokenizer` (the one the embedded segments use), and three tables hold what BM25 needs:

* ``{prefix}_bm25_docs``: passage id and length in tokens;
* ``{prefix}_bm25_postings``: (term, passage id, term frequency, passage length), keyed by
  term then passage with the frequency and length in the key's index, so a term's document
  frequency is a count over one index range and its postings are read from the index alone;
* ``{prefix}_bm25_stats``: one row, the passage count and total length (exact: updated in the
  same transaction as the postings).

A search sums ``idf(t) * tf / (tf + k1 * (1 - b + b * len / avglen))`` (``lucene``,
``robertson``; ``atire`` with Okapi's ``k1 + 1``) over the query's tokens in one statement,
with the collection's exact average length: unlike the embedded segments (whose length norm
is per segment until a merge), the scores are exact after any sequence of commits, and equal
:func:`pensive_core.testing.sparse.reference_scores` to float precision.

Writes wait in memory until :meth:`PostgresBM25.commit`, which applies them in one
transaction under an advisory lock of the index (two writers' commits never interleave; a
crash before the commit leaves nothing). A commit that moves the average length reports
``rebuilt`` (every passage's length norm moved), so cached answers are dropped.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Container, Iterable, Sequence, Sized
from typing import Any

from ..config import BM25Config
from ..errors import ConfigError, InputError
from ..storage.pg import PgConnection
from ..tokenize import Tokenizer
from ..validate import check_id, check_text

__all__ = ["PostgresBM25"]

_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")
_ALLOWED_IN_SQL = 100_000  # an ``allowed`` set up to this size is sent as an array


def _idf(method: str, df: float, n: float) -> float:
    if df <= 0:
        return 0.0
    if method == "lucene":
        return math.log1p((n - df + 0.5) / (df + 0.5))
    if method == "robertson":
        return math.log(max((n - df + 0.5) / (df + 0.5), 1.0))
    return math.log(n / df)


class PostgresBM25:
    """A :class:`~pensive_core.sparse.SparseIndex` in Postgres tables.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        cfg: The ``[bm25]`` section (variant, k1, b, tokenizer).
        prefix: The tables' prefix (one index per prefix: a store, or a namespace).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self,
        dsn: str,
        cfg: BM25Config | None = None,
        prefix: str = "pensive",
        timeout_s: float = 10,
    ) -> None:
        if not _PREFIX.match(prefix):
            raise ConfigError(
                f"BM25 table prefix {prefix!r} is not valid: use up to 40 lower-case letters, "
                "digits or '_', starting with a letter or '_'"
            )
        from psycopg import sql

        self.cfg = cfg or BM25Config()
        self.tokenizer = Tokenizer(self.cfg.stemmer, self.cfg.stopwords)
        self.prefix = prefix
        self._pg = PgConnection(dsn, "The Postgres BM25 index", timeout_s)
        self.address = self._pg.address
        self._docs = sql.Identifier(f"{prefix}_bm25_docs")
        self._post = sql.Identifier(f"{prefix}_bm25_postings")
        self._stats = sql.Identifier(f"{prefix}_bm25_stats")
        self._lock_key = f"pensive_bm25:{prefix}"
        self._adds: dict[str, Counter[str]] = {}
        self._lens: dict[str, int] = {}
        self._dels: set[str] = set()
        self._pending_n: int | None = None  # n_live while writes wait (None: to compute)
        self.rebuilt = False
        self._create()
        self._n, self._total = self._read_stats()
        # the last commit's document-frequency changes and the count before it (idf_shift)
        self._last_delta: dict[str, int] = {}
        self._prev_n = self._n

    # -- schema ------------------------------------------------------------------------------
    def _create(self) -> None:
        from psycopg import sql

        def make(conn: Any) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._lock_key,))
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (chunk_id text PRIMARY KEY, "
                        "len integer NOT NULL)"
                    ).format(self._docs)
                )
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (term text NOT NULL, chunk_id text NOT "
                        "NULL, tf integer NOT NULL, len integer NOT NULL, "
                        "PRIMARY KEY (term, chunk_id) INCLUDE (tf, len))"
                    ).format(self._post)
                )
                conn.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (chunk_id)").format(
                        sql.Identifier(f"{self.prefix}_bm25_postings_chunk"), self._post
                    )
                )
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (one boolean PRIMARY KEY DEFAULT true "
                        "CHECK (one), n bigint NOT NULL, total bigint NOT NULL, "
                        "commits bigint NOT NULL)"
                    ).format(self._stats)
                )
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (one, n, total, commits) VALUES (true, 0, 0, 0) "
                        "ON CONFLICT DO NOTHING"
                    ).format(self._stats)
                )

        self._pg.run("create the BM25 tables", make)

    def _read_stats(self) -> tuple[int, int]:
        from psycopg import sql

        stmt = sql.SQL("SELECT n, total FROM {}").format(self._stats)
        row = self._pg.run("read BM25 statistics", lambda c: c.execute(stmt).fetchone())
        return int(row[0]), int(row[1])

    # -- writing -----------------------------------------------------------------------------
    def _terms(self, text: str) -> list[str]:
        """The text's tokens as the postings key them: a token over 256 bytes (a base64 run,
        a long URL) as ``#`` + its SHA-256 (a B-tree key holds about 2,700 bytes; no token
        holds a ``#``, so the two never meet)."""
        out = self.tokenizer.tokenize(text)
        for i, t in enumerate(out):
            if len(t) > 64 and len(t.encode("utf-8")) > 256:
                out[i] = "#" + hashlib.sha256(t.encode("utf-8")).hexdigest()
        return out

    def add(self, chunk_id: str, text: str) -> None:
        """Index ``text`` under ``chunk_id`` at the next commit (replacing what it held).

        Raises:
            InputError: If the id is not a str Postgres can key (NUL, a lone surrogate, over
                2,000 bytes) or the text is not a str; nothing is queued then.
        """
        check_id(chunk_id, "a passage id")
        if len(chunk_id.encode("utf-8")) > 2000:
            raise InputError(f"a passage id of {len(chunk_id.encode('utf-8'))} bytes is over 2,000")
        check_text(text, f"passage {chunk_id!r}: text")
        tokens = self._terms(text)
        self._adds[chunk_id] = Counter(tokens)
        self._lens[chunk_id] = len(tokens)
        self._dels.discard(chunk_id)
        self._pending_n = None

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove passages at the next commit; unknown ids are ignored.

        Raises:
            InputError: If ``chunk_ids`` is one string, or an id is not a str Postgres can key.
        """
        if isinstance(chunk_ids, (str, bytes)):
            raise InputError("delete takes a list of passage ids, not one string")
        chunk_ids = [check_id(c, "a passage id") for c in chunk_ids]
        for cid in chunk_ids:
            self._adds.pop(cid, None)
            self._lens.pop(cid, None)
            self._dels.add(cid)
        self._pending_n = None

    def commit(self) -> None:
        """Apply the waiting writes in one transaction (under the index's advisory lock)."""
        from psycopg import sql

        self.rebuilt = False
        if not self._adds and not self._dels:
            self._last_delta, self._prev_n = {}, self._n
            return
        touched = sorted(set(self._adds) | self._dels)
        adds, lens = self._adds, self._lens

        def write(conn: Any) -> tuple[int, int, int, int, dict[str, int]]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._lock_key,))
                n0, total0 = conn.execute(
                    sql.SQL("SELECT n, total FROM {} FOR UPDATE").format(self._stats)
                ).fetchone()
                delta: Counter[str] = Counter()
                for term, k in conn.execute(
                    sql.SQL(
                        "SELECT term, count(*) FROM {} WHERE chunk_id = ANY(%s) GROUP BY term"
                    ).format(self._post),
                    (touched,),
                ):
                    delta[term] -= int(k)
                gone = conn.execute(
                    sql.SQL("DELETE FROM {} WHERE chunk_id = ANY(%s) RETURNING len").format(
                        self._docs
                    ),
                    (touched,),
                ).fetchall()
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE chunk_id = ANY(%s)").format(self._post),
                    (touched,),
                )
                with conn.cursor() as cur:
                    with cur.copy(
                        sql.SQL("COPY {} (chunk_id, len) FROM STDIN").format(self._docs)
                    ) as cp:
                        for cid in adds:
                            cp.write_row((cid, lens[cid]))
                    with cur.copy(
                        sql.SQL("COPY {} (term, chunk_id, tf, len) FROM STDIN").format(self._post)
                    ) as cp:
                        for cid, counts in adds.items():
                            n_tokens = lens[cid]
                            for term, tf in counts.items():
                                cp.write_row((term, cid, tf, n_tokens))
                                delta[term] += 1
                n1 = int(n0) - len(gone) + len(adds)
                total1 = int(total0) - sum(int(r[0]) for r in gone) + sum(lens.values())
                conn.execute(
                    sql.SQL("UPDATE {} SET n = %s, total = %s, commits = commits + 1").format(
                        self._stats
                    ),
                    (n1, total1),
                )
            return int(n0), int(total0), n1, total1, {t: d for t, d in delta.items() if d}

        n0, total0, n1, total1, delta = self._pg.run("commit BM25 postings", write)
        if len(touched) * 10 >= max(n0, n1):
            # a tenth of the passages or more changed: fresh planner statistics at once (the
            # autovacuum daemon would take its time, and plans made on empty tables are bad)
            # (a vacuum too: the postings' index answers alone once its pages are all-visible)
            self._pg.run(
                "analyze the BM25 tables",
                lambda c: c.execute(
                    sql.SQL("VACUUM (ANALYZE) {}, {}, {}").format(
                        self._docs, self._post, self._stats
                    )
                ),
            )
        # every length norm moved when the average length did
        self.rebuilt = n0 > 0 and total0 * n1 != total1 * n0
        self._prev_n, self._last_delta = n0, delta
        self._n, self._total = n1, total1
        self._adds, self._lens, self._dels = {}, {}, set()
        self._pending_n = None

    def reload(self) -> None:
        """Read the statistics again: another process may have committed (the Postgres
        storage engine calls this when the store's commit number moves). Writes waiting
        for this index's own commit are kept."""
        self._n, self._total = self._read_stats()
        self._pending_n = None

    # -- reading -----------------------------------------------------------------------------
    @property
    def n_live(self) -> int:
        """Passages indexed, the waiting writes counted."""
        if not self._adds and not self._dels:
            return self._n
        if self._pending_n is None:
            from psycopg import sql

            ids = sorted(set(self._adds) | self._dels)
            stmt = sql.SQL("SELECT chunk_id FROM {} WHERE chunk_id = ANY(%s)").format(self._docs)
            rows = self._pg.run("count BM25 passages", lambda c: c.execute(stmt, (ids,)).fetchall())
            there = {r[0] for r in rows}
            self._pending_n = (
                self._n
                + sum(1 for cid in self._adds if cid not in there)
                - sum(1 for cid in self._dels if cid in there)
            )
        return self._pending_n

    @property
    def n_terms(self) -> int:
        """Distinct terms indexed."""
        from psycopg import sql

        stmt = sql.SQL("SELECT count(*) FROM (SELECT DISTINCT term FROM {}) t").format(self._post)
        return int(self._pg.run("count BM25 terms", lambda c: c.execute(stmt).fetchone()[0]))

    @property
    def n_segments(self) -> int:
        """Always 1: the postings are one table."""
        return 1

    def _score_sql(self, restrict: bool, limit: bool) -> Any:
        """One statement (one snapshot): the query terms' weights first, each from its
        document frequency (an index range count), then each term's postings by index
        (``LATERAL``: the planner never scans every posting), summed per passage. A term whose
        weight is 0 (``robertson``'s floor, ``atire`` on a term every passage holds) adds
        nothing, as in bm25s, so every sum left is positive."""
        from psycopg import sql

        m, k1, b = self.cfg.method, float(self.cfg.k1), float(self.cfg.b)
        idf = {
            "lucene": "ln(1 + (s.n - d.df + 0.5) / (d.df + 0.5))",
            "robertson": "ln(greatest((s.n - d.df + 0.5) / (d.df + 0.5), 1.0))",
            "atire": "ln(s.n / d.df)",
        }[m]
        lift = f"{k1 + 1!r} * " if m == "atire" else ""
        term = f"w.weight * {lift}p.tf / (p.tf + {k1!r} * (1 - {b!r} + {b!r} * p.len / a.avgdl))"
        text = (
            "WITH s AS MATERIALIZED (SELECT n::float8 AS n, CASE WHEN n > 0 THEN "
            "total::float8 / n ELSE 1 END AS avgdl FROM {stats}), "
            "w AS MATERIALIZED (SELECT q.term, q.qtf * " + idf + " AS weight "
            "FROM unnest(%s::text[], %s::int[]) AS q(term, qtf) CROSS JOIN s CROSS JOIN "
            "LATERAL (SELECT count(*)::float8 AS df FROM {post} x WHERE x.term = q.term) d "
            "WHERE d.df > 0) "
            "SELECT p.chunk_id, sum(" + term + ") AS score FROM w "
            "CROSS JOIN LATERAL (SELECT x.chunk_id, x.tf, x.len FROM {post} x "
            "WHERE x.term = w.term" + (" AND x.chunk_id = ANY(%s)" if restrict else "") + ") p "
            "CROSS JOIN (SELECT avgdl FROM s) a WHERE w.weight > 0 "
            "GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id" + (" LIMIT %s" if limit else "")
        )  # fmt: skip
        return sql.SQL(text).format(stats=self._stats, post=self._post, docs=self._docs)

    def _query_terms(self, query: str) -> tuple[list[str], list[int]]:
        counts = Counter(self._terms(query))
        return list(counts), list(counts.values())

    def search(
        self, query: str, k: int, allowed: Container[str] | None = None
    ) -> list[tuple[str, float]]:
        """Top-k committed passages by BM25, best first (only ``allowed`` ids, if given)."""
        terms, qtf = self._query_terms(query)
        if not terms or k <= 0:
            return []
        if allowed is not None and isinstance(allowed, (Sized, Iterable)):
            ids = (
                [i for i in allowed if isinstance(i, str) and "\x00" not in i]
                if isinstance(allowed, Iterable)
                else None
            )
            if ids is not None and len(ids) <= _ALLOWED_IN_SQL:
                if not ids:
                    return []
                stmt = self._score_sql(restrict=True, limit=True)
                params: tuple[Any, ...] = (terms, qtf, ids, int(k))
                return self._rows(stmt, params)
        if allowed is None:
            return self._rows(self._score_sql(restrict=False, limit=True), (terms, qtf, int(k)))
        every = self._rows(self._score_sql(restrict=False, limit=False), (terms, qtf))
        return [(c, s) for c, s in every if c in allowed][:k]

    def _rows(self, stmt: Any, params: tuple[Any, ...]) -> list[tuple[str, float]]:
        rows = self._pg.run("search BM25", lambda c: c.execute(stmt, params).fetchall())
        return [(str(cid), float(score)) for cid, score in rows]

    def scores_for(self, query: str, chunk_ids: Sequence[str]) -> dict[str, float]:
        """BM25 scores of ``query`` for the committed ones of ``chunk_ids`` (0.0 when no term
        matches; ids not indexed are left out)."""
        from psycopg import sql

        ids = list(dict.fromkeys(chunk_ids))
        terms, qtf = self._query_terms(query)
        if not terms or not ids:
            return {}
        stmt = sql.SQL("SELECT chunk_id FROM {} WHERE chunk_id = ANY(%s)").format(self._docs)
        there = self._pg.run("look up passages", lambda c: c.execute(stmt, (ids,)).fetchall())
        out = {str(r[0]): 0.0 for r in there}
        if out:
            scored = self._rows(self._score_sql(restrict=True, limit=False), (terms, qtf, ids))
            out.update(scored)
        return out

    def doc_freq(self, terms: Sequence[str]) -> dict[str, int]:
        """How many committed passages hold each term (terms never indexed are left out)."""
        from psycopg import sql

        stmt = sql.SQL("SELECT term, count(*) FROM {} WHERE term = ANY(%s) GROUP BY term").format(
            self._post
        )
        rows = self._pg.run("count terms", lambda c: c.execute(stmt, (list(terms),)).fetchall())
        return {str(t): int(k) for t, k in rows}

    def idf_shift(self, query: str) -> float:
        """How far this process's last commit can have moved a passage's score for ``query``
        (meaningful when it did not report ``rebuilt``): the sum over the query's terms of
        count x |idf now - idf before| x the most a term's tf part weighs."""
        terms, qtf = self._query_terms(query)
        if not terms:
            return 0.0
        now = self.doc_freq(terms)
        lift = self.cfg.k1 + 1 if self.cfg.method == "atire" else 1.0
        shift = 0.0
        for t, c in zip(terms, qtf, strict=True):
            df_now = now.get(t, 0)
            df_before = df_now - self._last_delta.get(t, 0)
            if df_before <= 0:
                continue  # no passage held it before: none of their scores has it
            a = _idf(self.cfg.method, df_now, max(1, self._n))
            b = _idf(self.cfg.method, df_before, max(1, self._prev_n))
            shift += c * abs(a - b) * lift
        return shift

    def ids(self) -> set[str]:
        """Every committed passage id."""
        from psycopg import sql

        stmt = sql.SQL("SELECT chunk_id FROM {}").format(self._docs)
        rows = self._pg.run("list passages", lambda c: c.execute(stmt).fetchall())
        return {str(r[0]) for r in rows}

    def __contains__(self, chunk_id: object) -> bool:
        from psycopg import sql

        stmt = sql.SQL("SELECT 1 FROM {} WHERE chunk_id = %s").format(self._docs)
        row = self._pg.run("look up a passage", lambda c: c.execute(stmt, (chunk_id,)).fetchone())
        return row is not None

    def __len__(self) -> int:
        return self.n_live

    def close(self) -> None:
        """Close the connection (waiting writes are dropped, as a crash would)."""
        self._pg.close()
