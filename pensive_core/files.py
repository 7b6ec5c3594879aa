"""Atomic generation-numbered files: write new files, then swap a small manifest by rename.

Every file an index writes is recorded in its manifest with its size and CRC-32
(:func:`file_sum`), and the manifest carries a checksum of itself (:func:`write_manifest`):
a reader checks what it loads against both (:func:`read_manifest`, :func:`check_file`,
:func:`read_checked`), so a damaged file is a :class:`~pensive_core.errors.CorruptStoreError`
naming it, never a silently different answer. Manifests written before checksums still load
(their next commit writes checksums).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import sqlite3
import threading
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CorruptStoreError, StorageError

__all__ = [
    "atomic_write_bytes",
    "check_file",
    "connect",
    "connect_read_only",
    "disk_error",
    "corrupt",
    "damaged",
    "file_sum",
    "last_generation",
    "load_npy",
    "load_npz",
    "load_npy_checked",
    "npy_bytes",
    "read_checked",
    "read_manifest",
    "row_sums",
    "write_manifest",
]

# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor keeps
# its recursion depth in shared state: two threads loading at once raised "SystemError: AST
# constructor recursion depth mismatch" once in CI (four sessions reopening their indexes).
# Loads are rare next to queries, so one lock for the whole process costs nothing.
_NPY_LOCK = threading.Lock()

# a manifest starts with its own checksum: {"checksum": "<crc32 of the bytes after this>", ...
_SELF_PREFIX = b'{"checksum": "'
_SELF_LEN = len(_SELF_PREFIX) + 8 + len(b'", ')
_BLOCK = 1 << 22  # bytes read at a time when checking a large file

# fixed odd 64-bit multipliers, one per vector component, for row_sums (part of the format)
_GOLDEN = 0x9E3779B97F4A7C15


def corrupt(path: str | os.PathLike[str], why: str) -> CorruptStoreError:
    """The error for a damaged store file: names it, says what is wrong and what repairs it."""
    return CorruptStoreError(
        f"{path} is damaged: {why}. Nothing was read from it; `pensive verify` lists what is "
        "damaged and `pensive repair` (pensive_core.repair_store) rebuilds the indexes from the archive",
        file=str(path),
    )


@contextlib.contextmanager
def damaged(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn what a malformed file raises while it is parsed (a missing key, a wrong type or
    shape, a file it names that is gone) into a :class:`CorruptStoreError` naming ``path``."""
    try:
        yield
    except CorruptStoreError:
        raise
    except FileNotFoundError as exc:
        raise corrupt(path, f"it names {exc.filename or 'a file'}, which is missing") from exc
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, EOFError) as exc:
        raise corrupt(path, f"unexpected content ({type(exc).__name__}: {exc})") from exc


