"""Crash safety: SIGKILL a real ingesting process at random points, then check the store.

A child process (``python -m benchmarks.crash --child STORE SEED``) opens a Pensive store (hash
embedder, graph, temporal and the L1 cache on) and runs a workload derived from SEED: ingest
batches of generated documents (names and dates, so the graph and temporal tables get rows),
replacements of earlier documents, deletes and queries (answers land in the L1 cache). It prints
``ACK <op> <kind> <ids>`` after each operation returns and ``P <phase> <time>`` when it enters
or leaves a phase (open, embed, archive write, graph, temporal, BM25 commit, FAISS persist, ...),
so the parent knows what was acknowledged and where the kill landed.

:func:`run` kills the child ``kills`` times after a random delay spread over a whole run (timed
first), then :func:`check` reopens the store and verifies:

* no document is left half-indexed (indexed=0 rows) and the recovery marker is clear;
* every passage of every document is in BM25, in the vector backend (fetched by id), in the
  graph's and the temporal index's passage tables; nothing is in BM25, the vectors, the graph
  or the temporal tables that the archive does not list;
* every acknowledged operation's effect is there (acknowledged ingests with their text, or the
  text of the one operation in flight at the kill; acknowledged deletes absent, ...);
* no L1 answer names a passage that no longer exists or holds text it no longer has, and the
  cache's commit is the store's.

After each check the workload is run again to completion on the same store and every document
must be present and found by a query for its unique token.

Deterministic kills at named points use the ``PENSIVE_CRASH_AT`` environment variable, read only
by the child here: ``hook:point:when:nth`` for a point the engine announces
(:data:`pensive_core.hooks.POINTS`: ``open``, ``recover``, ``ingest-batch``, ``commit``,
``l1-invalidate``, ...) or ``Class.method:when:nth`` for a public method of a storage part
(``Archive.write``, ``BM25Index.commit``, ``FaissBackend.persist``, ...); when = before, after,
mid (at the first file rename inside the call) or torn (the first file being written is cut in
half). The engine knows nothing of kills: it only announces its points to listeners.

Then two rounds on the disk and the files (:func:`disk_full_rounds`, :func:`corruption_rounds`):
the workload on a small tmpfs filled at a random operation, and each store file damaged in
turn on a copy of one store.

``python -m benchmarks.crash --kills 200`` writes ``benchmarks/results/crash.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

CONFIG: dict[str, Any] = {
    "embedder": {"name": "hash", "dim": 64},
    "router": {"l1": True},
    "graph": {"enabled": True},
    "temporal": {"enabled": True},
}
ENV_KILL = "PENSIVE_CRASH_AT"

_FIRST = ["Ada", "Boris", "Chen", "Dalia", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jana"]
_LAST = ["Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Sato", "Tanaka", "Ulman", "Varga"]
_PLACES = ["Lisbon", "Oslo", "Nairobi", "Quito", "Hanoi", "Tallinn", "Perth", "Dakar", "Lima"]
_MONTHS = ["January", "March", "April", "June", "August", "October", "November", "December"]
_WORDS = (
    "budget review harbour survey cable audit grant permit turbine orchard ledger bridge "
    "reactor census archive vessel pipeline quarry tunnel satellite clinic furnace"
).split()

# -- the workload ---------------------------------------------------------------------------


def token(seed: int, doc: str, version: int) -> str:
    """The unique word of one version of one document (found by BM25 only there)."""
    return f"zq{seed}x{doc.replace('-', '')}v{version}"


def _text(rng: random.Random, seed: int, doc: str, version: int) -> str:
    paras = []
    for p in range(rng.randint(1, 4)):
        who = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        other = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        where = rng.choice(_PLACES)
        when = f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(1990, 2024)}"
        filler = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(25, 70)))
        tag = f" Reference {token(seed, doc, version)}." if p == 0 else ""
        paras.append(
            f"{who} visited {where} on {when} with {other}.{tag} The {rng.choice(_WORDS)} "
            f"status is {rng.choice(_WORDS)}. {filler.capitalize()}."
        )
    return "\n\n".join(paras)


def workload(seed: int, scale: int = 1) -> list[tuple[str, Any]]:
    """The operations for ``seed``: ``("ingest", [(id, text, version), ...])``,
    ``("delete", id)`` and ``("query", text)``, in order."""
    rng = random.Random(seed)
    ops: list[tuple[str, Any]] = []
    alive: dict[str, int] = {}  # doc -> version
    n = 0
    for b in range(3 + 2 * scale):
        batch = []
        for _ in range(rng.randint(6, 6 + 6 * scale)):
            doc = f"d{n:03d}"
            n += 1
            batch.append((doc, _text(rng, seed, doc, 1), 1))
            alive[doc] = 1
        ops.append(("ingest", batch))
        if b == 0:
            continue
        for doc in rng.sample(sorted(alive), min(3, len(alive))):
            alive[doc] += 1
            ops.append(("ingest", [(doc, _text(rng, seed, doc, alive[doc]), alive[doc])]))
        doc = rng.choice(sorted(alive))
        del alive[doc]
        ops.append(("delete", doc))
        for doc in rng.sample(sorted(alive), min(2, len(alive))):
            ops.append(("query", f"{token(seed, doc, alive[doc])} report"))
    return ops


def final_state(seed: int, scale: int = 1) -> dict[str, str | None]:
    """Every document id the workload touches -> its text at the end (None: deleted)."""
    state: dict[str, str | None] = {}
    for kind, arg in workload(seed, scale):
        _apply(state, kind, arg)
    return state


def _apply(state: dict[str, Any], kind: str, arg: Any) -> None:
    if kind == "ingest":
        for doc, text, _ in arg:
            state[doc] = text
    elif kind == "delete":
        state[arg] = None


def versions(seed: int, scale: int = 1) -> dict[str, int]:
    """Live document -> its final version (to query for its unique token)."""
    out: dict[str, int] = {}
    for kind, arg in workload(seed, scale):
        if kind == "ingest":
            out.update({doc: v for doc, _, v in arg})
        elif kind == "delete":
            out.pop(arg, None)
    return out


def run_workload(store: str | Path, seed: int, scale: int = 1, say: Any = None) -> None:
    """Run the whole workload on ``store`` (in this process); ``say`` gets the ACK lines."""
    from pensive_core import Document, Pensive
    from pensive_core.errors import NotFoundError

    p = Pensive(store, config=CONFIG)
    if say:
        say("P ready")
    try:
        for i, (kind, arg) in enumerate(workload(seed, scale)):
            if kind == "ingest":
                p.ingest([Document(id=d, text=t) for d, t, _ in arg])
                ids = ",".join(d for d, _, _ in arg)
            elif kind == "delete":
                with contextlib.suppress(NotFoundError):  # a rerun: deleted before
                    p.delete(arg)
                ids = arg
            else:
                p.query(arg, k=5)
                ids = "-"
            if say:
                say(f"ACK {i} {kind} {ids}")
                say("P between")
    finally:
        p.close()


# -- the child ------------------------------------------------------------------------------


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())  # unbuffered: a kill right after loses nothing said


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _probe(cls: Any, name: str, phase: str) -> None:
    """Report entering and leaving ``cls.name`` (a public method of a storage part)."""
    orig = getattr(cls, name)

    def wrapper(*a: Any, **kw: Any) -> Any:
        _say(f"P {phase} {time.time():.4f}")
        try:
            return orig(*a, **kw)
        finally:
            _say(f"P ~{phase} {time.time():.4f}")

    setattr(cls, name, wrapper)


# the engine's announced points, and the phase each is reported as
HOOK_PHASES = {
    "open": "open",
    "recover": "recover",
    "ingest-batch": "ingest",
    "commit": "commit",
    "l1-invalidate": "l1-invalidate",
    "query": "query",
    "delete": "delete",
    "close": "close",
}


def _probe_hooks() -> None:
    """Report entering and leaving every point the engine announces."""
    from pensive_core import hooks

    def listen(point: str, event: str) -> None:
        phase = HOOK_PHASES[point]
        _say(f"P {phase if event == 'enter' else '~' + phase} {time.time():.4f}")

    hooks.add_listener(listen)


def _targets() -> dict[str, tuple[Any, str, str]]:
    from pensive_core.archive import Archive
    from pensive_core.backends.faiss import FaissBackend
    from pensive_core.embedders.hash import HashEmbedder
    from pensive_core.graph.store import GraphStore
    from pensive_core.sparse.bm25 import BM25Index
    from pensive_core.temporal.store import TemporalStore

    return {
        "HashEmbedder.embed": (HashEmbedder, "embed", "embed"),
        "Archive.write": (Archive, "write", "archive-write"),
        "Archive.delete": (Archive, "delete", "archive-delete"),
        "GraphStore.add_document": (GraphStore, "add_document", "graph"),
        "GraphStore.remove_document": (GraphStore, "remove_document", "graph"),
        "TemporalStore.add_document": (TemporalStore, "add_document", "temporal"),
        "TemporalStore.remove_document": (TemporalStore, "remove_document", "temporal"),
        "BM25Index.commit": (BM25Index, "commit", "bm25-commit"),
        "FaissBackend.persist": (FaissBackend, "persist", "faiss-persist"),
        "Archive.mark_indexed": (Archive, "mark_indexed", "mark-indexed"),
    }


def _arm(when: str) -> None:
    """At the chosen call: "mid" dies at the first file rename inside it, "torn" cuts the
    first file written inside it in half and dies."""
    import numpy as np

    def armed(fn_name: str, mod: Any, make: Any) -> None:
        setattr(mod, fn_name, make(getattr(mod, fn_name)))

    if when == "mid":  # the first file rename inside the call: a temp file is left
        armed("replace", os, lambda real: lambda *x, **y: _die())
    if when == "torn":  # the first file written inside the call is cut in half
        import faiss

        def half_save(real: Any) -> Any:
            def save(fh: Any, arr: Any, **k: Any) -> None:
                buf = io.BytesIO()
                real(buf, arr, **k)
                data = buf.getvalue()
                if hasattr(fh, "write"):
                    fh.write(data[: len(data) // 2])
                    fh.flush()
                else:
                    Path(fh).write_bytes(data[: len(data) // 2])
                _die()

            return save

        def half_fsync(real: Any) -> Any:
            def fsync(fd: int) -> None:
                os.ftruncate(fd, os.fstat(fd).st_size // 2)
                _die()

            return fsync

        def half_index(real: Any) -> Any:
            def write_index(index: Any, path: Any, *rest: Any) -> None:
                if not isinstance(path, (str, os.PathLike)):  # serialize_index's own writer
                    return real(index, path, *rest)
                data = faiss.serialize_index(index).tobytes()
                Path(path).write_bytes(data[: len(data) // 2])
                _die()

            return write_index

        armed("save", np, half_save)
        armed("fsync", os, half_fsync)
        armed("write_index", faiss, half_index)


def _install_kill(spec: str, targets: dict[str, tuple[Any, str, str]]) -> None:
    """SIGKILL this process at the nth entry of a point: ``hook:point:when:nth`` (a point the
    engine announces) or ``Class.method:when:nth`` (a storage part's method)."""
    calls = [0]
    if spec.startswith("hook:"):
        from pensive_core import hooks

        _, point, when, nth = spec.split(":")
        if point not in hooks.POINTS:
            raise SystemExit(f"unknown hook point {point!r}; known: {', '.join(hooks.POINTS)}")

        def listen(at: str, event: str) -> None:
            if at != point:
                return
            if event == "enter":
                calls[0] += 1
                if calls[0] == int(nth):
                    if when == "before":
                        _die()
                    _arm(when)
            elif event == "exit" and calls[0] == int(nth):
                _die()  # "after" (and "mid"/"torn" steps that wrote nothing)

        hooks.add_listener(listen)
        return
    target, when, nth = spec.split(":")
    cls, name, _ = targets[target]
    orig = getattr(cls, name)

    def wrapper(*a: Any, **kw: Any) -> Any:
        calls[0] += 1
        if calls[0] != int(nth):
            return orig(*a, **kw)
        if when == "before":
            _die()
        _arm(when)
        out = orig(*a, **kw)
        _die()  # "after" (and "mid"/"torn" calls that wrote nothing)
        return out

    setattr(cls, name, wrapper)


def child(store: str, seed: int, scale: int) -> None:
    """The child process: probes, an optional kill point, then the workload."""
    _say(f"P import {time.time():.4f}")
    targets = _targets()
    _probe_hooks()  # before the kill's listener: a point is reported entered before it dies
    spec = os.environ.get(ENV_KILL)
    if spec:
        _install_kill(spec, targets)
    for cls, name, phase in targets.values():
        _probe(cls, name, phase)
    run_workload(
        store, seed, scale, say=lambda s: _say(s if s[0] != "P" else f"{s} {time.time():.4f}")
    )
    _say("DONE")


# -- the parent -----------------------------------------------------------------------------


def start_child(
    store: Path, seed: int, scale: int = 1, kill_at: str | None = None
) -> subprocess.Popen[bytes]:
    """Start the child workload on ``store`` (``kill_at``: a ``PENSIVE_CRASH_AT`` spec)."""
    env = dict(os.environ)
    env.pop(ENV_KILL, None)
    if kill_at:
        env[ENV_KILL] = kill_at
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny indexes: threads only add overhead
    cmd = [sys.executable, "-m", "benchmarks.crash", "--child", str(store), str(seed)]
    cmd += ["--scale", str(scale)]
    return subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_ready(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Read the child's output until it says ``P ready`` (kept in ``proc.head``)."""
    head = b""
    deadline = time.time() + timeout
    assert proc.stdout is not None
    while time.time() < deadline:
        line = proc.stdout.readline()
        head += line
        if not line or line.startswith(b"P ready"):
            break
    proc.head = head  # type: ignore[attr-defined]


def parse(out: bytes) -> dict[str, Any]:
    """The child's report: acknowledged op indexes, the phase it was last in, whether done."""
    acked: list[int] = []
    stack: list[str] = []
    last = "import"
    done = False
    for line in out.decode(errors="replace").splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "ACK":
            acked.append(int(parts[1]))
        elif parts[0] == "DONE":
            done = True
        elif parts[0] == "P" and len(parts) >= 2:
            ph = parts[1]
            if ph.startswith("~"):
                if stack:
                    stack.pop()
                last = stack[-1] if stack else "between"
            elif ph in ("ready", "between"):
                stack, last = [], ph
            else:
                stack.append(ph)
                last = ph
    return {"acked": acked, "phase": last, "done": done}


def expect(
    allowed: dict[str, set[str | None]], ops: list[tuple[str, Any]], report: dict[str, Any]
) -> None:
    """Fold one (possibly killed) child run into the allowed states of each document."""
    for i in report["acked"]:
        kind, arg = ops[i]
        if kind == "ingest":
            for doc, text, _ in arg:
                allowed[doc] = {text}
        elif kind == "delete":
            allowed[arg] = {None}
    if not report["done"]:
        nxt = (report["acked"][-1] + 1) if report["acked"] else 0
        if nxt < len(ops):  # the operation in flight may or may not have taken effect
            kind, arg = ops[nxt]
            if kind == "ingest":
                for doc, text, _ in arg:
                    allowed.setdefault(doc, {None}).add(text)
            elif kind == "delete":
                allowed.setdefault(arg, {None}).add(None)


def check(
    store: str | Path,
    allowed: dict[str, set[str | None]] | None = None,
    tokens: dict[str, str] | None = None,
    timing: dict[str, float] | None = None,
) -> list[str]:
    """Open the store (recovering it) and list every broken invariant (empty: consistent).

    Args:
        store: The store folder.
        allowed: Document id -> the texts it may hold (None: absent); unlisted ids are free.
        tokens: Document id -> a word only it holds: a query for it must find the document.
        timing: If given, ``timing["open_s"]`` is set to how long opening (recovery) took.
    """
    import numpy as np  # noqa: F401 - loaded before timing the open

    from pensive_core import Pensive

    store = Path(store)
    bad: list[str] = []
    t0 = time.perf_counter()
    try:
        p = Pensive(store, config=CONFIG)
    except Exception as exc:  # a store that does not open is the worst violation
        return [f"open failed: {type(exc).__name__}: {exc}"]
    if timing is not None:
        timing["open_s"] = time.perf_counter() - t0
    parts = p.components
    # the checker reads the files as they are on disk (the store's own connection may hold
    # state of its own): the archive's and the cache's SQLite files, opened read-only
    db = sqlite3.connect(f"file:{store / 'pensive.sqlite'}?mode=ro", uri=True)
    try:
        docs = {r[0]: r[1] for r in db.execute("SELECT id, indexed FROM documents")}
        pending = [d for d, flag in docs.items() if flag == 0]
        if pending:
            bad.append(f"{len(pending)} document(s) left unindexed after reopen: {pending[:3]}")
        if parts.archive.get_meta("dirty"):
            bad.append("the recovery marker is still set after reopen")
        chunks: dict[str, tuple[str, str]] = {}
        for cid, did, text in db.execute(
            "SELECT c.id, c.doc_id, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.indexed IN (0, 1)"
        ):
            chunks[cid] = (did, text)
        want = set(chunks)
        bm25 = parts.sparse.ids()
        for cid in sorted(want - bm25)[:5]:
            bad.append(f"passage {cid} of {chunks[cid][0]} missing from BM25")
        for cid in sorted(bm25 - want)[:5]:
            bad.append(f"BM25 holds {cid}, which the archive does not list")
        ns = p.config.backend.namespace
        backend = parts.backend
        if backend is None:
            if want:
                bad.append("no vector backend though the archive has passages")
        else:
            got = backend.fetch(sorted(want), namespace=ns)
            for cid in sorted(want - set(got))[:5]:
                bad.append(f"passage {cid} of {chunks[cid][0]} missing from the vectors")
            vec = backend.ids(namespace=ns) or set()
            for cid in sorted(vec - want)[:5]:
                bad.append(f"the vectors hold {cid}, which the archive does not list")
            if backend.count(namespace=ns) != len(want):
                bad.append(f"the vectors count {backend.count(namespace=ns)}, want {len(want)}")
        for table in ("graph_chunks", "temporal_chunks"):
            rows = dict(db.execute(f"SELECT chunk_id, doc_id FROM {table}"))
            for cid in sorted(want - set(rows))[:5]:
                bad.append(f"passage {cid} of {chunks[cid][0]} missing from {table}")
            for cid in sorted(set(rows) - want)[:5]:
                bad.append(f"{table} holds {cid} ({rows[cid]}), which the archive does not list")
            for cid in sorted(c for c in set(rows) & want if rows[c] != chunks[c][0])[:5]:
                bad.append(f"{table} files {cid} under {rows[cid]}, the archive {chunks[cid][0]}")
        for doc, texts in sorted((allowed or {}).items()):
            d = parts.archive.document(doc)
            have = None if d is None else d.text
            if have not in texts:
                state = "absent" if have is None else "an unexpected text"
                bad.append(f"document {doc} is {state} (acknowledged: {len(texts)} option(s))")
        if parts.l1 is not None:
            commit = parts.archive.commit_number()
            if parts.l1.commit != commit:
                bad.append(f"the L1 cache is at commit {parts.l1.commit}, the store at {commit}")
            l1 = sqlite3.connect(f"file:{store / 'l1.sqlite'}?mode=ro", uri=True)
            try:
                l1_rows = l1.execute("SELECT query, hits FROM l1").fetchall()
            finally:
                l1.close()
            for query, hits in l1_rows:
                for h in json.loads(hits):
                    c = chunks.get(h["chunk_id"])
                    if c is None or c[0] != h["doc_id"] or h["text"] not in c[1]:
                        bad.append(f"L1 answer to {query!r} names vanished {h['chunk_id']}")
                        break
        for doc, word in sorted((tokens or {}).items()):
            res = p.query(word, k=5)
            if doc not in [h.doc_id for h in res.hits]:
                bad.append(f"a query for {word} does not find {doc}")
    finally:
        db.close()
        p.close()
    return bad


def _calibrate(root: Path, seed: int, scale: int) -> dict[str, Any]:
    """Time one whole child run and the phases in it."""
    store = root / "calibrate"
    t0 = time.time()
    proc = start_child(store, seed, scale)
    out, err = proc.communicate(timeout=600)
    total = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"the child failed: {err.decode()[-2000:]}")
    spans: Counter[str] = Counter()
    first = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if parts and parts[0] == "P" and len(parts) >= 3 and not parts[1].startswith("~"):
            first.setdefault(parts[1], float(parts[2]) - t0)
            spans[parts[1]] += 1
    shutil.rmtree(store, ignore_errors=True)
    ready = first.get("ready", 0.0)
    return {
        "total_s": total,
        "import_s": first.get("open", 0.0),
        "ready_s": ready,
        "work_s": total - ready,
        "first": first,
    }


def run(
    kills: int,
    seed: int = 0,
    *,
    scale: int = 1,
    workdir: str | Path | None = None,
    double_kill: float = 0.2,
    early: float = 0.2,
    lanes: int = 1,
    progress: Any = None,
) -> dict[str, Any]:
    """Kill the child ``kills`` times at random points; check after each kill and after a
    rerun to completion. Returns counts, violations (with examples), phases and recovery times.

    Args:
        kills: How many child runs to kill.
        seed: The workload's and the delays' seed.
        scale: Workload size (1: ~5 batches of 6-12 documents).
        workdir: Where the store lives (default: a temporary folder, removed after).
        double_kill: The share of kills followed by a second kill soon after the child
            restarts (landing in its open and recovery).
        early: The share of kills aimed at the child's import and open.
        lanes: Stores worked on side by side (each its own child and store).
        progress: Optional callable ``(i, report) -> None``.
    """
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="pensive-crash-")
        workdir = tmp
    root = Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    ops = workload(seed, scale)
    final = final_state(seed, scale)
    toks = {d: token(seed, d, v) for d, v in versions(seed, scale).items()}
    cal = _calibrate(root, seed, scale)
    lo = 0.05
    phases: Counter[str] = Counter()
    recovery: list[float] = []
    violations: list[dict[str, Any]] = []
    counts = {"consistent": 0, "completed": 0, "done": 0}
    lock = threading.Lock()
    t_all = time.time()

    def lane(j: int, n: int) -> None:
        # each lane kills its own child on its own store, so lanes run side by side
        lrng = random.Random(seed * 1000 + j)
        store = root / f"store{j}"
        shutil.rmtree(store, ignore_errors=True)
        state: dict[str, set[str | None]] = {}  # a fresh store: nothing yet
        for _ in range(n):
            # a share of the kills in the import and open (how long they take here, alone);
            # the rest spread over the workload, timed from when the child says it is ready,
            # so the kills land where intended however busy the machine is
            if lrng.random() < early:
                runs = [lrng.uniform(lo, cal["ready_s"])]
            else:
                runs = [-lrng.uniform(0.0, cal["work_s"] * 1.05)]
            if lrng.random() < double_kill:  # the restart is killed too, in open/recovery
                runs.append(lrng.uniform(cal["import_s"], cal["ready_s"] + 0.3))
            allowed = {d: set(v) for d, v in state.items()}
            seen = []
            for delay in runs:
                proc = start_child(store, seed, scale)
                if delay >= 0:  # from the start: lands in the import or the open
                    time.sleep(delay)
                else:  # -delay into the workload, timed from the child's own "ready"
                    _wait_ready(proc, 60)
                    time.sleep(-delay)
                proc.send_signal(signal.SIGKILL)
                out, _ = proc.communicate(timeout=120)
                rep = parse(getattr(proc, "head", b"") + out)
                seen.append("finished" if rep["done"] else rep["phase"])
                expect(allowed, ops, rep)
            timing: dict[str, float] = {}
            after_kill = check(store, allowed, timing=timing)
            run_workload(store, seed, scale)
            state = {d: {t} for d, t in final.items()}
            after_rerun = check(store, state, tokens=toks)
            with lock:
                i = counts["done"]
                counts["done"] += 1
                phases.update(seen)
                recovery.append(timing.get("open_s", float("nan")))
                for what, bad in (("kill", after_kill), ("rerun", after_rerun)):
                    if bad:
                        violations.append(
                            {"kill": i, "phase": seen[-1], "after": what, "what": bad}
                        )
                    else:
                        counts["consistent" if what == "kill" else "completed"] += 1
                if progress:
                    progress(i, {"phase": seen[-1], "violations": len(violations)})

    try:
        share = [kills // lanes + (1 if j < kills % lanes else 0) for j in range(lanes)]
        threads = [threading.Thread(target=lane, args=(j, n)) for j, n in enumerate(share)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    consistent, completed = counts["consistent"], counts["completed"]
    if counts["done"] != kills:
        violations.append({"kill": -1, "phase": "-", "after": "-", "what": ["a lane failed"]})
    rec = sorted(recovery)
    return {
        "kills": kills,
        "seed": seed,
        "lanes": lanes,
        "scale": scale,
        "operations": len(ops),
        "child_run_s": round(cal["total_s"], 3),
        "child_import_s": round(cal["import_s"], 3),
        "child_ready_s": round(cal["ready_s"], 3),
        "early_share": early,
        "consistent_after_kill": consistent,
        "completed_after_rerun": completed,
        "violations": len(violations),
        "violation_examples": violations[:10],
        "phases": dict(phases.most_common()),
        "recovery_s": {
            "p50": round(rec[len(rec) // 2], 4) if rec else None,
            "p90": round(rec[int(len(rec) * 0.9)], 4) if rec else None,
            "max": round(rec[-1], 4) if rec else None,
        },
        "seconds": round(time.time() - t_all, 1),
    }


# -- the disk failing and the files damaged ------------------------------------------------


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return run.returncode == 0


def disk_full_rounds(rounds: int, seed: int, root: Path) -> dict[str, Any]:
    """Run the workload on a small tmpfs filled, at a random operation, to leave a random few
    kilobytes: the first operation that fails must raise one ``StorageError`` whose
    ``stored`` names the documents the archive kept; a reader then must not see any of the
    failed operation's documents; ``close`` must release the lock; once space is freed the
    store must reopen with exactly the ``stored`` documents of the failed operation present
    (the others as before it) and pass :func:`check`. Needs root to mount (skipped if not).
    """
    from pensive_core import Document, Pensive, StorageError
    from pensive_core.errors import NotFoundError

    rng = random.Random(seed)
    out: dict[str, Any] = {
        "rounds": 0,
        "failed_ops": 0,
        "storage_errors": 0,
        "other_errors": [],
        "reader_saw_failed": 0,
        "close_raised": 0,
        "violations": [],
        "leave_bytes": [],
        "mount": "tmpfs",
    }
    for i in range(rounds):
        fs = root / f"full{i}"
        if not _mount_tmpfs(fs, "48m"):
            out["mount"] = "unavailable (not root): skipped"
            break
        try:
            store, wseed = fs / "store", seed * 100 + i
            ops = workload(wseed, 1)
            cut = rng.randint(1, max(1, len(ops) // 2))
            leave = rng.choice([16, 64, 128, 256, 512, 1024]) * 1024
            state: dict[str, Any] = {}
            p = Pensive(store, config=CONFIG)
            failed: tuple[int, Any] | None = None
            for j, (kind, arg) in enumerate(ops):
                if j == cut:
                    st = os.statvfs(fs)
                    with open(fs / "filler", "wb") as fh:
                        fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
                try:
                    if kind == "ingest":
                        p.ingest([Document(id=d, text=t) for d, t, _ in arg])
                    elif kind == "delete":
                        with contextlib.suppress(NotFoundError):
                            p.delete(arg)
                    else:
                        p.query(arg, k=5)
                except StorageError as exc:
                    failed = (j, exc)
                    out["storage_errors"] += 1
                    break
                except Exception as exc:  # noqa: BLE001 - what the round is looking for
                    failed = (j, exc)
                    out["other_errors"].append(f"{type(exc).__name__}: {exc}"[:200])
                    break
                _apply(state, kind, arg)
            out["rounds"] += 1
            out["leave_bytes"].append(leave)
            allowed: dict[str, set[str | None]] = {d: {t} for d, t in state.items()}
            if failed is not None:
                out["failed_ops"] += 1
                j, exc = failed
                kind, arg = ops[j]
                kept = set(getattr(exc, "stored", ()))
                if kind == "ingest":
                    for d, t, _v in arg:
                        allowed[d] = {t} if d in kept else {state.get(d)}
                    with Pensive(store, read_only=True) as r:
                        for d, _t, v in arg:
                            tok = token(wseed, d, v)
                            if any(tok in h.text for h in r.query(tok, k=3).hits):
                                out["reader_saw_failed"] += 1
                elif kind == "delete":
                    allowed[arg] = {state.get(arg), None}
            try:
                p.close()
            except StorageError:
                out["close_raised"] += 1
            (fs / "filler").unlink(missing_ok=True)
            bad = check(store, allowed)
            if bad:
                out["violations"].append({"round": i, "what": bad[:3]})
        finally:
            subprocess.run(["umount", "-l", str(fs)], check=False)
    out["leave_bytes"] = sorted(set(out["leave_bytes"]))
    return out


def _flip(path: Path, offset: int, n: int) -> None:
    data = bytearray(path.read_bytes())
    offset = max(0, min(offset, len(data) - n))
    for k in range(offset, min(len(data), offset + n)):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))


def corruption_rounds(seed: int, root: Path, random_flips: int = 30) -> dict[str, Any]:
    """Damage each file of a store built by the workload, one at a time on a copy, and see
    what a reader does: refuse with a ``CorruptStoreError`` naming the file, rebuild a cache,
    or answer -- then the answers (the top passage for every document's unique token) must be
    the ones from before. ``verify_store`` must find the damage and ``repair_store`` must
    bring back the same answers. Named damage first, then ``random_flips`` flips of 4 KB at
    random places of random index files."""
    from pensive_core import CorruptStoreError, Pensive, repair_store, verify_store

    base = root / "corrupt-base"
    shutil.rmtree(base, ignore_errors=True)
    run_workload(base, seed, 1)
    toks = {d: token(seed, d, v) for d, v in versions(seed, 1).items()}

    def answers(store: Path) -> dict[str, str | None]:
        with Pensive(store, read_only=True) as r:
            return {
                d: next((h.doc_id for h in r.query(t, k=1).hits), None) for d, t in toks.items()
            }

    want = answers(base)
    rng = random.Random(seed)

    def faiss_file(store: Path, key: str) -> Path:
        m = json.loads((store / "vectors" / "faiss.json").read_text())
        return store / "vectors" / m["spaces"][""][key]

    def reorder(path: Path) -> None:
        side = json.loads(path.read_text())
        side["names"] = side["names"][::-1]
        path.write_text(json.dumps(side))

    def body(store: Path) -> None:
        db = sqlite3.connect(store / "pensive.sqlite")
        blob = db.execute("SELECT body FROM documents LIMIT 1").fetchone()[0]
        db.close()
        at = (store / "pensive.sqlite").read_bytes().find(blob)
        _flip(store / "pensive.sqlite", at + len(blob) // 2, 8)

    named: list[tuple[str, Any]] = [
        ("FAISS index: 4 KB flipped", lambda s: _flip(faiss_file(s, "index"), 4096, 4096)),
        ("FAISS names: reordered", lambda s: reorder(faiss_file(s, "names"))),
        ("FAISS ids: 64 B flipped", lambda s: _flip(faiss_file(s, "ids"), 130, 64)),
        ("faiss.json: truncated", lambda s: (s / "vectors/faiss.json").write_text('{"gen')),
        ("bm25.json: truncated", lambda s: (s / "bm25/bm25.json").write_text('{"gen')),
        (
            "BM25 segment: 64 B flipped",
            lambda s: _flip(sorted((s / "bm25").glob("bm25-seg*.data.npy"))[0], 200, 64),
        ),
        ("l1.sqlite: garbage", lambda s: (s / "l1.sqlite").write_bytes(os.urandom(8192))),
        ("archive: a document body flipped", body),
    ]
    for _ in range(random_flips):
        named.append(("random 4 KB flip in an index file", "random"))
    rows: list[dict[str, Any]] = []
    for n, (what, damage) in enumerate(named):
        store = root / f"corrupt{n}"
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(base, store)
        for suffix in ("-wal", "-shm"):
            (store / f"l1.sqlite{suffix}").unlink(missing_ok=True)
        if damage == "random":
            files = sorted(
                p
                for p in [*(store / "vectors").iterdir(), *(store / "bm25").iterdir()]
                if p.is_file()
            )
            target = rng.choice(files)
            _flip(target, rng.randrange(max(1, target.stat().st_size)), 4096)
            what = f"random 4 KB flip: {target.name.split('-')[0]} {target.suffix}"
        else:
            damage(store)
        row: dict[str, Any] = {"damage": what}
        try:
            got = answers(store)
            row["open"] = "opened"
            row["same_answers"] = got == want
        except CorruptStoreError as exc:
            row["open"] = "refused"
            row["named"] = bool(exc.filename) and "pensive repair" in str(exc)
        except Exception as exc:  # noqa: BLE001 - a raw error is what the round looks for
            row["open"] = f"raw {type(exc).__name__}"
        row["verify_found"] = not verify_store(store)["ok"]
        try:
            fixed = repair_store(store)
            row["repair"] = "+".join(fixed["rebuilt"] + (["l1"] if fixed["moved_aside"] else []))
            row["vectors_kept"] = fixed["vectors_kept"]
            row["reindexed"] = fixed["reindexed"]
            row["repair_s"] = fixed["seconds"]
            row["after_repair_same"] = answers(store) == want
        except Exception as exc:  # noqa: BLE001
            row["repair"] = f"failed: {type(exc).__name__}: {exc}"[:160]
            row["after_repair_same"] = False
        rows.append(row)
        shutil.rmtree(store, ignore_errors=True)
    silent = [r for r in rows if r["open"] == "opened" and not r["same_answers"]]
    return {
        "cases": len(rows),
        "refused": sum(r["open"] == "refused" for r in rows),
        "opened_same_answers": sum(r["open"] == "opened" and r["same_answers"] for r in rows),
        "silently_different": len(silent),
        "raw_errors": sum(r["open"].startswith("raw") for r in rows),
        "verify_found": sum(r["verify_found"] for r in rows),
        "repaired_same": sum(r["after_repair_same"] for r in rows),
        "rows": rows,
    }


def render(r: dict[str, Any]) -> str:
    """The Markdown report."""
    lines = [
        "# Crash safety: SIGKILL during ingest",
        "",
        "A child process runs a workload of ingest batches, replacements, deletes and cached "
        "queries (hash embedder, graph, temporal and L1 on) and is killed with SIGKILL after a "
        "random delay spread over a whole run; the store is then reopened and checked "
        "(`benchmarks/crash.py`), and the workload re-run to completion and checked again.",
        "",
        f"* kills: **{r['kills']}** (seed {r['seed']}, {r['operations']} operations per run, "
        f"a full child run {r['child_run_s']} s alone, ready after {r['child_ready_s']} s; "
        f"{r['early_share']:.0%} of kills aimed at import/open, the rest spread over the "
        f"workload timed from the child's ready; {r['lanes']} stores side by side)",
        f"* consistent after the kill: **{r['consistent_after_kill']}/{r['kills']}**",
        f"* completed and consistent after the rerun: **{r['completed_after_rerun']}/{r['kills']}**",
        f"* violations: **{r['violations']}**",
        f"* reopen (recovery) time: p50 {r['recovery_s']['p50']} s, p90 {r['recovery_s']['p90']} s, "
        f"max {r['recovery_s']['max']} s",
        "",
        "| phase at the kill | kills |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {v} |" for k, v in r["phases"].items()]
    if r["violation_examples"]:
        lines += ["", "## Violations (first ten)", ""]
        lines += [
            f"* kill {v['kill']} ({v['phase']}, after {v['after']}): {'; '.join(v['what'][:3])}"
            for v in r["violation_examples"]
        ]
    full = r.get("disk_full")
    if full:
        lines += [
            "",
            "## Disk full (a small tmpfs filled at a random operation)",
            "",
            f"* rounds: **{full['rounds']}** ({full['mount']}; left free: "
            f"{', '.join(str(b // 1024) + ' KB' for b in full['leave_bytes'])}), an operation "
            f"failed in **{full['failed_ops']}**",
            f"* failures that were one `StorageError`: **{full['storage_errors']}/"
            f"{full['failed_ops']}** (other errors: {len(full['other_errors'])})",
            f"* a reader saw a passage of the failed operation: **{full['reader_saw_failed']}** times",
            f"* `close()` raised (lock released anyway): {full['close_raised']}",
            f"* consistent after freeing space and reopening (the `stored` documents present, "
            f"the rest as before): **{full['rounds'] - len(full['violations'])}/{full['rounds']}**",
        ]
    bad = r.get("corruption")
    if bad:
        lines += [
            "",
            "## Damaged files (each on a copy of one store)",
            "",
            f"* cases: **{bad['cases']}**; refused with a `CorruptStoreError` naming the file: "
            f"**{bad['refused']}**; opened with the same answers: {bad['opened_same_answers']}; "
            f"**silently different answers: {bad['silently_different']}**; raw errors: "
            f"{bad['raw_errors']}",
            f"* `verify` found the damage: **{bad['verify_found']}/{bad['cases']}**; "
            f"`repair` brought back the same answers: **{bad['repaired_same']}/{bad['cases']}**",
            "",
            "| damage | open | verify | repair | vectors kept | docs re-embedded | answers after repair |",
            "|---|---|---|---|---:|---:|---|",
        ]
        seen: set[str] = set()
        for row in bad["rows"]:
            key = row["damage"]
            if key.startswith("random") and key in seen:
                continue
            seen.add(key)
            opened = row["open"] + (
                f" ({'same' if row.get('same_answers') else 'DIFFERENT'} answers)"
                if row["open"] == "opened"
                else ""
            )
            lines.append(
                f"| {key} | {opened} | {'found' if row['verify_found'] else 'MISSED'} | "
                f"{row['repair'] or 'nothing'} | {row.get('vectors_kept', '-')} | "
                f"{row.get('reindexed', '-')} | {'same' if row['after_repair_same'] else 'DIFFERENT'} |"
            )
    lines += ["", f"Measured in {r['seconds']} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("STORE", "SEED"))
    ap.add_argument("--scale", type=int, default=0, help="workload size (0: 15 operations)")
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--lanes", type=int, default=2, help="stores killed side by side")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--full-rounds", type=int, default=20, help="disk-full rounds (root only)")
    ap.add_argument("--random-flips", type=int, default=30, help="random 4 KB flips")
    ap.add_argument(
        "--disk-only",
        action="store_true",
        help="run only the disk-full and corruption rounds, keeping the kill figures of the "
        "last crash.json",
    )
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.scale)
        return
    from benchmarks.common import RESULTS, environment, source_state, write_results

    def show(i: int, rep: dict[str, Any]) -> None:
        print(f"kill {i + 1}/{args.kills}: {rep['phase']}, violations so far {rep['violations']}")

    if args.disk_only:  # the kill rounds as last measured; the disk and file rounds anew
        result = json.loads((RESULTS / "crash.json").read_text())
        result["kill_rounds_from"] = result.pop("source", None)
    else:
        result = run(args.kills, args.seed, scale=args.scale, lanes=args.lanes, progress=show)
    with tempfile.TemporaryDirectory(prefix="pensive-disk-") as tmp:
        t0 = time.time()
        result["disk_full"] = disk_full_rounds(args.full_rounds, args.seed, Path(tmp))
        result["corruption"] = corruption_rounds(args.seed, Path(tmp), args.random_flips)
        result["seconds"] = round(result["seconds"] + time.time() - t0, 1)
    result["environment"] = environment()
    result["source"] = source_state()
    write_results("crash", args.out or RESULTS, result, render(result))


if __name__ == "__main__":
    main()
