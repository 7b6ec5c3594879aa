"""Each store file damaged in turn (issue 24, D13): the store refuses with a CorruptStoreError
naming the file and the repair, or (a cache) rebuilds it with a warning. Never a silently
different answer: every answer given after the damage is compared with the one before it.
``verify`` finds the damage and ``repair`` brings back the answers from before.

Damage is done to copies of one store built per module: 4 KB of flipped bytes in the FAISS
index file, a names file reordered, a BM25 segment array flipped, manifests truncated or
deleted, garbage in ``l1.sqlite``, and the bytes of one archived document body flipped where
they sit in ``pensive.sqlite``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pensive_core import CorruptStoreError, Document, Pensive, repair_store, verify_store

pytestmark = pytest.mark.adversarial

CFG = {"embedder": {"name": "hash", "dim": 64}}
QUERIES = [f"lantern number a{i} north door" for i in range(0, 60, 6)]


def docs(n: int) -> list[Document]:
    words = ["harbour", "compass", "anchor", "rope", "sail", "mast", "keel", "tide"]
    return [
        Document(
            id=f"a{i}",
            text=f"The lantern number a{i} hangs by the north door, near the "
            f"{words[i % 8]} and the {words[(i * 3) % 8]}. " * 3,
        )
        for i in range(60)
    ][:n]


def answers(p: Pensive) -> list[list[tuple[str, float]]]:
    return [[(h.chunk_id, round(h.score, 6)) for h in p.query(q, k=5).hits] for q in QUERIES]


def same(got, want) -> bool:
    """The same answers, up to the order of exact ties (a rebuilt index may list tied
    passages in another order): the same scores, and above each query's last score the same
    passages at each score."""
    for g, w in zip(got, want, strict=True):
        if [s for _, s in g] != [s for _, s in w]:
            return False
        last = w[-1][1] if w else None
        if {x for x in g if x[1] != last} != {x for x in w if x[1] != last}:
            return False
    return True


def counts(p: Pensive) -> tuple[int, int, int, int]:
    s = p.stats(disk=False)
    return s["documents"], s["chunks"], s["vectors"], len(p.components.sparse.ids())


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    folder = tmp_path_factory.mktemp("original") / "store"
    with Pensive(folder, config=CFG) as p:
        p.ingest(docs(60))
        want = answers(p)
        n = counts(p)
    return folder, want, n


@pytest.fixture
def store(original, tmp_path):
    folder, want, n = original
    copy = tmp_path / "store"
    shutil.copytree(folder, copy)
    return copy, want, n


def faiss_manifest(folder: Path) -> dict:
    return json.loads((folder / "vectors" / "faiss.json").read_text())


def the_file(folder: Path, key: str) -> Path:
    space = faiss_manifest(folder)["spaces"][""]
    return folder / "vectors" / space[key]


def flip(path: Path, offset: int, n: int) -> None:
    data = bytearray(path.read_bytes())
    offset = min(offset, max(0, len(data) - n))
    for i in range(offset, min(len(data), offset + n)):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def refused(folder: Path, name: str) -> CorruptStoreError:
    """Opening for writing and for reading both refuse, naming ``name`` and the repair."""
    for read_only in (False, True):
        with pytest.raises(CorruptStoreError) as info:
            Pensive(folder, read_only=read_only)
        message = str(info.value)
        assert name in message and "pensive repair" in message, message
    return info.value


def repaired(folder: Path, want, n) -> dict:
    report = verify_store(folder)
    assert not report["ok"]
    out = repair_store(folder)
    assert out["after"]["ok"], out["after"]
    with Pensive(folder, read_only=True) as p:
        assert same(answers(p), want)
        assert counts(p) == n
    return out


def test_flipped_bytes_in_the_faiss_index_are_refused_and_repaired(store):
    folder, want, n = store
    index = the_file(folder, "index")
    flip(index, index.stat().st_size // 2, 4096)
    refused(folder, index.name)
    out = repaired(folder, want, n)
    assert "vectors" in out["rebuilt"]
    # the vectors the flipped bytes did not touch were kept, not embedded again
    assert out["vectors_kept"] > 0 and out["reindexed"] < 60


def test_a_reordered_names_file_is_refused(store):
    folder, want, n = store
    names = the_file(folder, "names")
    side = json.loads(names.read_text())
    side["names"] = side["names"][::-1]
    names.write_text(json.dumps(side))
    refused(folder, names.name)
    repaired(folder, want, n)


def test_a_flipped_bm25_segment_is_refused_and_rebuilt(store):
    folder, want, n = store
    seg = sorted((folder / "bm25").glob("bm25-seg*.data.npy"))[0]
    flip(seg, 200, 64)
    refused(folder, seg.name)
    out = repaired(folder, want, n)
    assert out["rebuilt"] == ["bm25"] and out["reindexed"] == 0  # nothing embedded


@pytest.mark.parametrize("manifest", ["vectors/faiss.json", "bm25/bm25.json"])
@pytest.mark.parametrize("damage", ["truncated", "deleted-file"])
def test_a_damaged_manifest_is_a_corrupt_store_error(store, manifest, damage):
    folder, want, n = store
    path = folder / manifest
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        refused(folder, path.name)
    else:  # a file the manifest names is gone
        listed = json.loads(path.read_text())
        name = (listed.get("vocab_parts") or [None])[0] or listed["spaces"][""]["ids"]
        (path.parent / name).unlink()
        refused(folder, name)
    repaired(folder, want, n)


def test_a_garbage_l1_cache_is_moved_aside_with_a_warning(store, caplog):
    folder, want, n = store
    (folder / "l1.sqlite").write_bytes(os.urandom(8192))
    for suffix in ("-wal", "-shm"):
        (folder / f"l1.sqlite{suffix}").unlink(missing_ok=True)
    with caplog.at_level(logging.WARNING), Pensive(folder, read_only=True) as r:
        assert answers(r) == want  # a reader keeps its cache in memory
    assert "l1.sqlite" in caplog.text
    with caplog.at_level(logging.WARNING), Pensive(folder) as p:
        assert answers(p) == want and counts(p) == n
    assert list(folder.glob("l1.sqlite.damaged-*"))
    assert verify_store(folder)["ok"]


def test_a_flipped_document_body_is_a_corrupt_store_error_naming_the_archive(store):
    folder, want, n = store
    db = sqlite3.connect(folder / "pensive.sqlite")
    body = db.execute("SELECT body FROM documents WHERE id='a7'").fetchone()[0]
    db.close()
    raw = (folder / "pensive.sqlite").read_bytes()
    at = raw.find(body)
    assert at > 0
    flip(folder / "pensive.sqlite", at + len(body) // 2, 8)
    with Pensive(folder, read_only=True) as p:
        with pytest.raises(CorruptStoreError, match="pensive.sqlite") as info:
            p.get("a7")
        assert "a7" in str(info.value)
        assert p.get("a8").id == "a8"
        assert answers(p) == want  # passages are stored apart from bodies
        report = p.verify()
    assert not report["ok"] and report["documents_damaged"] == ["a7"]


def test_a_malformed_archive_page_is_a_corrupt_store_error(store):
    folder, want, n = store
    db = sqlite3.connect(folder / "pensive.sqlite")
    page = db.execute("PRAGMA page_size").fetchone()[0]
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name='chunks'").fetchone()[0]
    db.close()
    flip(folder / "pensive.sqlite", (root - 1) * page, page)  # the chunks table's root page
    seen = []
    for read_only in (True, False):
        try:
            with Pensive(folder, read_only=read_only) as p:
                got = answers(p)
                seen.append(got)
                assert got == want
        except CorruptStoreError as exc:
            assert "pensive.sqlite" in str(exc)
    assert not verify_store(folder)["ok"]


def test_verify_and_repair_on_the_command_line(store):
    folder, want, n = store
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cli = [sys.executable, "-m", "pensive_core.cli"]
    ok = subprocess.run([*cli, "verify", "--store", str(folder)], capture_output=True, env=env)
    assert ok.returncode == 0, ok.stderr.decode()
    index = the_file(folder, "index")
    flip(index, 100, 4096)
    bad = subprocess.run([*cli, "verify", "--store", str(folder)], capture_output=True, env=env)
    assert bad.returncode == 2 and index.name in bad.stderr.decode()
    fixed = subprocess.run([*cli, "repair", "--store", str(folder)], capture_output=True, env=env)
    assert fixed.returncode == 0, fixed.stderr.decode()
    assert "rebuilt vectors" in fixed.stdout.decode()
    with Pensive(folder, read_only=True) as p:
        assert same(answers(p), want) and counts(p) == n


def test_an_emptied_archive_is_refused_and_the_indexes_are_kept(store):
    folder, want, n = store
    (folder / "pensive.sqlite").write_bytes(b"")  # truncated to nothing (SQLite: a new file)
    before = sorted(p.name for p in (folder / "vectors").iterdir())
    for read_only in (True, False):  # a writer used to reconcile every passage away
        with pytest.raises(CorruptStoreError, match="pensive.sqlite"):
            Pensive(folder, config=CFG, read_only=read_only)
    assert sorted(p.name for p in (folder / "vectors").iterdir()) == before
    assert (folder / "bm25" / "bm25.json").exists()


def test_a_missing_bm25_manifest_is_refused_not_read_as_empty(store):
    folder, want, n = store
    (folder / "bm25" / "bm25.json").unlink()
    for read_only in (True, False):
        with pytest.raises(CorruptStoreError, match="bm25.json"):
            Pensive(folder, read_only=read_only)
    repair_store(folder)
    with Pensive(folder, read_only=True) as p:
        assert same(answers(p), want) and counts(p) == n


def test_a_garbled_passage_text_is_a_corrupt_store_error_found_and_repaired(store):
    folder, want, n = store
    db = sqlite3.connect(folder / "pensive.sqlite")
    text = db.execute("SELECT text FROM chunks WHERE doc_id='a6'").fetchone()[0]
    db.close()
    raw = (folder / "pensive.sqlite").read_bytes()
    at = raw.find(text.encode("utf-8"))
    assert at > 0
    with open(folder / "pensive.sqlite", "r+b") as f:  # one byte that is no UTF-8
        f.seek(at + 3)
        f.write(b"\xff")
    with Pensive(folder, read_only=True) as p, pytest.raises(CorruptStoreError, match="sqlite"):
        p.query("which door does lantern a6 hang by", k=5)  # never a raw sqlite3 error
    report = verify_store(folder)
    assert not report["ok"] and report["documents_damaged"] == ["a6"]
    fixed = repair_store(folder)
    assert fixed["removed"] == ["a6"]
    assert verify_store(folder)["ok"]
    with Pensive(folder, read_only=True) as p:
        assert p.query(QUERIES[1], k=5).hits[0].doc_id != "a6"  # gone, the rest answer
        assert counts(p) == (n[0] - 1, n[1] - 1, n[2] - 1, n[3] - 1)
