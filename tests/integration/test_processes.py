"""One writer process and several reader processes on one store: no errors, no torn reads."""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback

import pytest

from pensive_core import Document, Pensive
from tests.conftest import HASH_CONFIG, docs_corpus

pytestmark = pytest.mark.integration

CONFIG = {**HASH_CONFIG, "router": {"l1": True}}
ROUNDS = 12


def _writer(path: str, ready, done) -> None:
    with Pensive(path) as p:
        ready.wait(60)
        for i in range(ROUNDS):
            p.ingest([Document(id=f"tern{i}", text=f"Arctic tern sighting number {i} at dawn.")])
            if i % 4 == 3:
                p.delete(f"tern{i - 2}")
            time.sleep(0.05)
        p.ingest([Document(id="final", text="The final arctic tern report closes the season.")])
    done.set()


def _reader(path: str, ready, done, out) -> None:
    try:
        p = Pensive(path, read_only=True)
        ready.wait(60)
        queries = ["arctic tern sighting", "green tea", "final arctic tern report", "INV-4471"]
        seen_final = False
        n = 0
        deadline = time.time() + 120
        while time.time() < deadline:
            finished = done.is_set()
            for q in queries:
                res = p.query(q, k=3)
                n += 1
                for h in res.hits:
                    doc = p.components.archive.document(h.doc_id)
                    # a hit is always a real passage of a stored document (or an expansion of one)
                    assert doc is None or h.text in doc.text, (q, h)
                if res.hits and res.hits[0].doc_id == "final":
                    seen_final = True
            if finished:
                break
        p.close()
        out.put(("ok", n, seen_final))
    except BaseException:
        out.put(("error", traceback.format_exc(), False))


def test_one_writer_many_readers(tmp_path):
    path = str(tmp_path / "store")
    with Pensive(path, config=CONFIG) as p:
        p.ingest(docs_corpus())
        p.query("arctic tern sighting")  # a cached answer the writer must invalidate
    ctx = mp.get_context("spawn")
    ready, done, out = ctx.Event(), ctx.Event(), ctx.Queue()
    readers = [ctx.Process(target=_reader, args=(path, ready, done, out)) for _ in range(2)]
    writer = ctx.Process(target=_writer, args=(path, ready, done))
    for proc in (*readers, writer):
        proc.start()
    time.sleep(1.0)  # let every process open the store before the writes start
    ready.set()
    results = [out.get(timeout=180) for _ in readers]
    for proc in (*readers, writer):
        proc.join(timeout=60)
    assert writer.exitcode == 0
    for status, detail, seen_final in results:
        assert status == "ok", detail
        assert detail > 10 and seen_final  # queried throughout, and saw the last commit
    with Pensive(path) as p:
        assert p.query("final arctic tern report", k=1).hits[0].doc_id == "final"
        assert p.stats()["documents"] == 8 + ROUNDS + 1 - ROUNDS // 4
