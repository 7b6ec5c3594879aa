"""A conversation's files damaged in turn: ``verify`` names each damaged file, ``repair``
rebuilds a session's indexes from their own archives, and the command line says what is
wrong in one line, never a traceback.

A session is a registry row (``conversations/sessions.sqlite``), a turn log (``memory.sqlite``)
and two small stores of its own (``index/`` and ``windows/``). ``verify`` once checked none of
them (it said ``ok`` over a half-truncated turn log), a damaged log reached the command line as
a raw ``sqlite3.DatabaseError`` traceback, and ``repair`` found nothing to repair.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pensive_core import Pensive, repair_store, verify_store

pytestmark = pytest.mark.adversarial

CFG = {"embedder": {"name": "hash", "dim": 64}}
TURNS = [
    ("user", "I moved to Lisbon last week"),
    ("assistant", "Lisbon is lovely in spring."),
    ("user", "My dog is called Rex"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("conv") / "store"
    with Pensive(store, config=CFG) as p:
        conv = p.conversation("s42", user="ana")
        for role, text in TURNS:
            conv.add(role, text)
    return store


@pytest.fixture
def store(built, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(built, copy)
    return copy


def session_folder(store: Path) -> Path:
    (log,) = (store / "conversations").rglob("memory.sqlite")
    return log.parent


def recalled(store: Path) -> list[str]:
    with Pensive(store, read_only=True) as r:
        return [h.chunk_id for h in r.conversation("s42", create=False).recall("Lisbon", k=3)]


def cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "pensive_core.cli", *args, "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_a_sound_store_with_a_session_verifies_clean(store):
    report = verify_store(store)
    assert report["ok"], report["damaged"]
    assert "conversations" in report["checked"]


def test_a_truncated_turn_log_is_named_by_verify_and_one_line_on_the_command_line(store):
    log = session_folder(store) / "memory.sqlite"
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    report = verify_store(store)
    assert not report["ok"]
    assert any(d["file"] == str(log) and "s42" in d["part"] for d in report["damaged"])
    out = cli(store, "chat", "turns", "s42")
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and "memory.sqlite" in out.stderr
    assert "pensive verify" in out.stderr
    # repair cannot rebuild a log from anything: it says it is still damaged
    after = repair_store(store)["after"]
    assert any(d["file"] == str(log) for d in after["damaged"])


def test_a_deleted_turn_log_of_a_registered_session_is_reported(store):
    folder = session_folder(store)
    for f in folder.glob("memory.sqlite*"):
        f.unlink()
    report = verify_store(store)
    assert [d for d in report["damaged"] if "turn log is missing" in d["problem"]]


def test_a_garbage_session_registry_is_reported(store):
    registry = store / "conversations" / "sessions.sqlite"
    registry.write_bytes(b"not a database at all" * 100)
    report = verify_store(store)
    assert [d for d in report["damaged"] if d["file"] == str(registry)]


@pytest.mark.parametrize("sub", ["index", "windows"])
def test_a_session_index_that_lost_its_vectors_is_found_and_repaired(store, sub):
    before = recalled(store)
    assert len(before) == 3
    manifest = session_folder(store) / sub / "vectors" / "faiss.json"
    manifest.unlink()
    report = verify_store(store)
    bad = [d for d in report["damaged"] if d.get("store") == str(manifest.parent.parent)]
    assert bad and all("s42" in d["part"] for d in bad), report["damaged"]
    out = repair_store(store)
    assert out["sessions"] and out["sessions"][0]["rebuilt"] == ["vectors"]
    assert out["after"]["ok"], out["after"]["damaged"]
    assert recalled(store) == before
    assert verify_store(session_folder(store) / sub)["ok"]


def test_a_registry_row_naming_a_folder_outside_is_reported_and_never_repaired(store, tmp_path):
    """A registry is data: a row whose folder leaves ``conversations/`` made ``verify`` read,
    and ``repair`` rewrite, a store elsewhere on the disk."""
    import sqlite3

    outside = tmp_path / "elsewhere"
    shutil.copytree(session_folder(store), outside)
    (outside / "index" / "vectors" / "faiss.json").unlink()
    files = sorted(str(p) for p in outside.rglob("*"))
    db = sqlite3.connect(store / "conversations" / "sessions.sqlite")
    rel = os.path.relpath(outside, store / "conversations")
    db.execute("INSERT INTO sessions VALUES ('default', 'x', NULL, ?, '2026-01-01')", (rel,))
    db.commit()
    db.close()
    report = verify_store(store)
    bad = [d for d in report["damaged"] if "outside" in d["problem"]]
    assert bad and not [d for d in report["damaged"] if "store" in d]
    out = repair_store(store)
    assert out["sessions"] == []
    assert sorted(str(p) for p in outside.rglob("*")) == files  # nothing written there
