"""Several groups of documents ingested as one change (``Pensive.ingest_many``): one commit,
and each group reported as if it had been ingested alone; a failing group leaves the groups
before it committed and the groups after it still ingested."""

from __future__ import annotations

import pytest

import pensive_core.ingest.plan as plan
from pensive_core import Document, IngestGroupsError, InputError, NotFoundError, Pensive, hooks
from tests.conftest import HASH_CONFIG

TIMING = ("seconds", "stages")


def _para(topic: str, n: int = 3) -> str:
    return " ".join(
        f"The {topic} report, part {i}, notes that {topic} figures moved by {i + 3} points."
        for i in range(n)
    )


def _long(topic: str, edit: str = "") -> str:
    # several passages: an edit of the last paragraph keeps the others' vectors
    paras = [_para(f"{topic}{j}", 12) for j in range(4)]
    if edit:
        paras[-1] = _para(edit, 12)
    return "\n\n".join(paras)


BASE = [
    Document("a", _long("alpha")),
    Document("b", _long("beta"), {"source": "b.txt"}),
    Document("c", "Gamma is the third letter. " + _para("gamma"), {"source": "c.txt"}),
]
GROUPS = [
    [Document("a", _long("alpha", edit="amended")), Document("d", _para("delta"))],
    [
        BASE[1],  # identical: unchanged
        Document("e", _para("epsilon")),
        Document("a", _long("alpha", edit="again")),  # replaces the first group's version
    ],
    [
        Document("c", BASE[2].text, {"source": "c2.txt"}),  # metadata only
        Document("d", _para("delta")),  # identical to the first group's: unchanged
        Document("f", _para("zeta")),
    ],
]


def _plain(report) -> dict:
    return {k: v for k, v in report.__dict__.items() if k not in TIMING}


def _store(path) -> Pensive:
    p = Pensive(path, config=HASH_CONFIG)
    p.ingest(BASE)
    return p


def _commits() -> tuple[list[str], object]:
    seen: list[str] = []

    def listen(point: str, event: str) -> None:
        if point == "commit" and event == "enter":
            seen.append(point)

    return seen, hooks.add_listener(listen)


def test_groups_report_as_separate_ingests_and_commit_once(tmp_path):
    with _store(tmp_path / "one") as p, _store(tmp_path / "each") as q:
        before = p.commit_number
        seen, remove = _commits()
        try:
            reports = p.ingest_many(*GROUPS)
        finally:
            remove()
        assert len(seen) == 1 and p.commit_number == before + 1
        alone = [q.ingest(g) for g in GROUPS]
        assert [_plain(r) for r in reports] == [_plain(r) for r in alone]
        # the cases the groups were built for, so the comparison is not vacuous
        assert reports[0].chunks_reused > 0 and reports[0].chunks_deleted > 0
        assert (reports[1].unchanged, reports[1].updated, reports[1].added) == (1, 1, 1)
        assert (reports[2].unchanged, reports[2].updated, reports[2].added) == (1, 1, 1)
        for r in reports:
            assert r.seconds >= r.stages["commit"] > 0
        for did in "abcdef":
            assert p.get(did) == q.get(did)
        for text in ("again2 figures", "zeta report", "amended3", "gamma"):
            assert [h.chunk_id for h in p.query(text, k=5).hits] == [
                h.chunk_id for h in q.query(text, k=5).hits
            ]
        s, t = p.stats(disk=False), q.stats(disk=False)
        assert (s["documents"], s["chunks"]) == (t["documents"], t["chunks"])
        assert p.components.archive.unindexed() == []


def test_a_later_group_replaces_an_earlier_groups_document(hash_store):
    first = Document("x", "Orchid greenhouse note: the orchids need misting at dawn.")
    second = Document("x", "Cactus greenhouse note: the cacti need no water in winter.")
    one, two = hash_store.ingest_many([first], [second])
    assert (one.added, one.updated, one.chunks_embedded) == (1, 0, 1)
    assert (two.added, two.updated, two.chunks_embedded, two.chunks_deleted) == (0, 1, 1, 1)
    assert hash_store.get("x").text == second.text
    hits = hash_store.query("orchids misting dawn", k=5).hits
    assert all("Orchid" not in h.text for h in hits)
    assert hash_store.query("cacti winter water", k=1).hits[0].text == second.text
    assert hash_store.stats(disk=False)["chunks"] == 1


def test_each_group_has_its_own_progress(hash_store):
    seen: list[tuple[int, int]] = []
    groups = [[Document(f"p{i}-{j}", f"Note {i} {j}.") for j in range(i + 1)] for i in range(3)]
    hash_store.ingest_many(*groups, progress=lambda i, n: seen.append((i, n)))
    assert seen == [(0, 1), (1, 2), (2, 3)]


def test_no_groups_is_no_change(hash_store):
    before = hash_store.commit_number
    assert hash_store.ingest_many() == []
    assert hash_store.commit_number == before


