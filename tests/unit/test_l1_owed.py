"""A writer that defers the L1 refresh (``[server] cache_refresh = "idle"``): a commit still
drops every cached answer it could change, at once, and owes them; :meth:`refresh_owed`
answers them again later, against the store as it then stands."""

from __future__ import annotations

import pytest

from pensive_core import Document, Pensive
from pensive_core.cache import make_key
from tests.conftest import HASH_CONFIG

BASE = [
    Document("harbour", "The harbour master of Tallinn keeps the tide tables for the old port."),
    Document("orchid", "Orchids in the glasshouse need misting at dawn and shade at noon."),
    Document("saffron", "Saffron is picked by hand from crocus flowers every autumn."),
]
QUESTIONS = ["who keeps the tide tables?", "when are orchids misted?", "how is saffron picked?"]
NEW = Document("tides", "Tide tables of the old port are now kept by the harbour pilots.")


def _store(tmp_path, **router) -> Pensive:
    p = Pensive(tmp_path / "s", config={**HASH_CONFIG, "router": router})
    p.ingest(BASE)
    return p


def _cached(p: Pensive, text: str, k: int = 5):
    l1 = p.components.l1
    l1.sync()
    settings = p.components.invalidation.router().cache.settings()
    return l1.get(make_key(text, k, None, settings), peek=True)


def test_a_deferred_commit_drops_at_once_and_owes_the_refresh(tmp_path):
    with _store(tmp_path) as p:
        inv = p.components.invalidation
        inv.defer = True
        for q in QUESTIONS:
            p.query(q)
        assert all(_cached(p, q) is not None for q in QUESTIONS)
        refreshed = p.components.counters["l1_refreshed"]
        p.ingest([NEW])
        # dropped with the commit (never served stale), answered again by nobody yet
        assert _cached(p, QUESTIONS[0]) is None
        assert QUESTIONS[0] in {e.text for e in inv.owed.values()}
        assert p.components.counters["l1_refreshed"] == refreshed
        owed = len(inv.owed)
        assert inv.refresh_owed() == owed
        assert inv.owed == {}
        back = _cached(p, QUESTIONS[0])
        assert back is not None and "tides" in {h.doc_id for h in back.hits}
        res = p.query(QUESTIONS[0])
        assert res.tier == "L1" and "tides" in {h.doc_id for h in res.hits}


def test_without_defer_the_commit_refreshes_as_before(tmp_path):
    with _store(tmp_path) as p:
        for q in QUESTIONS:
            p.query(q)
        p.ingest([NEW])
        assert p.components.invalidation.owed == {}
        back = _cached(p, QUESTIONS[0])
        assert back is not None and "tides" in {h.doc_id for h in back.hits}


def test_stop_leaves_the_rest_owed(tmp_path):
    with _store(tmp_path) as p:
        inv = p.components.invalidation
        inv.defer = True
        for q in QUESTIONS:
            p.query(q)
        p.ingest([NEW])
        owed = dict(inv.owed)
        assert owed
        assert inv.refresh_owed(stop=lambda: True) == 0
        assert inv.owed.keys() == owed.keys()
        calls = []

        def after_one() -> bool:
            calls.append(1)
            return len(calls) > 1

        stored = inv.refresh_owed(stop=after_one)
        assert stored == 1 and len(inv.owed) == len(owed) - 1


def test_owed_entries_are_capped_at_the_refresh_budget_most_used_first(tmp_path):
    with _store(tmp_path, l1_refresh=2) as p:
        inv = p.components.invalidation
        inv.defer = True
        for n, q in enumerate(QUESTIONS):
            for _ in range(n + 1):  # the last question is the most used
                p.query(q)
        p.ingest([NEW])  # a third more passages: a bulk change, every entry dropped
        assert {e.text for e in inv.owed.values()} == set(QUESTIONS[1:])


def test_an_entry_stored_again_meanwhile_is_skipped(tmp_path):
    with _store(tmp_path) as p:
        inv = p.components.invalidation
        inv.defer = True
        p.query(QUESTIONS[0])
        p.ingest([NEW])
        assert inv.owed
        p.query(QUESTIONS[0])  # answered (and cached) by a query before the refresh
        assert _cached(p, QUESTIONS[0]) is not None
        refreshed = p.components.counters["l1_refreshed"]
        assert inv.refresh_owed() == 0
        assert p.components.counters["l1_refreshed"] == refreshed


def test_a_closed_store_owes_nothing(tmp_path):
    p = _store(tmp_path)
    inv = p.components.invalidation
    inv.defer = True
    p.query(QUESTIONS[0])
    p.ingest([NEW])
    p.close()
    assert inv.refresh_owed() == 0 and inv.owed == {}


def test_the_setting_is_checked():
    from pensive_core.config import load_config
    from pensive_core.errors import ConfigError

    assert load_config({}).server.cache_refresh == "idle"
    for mode in ("commit", "idle", "off"):
        assert load_config({"server": {"cache_refresh": mode}}).server.cache_refresh == mode
    with pytest.raises(ConfigError):
        load_config({"server": {"cache_refresh": "later"}})


def test_off_drops_and_owes_nothing(tmp_path):
    with _store(tmp_path) as p:
        inv = p.components.invalidation
        inv.defer, inv.owe = True, False
        p.query(QUESTIONS[0])
        p.ingest([NEW])
        assert _cached(p, QUESTIONS[0]) is None and inv.owed == {}
        assert inv.refresh_owed() == 0
        res = p.query(QUESTIONS[0])  # the next asker answers it, with the new document
        assert res.tier == "L2" and "tides" in {h.doc_id for h in res.hits}
