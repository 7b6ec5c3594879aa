"""A BM25 commit writes what changed, and a reader reloads only what changed (issue 29: a
commit costs in proportion to the change)."""

from __future__ import annotations

import json
import os

import pytest

from pensive_core.config import BM25Config
from pensive_core.errors import CorruptStoreError
from pensive_core.sparse import BM25Index

# merges off: every commit adds one segment, so what each commit writes is easy to see
CFG = BM25Config(merge_ratio=1.0)
BASE = [f"passage {i} about the river mill number{i} and its water wheel" for i in range(50)]


def _files(folder):
    return {p.name: os.stat(p).st_mtime_ns for p in folder.iterdir() if p.name != "bm25.json"}


def _written(before, after):
    return {n for n, t in after.items() if before.get(n) != t}


def _manifest(folder):
    return json.loads((folder / "bm25.json").read_text())


@pytest.fixture
def ix(tmp_path):
    folder = tmp_path / "bm25"
    ix = BM25Index(folder, CFG)
    for i, text in enumerate(BASE):
        ix.add(f"d{i}", text)
    ix.commit()
    ix.add("e0", "a second segment about ferries")
    ix.commit()
    return ix


def _search_all(ix, queries=("river mill", "ferries", "water wheel number7", "lighthouse")):
    return [ix.search(q, 10) for q in queries]


def test_an_added_passage_writes_its_segment_the_new_terms_and_df_only(ix):
    folder = ix.folder
    before = _files(folder)
    ix.add("n1", "a lighthouse keeper on the river")  # one new term (stemmed "lighthous")
    ix.commit()
    written = _written(before, _files(folder))
    new_seg = [n for n in written if n.startswith("bm25-seg3.")]
    assert len(new_seg) == 8  # 6 arrays, rows, alive: the new segment's files
    rest = written - set(new_seg)
    assert {n.split("-")[1] for n in rest} == {"vocab", "df"}, rest
    vocab_part = next(n for n in rest if n.startswith("bm25-vocab-"))
    terms = json.loads((folder / vocab_part).read_text())
    assert set(terms) == {"lighthous", "keeper"}  # the new terms, not the 100-odd known ones
    assert len(_manifest(folder)["vocab_parts"]) == 3


def test_a_deletion_rewrites_only_that_segments_alive_rows(ix):
    folder = ix.folder
    before = _files(folder)
    ix.delete(["d3"])
    ix.commit()
    written = _written(before, _files(folder))
    assert {n for n in written if ".alive-" in n} == {
        next(n for n in written if n.startswith("bm25-seg1.alive-"))
    }
    assert not any(n.startswith("bm25-vocab-") for n in written)  # no new terms: no part
    gone = set(before) - set(_files(folder))
    assert len(gone) == 2 and all(".alive-" in n or "df-" in n for n in gone), gone


def test_a_reload_takes_unchanged_segments_from_the_previous_load(ix):
    folder = ix.folder
    reader = BM25Index(folder, CFG)
    ix.add("n1", "a lighthouse keeper on the river")
    ix.delete(["e0"])
    ix.commit()
    again = BM25Index(folder, CFG, previous=reader)
    fresh = BM25Index(folder, CFG)
    assert again.segments[0].model is reader.segments[0].model  # not read again
    assert again.segments[0].alive is reader.segments[0].alive  # no deletion in it
    assert again.segments[1].model is reader.segments[1].model
    assert again.segments[1].alive is not reader.segments[1].alive  # e0 was deleted
    assert again.vocab == fresh.vocab and again.vocab is not reader.vocab
    assert _search_all(again) == _search_all(fresh) == _search_all(ix)
    assert "e0" not in again and "n1" in again
    assert len(reader.vocab) < len(again.vocab)  # the old load is left as it was
    assert [h for h in reader.search("ferries", 5)] and "n1" not in reader


def test_a_changed_file_under_the_same_name_is_read_again_not_reused(ix):
    folder = ix.folder
    reader = BM25Index(folder, CFG)
    # a rebuild in another process reuses segment names with other contents
    rebuilt = BM25Index(folder, CFG, load=False)
    for i, text in enumerate(reversed(BASE)):
        rebuilt.add(f"r{i}", text)
    rebuilt.commit()
    again = BM25Index(folder, CFG, previous=reader)
    assert not any(s.model is r.model for s in again.segments for r in reader.segments)
    assert _search_all(again) == _search_all(BM25Index(folder, CFG))


def test_many_commits_keep_few_vocabulary_files_and_the_same_vocabulary(tmp_path):
    ix = BM25Index(tmp_path / "bm25", CFG)
    for i in range(40):
        ix.add(f"d{i}", f"word{i} and uniq{i * 7}")
        ix.commit()
    parts = _manifest(ix.folder)["vocab_parts"]
    assert 1 <= len(parts) <= 16
    assert sorted(n for n in os.listdir(ix.folder) if n.startswith("bm25-vocab-")) == sorted(parts)
    loaded = BM25Index(ix.folder, CFG)
    assert loaded.vocab == ix.vocab
    assert loaded.search("word17", 3)[0][0] == "d17"


def test_an_index_written_with_one_vocabulary_file_loads_and_converts(ix):
    folder = ix.folder
    m = _manifest(folder)
    from pensive_core.files import atomic_write_bytes, write_manifest

    # the layout before vocabulary parts: one {term: id} file named by "vocab"
    old = "bm25-vocab-999.json"
    m["files"][old] = atomic_write_bytes(folder / old, json.dumps(ix.vocab).encode())
    for name in m.pop("vocab_parts"):
        m["files"].pop(name)
        (folder / name).unlink()
    m["vocab"] = old
    write_manifest(folder, "bm25.json", m)
    loaded = BM25Index(folder, CFG)
    assert loaded.vocab == ix.vocab and _search_all(loaded) == _search_all(ix)
    loaded.add("n1", "a lighthouse keeper")
    loaded.commit()
    m2 = _manifest(folder)
    assert "vocab" not in m2 and len(m2["vocab_parts"]) == 1
    assert not (folder / old).exists()
    assert BM25Index(folder, CFG).vocab == loaded.vocab


def test_a_damaged_vocabulary_part_is_refused(ix):
    part = _manifest(ix.folder)["vocab_parts"][-1]
    path = ix.folder / part
    path.write_text(path.read_text().replace("ferri", "ferrx"))
    with pytest.raises(CorruptStoreError):
        BM25Index(ix.folder, CFG)
