"""The disk failing the store: full, read-only, an I/O error (issue 24, D11 and D12).

How the failures are made: a real filesystem where the test may mount one -- a small tmpfs
the test mounts and unmounts (``mount -t tmpfs -o size=...``, which needs root; these tests
skip without it), filled with a filler file to leave a few kilobytes free, and remounted
read-only (``mount -o remount,ro``: a real EROFS, which root cannot write through, unlike
``chmod a-w``). Where the failure must hit one exact file, the file layer's write is replaced
by one raising the operating system's error (``OSError(ENOSPC)``/``EIO``), which is what a
full disk or a failing one raises from ``write``.

After every refused operation the searchable passages, vector and BM25 counts are checked
unchanged, and the answers to the queries asked before are the same.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pensive_core import Document, Pensive, StorageError
from pensive_core.backends import faiss as faiss_backend

pytestmark = [pytest.mark.adversarial, pytest.mark.integration]

CFG = {"embedder": {"name": "hash", "dim": 64}}
QUERIES = ["lantern north door", "compass harbour", "anchor rope", "number 3", "a7 lantern"]


def docs(prefix: str, n: int, word: str = "lantern", size: int = 1) -> list[Document]:
    pad = " ".join(f"{word}{prefix}{j} filler text about the harbour" for j in range(size))
    return [
        Document(
            id=f"{prefix}{i}", text=f"The {word} number {prefix}{i} hangs by the north door. {pad}"
        )
        for i in range(n)
    ]


def counts(p: Pensive) -> tuple[int, int]:
    s = p.stats(disk=False)
    return s["vectors"], len(p.components.sparse.ids())


def answers(p: Pensive) -> list[list[str]]:
    return [[h.chunk_id for h in p.query(q, k=5).hits] for q in QUERIES]


def searchable(p: Pensive, word: str) -> set[str]:
    return {h.doc_id for h in p.query(word, k=50).hits if word in h.text}


@pytest.fixture
def small_fs(tmp_path):
    """Mount a tmpfs of the size given; yields a function ``mount(size) -> folder``."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"fs-{len(mounted)}"
        where.mkdir()
        run = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            check=False,
        )
        if run.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {run.stderr.decode().strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


def fill(where: Path, leave: int) -> Path:
    """Fill the filesystem at ``where`` but ``leave`` bytes."""
    filler = where / "filler"
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))
    return filler


def listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")}


# -- read-only (D11) ---------------------------------------------------------------------------
def test_a_store_on_a_read_only_filesystem_opens_read_only_and_refuses_writers(small_fs):
    fs = small_fs("64m")
    store = fs / "store"
    with Pensive(store, config=CFG) as p:
        p.ingest(docs("a", 20))
        before, n = answers(p), counts(p)
    remount(fs, "ro")
    files = listing(store)
    with Pensive(store, read_only=True) as r:
        assert answers(r) == before
        assert counts(r) == n
        assert r.get("a3").text.startswith("The lantern number a3")
    assert listing(store) == files  # nothing created beside the files (no -wal, no -shm)
    with pytest.raises(StorageError, match="read-only") as info:
        Pensive(store)
    assert "read_only=True" in str(info.value)
    assert info.value.errno == errno.EROFS
    with pytest.raises(StorageError, match="read-only"):
        Pensive(fs / "new-store")  # a new store on a read-only filesystem
    # the command line says so in one line, no traceback
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cli = [sys.executable, "-m", "pensive_core.cli"]
    out = subprocess.run([*cli, "stats", "--store", str(store)], capture_output=True, env=env)
    assert out.returncode == 0, out.stderr.decode()
    src = fs.parent / "more.txt"
    src.write_text("one more lantern")
    out = subprocess.run(
        [*cli, "ingest", str(src), "--store", str(store)], capture_output=True, env=env
    )
    err = out.stderr.decode()
    assert out.returncode == 1 and "read-only" in err and "Traceback" not in err, err


def test_conversations_read_on_a_read_only_filesystem(small_fs):
    """The session registry and turn logs are in WAL mode: ``mode=ro`` alone cannot open
    them where no ``-shm`` can be made, and every conversation read (and ``pensive health``,
    which counts sessions) failed with a raw ``OperationalError``."""
    fs = small_fs("64m")
    store = fs / "store"
    with Pensive(store, config=CFG) as p:
        p.ingest(docs("a", 5))
        conv = p.conversation("s42", user="ana")
        conv.add("user", "I moved to Lisbon last week")
        conv.add("user", "My dog is called Rex")
        recalled = [h.chunk_id for h in conv.recall("Lisbon", k=2)]
    remount(fs, "ro")
    files = listing(store)
    with Pensive(store, read_only=True) as r:
        assert r.conversations() == ["s42"]
        conv = r.conversation("s42", create=False)
        assert [t.text for t in conv.turns()][1] == "My dog is called Rex"
        assert [h.chunk_id for h in conv.recall("Lisbon", k=2)] == recalled
    assert listing(store) == files  # nothing created beside the files
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for args in (["health"], ["chat", "list"], ["chat", "turns", "s42"]):
        out = subprocess.run(
            [sys.executable, "-m", "pensive_core.cli", *args, "--store", str(store)],
            capture_output=True,
            env=env,
        )
        assert out.returncode == 0, (args, out.stderr.decode())


