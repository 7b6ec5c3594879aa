"""Two processes on one store, both querying: a reader never gets an L1 answer computed for a
commit other than the one it sees (D6: a ``read_only`` handle kept serving an answer that missed
newly ingested matching documents over several commits when the writer also ran queries).

The writer ingests one matching document per commit; at each commit the reader asks two
questions (one the writer's cache also knows, one only the reader ever asked) and then the
writer asks questions of its own. Every answer the reader got is checked against the commit it
was answered at: it must hold every matching document that commit holds, whichever tier
answered.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback

import pytest

from pensive_core import Document, Pensive
from tests.conftest import HASH_CONFIG, docs_corpus

pytestmark = [pytest.mark.adversarial, pytest.mark.integration]

CONFIG = {**HASH_CONFIG, "router": {"l1": True}}
COMMITS = 14
QUESTION = "grey heron sighting on the marsh"
# first asked by the reader: an answer only the reader's process computed
ASKED_BY_READER = "heron sightings at dusk"
OTHERS = ["green tea harvest", "invoice INV-4471", "arctic tern report"]


def _heron(i: int) -> Document:
    return Document(id=f"heron{i}", text=f"Grey heron sighting number {i} on the marsh at dusk.")


def _fillers() -> list[Document]:
    # enough passages that one new passage is a small change: L1 is invalidated selectively
    # (by what each answer depends on), not emptied as after a bulk change
    topics = ["tide tables", "bread ovens", "tram lines", "violin bows", "salt marsh grazing"]
    return [
        Document(id=f"note{i}", text=f"Field note {i} records {topics[i % 5]} in district {i}.")
        for i in range(120)
    ]


def _writer(path: str, ready, turn, back, out) -> None:
    try:
        with Pensive(path) as p:
            ready.wait(60)
            commits = {}
            for i in range(COMMITS):
                p.ingest([_heron(i)])
                commits[p.commit_number] = i + 1  # herons 0..i are in this commit
                turn.put(p.commit_number)  # the reader asks now, at this commit
                back.get(timeout=60)
                for q in OTHERS:  # then the writer's own answers go into the shared cache
                    p.query(f"{q} {i}", k=5)
            turn.put(None)
        out.put(("writer", "ok", commits))
    except BaseException:
        turn.put(None)
        out.put(("writer", "error", traceback.format_exc()))


def _reader(path: str, ready, turn, back, out) -> None:
    try:
        p = Pensive(path, read_only=True)
        ready.wait(60)
        seen = []
        while turn.get(timeout=60) is not None:
            for _ in range(2):  # the second time from L1 if anyone cached it
                for q in (QUESTION, ASKED_BY_READER):
                    res = p.query(q, k=20)
                    herons = sorted(h.doc_id for h in res.hits if h.doc_id.startswith("heron"))
                    seen.append((p.commit_number, res.tier, herons))
            back.put(True)
        p.close()
        out.put(("reader", "ok", seen))
    except BaseException:
        back.put(False)
        out.put(("reader", "error", traceback.format_exc()))


def test_a_reader_never_serves_an_answer_from_another_commit(tmp_path):
    path = str(tmp_path / "store")
    with Pensive(path, config=CONFIG) as p:
        p.ingest([*docs_corpus(), *_fillers()])
        base = p.commit_number
        p.query(QUESTION, k=20)  # a cached answer every later commit must invalidate
    ctx = mp.get_context("spawn")
    ready, turn, back, out = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_reader, args=(path, ready, turn, back, out)),
        ctx.Process(target=_writer, args=(path, ready, turn, back, out)),
    ]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # both open the store before the writes start
    ready.set()
    results = {}
    for _ in procs:
        who, status, detail = out.get(timeout=180)
        assert status == "ok", detail
        results[who] = detail
    for proc in procs:
        proc.join(timeout=60)
    commits = {base: 0, **results["writer"]}
    assert len(commits) == COMMITS + 1
    stale = []
    for commit, tier, herons in results["reader"]:
        want = sorted(f"heron{i}" for i in range(commits[commit]))
        if herons != want:
            stale.append((commit, tier, len(herons), len(want)))
    answered_at = {c for c, _, _ in results["reader"]}
    assert len(answered_at) == COMMITS  # the reader asked at every commit
    assert any(t == "L1" for _, t, _ in results["reader"])  # and the cache really served it
    assert not stale, f"answers that miss documents of the commit they were given at: {stale}"
