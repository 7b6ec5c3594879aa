"""What an L1 lookup costs on Postgres beside SQLite (issue 26), in one process.

A real Postgres 16 is started from the ``pgserver`` wheel in a folder (or ``--dsn`` names a
server). Both caches are filled with the same ``--entries`` answers to synthetic questions, then
each lookup is timed the way the query stage makes it (``sync()`` then ``get()``):

* **hit**: an exact key whose answer is in the hot set (the common case);
* **bag hit**: the same words in another order;
* **cold hit**: an entry outside the hot set (its hits are read from storage);
* **miss**: a question never asked;
* **hit after another writer**: another cache object (another process or replica) stored one
  answer just before (the reader reads the new rows first);
* **hit after another commit**: another cache invalidated one entry and moved the commit just
  before (the reader reloads every entry's key and dependencies, not their hits);
* **round trip**: ``SELECT 1`` on a connection of its own (the floor of any Postgres read);
* **engine hit**: a whole ``Pensive.query`` answered from L1, on an embedded store whose L1 is
  the SQLite one, then a Postgres one swapped in.

Timings are the client's wall time over a Unix socket on the same cores, medians and p95 over
``--lookups`` lookups. Not a test: numbers for the README and the design notes.

    python -m benchmarks.l1_postgres   # ~20 s
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import base_parser, environment, source_state, write_results
from pensive_core.cache import Deps, L1Cache, L1Memory, make_key
from pensive_core.types import Hit

WORDS = (
    "revenue invoice migration antioxidant ferry harbour contract tenant quarterly margin "
    "vaccine trial protein glacier orbit lattice turbine ledger audit payroll"
).split()


def question(i: int) -> str:
    """A distinct question per ``i`` (three content words and an id)."""
    a, b, c = WORDS[i % 20], WORDS[(i // 20) % 20], WORDS[(i // 400) % 20]
    return f"What happened to the {a} {b} {c} of case {i}?"


def fill(cache: L1Memory, n: int) -> None:
    """``n`` answers of five hits each, at commit 0."""
    for i in range(n):
        hits = [
            Hit(f"d{i}", f"d{i}#{j}", f"passage {j} of {i} " * 20, 1.0 / (j + 1)) for j in range(5)
        ]
        cache.put(
            make_key(question(i), 5, None, ()), hits, 0.7, "L2", Deps(docs=frozenset({f"d{i}"})), 0
        )


def timed(
    fn: Callable[[int], Any], n: int, setup: Callable[[int], Any] | None = None
) -> dict[str, float]:
    """Median and p95 of ``fn(i)`` in microseconds (``setup(i)`` before each, not timed)."""
    out = []
    for i in range(n):
        if setup is not None:
            setup(i)
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1e6)
    out.sort()
    return {
        "p50_us": round(statistics.median(out), 1),
        "p95_us": round(out[int(0.95 * (n - 1))], 1),
    }


def measure(make: Callable[[], L1Memory], entries: int, lookups: int) -> dict[str, Any]:
    """Every case above on one kind of cache."""
    cache = make()
    fill(cache, entries)
    other = make()
    hot = min(entries, 200)

    def look(text: str) -> Any:
        cache.sync()
        return cache.get(make_key(text, 5, None, ()))

    for i in range(hot):  # warm: these answers are in memory
        assert look(question(i)) is not None
    res = {
        "hit": timed(lambda i: look(question(i % hot)), lookups),
        "bag_hit": timed(
            lambda i: look(question(i % hot).replace("What happened to the", "the")), lookups
        ),
    }
    cold = make()  # a fresh reader with a hot set of one: every answer comes from storage
    cold.hot = 1

    def look_cold(i: int) -> Any:
        cold.sync()
        return cold.get(make_key(question(hot + i % (entries - hot)), 5, None, ()))

    res["cold_hit"] = timed(look_cold, min(lookups, entries - hot))
    res["miss"] = timed(lambda i: look(f"an unasked question number {i}"), lookups)

    def other_writes(i: int) -> None:
        qk = make_key(f"another replica's question {i}", 5, None, ())
        other.put(qk, [Hit("x", "x#1", "t", 1.0)], 0.5, "L2", Deps(), 0)

    res["hit_after_another_writer"] = timed(
        lambda i: look(question(i % hot)), min(lookups, 300), other_writes
    )

    def other_commits(i: int) -> None:
        other.entries()
        other.invalidate([make_key(question(hot + i), 5, None, ()).exact], cache.commit + 1)

    # the reader reloads every entry's key and dependencies (not their hits) after a commit
    res["hit_after_another_commit"] = timed(
        lambda i: look(question(i % hot)), min(50, entries - hot), other_commits
    )
    for c in (cache, other, cold):
        c.close()
    return res


def engine_hits(dsn: str, folder: Path, lookups: int) -> dict[str, dict[str, float]]:
    """``Pensive.query`` answered from L1, with the SQLite L1 and with a Postgres one swapped
    in (the rest of the store embedded, hash embedder): the whole query path of a hit."""
    from pensive_core import Document, Pensive
    from pensive_core.storage.pg_cache import PostgresL1Cache

    config = {"embedder": {"name": "hash", "dim": 256}, "router": {"l1": True}}
    docs = [
        Document(id=f"d{i}", text=f"{question(i)} The answer is number {i}.") for i in range(200)
    ]
    out = {}
    with Pensive(folder / "engine-store", config=config) as p:
        p.ingest(docs)
        for name in ("sqlite", "postgres"):
            if name == "postgres":
                router = p.config.router
                cache = PostgresL1Cache(
                    dsn,
                    "bench_engine",
                    router.l1_capacity,
                    router.l1_ttl_s,
                    router.l1_hot,
                    router.l1_fuzzy,
                )
                cache.invalidate_all(p.components.commit_no)
                p.components.l1.close()
                p.components.l1 = cache
            for i in range(50):
                p.query(question(i))
            assert all(p.query(question(i)).tier == "L1" for i in range(50))
            out[name] = timed(lambda i: p.query(question(i % 50)), lookups)
    return out


def round_trip(dsn: str, lookups: int) -> dict[str, float]:
    """``SELECT 1`` on its own connection."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return timed(lambda i: conn.execute("SELECT 1").fetchone(), lookups)


