"""The server's writer process runs the ingests queued behind each other (one namespace, the
same ``archive_only``) as one change with one commit, answering each request with its own
report; anything else queued between them (a delete) keeps its place."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from pensive_core import Document, Pensive
from pensive_core.server.worker import WorkerError, Writer
from tests.conftest import HASH_CONFIG

pytestmark = pytest.mark.integration

TIMING = ("seconds", "stages")
LONG = [
    {"id": f"long{i}", "text": f"Long ingest page {i}. " + "Filler words about harbours. " * 40}
    for i in range(300)
]


@pytest.fixture
def writer(tmp_path):
    w = Writer(tmp_path / "served", HASH_CONFIG)
    w.start()
    yield w
    w.close()


def _commit(writer: Writer, ns: str = "default") -> int:
    return writer.call("open", ns=ns).result(60)["commit"]


def _behind_a_long_ingest(
    writer: Writer, calls: list[tuple[str, dict]]
) -> tuple[Future, list[Future], list[list[int]]]:
    """A long ingest, and once it runs, ``calls`` sent at once: they queue behind it."""
    started = threading.Event()
    long = writer.call("ingest", progress=lambda n: started.set(), ns="default", documents=LONG)
    assert started.wait(60)
    seen: list[list[int]] = [[] for _ in calls]
    futs = [
        writer.call(op, progress=seen[i].append, **{"ns": "default", **args})
        for i, (op, args) in enumerate(calls)
    ]
    return long, futs, seen


def _plain(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in TIMING}


def _json(report) -> dict:
    return {k: v for k, v in report.__dict__.items() if k not in ("errors", *TIMING)}


def test_queued_ingests_share_one_commit_and_each_gets_its_own_report(writer, tmp_path):
    first = {"id": "x", "text": "Orchid note: the orchids in the glasshouse need misting at dawn."}
    later = {"id": "x", "text": "Cactus note: the cacti in the glasshouse need no water in winter."}
    s0 = {"id": "s0", "text": "Saffron is picked by hand from crocus flowers in autumn."}
    requests = [
        [first, s0],
        [later, {"id": "s1", "text": "Sumac gives a lemony taste to grilled fish."}],
        [{"id": "bad", "text": ""}],  # refused alone: empty text
        [{"id": "s3", "text": "Sorrel soup is a spring dish of the Baltic coast."}],
        [s0],  # identical to the first request's: unchanged
    ]
    before = _commit(writer)
    long, futs, seen = _behind_a_long_ingest(
        writer, [("ingest", {"documents": docs}) for docs in requests]
    )
    assert long.result(120)["added"] == len(LONG)
    with pytest.raises(WorkerError) as bad:
        futs[2].result(120)
    assert bad.value.kind == "InputError" and "empty text" in str(bad.value)
    got = [f.result(120) for i, f in enumerate(futs) if i != 2]
    # the long ingest's commit, then one for the four requests queued behind it
    assert _commit(writer) == before + 2
    assert len({r["stages"]["commit"] for r in got}) == 1  # (one commit's time, shared)
    assert [s for i, s in enumerate(seen) if i != 2] == [[0, 2], [0, 2], [0, 1], [0, 1]]
    # each report as the same ingests, one by one, report on a store of their own
    with Pensive(tmp_path / "alone", config=HASH_CONFIG) as q:
        q.ingest([Document(**d) for d in LONG])
        alone = [
            q.ingest([Document(**d) for d in docs]) for i, docs in enumerate(requests) if i != 2
        ]
    assert [_plain(r) for r in got] == [_json(r) for r in alone]
    assert (got[1]["updated"], got[1]["chunks_deleted"], got[3]["unchanged"]) == (1, 1, 1)
    with Pensive(tmp_path / "served", config=HASH_CONFIG, read_only=True) as r:
        assert r.get("x").text == later["text"]
        assert r.stats(disk=False)["documents"] == len(LONG) + 4
        assert r.query("sorrel soup Baltic", k=1).hits[0].doc_id == "s3"
        assert r.query("cacti water winter", k=1).hits[0].text == later["text"]
        assert all("orchids" not in h.text for h in r.query("orchids misting", k=5).hits)


def test_a_delete_queued_between_ingests_keeps_its_place(writer, tmp_path):
    v1 = {"id": "d1", "text": "First version: the ferry leaves at nine."}
    v3 = {"id": "d1", "text": "Third version: the ferry leaves at eleven."}
    before = _commit(writer)
    long, futs, _ = _behind_a_long_ingest(
        writer,
        [
            ("ingest", {"documents": [v1]}),
            ("ingest", {"documents": [{"id": "d2", "text": "The bakery opens at six."}]}),
            ("delete", {"doc_id": "d1"}),
            ("ingest", {"documents": [v3]}),
            ("ingest", {"documents": [{"id": "d3", "text": "The museum shuts on Mondays."}]}),
            ("ingest", {"documents": [{"id": "o1", "text": "Elsewhere."}], "ns": "other"}),
            ("ingest", {"documents": [{"id": "d4", "text": "Archived."}], "archive_only": True}),
        ],
    )
    long.result(120)
    a, b, deleted, c, d, other, archived = (f.result(120) for f in futs)
    assert (a["added"], b["added"]) == (1, 1)
    assert deleted["chunks"] == 1  # after the first ingest (else: not found) ...
    assert (c["added"], c["updated"]) == (1, 0)  # ... and before the third
    assert (d["added"], other["added"], archived["added"]) == (1, 1, 1)
    # the long ingest, the first two together, the delete, the next two together (the other
    # namespace's and the archive-only ingest are changes of their own)
    assert _commit(writer) == before + 5
    assert _commit(writer, "other") >= 1
    with Pensive(tmp_path / "served", config=HASH_CONFIG, read_only=True) as r:
        assert r.get("d1").text == v3["text"]
        assert {"d2", "d3", "d4"} <= {r.get(i).id for i in ("d2", "d3", "d4")}
        assert r.query("ferry eleven", k=1).hits[0].text == v3["text"]


def test_idle_cache_refresh_answers_the_dropped_questions_again_after_the_ingest(tmp_path):
    """``[server] cache_refresh = "idle"``: the ingest is acknowledged at its commit, and the
    cached answers it dropped come back (with the new document) once no write waits."""
    import time

    config = {**HASH_CONFIG, "server": {"cache_refresh": "idle"}}
    w = Writer(tmp_path / "served", config)
    w.start()
    try:
        base = [{"id": f"b{i}", "text": f"Harbour note {i}: the quay is busy."} for i in range(6)]
        w.call("ingest", ns="default", documents=base).result(60)
        question = "who keeps the tide tables of the old port?"
        with Pensive(tmp_path / "served", config=config, read_only=True) as r:
            assert r.query(question).tier == "L2"
            assert r.query(question).tier == "L1"
            doc = {"id": "tides", "text": "The tide tables of the old port are kept by pilots."}
            assert w.call("ingest", ns="default", documents=[doc]).result(60)["added"] == 1
            l1 = r.components.l1
            deadline = time.time() + 30
            while time.time() < deadline:
                l1.sync()
                if question in {e.text for e in l1.entries()}:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the dropped answer was not answered again")
            res = r.query(question)  # not asked since the ingest: the writer stored it
            assert res.tier == "L1" and "tides" in {h.doc_id for h in res.hits}
    finally:
        w.close()