# -- disk full (D12) ---------------------------------------------------------------------------
def test_a_full_disk_is_one_storage_error_and_the_batch_is_absent_or_complete(small_fs):
    fs = small_fs("64m")
    store = fs / "store"
    with Pensive(store, config=CFG) as p:
        p.ingest(docs("a", 10))
        before, n = answers(p), counts(p)
    reader = Pensive(store, read_only=True)
    filler = fill(fs, leave=256 * 1024)
    p = Pensive(store, config=CFG)
    with pytest.raises(StorageError) as info:
        p.ingest(docs("b", 400, word="compass", size=20))
    err = info.value
    assert err.errno == errno.ENOSPC
    assert str(store) in str(err) and "full" in str(err) and "free space" in str(err)
    stored = set(err.stored)
    assert stored <= {f"b{i}" for i in range(400)}
    # nothing of the failed call is searchable, by the writer or by a reader
    assert counts(p) == n and answers(p) == before
    assert searchable(p, "compass") == set()
    assert searchable(reader, "compass") == set() and answers(reader) == before
    fresh = Pensive(store, read_only=True)
    assert searchable(fresh, "compass") == set() and answers(fresh) == before
    fresh.close()
    # close releases the lock whatever its own writes do
    with contextlib.suppress(StorageError):
        p.close()
    filler.unlink()
    with Pensive(store, config=CFG) as p:  # the same process reopens; the batch completes
        found = searchable(p, "compass")
        assert found == stored  # exactly the documents the error said were kept
        assert counts(p)[0] == n[0] + len(stored)
        if not stored:
            assert answers(p) == before
    reader.close()


def test_an_index_file_failing_to_write_fails_the_ingest_cleanly(tmp_path, monkeypatch):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 10))
        before, n = answers(p), counts(p)
    real = faiss_backend.atomic_write_bytes

    def full(path, data):
        if path.name.startswith("faiss-"):  # the index written whole, or a log of the batch
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, data)

    p = Pensive(tmp_path, config=CFG)
    monkeypatch.setattr(faiss_backend, "atomic_write_bytes", full)
    with pytest.raises(StorageError, match="full") as info:
        p.ingest(docs("b", 5, word="compass"))
    assert set(info.value.stored) == {f"b{i}" for i in range(5)}
    assert any("not committed" in note for note in info.value.__notes__)
    assert counts(p) == n and answers(p) == before and searchable(p, "compass") == set()
    with Pensive(tmp_path, read_only=True) as r:  # the BM25 files of the batch were written
        assert searchable(r, "compass") == set() and answers(r) == before
    p.close()
    monkeypatch.setattr(faiss_backend, "atomic_write_bytes", real)
    with Pensive(tmp_path, config=CFG) as p:
        assert searchable(p, "compass") == {f"b{i}" for i in range(5)}
        assert counts(p) == (n[0] + 5, n[1] + 5)


def test_close_releases_the_writer_lock_when_its_commit_fails(tmp_path, monkeypatch):
    from pensive_core.ingest.commit import Committer

    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 3))
        n = counts(p)
    p = Pensive(tmp_path, config=CFG)

    def broken(self):
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(tmp_path / "bm25"))

    monkeypatch.setattr(Committer, "commit", broken)
    with pytest.raises(StorageError, match="I/O error") as info:
        p.close()
    assert info.value.errno == errno.EIO
    monkeypatch.undo()
    with Pensive(tmp_path, config=CFG) as again:  # the same process opens it for writing
        assert counts(again) == n


def test_an_unwritable_lock_is_a_storage_error_not_a_traceback(tmp_path, monkeypatch):
    """The writer's first write (its lock) on a read-only medium, without a mount: the
    failure ``open`` gives there, injected."""
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 2))
    import builtins

    real_open = builtins.open

    def ro_open(file, mode="r", *args, **kwargs):
        if str(file).endswith("writer.lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", ro_open)
    with pytest.raises(StorageError, match="read-only filesystem"):
        Pensive(tmp_path, config=CFG)
    monkeypatch.undo()
    with Pensive(tmp_path, config=CFG) as p:  # nothing was left held
        assert p.stats(disk=False)["documents"] == 2