def render(p: dict[str, Any]) -> str:
    """The Markdown table."""
    lines = [
        "# L1 lookup cost: Postgres beside SQLite",
        "",
        f"{p['entries']} answers (5 hits each), {p['lookups']} lookups per case; `sync()` + `get()` "
        "as the query stage calls them; microseconds, client wall time (Postgres over a Unix "
        f"socket on the same machine, {p['postgres']}).",
        "",
        "| case | SQLite p50 | SQLite p95 | Postgres p50 | Postgres p95 |",
        "|---|---:|---:|---:|---:|",
    ]
    for case in p["sqlite"]:
        s, g = p["sqlite"][case], p["postgres_l1"][case]
        lines.append(f"| {case} | {s['p50_us']} | {s['p95_us']} | {g['p50_us']} | {g['p95_us']} |")
    rt, eh = p["round_trip"], p["engine_hit"]
    lines += [
        "",
        f"Postgres round trip (`SELECT 1`): p50 {rt['p50_us']} µs, p95 {rt['p95_us']} µs.",
        "",
        "A whole `Pensive.query` answered from L1 (200 documents, hash embedder, the rest of the "
        f"store embedded): SQLite L1 p50 {eh['sqlite']['p50_us']} µs (p95 "
        f"{eh['sqlite']['p95_us']}), Postgres L1 p50 {eh['postgres']['p50_us']} µs (p95 "
        f"{eh['postgres']['p95_us']}).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write ``l1_postgres.json`` / ``.md``."""
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="", help="a Postgres (default: one from pgserver)")
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--lookups", type=int, default=2000)
    args = ap.parse_args(argv)
    from pensive_core.storage.pg_cache import PostgresL1Cache

    work = args.store or Path(tempfile.mkdtemp(prefix="pensive-bench-l1pg-"))
    work.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        dsn = args.dsn
        if not dsn:
            import pgserver

            shutil.rmtree(work / "pg", ignore_errors=True)
            server = pgserver.get_server(work / "pg", cleanup_mode="stop")
            dsn = server.get_uri()
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as c:
            for t in ("bench_l1_docs", "bench_l1", "bench_l1_meta", "bench_engine_l1_docs",
                      "bench_engine_l1", "bench_engine_l1_meta"):  # fmt: skip
                c.execute(f"DROP TABLE IF EXISTS {t}")  # a run starts from nothing
            pg_version = "Postgres " + c.execute("SHOW server_version").fetchone()[0]
        (work / "l1.sqlite").unlink(missing_ok=True)
        payload: dict[str, Any] = {
            "benchmark": "l1_postgres",
            "environment": environment(),
            "source": source_state(),
            "postgres": pg_version,
            "entries": args.entries,
            "lookups": args.lookups,
            "sqlite": measure(lambda: L1Cache(work / "l1.sqlite"), args.entries, args.lookups),
            "postgres_l1": measure(
                lambda: PostgresL1Cache(dsn, "bench"), args.entries, args.lookups
            ),
            "round_trip": round_trip(dsn, args.lookups),
            "engine_hit": engine_hits(dsn, work, args.lookups),
        }
        write_results("l1_postgres", args.out, payload, render(payload))
        print(render(payload))
    finally:
        if server is not None:
            server.cleanup()
        if args.store is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
