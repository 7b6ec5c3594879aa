"""Replicas of ``pensive serve`` sharing one Postgres: 1, 2 and 3 on 127.0.0.1, clients spread
over them, a query-only phase and a 90/10 query/ingest phase.

The store is SciFact abstracts with the default configuration on ``[storage] engine =
"postgres"`` (bundled MiniLM, pgvector, L1, graph and temporal on); Postgres is started from the
``pgserver`` wheel in a folder (or ``--dsn``). Each replica is a real ``pensive serve``
subprocess with a local folder of its own. Clients are threads; client ``n`` talks to replica
``n mod R`` and, when its replica dies, to the next one alive (as a load balancer would). With
two or three replicas one is SIGKILLed half way through the mix. Afterwards:

* every acknowledged ingest is fetched whole, and found by a query for its title, from every
  replica still alive;
* stale L1 answers: each live replica is asked a sample of claims twice, and each answer it
  serves from L1 is compared with a fresh L2 answer at the same commit (a store opened here
  with L1 off); any difference in the hits is a stale answer;
* Postgres CPU per query: user + system time of every Postgres process over the query-only
  phase, divided by the queries answered.

Then one query's latency on Postgres beside the embedded engine on the same documents (both
in this process, L1 off, the same MiniLM), and what each store takes on disk.

    python -m benchmarks.replicas --store .bench/replicas
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import base_parser, environment, source_state, write_results
from benchmarks.reliability import AUTH, KEY, free_port, summary, wait_ready
from benchmarks.scifact_data import load

SCHEMA = "bench_replicas"


def _postgres(folder: Path, dsn: str | None) -> tuple[str, Any]:
    if dsn:
        return dsn, None
    import pgserver

    server = pgserver.get_server(folder, cleanup_mode="stop")
    return server.get_uri(), server


def _toml(path: Path, dsn: str) -> Path:
    path.write_text(
        f'[storage]\nengine = "postgres"\ndsn = "{dsn}"\nschema_name = "{SCHEMA}"\n',
        encoding="utf-8",
    )
    return path


def _fresh_start(dsn: str, root: Path) -> None:
    """Every run starts from the base documents alone (a kept store would hold the last
    run's ingests): the schema and the local folders go."""
    import shutil

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        for (name,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{SCHEMA}\\_\\_%",)
        ).fetchall():
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    for child in root.iterdir():
        if child.is_dir() and child.name != "pg":
            shutil.rmtree(child)


def _empty_l1(root: Path, config: Path) -> None:
    """Drop every cached answer (the L1 cache is shared and outlives the replicas)."""
    from pensive_core import Pensive

    with Pensive(root / "admin", config=str(config)) as p:
        if p.components.l1 is not None:
            p.components.l1.invalidate_all(p.components.commit_no)


def _serve(folder: Path, config: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PENSIVE_API_KEYS": f"{KEY}=default"}
    cmd = [sys.executable, "-m", "pensive_core.cli", "serve", "--store", str(folder)]
    cmd += ["--config", str(config), "--port", str(port)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _postgres_cpu_s() -> float:
    """User + system seconds of every process named postgres on this machine."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                stat = fh.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name.startswith("postgres"):
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


class _Spread:
    """Clients spread over replicas; a client whose replica died moves to the next alive."""

    def __init__(self, urls: list[str], claims: list[str], fresh: list[Any], share: float) -> None:
        self.urls, self.claims, self.share = urls, claims, share
        self.alive = [True] * len(urls)
        self.fresh = list(fresh)
        self.lock = threading.Lock()
        self.lat: dict[str, list[float]] = {"query": [], "ingest": []}
        self.tiers: dict[str, int] = {}
        self.errors: list[str] = []
        self.lost_in_kill: list[str] = []  # requests in flight on the killed replica
        self.acked: list[Any] = []

    def _target(self, n: int) -> int | None:
        for step in range(len(self.urls)):
            i = (n + step) % len(self.urls)
            if self.alive[i]:
                return i
        return None

    def client(self, n: int, until: float, seed: int) -> None:
        rng = random.Random(seed * 1000 + n)
        https = [httpx.Client(base_url=u, headers=AUTH, timeout=120) for u in self.urls]
        try:
            while time.perf_counter() < until:
                i = self._target(n)
                if i is None:
                    return
                doc = None
                if rng.random() < self.share:
                    with self.lock:
                        doc = self.fresh.pop() if self.fresh else None
                t = time.perf_counter()
                try:
                    if doc is not None:
                        body = {"documents": [{"id": doc.id, "text": doc.text,
                                               "metadata": dict(doc.metadata)}]}  # fmt: skip
                        r = https[i].post("/v1/documents", json=body)
                        kind = "ingest"
                    else:
                        text = rng.choice(self.claims)
                        r = https[i].post("/v1/query", json={"text": text, "k": 10})
                        kind = "query"
                    ms = (time.perf_counter() - t) * 1000
                    with self.lock:
                        if r.status_code != 200:
                            self.errors.append(f"{kind} {r.status_code} {r.text[:200]}")
                            continue
                        self.lat[kind].append(ms)
                        if kind == "ingest":
                            self.acked.append(doc)
                        else:
                            tier = r.json()["tier"]
                            self.tiers[tier] = self.tiers.get(tier, 0) + 1
                except httpx.HTTPError as exc:
                    with self.lock:
                        if not self.alive[i]:
                            self.lost_in_kill.append(f"{type(exc).__name__}")
                            if doc is not None:  # never acknowledged: may or may not be stored
                                self.fresh.append(doc)
                        else:
                            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            for h in https:
                h.close()

    def run(self, clients: int, seconds: float, seed: int, kill: Any = None) -> dict[str, Any]:
        until = time.perf_counter() + seconds
        t0 = time.perf_counter()
        threads = [
            threading.Thread(target=self.client, args=(n, until, seed)) for n in range(clients)
        ]
        for t in threads:
            t.start()
        killed = None
        if kill is not None:
            time.sleep(seconds / 2)
            killed = kill(self)
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        ops = sum(len(v) for v in self.lat.values())
        return {
            "seconds": round(wall, 2),
            "requests_per_s": round(ops / wall, 2),
            "computed_answers_per_s": round(
                sum(n for t, n in self.tiers.items() if t != "L1") / wall, 2
            ),
            "queries": summary(self.lat["query"]),
            "ingests": summary(self.lat["ingest"]),
            "tiers": dict(sorted(self.tiers.items())),
            "errors": len(self.errors),
            "error_examples": self.errors[:5],
            "killed_replica": killed,
            "in_flight_on_killed_replica": len(self.lost_in_kill),
        }


def _verify(urls: list[str], acked: list[Any]) -> dict[str, Any]:
    """Every acknowledged ingest, from every replica given: fetched whole, found by title."""
    fetched = found = 0
    missing: list[str] = []
    for url in urls:
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
            for doc in acked:
                r = http.get(f"/v1/documents/{doc.id}")
                ok_fetch = r.status_code == 200 and r.json()["text"] == doc.text
                q = {"text": doc.metadata["title"], "k": 10}
                hits = http.post("/v1/query", json=q).json()["hits"]
                ok_found = any(h["doc_id"] == doc.id for h in hits)
                fetched += ok_fetch
                found += ok_found
                if not (ok_fetch and ok_found):
                    missing.append(f"{doc.id}@{url}")
    return {
        "acknowledged": len(acked),
        "replicas_checked": len(urls),
        "fetched_whole": fetched,
        "found_by_title": found,
        "checks": len(acked) * len(urls),
        "not_found": missing[:10],
    }


def _stale(urls: list[str], claims: list[str], config: Path, folder: Path) -> dict[str, Any]:
    """L1 answers compared with a fresh L2 answer at the same commit (no writes meanwhile)."""
    from pensive_core import Pensive

    checked = stale = 0
    examples: list[str] = []
    with Pensive(folder, config=str(config), read_only=True) as fresh:
        fresh.components.l1 = None  # every answer here is computed (L2 or L3)
        for url in urls:
            with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
                for text in claims:
                    for _ in range(2):  # the second is served from L1 where it can be
                        got = http.post("/v1/query", json={"text": text, "k": 10}).json()
                    if got["tier"] != "L1":
                        continue
                    want = fresh.query(text, k=10)
                    checked += 1
                    if [h["chunk_id"] for h in got["hits"]] != [h.chunk_id for h in want.hits]:
                        stale += 1
                        examples.append(text[:80])
    return {"l1_answers_checked": checked, "stale": stale, "examples": examples[:5]}


def _one_query_latency(
    docs: list[Any], claims: list[str], config: Path, root: Path, n: int
) -> dict[str, Any]:
    """Postgres beside the embedded engine, same documents and model, L1 off, this process."""
    from pensive_core import Pensive

    out: dict[str, Any] = {}
    emb = Pensive(root / "embedded", config={"router": {"l1": False}})
    pg = Pensive(root / "reader", config=str(config), read_only=True)
    pg.components.l1 = None
    try:
        emb.ingest(docs)  # (skipped when already there)
        emb.query(claims[0])
        pg.query(claims[0])
        for name, store in (("embedded", emb), ("postgres", pg)):
            ms = []
            for text in claims[:n]:
                t = time.perf_counter()
                store.query(text, k=10)
                ms.append((time.perf_counter() - t) * 1000)
            out[name] = {**summary(ms), "disk_mb": round(store.stats()["disk_bytes"] / 2**20, 1)}
        same = sum(
            [h.doc_id for h in emb.query(t, k=10).hits]
            == [h.doc_id for h in pg.query(t, k=10).hits]
            for t in claims[:50]
        )
        out["same_top10_of_50"] = int(same)
    finally:
        emb.close()
        pg.close()
    return out


def main() -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=600, help="SciFact abstracts in the base store")
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=40.0, help="length of the mixed phase")
    ap.add_argument("--baseline-seconds", type=float, default=20.0, help="queries-only phase")
    ap.add_argument("--ingest-seconds", type=float, default=20.0, help="ingests-only phase")
    ap.add_argument("--ingest-share", type=float, default=0.10)
    ap.add_argument("--replicas", default="1,2,3")
    ap.add_argument("--stale-claims", type=int, default=40)
    ap.add_argument("--dsn", default=None, help="an existing Postgres with pgvector (default: "
                    "one started from the pgserver wheel)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    root = args.store or Path(".bench/replicas")
    root.mkdir(parents=True, exist_ok=True)
    docs, queries, _ = load(args.data)
    rng = random.Random(args.seed)
    rng.shuffle(docs)
    base, held = docs[: args.docs], docs[args.docs :]
    claims = list(queries.values())
    dsn, server = _postgres(root / "pg", args.dsn)
    config = _toml(root / "pensive.toml", dsn)
    _fresh_start(dsn, root)

    from pensive_core import Pensive

    try:
        t = time.perf_counter()
        with Pensive(root / "build", config=str(config)) as p:  # unchanged documents skipped
            report = p.ingest(base)
            known = set(p.components.archive.filter_rows()[0])
        build_s = time.perf_counter() - t
        fresh = [d for d in held if d.id not in known]
        print(f"base store on Postgres: {len(base)} documents ({report.added} added, "
              f"{build_s:.0f} s); {len(fresh)} held out")  # fmt: skip
        # before the replicas ingest anything: both stores hold the same documents
        single = _one_query_latency(base, claims, config, root, 200)
        print("one query:", single)
        runs = []
        counts = [int(x) for x in args.replicas.split(",")]
        share = len(fresh) // len(counts)  # each run ingests documents no run has seen
        for i, r in enumerate(counts):
            _empty_l1(root, config)  # and starts from an empty L1, as the first did
            pool = fresh[i * share : (i + 1) * share]
            runs.append(_run_replicas(r, args, root, config, claims, pool))
            print(runs[-1]["summary"])
    finally:
        if server is not None:
            server.cleanup()
    payload = {
        "benchmark": "replicas",
        "data": {
            "corpus": "scifact",
            "base_documents": len(base),
            "seed": args.seed,
            "queries": "scifact train claims, uniform with repeats",
        },  # fmt: skip
        "config": "defaults on [storage] engine = postgres (MiniLM, pgvector, L1, graph, "
        "temporal); Postgres 16 + pgvector 0.6 from the pgserver wheel, same 2 cores",
        "clients": args.clients,
        "ingest_share": args.ingest_share,
        "runs": [{k: v for k, v in run.items() if k != "acked_ids"} for run in runs],
        "one_query": single,
        "environment": environment(),
        "source": source_state(),
    }
    write_results("replicas", args.out, payload, _markdown(payload))


def _run_replicas(
    r: int, args: Any, root: Path, config: Path, claims: list[str], fresh: list[Any]
) -> dict[str, Any]:
    ports = [free_port() for _ in range(r)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    procs = [_serve(root / f"r{r}-{i}", config, p) for i, p in enumerate(ports)]
    try:
        for url, proc in zip(urls, procs):
            wait_ready(url, proc)
            with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
                http.post("/v1/query", json={"text": claims[0]})  # the model loaded
        cpu0 = _postgres_cpu_s()
        base = _Spread(urls, claims, [], 0.0).run(args.clients, args.baseline_seconds, args.seed)
        cpu = _postgres_cpu_s() - cpu0
        n_q = base["queries"].get("n", 0)
        base["postgres_cpu_ms_per_query"] = round(1000 * cpu / max(1, n_q), 2)

        def kill(load: _Spread) -> int:
            victim = r - 1
            load.alive[victim] = False
            procs[victim].send_signal(signal.SIGKILL)
            return victim

        # ingests only: how many documents/s the replicas index together (each ingest's
        # contexts and vectors are computed before the store's change lock is taken)
        ingest_load = _Spread(urls, claims, fresh, 1.0)
        ingests = ingest_load.run(args.clients, args.ingest_seconds, args.seed + 2)
        ingests["documents_per_s"] = round(len(ingest_load.acked) / ingests["seconds"], 2)
        mix_load = _Spread(urls, claims, ingest_load.fresh, args.ingest_share)
        mix = mix_load.run(args.clients, args.seconds, args.seed + 1, kill if r > 1 else None)
        live = [u for u, ok in zip(urls, mix_load.alive) if ok]
        verified = _verify(live, ingest_load.acked + mix_load.acked)
        sample = random.Random(args.seed + r).sample(claims, args.stale_claims)
        stale = _stale(live, sample, config, root / f"check-{r}")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    line = (f"{r} replica(s): queries only {base['requests_per_s']}/s "
               f"p50 {base['queries'].get('p50_ms')} ms; ingests only "
               f"{ingests['documents_per_s']} docs/s; mix {mix['requests_per_s']}/s, "
               f"errors {base['errors'] + ingests['errors'] + mix['errors']}, "
               f"acked {verified['acknowledged']}, "
               f"found {verified['found_by_title']}/{verified['checks']}, "
               f"stale {stale['stale']}/{stale['l1_answers_checked']}")  # fmt: skip
    return {
        "replicas": r,
        "queries_only": base,
        "ingests_only": ingests,
        "mix": mix,
        "acknowledged_ingests": verified,
        "stale_l1": stale,
        "acked_ids": [d.id for d in ingest_load.acked + mix_load.acked],
        "summary": line,
    }


def _markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Replicas of `pensive serve` sharing one Postgres",
        "",
        f"{r['clients']} client threads spread over R replicas on 127.0.0.1 (one machine, 2 "
        f"cores shared by the replicas, Postgres and the clients), {r['data']['base_documents']} "
        "SciFact abstracts, default configuration on the Postgres engine. Queries: SciFact "
        "claims, k = 10. Ingests: one held-out abstract each, waiting for its commit. With 2 or "
        "3 replicas one is SIGKILLed half way through the mix; its clients move on. Ingests only: "
        "every request ingests one abstract. Every run "
        "starts from an empty L1 cache and ingests documents no other run saw. Claims repeat "
        "(809 drawn uniformly), so a share of answers comes from the shared L1 cache, and that "
        "share grows with the request rate: 'answers computed/s' is the CPU-bound part.",
        "",
        "| replicas | phase | req/s | answers computed/s (L2, L3) | share from L1 | query p50 / "
        "p95 / p99 ms | ingest p50 / p95 / p99 ms | errors | Postgres CPU ms/query |",
        "|---:|---|---:|---:|---:|---|---|---:|---:|",
    ]

    def l1(phase: dict[str, Any]) -> str:
        tiers = phase["tiers"]
        return f"{tiers.get('L1', 0) / max(1, sum(tiers.values())):.0%}"

    def pct(s: dict[str, Any]) -> str:
        return f"{s['p50_ms']} / {s['p95_ms']} / {s['p99_ms']}" if s.get("n") else "-"

    for run in r["runs"]:
        b, m = run["queries_only"], run["mix"]
        lines.append(f"| {run['replicas']} | queries only | {b['requests_per_s']} | "
                     f"{b['computed_answers_per_s']} | {l1(b)} | "
                     f"{pct(b['queries'])} | - | {b['errors']} | "
                     f"{b['postgres_cpu_ms_per_query']} |")  # fmt: skip
        if "ingests_only" in run:
            g = run["ingests_only"]
            lines.append(f"| {run['replicas']} | ingests only ({g['documents_per_s']} "
                         f"documents/s) | {g['requests_per_s']} | - | - | - | "
                         f"{pct(g['ingests'])} | {g['errors']} | |")  # fmt: skip
        lines.append(f"| {run['replicas']} | 90/10 mix | {m['requests_per_s']} | "
                     f"{m['computed_answers_per_s']} | {l1(m)} | "
                     f"{pct(m['queries'])} | {pct(m['ingests'])} | {m['errors']} | |")  # fmt: skip
    lines += ["", "| replicas | acknowledged ingests | fetched whole / found by title (every "
              "live replica) | L1 answers checked | stale | killed replica's in-flight requests |",
              "|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for run in r["runs"]:
        v, s, m = run["acknowledged_ingests"], run["stale_l1"], run["mix"]
        lines.append(f"| {run['replicas']} | {v['acknowledged']} | {v['fetched_whole']} / "
                     f"{v['found_by_title']} of {v['checks']} | {s['l1_answers_checked']} | "
                     f"{s['stale']} | {m['in_flight_on_killed_replica']} |")  # fmt: skip
    one = r["one_query"]
    lines += [
        "",
        "One query in this process, L1 off, the same documents and MiniLM:",
        "",
        "| engine | p50 ms | p95 ms | store MB |",
        "|---|---:|---:|---:|",
        f"| embedded (SQLite + FAISS) | {one['embedded']['p50_ms']} | "
        f"{one['embedded']['p95_ms']} | {one['embedded']['disk_mb']} |",
        f"| Postgres (pgvector) | {one['postgres']['p50_ms']} | {one['postgres']['p95_ms']} | "
        f"{one['postgres']['disk_mb']} |",
        "",
        f"Same top 10 documents for {one['same_top10_of_50']} of 50 claims.",
        "",
        "Reproduce: `python -m benchmarks.replicas --store .bench/replicas`.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
