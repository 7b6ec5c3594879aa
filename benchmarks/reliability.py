"""Load on the HTTP service: N concurrent clients on 127.0.0.1, 90% queries / 10% ingests.

``pensive serve`` runs as a real subprocess (its writer in a process of its own) over a store of
SciFact abstracts with the default configuration (bundled MiniLM, FAISS, every feature on).
Clients are threads with their own HTTP connections. Queries are SciFact claims drawn uniformly
(repeats happen, as they do in use); each ingest sends one held-out SciFact abstract that is
not yet in the store and waits for its commit. Two phases: queries alone, then the mix.
Afterwards every acknowledged ingest is checked: fetched by id, and found by a query for its
title. Errors (any non-2xx or transport failure) must be 0.

    python -m benchmarks.reliability --store .bench/reliability --clients 8 --seconds 60
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.common import base_parser, environment, source_state, write_results
from benchmarks.scifact_data import load

KEY = "reliability-bench-" + "k" * 24
AUTH = {"Authorization": f"Bearer {KEY}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(store: Path, port: int, cache_refresh: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PENSIVE_API_KEYS": f"{KEY}=default",
        "PENSIVE_SERVER__CACHE_REFRESH": cache_refresh,
    }
    cmd = [
        sys.executable,
        "-m",
        "pensive_core.cli",
        "serve",
        "--store",
        str(store),
        "--port",
        str(port),
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 600) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"error: the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/health/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("error: the server did not become ready")


class _Load:
    """Clients hammering the server for a bounded time; every outcome recorded."""

    def __init__(
        self, url: str, claims: list[str], fresh: list[Any], ingest_share: float, seed: int
    ) -> None:
        self.url, self.claims, self.ingest_share = url, claims, ingest_share
        self.fresh = list(fresh)
        self.fresh_lock = threading.Lock()
        # query_in_engine: the engine's own time for each query (the rest of "query" is HTTP,
        # the wait for the namespace's reader and its catch-up to the last commit)
        self.lat: dict[str, list[float]] = {"query": [], "ingest": [], "query_in_engine": []}
        self.tiers: dict[str, int] = {}
        self.errors: list[str] = []
        self.acked: list[Any] = []
        self.splits: list[dict[str, float]] = []  # where each acknowledged ingest's time went
        self.lock = threading.Lock()
        self.seed = seed

    def client(self, n: int, until: float) -> None:
        """A closed-loop client: its next request once the last one is answered."""
        rng = random.Random(self.seed * 1000 + n)
        with httpx.Client(base_url=self.url, headers=AUTH, timeout=120) as http:
            while time.perf_counter() < until:
                doc, text = self.pick(rng)
                self.one(http, doc, text, time.perf_counter())

    def pick(self, rng: random.Random) -> tuple[Any, str]:
        """The next request: a held-out document to ingest (ingest_share of them, while any
        is left), else None and a claim to ask."""
        doc = None
        if rng.random() < self.ingest_share:
            with self.fresh_lock:
                doc = self.fresh.pop() if self.fresh else None
        return doc, rng.choice(self.claims)

    def one(self, http: httpx.Client, doc: Any, text: str, t: float) -> None:
        """One request, its time counted from ``t`` (when it was due) and recorded."""
        try:
            if doc is not None:
                body = {
                    "documents": [{"id": doc.id, "text": doc.text, "metadata": dict(doc.metadata)}]
                }
                r = http.post("/v1/documents", json=body)
                kind = "ingest"
            else:
                r = http.post("/v1/query", json={"text": text, "k": 10})
                kind = "query"
            ms = (time.perf_counter() - t) * 1000
            with self.lock:
                if r.status_code != 200:
                    self.errors.append(f"{kind} {r.status_code} {r.text[:200]}")
                    return
                self.lat[kind].append(ms)
                if kind == "ingest":
                    self.acked.append(doc)
                    self.splits.append(_split(r.json(), ms))
                else:
                    tier = r.json()["tier"]
                    self.tiers[tier] = self.tiers.get(tier, 0) + 1
                    self.lat["query_in_engine"].append(float(r.json()["latency_ms"]))
        except httpx.HTTPError as exc:
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def run_open(self, rate: float, seconds: float, workers: int = 64) -> dict[str, Any]:
        """Open loop: requests arrive at ``rate`` per second (Poisson, seeded) whatever the
        answers' pace, each timed from when it arrived (a wait for a free sender counts), so
        two server settings meet the same offered load; a closed loop gives the one whose
        ingests are quicker more queries at once."""
        rng = random.Random(self.seed)
        local = threading.local()
        made: list[httpx.Client] = []

        def sender(doc: Any, text: str, due: float) -> None:
            http = getattr(local, "http", None)
            if http is None:
                http = local.http = httpx.Client(base_url=self.url, headers=AUTH, timeout=120)
                with self.lock:
                    made.append(http)
            self.one(http, doc, text, due)

        t0 = due = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            while True:
                due += rng.expovariate(rate)
                if due - t0 > seconds:
                    break
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                pool.submit(sender, *self.pick(rng), due)
        wall = time.perf_counter() - t0
        for http in made:
            http.close()
        out = self._summary(wall)
        out["offered_rps"] = rate
        return out

    def run(self, clients: int, seconds: float) -> dict[str, Any]:
        until = time.perf_counter() + seconds
        t0 = time.perf_counter()
        threads = [threading.Thread(target=self.client, args=(n, until)) for n in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        out = self._summary(wall)
        out["clients"] = clients
        return out

    def _summary(self, wall: float) -> dict[str, Any]:
        ops = len(self.lat["query"]) + len(self.lat["ingest"])
        return {
            "seconds": round(wall, 2),
            "requests": ops + len(self.errors),
            "throughput_rps": round(ops / wall, 2),
            "queries": summary(self.lat["query"]),
            "ingests": summary(self.lat["ingest"]),
            "queries_in_engine": summary(self.lat["query_in_engine"]),
            "tiers": dict(sorted(self.tiers.items())),
            "ingest_split_ms": _split_summary(self.splits),
            "errors": len(self.errors),
            "error_examples": self.errors[:5],
        }


def _split(body: dict[str, Any], ms: float) -> dict[str, float]:
    """One acknowledged ingest's time, split: queued in the writer (job created to started),
    its group's change (started to finished), of which its own report's ``seconds`` (the
    change's start, its own batches, the commit) and stages; the rest of ``ms`` is HTTP and
    the hand-over between processes."""
    job, report = body["job"], body["result"] or {}
    at = {k: datetime.fromisoformat(job[k]).timestamp() for k in ("created", "started", "finished")}
    out = {
        "total": ms,
        "queued": (at["started"] - at["created"]) * 1000,
        "change": (at["finished"] - at["started"]) * 1000,
        "own": float(report.get("seconds", 0.0)) * 1000,
    }
    for stage, s in (report.get("stages") or {}).items():
        out[f"stage_{stage}"] = float(s) * 1000
    return out


def _split_summary(splits: list[dict[str, float]]) -> dict[str, float]:
    """The median of each part over the acknowledged ingests."""
    if not splits:
        return {}
    keys = sorted({k for s in splits for k in s})
    return {k: round(float(np.median([s.get(k, 0.0) for s in splits])), 1) for k in keys}


def summary(ms: list[float]) -> dict[str, Any]:
    if not ms:
        return {"n": 0}
    a = np.asarray(ms)
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {
        "n": len(ms),
        "p50_ms": round(float(p50), 1),
        "p95_ms": round(float(p95), 1),
        "p99_ms": round(float(p99), 1),
        "max_ms": round(float(a.max()), 1),
    }


def _verify(url: str, acked: list[Any]) -> dict[str, Any]:
    """Every acknowledged ingest: stored whole, and found by a query for its title."""
    fetched = found = 0
    missing: list[str] = []
    with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
        for doc in acked:
            r = http.get(f"/v1/documents/{doc.id}")
            ok_fetch = r.status_code == 200 and r.json()["text"] == doc.text
            fetched += ok_fetch
            hits = http.post("/v1/query", json={"text": doc.metadata["title"], "k": 10}).json()[
                "hits"
            ]
            ok_found = any(h["doc_id"] == doc.id for h in hits)
            found += ok_found
            if not (ok_fetch and ok_found):
                missing.append(doc.id)
    return {
        "acknowledged": len(acked),
        "fetched_whole": fetched,
        "found_by_title": found,
        "not_found": missing[:10],
    }


def main() -> None:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000, help="SciFact abstracts in the base store")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the mixed phase")
    ap.add_argument("--baseline-seconds", type=float, default=20.0, help="queries-only phase")
    ap.add_argument("--ingest-share", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--cache-refresh",
        choices=("commit", "idle", "off"),
        default=None,
        help="[server] cache_refresh: when the writer answers again what a commit dropped "
        "(default: the server's default)",
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests/s arriving in the mixed phase (open loop); 0: --clients closed-loop clients",
    )
    ap.add_argument("--name", default="reliability", help="results file name (NAME.json/.md)")
    args = ap.parse_args()
    store = args.store or Path(".bench/reliability")
    docs, queries, _ = load(args.data)
    rng = random.Random(args.seed)
    rng.shuffle(docs)
    base, held = docs[: args.docs], docs[args.docs :]
    claims = list(queries.values())

    from pensive_core import Pensive
    from pensive_core.config import load_config

    t = time.perf_counter()
    # the base store only ever holds the base documents; each run serves a fresh copy of it,
    # so that a run's ingests do not make the next run's store larger (and its figures slower)
    with Pensive(store) as p:  # the default configuration; unchanged documents are skipped
        known = {d for (d,) in p.components.archive.db.execute("SELECT id FROM documents")}
        report = p.ingest(base)
        extra = known - {d.id for d in base}
        for doc_id in sorted(extra):  # left by a run before this copy was made
            p.delete(doc_id)
    build_s = time.perf_counter() - t
    served = store.with_name(store.name + "-run")
    shutil.rmtree(served, ignore_errors=True)
    shutil.copytree(store, served)
    store = served
    fresh = list(held)  # never in the base store
    print(
        f"base store: {len(base)} documents ({report.added} added, {build_s:.0f} s); "
        f"{len(fresh)} held out for ingests"
    )

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # the setting a new store gets unless one is given: a store keeps the config it was built
    # with, and the base store may be older than the current default
    refresh = args.cache_refresh or load_config({}).server.cache_refresh
    proc = _serve(store, port, refresh)
    try:
        wait_ready(url, proc)
        with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:  # warm the model
            http.post("/v1/query", json={"text": claims[0]})
        baseline = _Load(url, claims, [], 0.0, args.seed).run(args.clients, args.baseline_seconds)
        print("queries only:", baseline)
        load_ = _Load(url, claims, fresh, args.ingest_share, args.seed + 1)
        commit0 = httpx.get(f"{url}/v1/stats", headers=AUTH, timeout=60).json()["commit"]
        if args.rate > 0:
            mixed = load_.run_open(args.rate, args.seconds)
        else:
            mixed = load_.run(args.clients, args.seconds)
        mixed["commits"] = (
            httpx.get(f"{url}/v1/stats", headers=AUTH, timeout=60).json()["commit"] - commit0
        )
        print("mixed:", mixed)
        verified = _verify(url, load_.acked)
        print("verified:", verified)
        ready = httpx.get(f"{url}/health/ready", timeout=10).json()
        stats = httpx.get(f"{url}/v1/stats", headers=AUTH, timeout=60).json()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    payload = {
        "benchmark": "reliability",
        "data": {
            "corpus": "scifact",
            "base_documents": len(base),
            "stale_documents_removed": len(extra),
            "queries": "scifact train claims, uniform with repeats",
            "seed": args.seed,
        },
        "config": "defaults (pensive serve, bundled MiniLM, FAISS, L1 on, graph and temporal on)",
        "cache_refresh": refresh,
        "cache_refresh_given": args.cache_refresh is not None,
        "clients": args.clients,
        "offered_rps": args.rate or None,
        "name": args.name,
        "ingest_share": args.ingest_share,
        "baseline_queries_only": baseline,
        "mixed": mixed,
        "acknowledged_ingests": verified,
        "writer_restarts": ready.get("writer_restarts"),
        "store_documents_after": stats["documents"],
        "environment": environment(),
        "source": source_state(),
    }
    write_results(args.name, args.out, payload, _markdown(payload))


def _markdown(r: dict[str, Any]) -> str:
    def row(name: str, phase: dict[str, Any], kind: str) -> str:
        s = phase[kind]
        if not s.get("n"):
            return f"| {name} | {kind} | 0 | | | | |"
        return (
            f"| {name} | {kind} | {s['n']} | {s['p50_ms']} | {s['p95_ms']} | {s['p99_ms']} | "
            f"{phase['throughput_rps']} |"
        )

    b, m, v = r["baseline_queries_only"], r["mixed"], r["acknowledged_ingests"]
    return "\n".join(
        [
            "# Reliability: the HTTP service under load",
            "",
            (
                f"Requests arriving at {r['offered_rps']}/s in the mix (open loop, Poisson; each "
                "timed from its arrival), "
                f"{r['clients']} closed-loop clients in the queries-only phase,"
                if r.get("offered_rps")
                else f"{r['clients']} concurrent clients"
            )
            + " on 127.0.0.1 against `pensive serve` (a subprocess; its "
            f"writer in a process of its own) over {r['data']['base_documents']} SciFact abstracts, "
            + (
                "default configuration but "
                if r.get("cache_refresh_given", True)
                else "default configuration ("
            )
            + f'`[server] cache_refresh = "{r.get("cache_refresh", "commit")}"`'
            + ("" if r.get("cache_refresh_given", True) else ")")
            + ". "
            f"Commit {r['source'].get('commit', '?')}. Queries: SciFact claims (k = 10). Ingests: one held-out abstract "
            "each, waiting for its commit.",
            "",
            "| phase | request | n | p50 ms | p95 ms | p99 ms | all requests/s |",
            "|---|---|---:|---:|---:|---:|---:|",
            row(f"queries only ({b['seconds']} s)", b, "queries"),
            row(f"90/10 mix ({m['seconds']} s)", m, "queries"),
            row(f"90/10 mix ({m['seconds']} s)", m, "ingests"),
            "",
            f"- Errors: **{b['errors'] + m['errors']}** (queries only {b['errors']}, mix {m['errors']}).",
            f"- Tiers that answered in the mix: {m['tiers']}.",
            (
                "- A query's time inside the engine in the mix (its catch-up to the last commit "
                "included; the rest is HTTP and the wait for the namespace's reader): p50 "
                f"{m['queries_in_engine']['p50_ms']}, p95 {m['queries_in_engine']['p95_ms']}, "
                f"p99 {m['queries_in_engine']['p99_ms']}, max {m['queries_in_engine']['max_ms']} ms."
                if m.get("queries_in_engine", {}).get("n")
                else "- (A query's time inside the engine was not recorded.)"
            ),
            f"- Commits in the mix: {m.get('commits')} ({m.get('commits', 0) / m['seconds']:.1f}/s; "
            "each moves every reader to the new commit at its next query).",
            f"- Where an ingest's time went (median ms over the acknowledged ingests; `queued`: "
            f"waiting in the writer for the change ahead, `change`: its own change (the groups "
            f"before it in that change, its own batches, the commit), `own`: its report's "
            f"seconds, `stage_*`: its report's stages): {m.get('ingest_split_ms')}.",
            f"- Acknowledged ingests: {v['acknowledged']}; fetched whole afterwards: {v['fetched_whole']}; "
            f"found by a query for their title (top 10): {v['found_by_title']}.",
            f"- Writer restarts: {r['writer_restarts']}.",
            "",
            "Reproduce: `python -m benchmarks.reliability --store .bench/reliability` "
            f"(`--clients {r['clients']} --seconds {m['seconds']:.0f} "
            f"--cache-refresh {r.get('cache_refresh', 'commit')}"
            + (
                f" --rate {r['offered_rps']:g} --name {r.get('name', 'reliability')}"
                if r.get("offered_rps")
                else ""
            )
            + "`).",
            "",
        ]
    )


if __name__ == "__main__":
    main()