def test_a_group_with_bad_input_fails_alone(hash_store, monkeypatch):
    monkeypatch.setattr(plan, "BATCH", 2)  # so the bad group has a whole batch before the item

    def bad():
        yield Document("m1", "Magenta is a colour between red and blue.")
        yield Document("m2", "Mauve is a pale purple.")
        yield Document("m3", "Maroon is a dark red.")
        yield "not a document"

    before = hash_store.commit_number
    with pytest.raises(IngestGroupsError) as caught:
        hash_store.ingest_many(
            [Document("g1", "The first group's note on glaciers.")],
            bad(),
            [Document("g3", "Third.")],
        )
    first, err, third = caught.value.outcomes
    assert isinstance(err, InputError)
    assert "1 of 3" in str(caught.value) and "group 1" in str(caught.value)
    assert (first.added, third.added) == (1, 1)
    # as the bad group alone would: its whole batch before the bad item is committed
    ids = {"g1", "g3", "m1", "m2"}
    assert all(hash_store.get(i) for i in ids)
    with pytest.raises(NotFoundError, match="m3"):
        hash_store.get("m3")
    assert hash_store.commit_number == before + 2  # the first change, then the rest's
    assert hash_store.components.archive.unindexed() == []
    assert hash_store.query("glaciers", k=1).hits[0].doc_id == "g1"


def test_a_group_whose_batch_fails_fails_alone(tmp_path):
    groups = [
        [Document("h1", "Heron notes: herons wade in the shallow marsh.")],
        [Document("h2", "Hawk notes: hawks circle over the ridge.")],
        [Document("h3", "Hoopoe notes: hoopoes probe the lawn for grubs.")],
    ]
    batches: list[str] = []

    def fail_second(point: str, event: str) -> None:
        if point == "ingest-batch" and event == "enter":
            batches.append(point)
            if len(batches) == 2:
                raise RuntimeError("embedder refused the hawk")

    with Pensive(tmp_path / "one", config=HASH_CONFIG) as p:
        remove = hooks.add_listener(fail_second)
        try:
            with pytest.raises(IngestGroupsError) as caught:
                p.ingest_many(*groups)
        finally:
            remove()
        first, err, third = caught.value.outcomes
        assert isinstance(err, RuntimeError) and "hawk" in str(err)
        with Pensive(tmp_path / "alone", config=HASH_CONFIG) as q:
            assert _plain(first) == _plain(q.ingest(groups[0]))
            assert _plain(third) == _plain(q.ingest(groups[2]))
        # the groups before it are whole (committed, searchable), the one after it ingested
        assert p.components.archive.unindexed() == []
        assert p.query("herons marsh", k=1).hits[0].doc_id == "h1"
        assert p.query("hoopoes lawn grubs", k=1).hits[0].doc_id == "h3"
        with pytest.raises(NotFoundError, match="h2"):
            p.get("h2")
        p.ingest(groups[1])  # and the store goes on as usual
        assert p.query("hawks ridge", k=1).hits[0].doc_id == "h2"


def test_a_failing_last_group_leaves_the_earlier_ones_committed(hash_store):
    calls: list[str] = []

    def fail_second(point: str, event: str) -> None:
        if point == "ingest-batch" and event == "enter":
            calls.append(point)
            if len(calls) == 2:
                raise RuntimeError("no")

    remove = hooks.add_listener(fail_second)
    try:
        with pytest.raises(IngestGroupsError) as caught:
            hash_store.ingest_many([Document("k1", "Kestrel.")], [Document("k2", "Kite.")])
    finally:
        remove()
    assert caught.value.outcomes[0].added == 1
    assert hash_store.components.archive.unindexed() == []
    assert hash_store.query("kestrel", k=1).hits[0].doc_id == "k1"


def test_archive_only_applies_to_every_group(hash_store):
    reports = hash_store.ingest_many(
        [Document("r1", "Cold record one.")],
        [Document("r2", "Cold record two.")],
        archive_only=True,
    )
    assert [(r.added, r.chunks_embedded) for r in reports] == [(1, 0), (1, 0)]
    assert hash_store.get("r2").text == "Cold record two."


def test_a_document_given_twice_in_one_change_is_handled_as_a_later_call_would(
    hash_store, monkeypatch
):
    monkeypatch.setattr(plan, "BATCH", 1)  # the same id in two batches of one call
    doc = Document("t", "Tulips open in the morning sun.")
    report = hash_store.ingest([doc, Document("u", "Umbrellas."), doc])
    assert (report.added, report.unchanged, report.updated, report.chunks_embedded) == (2, 1, 0, 2)


@pytest.mark.parametrize("bad", ["some text", b"bytes", 123, {"id": "a", "text": "x"}, None])
def test_a_group_that_is_not_documents_is_refused_before_anything_is_written(tmp_path, bad):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        before = p.commit_number
        with pytest.raises(InputError, match="group 1"):
            p.ingest_many([Document("a", "alpha text")], bad)
        assert p.commit_number == before and p.stats()["documents"] == 0
