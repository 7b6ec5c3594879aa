"""Nothing is written after a commit's point of no return: the derived tables' "synced" marks
land in the commit's own transaction, so a full disk fails the change whole (one
StorageError, nothing searchable) and never after the commit (a raw error for a change
that in fact stands). Found by the crash benchmark's disk-full rounds."""

import sqlite3

import pytest

from pensive_core import Document, Pensive, StorageError
from pensive_core.archive import Archive
from tests.conftest import HASH_CONFIG

CONFIG = {**HASH_CONFIG, "temporal": {"enabled": True}}


def test_the_synced_marks_are_set_by_the_commit_itself(tmp_path):
    with Pensive(tmp_path / "s", config=CONFIG) as p:
        p.ingest([Document(id="a", text="Ada Lovelace wrote notes on the Analytical Engine.")])
    db = sqlite3.connect(tmp_path / "s" / "pensive.sqlite")
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    db.close()
    assert meta["graph_synced"] == meta["commit"] == "1"
    assert meta["temporal_synced"] == "1"


@pytest.mark.parametrize("key", ["graph_synced", "temporal_synced"])
def test_a_full_disk_at_a_synced_mark_fails_the_change_whole(tmp_path, monkeypatch, key):
    store = tmp_path / "s"
    with Pensive(store, config=CONFIG) as p:
        p.ingest([Document(id="a", text="Ada Lovelace wrote notes on the Analytical Engine.")])
        real = Archive.set_meta

        def full(self, k, value):
            if k == key:
                raise sqlite3.OperationalError("database or disk is full")
            real(self, k, value)

        monkeypatch.setattr(Archive, "set_meta", full)
        with pytest.raises(StorageError) as err:
            p.ingest([Document(id="b", text="Charles Babbage designed the Difference Engine.")])
        assert err.value.stored == ("b",)
        with Pensive(store, read_only=True) as r:
            assert r.stats()["commit"] == 1  # the commit number did not move
            assert all(h.doc_id != "b" for h in r.query("Babbage Difference Engine").hits)
        monkeypatch.setattr(Archive, "set_meta", real)
        # space freed: the next change indexes the kept document first
        p.ingest([Document(id="c", text="Grace Hopper wrote the first compiler.")])
        assert p.query("Babbage Difference Engine", k=1).hits[0].doc_id == "b"
