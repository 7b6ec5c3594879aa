"""The sparse index conformance suite: what every :class:`~pensive_core.sparse.SparseIndex`
must do, as pytest tests an implementation's own test module inherits.

Pensive runs it on the embedded BM25 segments (:class:`~pensive_core.sparse.BM25Index`) and
on the Postgres postings (:class:`~pensive_core.sparse.postgres.PostgresBM25`). Scores are
checked against :func:`reference_scores`, a direct implementation of the BM25 variants
bm25s computes (``lucene``, ``robertson``, ``atire``) over the index's own tokenizer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..config import BM25Config
from ..sparse.base import SparseIndex
from ..tokenize import Tokenizer

__all__ = ["IndexFactory", "SparseIndexTests", "reference_scores"]

#: What the ``make_index`` fixture returns: opens (or reopens) an index on a folder.
IndexFactory = Callable[[Path, BM25Config], SparseIndex]

DOCS = [
    "the cat sat on the mat",
    "dogs chase cats in the park",
    "a bird sings in the tree at dawn",
    "the stock market fell sharply today",
    "cats and dogs are popular pets, cats more than dogs",
    "invoice INV-4471 was paid in Q3 2024",
    "the park has many trees and birds",
    "market analysts expect growth in Q4",
    "quantum computers factor large numbers",
    "the river flows past the old mill",
    "tea and coffee contain caffeine",
    "the mill was built in 1820 by the river, and the river still turns the mill wheel",
]
QUERIES = ["cats park", "market growth", "river mill 1820", "INV-4471", "cats cats dogs"]


def reference_scores(docs: dict[str, str], query: str, cfg: BM25Config) -> dict[str, float]:
    """BM25 of ``query`` for every passage of ``docs`` (non-zero scores only), exactly as
    bm25s defines the variant: ``idf(t) * tf / (tf + k1 * (1 - b + b * len / avglen))``
    (times ``k1 + 1`` for ``atire``) summed over the query's tokens (a repeated token counts
    again)."""
    tok = Tokenizer(cfg.stemmer, cfg.stopwords)
    toks = {cid: tok.tokenize(text) for cid, text in docs.items()}
    n = len(toks)
    avg = sum(len(t) for t in toks.values()) / max(1, n)
    df: Counter[str] = Counter()
    for t in toks.values():
        df.update(set(t))
    out: dict[str, float] = {}
    for cid, t in toks.items():
        tf = Counter(t)
        score = 0.0
        for term in tok.tokenize(query):
            if not tf[term] or not df[term]:
                continue
            d = df[term]
            if cfg.method == "lucene":
                idf = math.log(1 + (n - d + 0.5) / (d + 0.5))
            elif cfg.method == "robertson":
                idf = math.log(max((n - d + 0.5) / (d + 0.5), 1.0))
            else:
                idf = math.log(n / d)
            norm = cfg.k1 * (1 - cfg.b + cfg.b * len(t) / avg) if avg else cfg.k1
            lift = cfg.k1 + 1 if cfg.method == "atire" else 1.0  # atire keeps Okapi's (k1 + 1)
            score += idf * lift * tf[term] / (tf[term] + norm)
        if score > 0:
            out[cid] = score
    return out


class SparseIndexTests:
    """What every sparse index must do; subclass it once per implementation and provide the
    ``make_index`` fixture: ``make_index(folder, cfg)`` opens (or reopens) the index kept at
    ``folder`` (each test has its own ``tmp_path``).

    The tests cover the empty index, scores equal to :func:`reference_scores` after one
    commit (to 1e-4, every BM25 variant), pending additions left out of search until the
    commit, replacing and deleting (unknown ids too), the ``allowed`` filter, ``scores_for``,
    ``n_live``, ``ids`` and ``in``, persistence across a reopen, and ``idf_shift`` bounding how
    far a commit moved the scores of passages that were there before (when the commit did not
    report ``rebuilt``). ``exact_across_commits`` says whether scores stay exact over many
    commits and deletes (the embedded segments normalise lengths per segment until a merge).
    """

    exact_across_commits: bool = False

    @pytest.fixture
    def make_index(self) -> IndexFactory:
        """The factory each test opens the index with; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_index` fixture")

    @staticmethod
    def fill(ix: SparseIndex, docs: Sequence[str], per_commit: int | None = None) -> dict[str, str]:
        texts = {}
        for i, text in enumerate(docs):
            ix.add(f"d{i}", text)
            texts[f"d{i}"] = text
            if per_commit and (i + 1) % per_commit == 0:
                ix.commit()
        ix.commit()
        return texts

    def assert_scores(self, ix: SparseIndex, texts: dict[str, str], cfg: BM25Config) -> None:
        for q in QUERIES:
            want = reference_scores(texts, q, cfg)
            got = dict(ix.search(q, 100))
            assert set(got) == set(want), q
            for cid, s in want.items():
                assert got[cid] == pytest.approx(s, abs=1e-4), (q, cid)
            ranked = [s for _, s in ix.search(q, 100)]
            assert ranked == sorted(ranked, reverse=True)

    def test_protocol_and_empty_index(self, make_index: IndexFactory, tmp_path: Path) -> None:
        ix = make_index(tmp_path, BM25Config())
        assert isinstance(ix, SparseIndex)
        assert ix.n_live == 0 and ix.ids() == set() and "d0" not in ix
        assert ix.search("anything at all", 5) == []
        assert ix.scores_for("cats", ["d0"]) == {}
        ix.delete(["never-there"])
        ix.commit()
        assert ix.n_live == 0

    @pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
    def test_scores_equal_the_reference(
        self, make_index: IndexFactory, tmp_path: Path, method: str
    ) -> None:
        cfg = BM25Config(method=method)
        ix = make_index(tmp_path, cfg)
        texts = self.fill(ix, DOCS)
        self.assert_scores(ix, texts, cfg)
        assert ix.search("cats park", 2) == ix.search("cats park", 100)[:2]

    def test_other_k1_b_and_no_stemming(self, make_index: IndexFactory, tmp_path: Path) -> None:
        cfg = BM25Config(k1=1.5, b=0.9, stemmer="", stopwords="none")
        ix = make_index(tmp_path, cfg)
        self.assert_scores(ix, self.fill(ix, DOCS), cfg)

    def test_exact_over_many_commits_and_deletes(
        self, make_index: IndexFactory, tmp_path: Path
    ) -> None:
        if not self.exact_across_commits:
            pytest.skip("this index normalises lengths per segment until a merge")
        cfg = BM25Config()
        ix = make_index(tmp_path, cfg)
        texts = self.fill(ix, DOCS, per_commit=3)
        ix.delete(["d1", "d7"])
        ix.add("d3", "cats in a market by the river")
        ix.commit()
        texts.pop("d1"), texts.pop("d7")
        texts["d3"] = "cats in a market by the river"
        self.assert_scores(ix, texts, cfg)

    def test_pending_additions_wait_for_the_commit(
        self, make_index: IndexFactory, tmp_path: Path
    ) -> None:
        ix = make_index(tmp_path, BM25Config())
        self.fill(ix, DOCS[:4])
        ix.add("late", "quantum cats")
        assert ix.n_live == 5  # counted at once
        assert all(cid != "late" for cid, _ in ix.search("quantum cats", 10))
        ix.commit()
        assert ix.search("quantum cats", 1)[0][0] == "late"

    def test_replace_and_delete(self, make_index: IndexFactory, tmp_path: Path) -> None:
        ix = make_index(tmp_path, BM25Config())
        self.fill(ix, DOCS)
        ix.add("d0", "quantum tea ceremony")  # replaces the cat on the mat
        ix.delete(["d5", "never-there"])
        ix.commit()
        assert ix.n_live == len(DOCS) - 1
        assert "d5" not in ix and "d0" in ix
        assert ix.ids() == {f"d{i}" for i in range(len(DOCS))} - {"d5"}
        assert all(cid != "d0" for cid, _ in ix.search("mat", 10))
        assert ix.search("ceremony", 1)[0][0] == "d0"
        assert ix.search("INV-4471", 5) == []
        ix.add("x", "once")
        ix.delete(["x"])  # added and removed before any commit
        ix.commit()
        assert "x" not in ix and ix.n_live == len(DOCS) - 1

    def test_allowed_and_scores_for(self, make_index: IndexFactory, tmp_path: Path) -> None:
        ix = make_index(tmp_path, BM25Config())
        self.fill(ix, DOCS)
        every = dict(ix.search("cats dogs park", 100))
        allowed = {"d1", "d6", "d9"}
        got = ix.search("cats dogs park", 100, allowed=allowed)
        assert {c for c, _ in got} == set(every) & allowed
        assert ix.search("cats dogs park", 10, allowed=set()) == []
        some = ix.scores_for("cats dogs park", ["d1", "d4", "d9", "never-there"])
        assert set(some) <= {"d1", "d4", "d9"} and {"d1", "d4"} <= set(some)
        for cid in ("d1", "d4"):
            assert some[cid] == pytest.approx(every[cid], abs=1e-5)
        assert some.get("d9", 0.0) == 0.0

    def test_persists_across_a_reopen(self, make_index: IndexFactory, tmp_path: Path) -> None:
        cfg = BM25Config()
        ix = make_index(tmp_path, cfg)
        self.fill(ix, DOCS)
        ix.delete(["d2"])
        ix.commit()
        before = {q: ix.search(q, 10) for q in QUERIES}
        close = getattr(ix, "close", None)
        if close is not None:
            close()
        again = make_index(tmp_path, cfg)
        assert again.n_live == len(DOCS) - 1 and "d2" not in again
        for q, hits in before.items():
            got = again.search(q, 10)
            assert [c for c, _ in got] == [c for c, _ in hits], q
            assert [s for _, s in got] == pytest.approx([s for _, s in hits], abs=1e-5)

    def test_idf_shift_bounds_the_moves_of_passages_already_there(
        self, make_index: IndexFactory, tmp_path: Path
    ) -> None:
        ix = make_index(tmp_path, BM25Config())
        self.fill(ix, DOCS)
        before = {q: dict(ix.search(q, 100)) for q in QUERIES}
        for i in range(5):
            ix.add(f"new{i}", f"cats everywhere, cats in the park number {i}")
        ix.commit()
        if ix.rebuilt:
            return  # every passage's norm moved: the caller drops what it cached
        for q, old in before.items():
            now = dict(ix.search(q, 100))
            moved = max((abs(now.get(c, 0.0) - s) for c, s in old.items()), default=0.0)
            assert moved <= ix.idf_shift(q) + 1e-5, q

    def test_doc_freq_when_offered(self, make_index: IndexFactory, tmp_path: Path) -> None:
        ix = make_index(tmp_path, BM25Config())
        doc_freq: Any = getattr(ix, "doc_freq", None)
        if doc_freq is None:
            pytest.skip("the index does not tell document frequencies")
        self.fill(ix, DOCS)
        tok = Tokenizer(BM25Config().stemmer, BM25Config().stopwords)
        cat, river = tok.tokenize("cats")[0], tok.tokenize("river")[0]
        got = doc_freq([cat, river, "zzzunknown"])
        assert got[cat] == 3 and got[river] == 2 and "zzzunknown" not in got