def file_sum(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """What a manifest records of a file: its size and CRC-32 (hex)."""
    return {"size": len(data), "crc32": f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"}


def load_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """``np.load`` of one array, never a pickle, safe to call from many threads."""
    with _NPY_LOCK:
        return np.load(path, allow_pickle=False)


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, never a pickle, all read under :func:`load_npy`'s lock
    (an ``.npz`` parses each array's header when the array is read, not when it is opened)."""
    with _NPY_LOCK, np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def npy_bytes(arr: np.ndarray) -> bytes:
    """An array as the bytes of a ``.npy`` file (never pickled)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr), allow_pickle=False)
    return buf.getvalue()


def atomic_write_bytes(path: Path, data: bytes) -> dict[str, Any]:
    """Write ``data`` to ``path`` via a temp file, fsync and rename.

    Returns:
        Its :func:`file_sum`, for the manifest that will name it.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk: do not leave the partial file
            tmp.unlink()
        raise
    return file_sum(data)


def write_manifest(folder: Path, name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Atomically replace ``folder/name`` with ``payload`` as JSON, led by its own checksum.

    Returns:
        The written file's :func:`file_sum`.
    """
    body = {k: v for k, v in payload.items() if k != "checksum"}
    rest = json.dumps(body).encode()[1:]  # everything after the opening brace
    if rest == b"}":
        data = b"{}"
    else:
        data = b'%s%08x", %s' % (_SELF_PREFIX, zlib.crc32(rest) & 0xFFFFFFFF, rest)
    return atomic_write_bytes(folder / name, data)


def read_manifest(folder: Path, name: str) -> dict[str, Any] | None:
    """Read a manifest written by :func:`write_manifest`, or None if there is none.

    Raises:
        CorruptStoreError: If it is not a JSON object or its checksum does not match.
    """
    path = folder / name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if data.startswith(_SELF_PREFIX):
        want = data[len(_SELF_PREFIX) : len(_SELF_PREFIX) + 8]
        if f"{zlib.crc32(data[_SELF_LEN:]) & 0xFFFFFFFF:08x}".encode() != want:
            raise corrupt(path, "its checksum does not match its content")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise corrupt(path, f"it is not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise corrupt(path, f"it holds a JSON {type(value).__name__}, not an object")
    value.pop("checksum", None)
    return value


def check_file(path: Path, expected: Mapping[str, Any] | None) -> None:
    """Check a file against what its manifest recorded (``None``: nothing recorded, an index
    written before checksums: only that it exists).

    Raises:
        CorruptStoreError: If it is missing, or its size or checksum differ.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise corrupt(path, "the file its manifest names is missing") from None
    if expected is None:
        return
    if size != expected.get("size"):
        raise corrupt(path, f"{size} bytes where its manifest recorded {expected.get('size')}")
    crc = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            crc = zlib.crc32(block, crc)
    if f"{crc & 0xFFFFFFFF:08x}" != expected.get("crc32"):
        raise corrupt(path, "its checksum does not match its manifest")


def read_checked(path: Path, expected: Mapping[str, Any] | None) -> bytes:
    """A file's bytes, checked against its manifest's record (see :func:`check_file`).

    Raises:
        CorruptStoreError: If it is missing, or its size or checksum differ.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise corrupt(path, "the file its manifest names is missing") from None
    if expected is not None and file_sum(data) != {
        "size": expected.get("size"),
        "crc32": expected.get("crc32"),
    }:
        raise corrupt(path, "its size or checksum does not match its manifest")
    return data


def load_npy_checked(path: Path, expected: Mapping[str, Any] | None) -> np.ndarray:
    """:func:`load_npy` of a file checked against its manifest's record.

    Raises:
        CorruptStoreError: If it is missing, damaged or not a ``.npy`` array.
    """
    data = read_checked(path, expected)
    with damaged(path), _NPY_LOCK:
        return np.load(io.BytesIO(data), allow_pickle=False)


def row_sums(matrix: np.ndarray) -> np.ndarray:
    """A 64-bit fingerprint of each row of a float32 matrix (its bits, position-weighted), so
    that vectors damaged in place are found one by one and the rest kept."""
    m = np.ascontiguousarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        m = m.reshape(len(m), -1)
    n, d = m.shape
    mult = (np.arange(d, dtype=np.uint64) * np.uint64(2) + np.uint64(1)) * np.uint64(_GOLDEN)
    mult |= np.uint64(1)
    out = np.empty(n, dtype=np.uint64)
    words = m.view(np.uint32)
    with np.errstate(over="ignore"):
        for i in range(0, n, 4096):  # bounded memory: a block of rows at a time
            out[i : i + 4096] = (words[i : i + 4096].astype(np.uint64) * mult).sum(axis=1)
    return out


def last_generation(folder: Path, pattern: str) -> int:
    """The highest number ``pattern`` (a regex with one group) captures among file names in
    ``folder`` (0 when none): a rebuild writes above it, never over a file a reader may hold."""
    best = 0
    rx = re.compile(pattern)
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = rx.fullmatch(p.name)
            if m:
                best = max(best, int(m.group(1)))
    return best


def connect_read_only(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    """Open a SQLite file to read only, on a medium that may be read-only itself.

    ``mode=ro`` first (it reads a write-ahead log another process left, and sees a writer's
    commits); where that cannot open (a read-only filesystem and no ``-shm``/``-wal`` beside
    the file: a store closed cleanly), ``immutable=1``, which reads the file as it is.

    Raises:
        sqlite3.Error: If neither can open it.
    """
    opts: dict[str, Any] = {
        "uri": True,
        "check_same_thread": False,
        "isolation_level": None,
        "timeout": timeout,
        "factory": _Connection,
    }
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", **opts)
        db.pensive_file = str(path)  # type: ignore[attr-defined]
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return db
    except sqlite3.OperationalError:
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise  # immutable would ignore the log, and with it the last commits
    db = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", **opts)
    db.pensive_file = str(path)  # type: ignore[attr-defined]
    db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    return db


# what the disk failing looks like: the operating system's error numbers, and the messages of
# SQLite's codes for them (its exceptions carry no errno)
_DISK_ERRNOS = {
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EROFS: "read-only",
    errno.EIO: "io",
}
_SQLITE_DISK = (
    ("database or disk is full", "full", errno.ENOSPC),
    ("attempt to write a readonly database", "read-only", errno.EROFS),
    ("disk i/o error", "io", errno.EIO),
    ("unable to open database file", "open", None),
)
_SQLITE_DAMAGE = (
    "database disk image is malformed",
    "file is not a database",
    "could not decode to utf-8",  # a flipped byte in a text column
)
_FIXES = {
    "full": "the disk is full: free space (or move the store to a larger disk) and retry",
    "read-only": "the filesystem is read-only: open the store with read_only=True to read it, "
    "or remount it read-write to change it",
    "io": "the disk reported an I/O error: check the disk, then run `pensive verify` on the store",
    "open": "a file of the store cannot be opened: check the folder's permissions and free space",
}


def disk_error(
    exc: BaseException, store: str | os.PathLike[str], doing: str
) -> StorageError | None:
    """The :class:`StorageError` that ``exc`` amounts to when the disk failed the store (full,
    read-only, an I/O error) or a SQLite file is damaged, else None.

    The one place that knows what a failing disk looks like, called where a store's writes
    end (a commit, an abandoned change, close, open), not by every caller.

    Args:
        exc: What was raised.
        store: The store folder (named in the message).
        doing: What was being done ("ingest", "close", ...).
    """
    if isinstance(exc, StorageError):
        return None
    kind, code, file = None, None, getattr(exc, "filename", None)
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        kind, code = _DISK_ERRNOS[exc.errno], exc.errno
    elif isinstance(exc, sqlite3.DatabaseError):
        text = str(exc).lower()
        if any(m in text for m in _SQLITE_DAMAGE):
            where = getattr(exc, "pensive_file", None) or Path(store) / "pensive.sqlite"
            return corrupt(where, f"SQLite says {exc}")
        for marker, k, c in _SQLITE_DISK:
            if marker in text:
                kind, code = k, c
                break
        file = getattr(exc, "pensive_file", None)
    if kind is None:
        return None
    what = f" ({file})" if file else ""
    return StorageError(
        f"Pensive store {store}: {doing} failed{what}: {_FIXES[kind]} [{exc}]",
        errno=code,
        file=str(file) if file else None,
    )


class _Connection(sqlite3.Connection):
    """A connection whose errors name its file (``pensive_file`` on the exception), so that
    :func:`disk_error` can say which file is full or damaged."""

    pensive_file = ""

    def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            exc.pensive_file = self.pensive_file  # type: ignore[attr-defined]
            raise

    def executemany(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executemany(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            exc.pensive_file = self.pensive_file  # type: ignore[attr-defined]
            raise

    def executescript(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executescript(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            exc.pensive_file = self.pensive_file  # type: ignore[attr-defined]
            raise


def connect(path: Path, *, read_only: bool = False, timeout: float = 30.0) -> sqlite3.Connection:
    """A store's SQLite file, autocommit (transactions are explicit), usable from any thread.

    Args:
        path: The file.
        read_only: Open it to read only (see :func:`connect_read_only`): nothing is created
            beside it, so a store on a read-only filesystem opens.
        timeout: Seconds to wait for another process's lock.
    """
    if read_only:
        return connect_read_only(path, timeout)
    db = sqlite3.connect(
        str(path),
        check_same_thread=False,
        isolation_level=None,
        timeout=timeout,
        factory=_Connection,
    )
    db.pensive_file = str(path)  # type: ignore[attr-defined]
    return db


def remove_stale(folder: Path, prefix: str, keep: set[str]) -> None:
    """Delete ``prefix*`` files in ``folder`` that the current manifest does not reference.

    Manifests are named without the prefix's dash (``faiss.json`` beside ``faiss-3.index``),
    so they are never matched.
    """
    for p in folder.glob(prefix + "*"):
        if p.name not in keep:
            with contextlib.suppress(OSError):
                p.unlink()
