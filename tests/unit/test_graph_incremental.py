"""A view brought forward by reading only the changed documents equals the view built from the
tables, matrix for matrix, over random sequences of adds, replacements and deletes; and the
change log that tells readers which documents to read."""

import random
import sqlite3

import numpy as np
import pytest

from pensive_core.graph.extract import Mention
from pensive_core.graph.incremental import update_view
from pensive_core.graph.store import EDGE_TYPES, LOG_KEEP, GraphStore, build_view


class WordKinds:
    """Each word of the form ``<kind>_<n>`` names entity ``n`` with that kind: the same key
    can come with another kind in another passage (the first one the graph saw stays)."""

    name = "test-words"

    def extract(self, text):
        out, at = [], 0
        for word in text.split():
            at = text.index(word, at)
            kind, _, key = word.partition("_")
            out.append(Mention("k" + key, word, kind, at, at + len(word)))
            at += len(word)
        return out


def assert_same(a, b):
    assert a.nodes == b.nodes
    assert a.kinds == b.kinds
    assert (a.n_chunks, a.n_entities) == (b.n_chunks, b.n_entities)
    assert a.docs == b.docs
    for t in EDGE_TYPES:
        x, y = a.edges[t], b.edges[t]
        assert x.shape == y.shape, t
        assert (x != y).nnz == 0, t


def forward(store, view, commit, upto, max_pair):
    with store.snapshot():
        changed = store.changed_since(commit, upto)
        assert changed is not None
        chunks, mentions, subjects = store.rows_of(changed)
        out = update_view(view, changed, chunks, mentions, subjects, store.kinds_of, max_pair)
    assert out is not None
    return out


def random_doc(rng, doc, n_keys):
    kinds = ["name", "date", "title"]
    chunks = []
    for i in range(rng.randint(0, 4)):
        words = [f"{rng.choice(kinds)}_{rng.randrange(n_keys)}" for _ in range(rng.randint(0, 6))]
        chunks.append((f"{doc}#{i}", i, " ".join(words)))
    title = rng.choice([None, "", f"K{rng.randrange(n_keys)}", f"Subject {doc}"])
    return chunks, title


@pytest.mark.parametrize("seed", range(12))
def test_forward_equals_built_over_random_changes(tmp_path, seed):
    rng = random.Random(seed)
    max_pair = rng.choice([2, 3, 30])
    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None), max_pair)
    store.start_log(0)  # views of commit 1 on can be brought forward
    commit = 1
    store.log_changes(commit)  # nothing changed: nothing logged
    view = store.load()
    seen = commit
    docs: set[str] = set()
    for _ in range(25):
        for _ in range(rng.randint(1, 4)):
            doc = f"d{rng.randrange(12)}"
            if doc in docs and rng.random() < 0.3:
                store.remove_document(doc)
                docs.discard(doc)
            else:
                chunks, title = random_doc(rng, doc, n_keys=rng.choice([3, 15]))
                store.add_document(doc, chunks, WordKinds(), title)
                docs.add(doc)
        commit += 1
        store.log_changes(commit)
        if rng.random() < 0.3:
            continue  # this reader skips a commit: the next step covers two
        view = forward(store, view, seen, commit, max_pair)
        seen = commit
        assert_same(view, store.load())


def test_log_is_refused_before_the_writer_opened_and_after_it_was_pruned(tmp_path):
    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    assert store.changed_since(0, 1) is None  # no writer of this release logged anything
    store.add_document("a", [("a#0", 0, "Ann Lee met Bob Ray.")], WordKinds())
    store.log_changes(1)  # not started: nothing logged, still unknown
    assert store.changed_since(0, 1) is None
    store.start_log(3)  # a writer opening at commit 3: views of 3 or before are rebuilt
    assert store.changed_since(3, 3) is None
    assert store.changed_since(4, 4) == []
    assert store.changed_since(4, 5) is None  # commit 5 is not logged (yet)
    store.add_document("b", [("b#0", 0, "name_1")], WordKinds())
    store.log_changes(5)
    assert store.changed_since(4, 5) == ["b"]
    assert store.changed_since(5, 5) == []
    store.remove_document("b")
    store.log_changes(5 + LOG_KEEP)
    assert store.changed_since(4, 5 + LOG_KEEP) is None  # its rows were pruned
    assert store.changed_since(5 + LOG_KEEP - 1, 5 + LOG_KEEP) == ["b"]
    assert store.changed_since(6, 5 + LOG_KEEP) is None  # commits 7.. were never logged


