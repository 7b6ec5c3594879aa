import numpy as np
import pytest

from pensive_core.config import BM25Config
from pensive_core.sparse import BM25Index

DOCS = [
    "the cat sat on the mat",
    "dogs chase cats in the park",
    "a bird sings in the tree at dawn",
    "the stock market fell sharply today",
    "cats and dogs are popular pets",
    "invoice INV-4471 was paid in Q3 2024",
    "the park has many trees and birds",
    "market analysts expect growth in Q4",
    "quantum computers factor large numbers",
    "the river flows past the old mill",
    "tea and coffee contain caffeine",
    "the mill was built in 1820 by the river",
]


def build(cfg, docs=DOCS, folder=None, per_commit=None):
    ix = BM25Index(folder, cfg)
    for i, text in enumerate(docs):
        ix.add(f"d{i}", text)
        if per_commit and (i + 1) % per_commit == 0:
            ix.commit()
    ix.commit()
    return ix


def test_scores_match_rank_bm25():
    rank_bm25 = pytest.importorskip("rank_bm25")
    cfg = BM25Config(method="robertson", stemmer="", stopwords="none")
    ix = build(cfg)
    tokenized = [ix.tokenizer.tokenize(t) for t in DOCS]
    ref = rank_bm25.BM25Okapi(tokenized, k1=cfg.k1, b=cfg.b)
    for q in ["cats park", "market growth", "river mill 1820", "inv-4471"]:
        expected = ref.get_scores(ix.tokenizer.tokenize(q)) / (cfg.k1 + 1)  # Okapi scales by k1+1
        got = dict(ix.search(q, len(DOCS)))
        for i, s in enumerate(expected):
            assert got.get(f"d{i}", 0.0) == pytest.approx(s, rel=1e-5, abs=1e-6)


def test_segments_rescale_to_global_idf():
    # equal-length documents, so segment length normalisation matches the merged index exactly
    docs = [
        " ".join(w)
        for w in (
            ["apple", "pear", "fig"],
            ["apple", "kiwi", "lime"],
            ["plum", "pear", "lime"],
            ["fig", "fig", "kiwi"],
            ["date", "plum", "apple"],
            ["lime", "lime", "lime"],
        )
    ]
    cfg = BM25Config(stemmer="", stopwords="none", merge_ratio=1.0)
    single = build(cfg, docs)
    segmented = BM25Index(None, cfg)
    for i, text in enumerate(docs):
        segmented.add(f"d{i}", text)
        if i in (2, 4) or i == len(docs) - 1:  # three segments, the last with what is left
            segmented.commit()
    assert len(segmented.segments) > 1
    for q in ["apple", "pear lime", "fig kiwi plum"]:
        a, b = dict(single.search(q, 10)), dict(segmented.search(q, 10))
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-5)


def test_incremental_adds_do_not_rebuild_everything():
    cfg = BM25Config(merge_ratio=0.5)
    ix = build(cfg, DOCS[:8])
    main = ix.segments[0]
    ix.add("new", "a brand new document about cats")
    ix.commit()
    assert ix.segments[0] is main and len(ix.segments) == 2
    assert ix.search("brand new", 1)[0][0] == "new"


def test_delete_and_replace():
    ix = build(BM25Config())
    assert ix.search("invoice", 1)[0][0] == "d5"
    ix.delete(["d5", "missing-id"])
    ix.commit()
    assert all(cid != "d5" for cid, _ in ix.search("invoice paid", 10))
    assert len(ix) == len(DOCS) - 1
    ix.add("d0", "invoice replaced text")
    ix.commit()
    assert ix.search("invoice", 1)[0][0] == "d0"
    assert len(ix) == len(DOCS) - 1


def test_persistence_round_trip(tmp_path):
    ix = build(BM25Config(merge_ratio=1.0), folder=tmp_path, per_commit=5)
    ix.delete(["d1"])
    ix.commit()
    before = ix.search("cats park market river", 10)
    again = BM25Index(tmp_path, BM25Config(merge_ratio=1.0))
    assert again.search("cats park market river", 10) == before
    assert len(again) == len(ix)
    assert not list(tmp_path.glob("*.pkl"))
    for f in tmp_path.glob("*.npy"):
        np.load(f, allow_pickle=False)  # nothing persisted needs pickle


def test_unknown_terms_and_empty_index():
    assert BM25Index(None).search("anything", 5) == []
    ix = build(BM25Config())
    assert ix.search("zzzz qqqq", 5) == []


def test_many_small_commits_merge_in_tiers_without_rebuilding_main():
    ix = build(BM25Config(merge_ratio=0.5), DOCS * 3)  # 36 passages in one main segment
    main = ix.segments[0]
    for i in range(12):  # single-document ingests, as a chat application makes them
        ix.add(f"small{i}", f"note number {i} about ferries")
        ix.commit()
        assert len(ix.segments) <= 9
    assert ix.segments[0] is main  # 12 < 0.5 * 36: the main segment was never rebuilt
    assert len(ix) == 48
    assert {cid for cid, _ in ix.search("note ferries", 20)} == {f"small{i}" for i in range(12)}


@pytest.mark.parametrize("change", ["add", "delete"])
def test_idf_shift_bounds_how_far_existing_scores_move(change):
    """The L1 cache relies on this bound to keep answers a commit cannot reorder."""
    idx = BM25Index(None)
    for i, text in enumerate(DOCS * 5):
        idx.add(f"d{i}", text)
    idx.commit()
    query = "cats in the park by the river mill"
    before = dict(idx.search(query, 100))
    assert idx.idf_shift(query) == 0.0  # the first commit: nothing to compare with
    if change == "add":
        idx.add("new1", "a cat in the park")
        idx.add("new2", "the mill by the river")
    else:
        idx.delete(["d0", "d9"])
    idx.commit()
    assert not idx.rebuilt  # a rebuild moves length norms too: the cache empties instead
    after = dict(idx.search(query, 100))
    moved = max(abs(after[c] - s) for c, s in before.items() if c in after)
    shift = idx.idf_shift(query)
    assert 0 < moved <= shift + 1e-6
    assert shift < 0.5  # and it is a tight enough bound to be useful
