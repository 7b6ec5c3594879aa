"""Opening a store level with its last commit skips the graph and statement scans; anything
else (a commit made with the graph off, an interrupted change, an old store) still scans."""

import pytest

from pensive_core import Document, Pensive
from tests.conftest import HASH_CONFIG

DOCS = [
    Document(id=f"d{i}", text=f"In 2020 Acme Corp{i} moved to Lisbon. Maria Silva{i} leads it.")
    for i in range(6)
]


def _scans(monkeypatch):
    """Record the scans the derive stage makes when a store opens behind its archive."""
    from pensive_core.ingest import derive

    seen = []
    monkeypatch.setattr(derive, "sync_graph", lambda comps: seen.append("graph"))
    monkeypatch.setattr(derive, "sync_temporal", lambda comps: seen.append("temporal"))
    return seen


def test_a_store_left_level_opens_without_scanning(tmp_path, monkeypatch):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(DOCS)
        p.delete("d0")
    seen = _scans(monkeypatch)
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        assert p.query("Who leads Acme Corp3?", k=3).hits
    assert seen == []


@pytest.mark.parametrize("off", ["graph", "temporal"])
def test_a_commit_made_with_a_feature_off_is_caught_up_on_the_next_open(tmp_path, off):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(DOCS[:2])
    with Pensive(tmp_path / "s", config={**HASH_CONFIG, off: {"enabled": False}}) as p:
        p.ingest(DOCS[2:])
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        st = p.stats()
        if off == "graph":
            assert st["graph"]["chunks"] == st["chunks"]
        else:
            docs = p.components.temporal.documents()
            assert set(docs) == {d.id for d in DOCS}


def test_an_interrupted_change_still_scans(tmp_path, monkeypatch):
    from pensive_core.archive import Archive

    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(DOCS)
    archive = Archive(tmp_path / "s" / "pensive.sqlite")
    archive.mark_dirty()  # as if killed between a change and its commit
    archive.close()
    seen = _scans(monkeypatch)
    with Pensive(tmp_path / "s", config=HASH_CONFIG):
        pass
    assert seen == ["graph", "temporal"]
