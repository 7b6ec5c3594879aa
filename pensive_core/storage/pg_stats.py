"""The query statistics (:class:`~pensive_core.stats.QueryStats`) in Postgres: the lifetime
histograms of every replica in one ``{prefix}_query_stats`` table, counted in memory and added
in batches (:class:`~pensive_core.stats.TierStats`, the same logic as the embedded store's).

Tier names are UTF-8 ``bytea`` (a text column holds no NUL). Counts are added with one upsert
per flush, in key order, so replicas flushing at once queue on rows instead of deadlocking; a
flush Postgres refuses leaves the counts pending for the next one.
"""

from __future__ import annotations

import logging

from ..errors import BackendError
from ..stats import TierStats
from .pg_tables import PgTables, from_bytes, to_bytes

__all__ = ["PostgresCountRows", "PostgresQueryStats"]

log = logging.getLogger(__name__)


class PostgresCountRows:
    """A :class:`~pensive_core.stats.CountRows` in a Postgres table.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The table's prefix (one set of statistics per prefix).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(self, dsn: str, prefix: str = "pensive", timeout_s: float = 10) -> None:
        self.tables = PgTables(dsn, prefix, {"t": "query_stats"}, "query statistics", timeout_s)
        self.tables.create(
            [
                "CREATE TABLE IF NOT EXISTS {t} (tier bytea NOT NULL, kind text NOT NULL, "
                "bucket integer NOT NULL, count bigint NOT NULL, PRIMARY KEY (tier, kind, bucket))"
            ]
        )

    def add(self, counts: list[tuple[str, str, int, int]]) -> bool:
        """Add counts in one statement (False if Postgres refused or could not be reached)."""
        counts = sorted(counts)
        try:
            self.tables.run(
                "add query statistics",
                "INSERT INTO {t} AS s (tier, kind, bucket, count) SELECT * FROM "
                "unnest(%s::bytea[], %s::text[], %s::integer[], %s::bigint[]) "
                "ON CONFLICT (tier, kind, bucket) DO UPDATE SET count = s.count + EXCLUDED.count",
                (
                    [to_bytes(t) for t, _, _, _ in counts],
                    [k for _, k, _, _ in counts],
                    [b for _, _, b, _ in counts],
                    [n for _, _, _, n in counts],
                ),
            )
        except BackendError as exc:
            log.debug("query statistics kept pending: %s", exc)
            return False
        return True

    def read(self) -> list[tuple[str, str, int, int]]:
        """Every stored count."""
        rows = self.tables.run("read query statistics", "SELECT tier, kind, bucket, count FROM {t}")
        return [(from_bytes(t), k, int(b), int(n)) for t, k, b, n in rows]

    def close(self) -> None:
        """Close the connection."""
        self.tables.close()


class PostgresQueryStats(TierStats):
    """Per-tier query statistics whose lifetime counts every replica shares in Postgres.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The table's prefix (one set of statistics per prefix: a store, or a namespace).
        flush_every: Queries between flushes.
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self, dsn: str, prefix: str = "pensive", flush_every: int = 256, timeout_s: float = 10
    ) -> None:
        self._rows = PostgresCountRows(dsn, prefix, timeout_s)
        self.prefix = prefix
        super().__init__(self._rows, flush_every)

    def close(self) -> None:
        """Flush what is pending (best effort) and close the connection."""
        self.flush()
        self._rows.close()
