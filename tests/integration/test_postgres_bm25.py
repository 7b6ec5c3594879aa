"""BM25 postings in a real Postgres (started by the ``postgres_dsn`` fixture): the sparse
conformance suite, scores equal to bm25s's own on a real corpus, two writers at once."""

from __future__ import annotations

import hashlib
import json
import multiprocessing

import numpy as np
import pytest

from pensive_core import BackendError, ConfigError, InputError
from pensive_core.config import BM25Config
from pensive_core.sparse import BM25Index
from pensive_core.sparse.postgres import PostgresBM25
from pensive_core.testing import SparseIndexTests, reference_scores
from tests.conftest import DATA, free_port

pytestmark = pytest.mark.integration


def prefix_for(folder) -> str:
    """One index per test folder: tests share the server, never each other's postings."""
    return "b" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


class TestPostgresBM25(SparseIndexTests):
    exact_across_commits = True

    @pytest.fixture
    def make_index(self, postgres_dsn):
        opened = []

        def make(folder, cfg):
            ix = PostgresBM25(postgres_dsn, cfg, prefix_for(folder))
            opened.append(ix)
            return ix

        yield make
        for ix in opened:
            ix.close()


def scifact_slice(n: int) -> dict[str, str]:
    """The first ``n`` SciFact abstracts from ../shared/data, or a skip when it is absent."""
    path = DATA / "scifact" / "corpus.jsonl"
    if not path.is_file():
        pytest.skip(f"SciFact not found at {path}")
    out = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out[f"sf{row['_id']}"] = f"{row['title']}\n\n{row['text']}"
            if len(out) >= n:
                break
    return out


def test_scores_equal_bm25s_on_real_abstracts(postgres_dsn, tmp_path):
    """300 SciFact abstracts in one commit: the embedded index (bm25s) and the postings give
    the same top 20 and the same scores to 1e-4 for 20 queries."""
    docs = scifact_slice(300)
    cfg = BM25Config()
    emb = BM25Index(tmp_path / "bm25", cfg)
    pg = PostgresBM25(postgres_dsn, cfg, prefix_for(tmp_path))
    for cid, text in docs.items():
        emb.add(cid, text)
        pg.add(cid, text)
    emb.commit()
    pg.commit()
    queries = [t.split("\n")[0] for t in list(docs.values())[::15]]
    for q in queries:
        a, b = emb.search(q, 20), pg.search(q, 20)
        assert a and len(a) == len(b), q
        np.testing.assert_allclose([s for _, s in a], [s for _, s in b], atol=1e-4)
        sa, sb = dict(a), dict(b)
        for cid in set(sa) & set(sb):
            assert sa[cid] == pytest.approx(sb[cid], abs=1e-4)
        # ids may swap only between equal scores
        assert {c for c, s in a if s > b[-1][1] + 1e-4} <= set(sb), q
    pg.close()


def _writer(dsn: str, prefix: str, start: int, n: int, out) -> None:  # type: ignore[no-untyped-def]
    ix = PostgresBM25(dsn, BM25Config(), prefix)
    for i in range(start, start + n):
        ix.add(f"w{i}", f"shared words plus number{i}")
        if i % 10 == 9:
            ix.commit()
    ix.commit()
    ix.close()
    out.put(start)


def test_two_processes_write_at_once_and_the_statistics_stay_exact(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    PostgresBM25(postgres_dsn, BM25Config(), prefix).close()  # tables made once
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(postgres_dsn, prefix, s, 100, q)) for s in (0, 100)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    ix = PostgresBM25(postgres_dsn, BM25Config(), prefix)
    assert ix.n_live == 200 and len(ix.ids()) == 200
    texts = {f"w{i}": f"shared words plus number{i}" for i in range(200)}
    want = reference_scores(texts, "shared number7", BM25Config())
    got = dict(ix.search("shared number7", 200))
    assert set(got) == set(want)
    assert max(abs(got[c] - s) for c, s in want.items()) < 1e-4
    ix.close()


def test_a_bad_prefix_and_an_unreachable_server_are_clear(postgres_dsn):
    with pytest.raises(ConfigError, match="prefix"):
        PostgresBM25(postgres_dsn, BM25Config(), "Bad-Prefix")
    port = free_port()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}/db") as err:
        PostgresBM25(f"postgresql://u:s3cret@127.0.0.1:{port}/db", BM25Config(), "x", timeout_s=2)
    assert "s3cret" not in str(err.value)


def test_a_crash_before_the_commit_leaves_nothing(postgres_dsn, tmp_path):
    ix = PostgresBM25(postgres_dsn, BM25Config(), prefix_for(tmp_path))
    ix.add("a", "kept words")
    ix.commit()
    ix.add("b", "lost words")
    ix.delete(["a"])
    ix.close()  # as a crash: the waiting writes never reach the server
    again = PostgresBM25(postgres_dsn, BM25Config(), prefix_for(tmp_path))
    assert again.ids() == {"a"} and again.n_live == 1
    assert again.search("words", 5)[0][0] == "a"
    again.close()


# -- an outside attack's findings, kept as tests ------------------------------------------------
def test_a_bad_id_is_refused_at_once_and_later_commits_still_work(postgres_dsn, tmp_path):
    ix = PostgresBM25(postgres_dsn, BM25Config(), prefix_for(tmp_path))
    for bad in ("a\x00b", "\udc80", 7, "x" * 2001):
        with pytest.raises(InputError):
            ix.add(bad, "gamma")
    with pytest.raises(InputError):
        ix.delete("ab")
    ix.add("good", "delta words")
    ix.commit()
    assert ix.ids() == {"good"} and ix.n_live == 1
    assert ix.search("delta", 5, allowed={1, "good"})[0][0] == "good"
    ix.close()


def test_a_token_longer_than_a_key_scores_as_in_bm25s(postgres_dsn, tmp_path):
    blob = "QUJD" * 1000  # one 4,000-character token (a base64 run)
    docs = {"a": f"payload {blob} end", "b": "payload small end", "c": "nothing here"}
    pg = PostgresBM25(postgres_dsn, BM25Config(), prefix_for(tmp_path))
    emb = BM25Index(tmp_path / "bm25", BM25Config())
    for cid, text in docs.items():
        pg.add(cid, text)
        emb.add(cid, text)
    pg.commit()
    emb.commit()
    for q in (blob, f"payload {blob}", "payload"):
        a, b = emb.search(q, 5), pg.search(q, 5)
        assert [c for c, _ in a] == [c for c, _ in b]
        np.testing.assert_allclose([s for _, s in a], [s for _, s in b], atol=1e-4)
    pg.close()