def test_a_commit_of_a_writer_that_logs_nothing_is_not_brought_forward(tmp_path):
    """A writer of an earlier release changes the tables and moves the commit without a
    word in the log: a view of before it is built whole."""
    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    store.start_log(0)
    store.add_document("a", [("a#0", 0, "name_1 name_2")], WordKinds())
    store.log_changes(1)
    old = GraphStore(store.db)  # logs nothing: start_log was never called on it
    old.add_document("b", [("b#0", 0, "name_3")], WordKinds())
    old.log_changes(2)
    assert store.changed_since(1, 2) is None
    assert store.changed_since(1, 1) == []


def test_a_writer_opening_forgets_commits_that_never_happened(tmp_path):
    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    store.start_log(0)
    store.add_document("a", [("a#0", 0, "name_1")], WordKinds())
    store.log_changes(1)  # the writer died before its commit 1 was marked
    again = GraphStore(store.db)
    again.start_log(0)
    assert store.db.execute("SELECT COUNT(*) FROM graph_log").fetchone()[0] == 0


def test_the_log_and_the_rows_are_read_in_one_snapshot(tmp_path):
    """Another process committing while a reader brings its view forward: the reader sees
    the tables as they were when its reading began, log and rows alike."""
    path = tmp_path / "g.sqlite"
    writer = GraphStore(sqlite3.connect(path, isolation_level=None))
    writer.db.execute("PRAGMA journal_mode=WAL")
    writer.start_log(0)
    writer.add_document("a", [("a#0", 0, "name_1")], WordKinds())
    writer.log_changes(1)
    reader = GraphStore(sqlite3.connect(path, isolation_level=None), create=False)
    with reader.snapshot():
        assert reader.changed_since(0, 1) is None and reader.changed_since(1, 1) == []
        writer.add_document("a", [("a#0", 0, "name_9")], WordKinds())
        writer.log_changes(2)
        assert reader.changed_since(1, 1) == []  # commit 2 is not in this snapshot
        assert [k for _, k, _, _ in reader.rows_of(["a"])[1]] == ["k1"]
        assert reader.kinds_of(["k9"]) == {}
    assert reader.changed_since(1, 2) == ["a"]
    assert [k for _, k, _, _ in reader.rows_of(["a"])[1]] == ["k9"]


def test_a_failed_write_stays_logged(tmp_path):
    """A write that rolled back is logged anyway: reading a document again that did not
    change gives the same view, missing one that did would not."""

    class Boom(WordKinds):
        def extract(self, text):
            raise RuntimeError("boom")

    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    store.start_log(0)
    store.add_document("a", [("a#0", 0, "name_1 name_2")], WordKinds())
    store.log_changes(1)
    view = store.load()
    with pytest.raises(RuntimeError):
        store.add_document("a", [("a#0", 0, "x")], Boom())
    store.remove_document("gone")  # never there
    store.log_changes(2)
    assert sorted(store.changed_since(1, 2)) == ["gone"]
    assert_same(forward(store, view, 1, 2, 30), store.load())


def test_a_view_without_documents_or_a_moved_passage_is_built_whole(tmp_path):
    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    store.start_log(0)
    store.add_document("a", [("p#0", 0, "name_1 name_2")], WordKinds())
    store.log_changes(1)
    view = store.load()
    bare = type(view)(view.nodes, view.kinds, view.n_chunks, view.n_entities, view.edges)
    assert update_view(bare, [], [], [], [], store.kinds_of, 30) is None
    # passage p#0 now belongs to b while a is not among the changed documents
    store.db.execute("UPDATE graph_chunks SET doc_id = 'b' WHERE chunk_id = 'p#0'")
    chunks, mentions, subjects = store.rows_of(["b"])
    assert update_view(view, ["b"], chunks, mentions, subjects, store.kinds_of, 30) is None


def test_build_view_records_each_passages_document():
    view = build_view(
        [("b#0", "b", 0), ("a#1", "a", 1), ("a#0", "a", 0)], [(1, "x", "name")], [], [], 30
    )
    assert view.nodes[:3] == ["a#0", "a#1", "b#0"]
    assert view.docs == ("a", "a", "b")
    assert np.array_equal(view.edges["next"].toarray()[0, :3], [0, 1, 0])


def test_a_dropped_log_is_started_again_and_vouches_only_for_later_commits(tmp_path):
    store = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    store.start_log(0)
    store.add_document("a", [("a#0", 0, "name_1")], WordKinds())
    store.log_changes(1)
    store.db.execute("DROP TABLE graph_log")
    store.add_document("b", [("b#0", 0, "name_2")], WordKinds())
    store.log_changes(2)  # no error: the log starts again at this commit
    assert store.changed_since(1, 2) is None  # commit 2's log alone cannot vouch for 1 -> 2
    store.add_document("c", [("c#0", 0, "name_3")], WordKinds())
    store.log_changes(3)
    assert store.changed_since(2, 3) == ["c"]
