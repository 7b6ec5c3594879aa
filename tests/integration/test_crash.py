"""Crash safety: real child processes killed with SIGKILL mid-ingest reopen consistent.

The random test kills the workload of ``benchmarks/crash.py`` at random points; the
deterministic ones kill it at named points through ``PENSIVE_CRASH_AT``, which only the child
driver reads. A small test corrupts a store by hand to show the checker sees what it checks.
"""

from __future__ import annotations

import time

import pytest

from benchmarks.crash import (
    check,
    expect,
    final_state,
    parse,
    run,
    run_workload,
    start_child,
    token,
    versions,
    workload,
)

pytestmark = pytest.mark.integration

SEED = 11


def _killed_at(store, spec: str) -> dict:
    proc = start_child(store, SEED, 0, kill_at=spec)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -9, (spec, err.decode()[-2000:])  # it died by SIGKILL
    return parse(out)


@pytest.mark.parametrize(
    "spec",
    [
        "BM25Index.commit:before:3",  # a batch's archive rows written, no index persisted
        "BM25Index.commit:torn:4",  # a segment file cut in half mid-write
        "FaissBackend.persist:torn:5",  # the index file cut in half mid-write
        "Archive.mark_indexed:after:7",  # committed, the L1 cache not yet invalidated
        "Archive.delete:after:1",  # a delete: archive row gone, the index files still hold it
    ],
)
def test_kill_at_a_named_point(tmp_path, spec):
    store = tmp_path / "store"
    ops = workload(SEED, 0)
    # a store with history, so replacements and deletes touch cached answers and old passages
    run_workload(store, SEED, 0)
    allowed = {d: {t} for d, t in final_state(SEED, 0).items()}
    rep = _killed_at(store, spec)
    assert not rep["done"]
    expect(allowed, ops, rep)
    assert check(store, allowed) == []
    run_workload(store, SEED, 0)
    toks = {d: token(SEED, d, v) for d, v in versions(SEED, 0).items()}
    final = {d: {t} for d, t in final_state(SEED, 0).items()}
    assert check(store, final, tokens=toks) == []


def test_kill_during_recovery(tmp_path):
    """A kill while the reopened store recovers from the first kill."""
    store = tmp_path / "store"
    ops = workload(SEED, 0)
    allowed: dict = {}
    for spec in ("Archive.delete:after:1", "hook:recover:after:1", "BM25Index.commit:mid:1"):
        expect(allowed, ops, _killed_at(store, spec))
    assert check(store, allowed) == []


def test_checker_sees_a_corrupt_store(tmp_path):
    from benchmarks.crash import CONFIG
    from pensive_core import Pensive

    store = tmp_path / "store"
    run_workload(store, SEED, 0)
    assert check(store) == []
    with Pensive(store, config=CONFIG) as p:  # a passage taken out of BM25 only
        victim = sorted(p.components.sparse.ids())[0]
        p.components.sparse.delete([victim])
    # the counts differ: opening for writing sees it and reconciles (the checker opens it)
    assert check(store) == []
    with Pensive(store, config=CONFIG) as p:  # out of BM25, a stray in its place: counts level
        p.components.sparse.delete([victim])
        p.components.sparse.add("stray#1", "a passage no document has")
    bad = check(store)
    assert any(victim in b and "BM25" in b for b in bad), bad
    assert any("stray#1" in b for b in bad), bad
    with Pensive(store, config=CONFIG) as p:  # put back; a vector the archive never had in
        # place of one it has (counts level again)
        p.components.sparse.delete(["stray#1"])
        text = p.components.archive.chunks([victim])[victim].text
        p.components.sparse.add(victim, text)
        vec = p.components.backend.fetch([victim])[victim]
        p.components.backend.delete([victim])
        p.components.backend.upsert(["ghost#1"], vec[None, :], [{}])
    bad = check(store)
    assert any("ghost#1" in b for b in bad), bad
    assert not any("BM25" in b for b in bad), bad
    # an acknowledged document that is missing, and one whose text is wrong
    bad = check(store, {"d000": {None}, "d001": {"other text"}})
    assert any("d000" in b for b in bad) and any("d001" in b for b in bad), bad


def test_random_kills(tmp_path):
    t0 = time.time()
    r = run(kills=20, seed=SEED, scale=0, workdir=tmp_path, lanes=2)
    assert r["violations"] == 0, r["violation_examples"]
    assert r["consistent_after_kill"] == r["kills"]
    assert r["completed_after_rerun"] == r["kills"]
    # the kills really landed inside the workload, not only while Python started: where
    # exactly is up to timing (the named-point tests above cover each write for certain)
    inside = sum(n for ph, n in r["phases"].items() if ph not in ("import", "open", "finished"))
    assert inside >= r["kills"] // 3 and len(r["phases"]) >= 2, r["phases"]
    print(r, time.time() - t0)
