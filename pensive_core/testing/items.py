"""The item table conformance suite: what every :class:`~pensive_core.items.ItemRecords` (the
table an :class:`~pensive_core.items.ItemStore` keeps LangGraph items in) must do, as pytest
tests an implementation inherits; and the same for the rows of the LLM response cache
(:class:`~pensive_core.llm_cache.LLMCacheRecords`).

Written from the embedded SQLite ones (:class:`~pensive_core.item_table.ItemTable`,
:class:`~pensive_core.llm_cache.SQLiteLLMCacheRecords`) before any other engine's existed,
so that one (Postgres, issue 26) is held to the same behaviour.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from ..items import ItemRecords
from ..llm_cache import LLMCache, LLMCacheRecords

__all__ = ["ItemRecordsTests", "ItemsFactory", "LLMCacheRecordsTests", "RecordsFactory"]

#: ``make_items()``: opens (or reopens) the test's item table.
ItemsFactory = Callable[[], ItemRecords]
#: ``make_records()``: opens (or reopens) the test's LLM cache rows.
RecordsFactory = Callable[[], LLMCacheRecords]

UTC = timezone.utc
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
ODD_TEXT = "nul\x00here \x01\x7f \u200f\u05e9\u05dc\u05d5\u05dd 𝔘𝔫𝔦 'quote\" end"


def value(**fields: object) -> str:
    """An item's value as :meth:`ItemRecords.put` takes it (JSON text, as the store writes)."""
    return json.dumps(fields, ensure_ascii=False)


class ItemRecordsTests:
    """What every item table must do; subclass it once per implementation and give the
    ``make_items`` fixture (each test has a table of its own)."""

    @pytest.fixture
    def make_items(self) -> ItemsFactory:
        """Opens the test's item table; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_items` fixture")

    @staticmethod
    def keys(items: object) -> list[tuple[tuple[str, ...], str]]:
        return [(it.namespace, it.key) for it in items]  # type: ignore[attr-defined]

    def test_an_empty_table(self, make_items: ItemsFactory) -> None:
        t = make_items()
        assert len(t) == 0 and t.get(("a",), "k") is None
        assert list(t.newest()) == [] and list(t.newest(("a",))) == []
        assert t.namespaces() == [] and t.unindexed() == []
        assert not t.indexed(("a",), "k") and t.index_text(("a",), "k") is None
        t.delete(("a",), "k")  # nothing to delete: no error
        t.close()

    def test_put_get_and_times(self, make_items: ItemsFactory) -> None:
        t = make_items()
        t.put(("users", "u1"), "prefs", value(theme="dark", n=[1, 2.5, None]), None, T0)
        got = t.get(("users", "u1"), "prefs")
        assert got is not None
        assert (got.namespace, got.key) == (("users", "u1"), "prefs")
        assert got.value == {"theme": "dark", "n": [1, 2.5, None]}
        assert got.created_at == T0 and got.updated_at == T0 and got.score is None
        assert got.updated_at.utcoffset() == timedelta(0)
        later = (T0 + timedelta(hours=1, microseconds=7)).astimezone(timezone(timedelta(hours=9)))
        t.put(("users", "u1"), "prefs", value(theme="light"), None, later)
        again = t.get(("users", "u1"), "prefs")
        assert again is not None and again.value == {"theme": "light"}
        assert again.created_at == T0 and again.updated_at == later  # its creation time kept
        assert again.updated_at.utcoffset() == timedelta(0)
        assert len(t) == 1 and t.get(("users",), "prefs") is None
        assert t.get(("users", "u1", "x"), "prefs") is None
        t.close()

    def test_texts_and_the_indexed_flag(self, make_items: ItemsFactory) -> None:
        t = make_items()
        t.put(("n",), "a", value(v=1), "text of a", T0)
        t.put(("n",), "b", value(v=2), None, T0)
        t.put(("m",), "c", value(v=3), "text of c", T0 + timedelta(seconds=1))
        assert sorted(t.unindexed()) == [(("m",), "c"), (("n",), "a")]
        assert t.index_text(("n",), "a") == ("text of a", T0)
        assert t.index_text(("n",), "b") is None  # stored without a text
        assert not t.indexed(("n",), "a")
        t.mark_indexed([(("n",), "a"), (("n",), "b"), (("x",), "missing")])
        assert t.indexed(("n",), "a") and not t.indexed(("n",), "b")  # no text: not indexed
        assert t.unindexed() == [(("m",), "c")]
        t.put(("n",), "a", value(v=4), "new text of a", T0 + timedelta(seconds=2))
        assert not t.indexed(("n",), "a")  # a rewrite is indexed again
        assert t.index_text(("n",), "a") == ("new text of a", T0 + timedelta(seconds=2))
        t.mark_indexed([(("n",), "a"), (("m",), "c")])
        assert t.unindexed() == []
        t.put(("n",), "a", value(v=5), None, T0 + timedelta(seconds=3))
        assert not t.indexed(("n",), "a") and t.index_text(("n",), "a") is None
        t.close()

    def test_delete(self, make_items: ItemsFactory) -> None:
        t = make_items()
        t.put(("n",), "a", value(v=1), "a", T0)
        t.put(("n",), "b", value(v=2), "b", T0)
        t.delete(("n",), "a")
        assert t.get(("n",), "a") is None and not t.indexed(("n",), "a")
        assert t.unindexed() == [(("n",), "b")] and len(t) == 1
        t.put(("n",), "a", value(v=3), None, T0 + timedelta(days=1))
        back = t.get(("n",), "a")
        assert back is not None and back.created_at == T0 + timedelta(days=1)  # a new item
        t.close()

    def test_newest_first_under_a_prefix(self, make_items: ItemsFactory) -> None:
        t = make_items()
        t.put(("a",), "old", value(), "x", T0)
        t.put(("a", "b"), "deep", value(), None, T0 + timedelta(minutes=2))
        t.put(("ab",), "sibling", value(), "x", T0 + timedelta(minutes=3))
        t.put(("a",), "first-of-two", value(), None, T0 + timedelta(minutes=1))
        t.put(("a", "c"), "second-of-two", value(), "x", T0 + timedelta(minutes=1))
        t.put(("a", "b", "c"), "deepest", value(), "x", T0 - timedelta(minutes=1))
        order = [
            (("ab",), "sibling"),
            (("a", "b"), "deep"),
            (("a", "c"), "second-of-two"),  # written at the same time: created last first
            (("a",), "first-of-two"),
            (("a",), "old"),
            (("a", "b", "c"), "deepest"),
        ]
        assert self.keys(t.newest()) == order
        assert self.keys(t.newest(("a",))) == [k for k in order if k[0][0] == "a"]
        assert self.keys(t.newest(("a", "b"))) == [(("a", "b"), "deep"),
                                                   (("a", "b", "c"), "deepest")]  # fmt: skip
        assert list(t.newest(("a", "b", "c", "d"))) == [] and list(t.newest(("z",))) == []
        assert self.keys(t.newest(("a",), textless=True)) == [
            (("a", "b"), "deep"), (("a",), "first-of-two")
        ]  # fmt: skip
        assert self.keys(t.newest(limit=2)) == order[:2]
        assert self.keys(t.newest(limit=2, offset=3)) == order[3:5]
        assert self.keys(t.newest(offset=4)) == order[4:]
        assert self.keys(t.newest(("a",), limit=0)) == []
        t.put(("a",), "old", value(v=1), "x", T0 + timedelta(minutes=5))  # rewritten: newest
        assert self.keys(t.newest(limit=1)) == [(("a",), "old")]
        assert sorted(t.namespaces()) == [("a",), ("a", "b"), ("a", "b", "c"), ("a", "c"),
                                          ("ab",)]  # fmt: skip
        t.close()

    def test_a_failure_inside_a_transaction_stores_nothing(self, make_items: ItemsFactory) -> None:
        t = make_items()
        t.put(("n",), "kept", value(v=1), "kept", T0)
        with pytest.raises(RuntimeError, match="interrupted"), t.transaction():
            t.put(("n",), "lost", value(v=2), "lost", T0)
            t.put(("n",), "kept", value(v=3), None, T0 + timedelta(hours=1))
            t.mark_indexed([(("n",), "kept")])
            raise RuntimeError("interrupted")
        assert t.get(("n",), "lost") is None and len(t) == 1
        kept = t.get(("n",), "kept")
        assert kept is not None and kept.value == {"v": 1} and kept.updated_at == T0
        assert t.unindexed() == [(("n",), "kept")]
        with pytest.raises(RuntimeError), t.transaction():
            t.delete(("n",), "kept")
            raise RuntimeError("interrupted")
        assert t.get(("n",), "kept") is not None
        with t.transaction():
            t.put(("n",), "a", value(v=4), None, T0)
            t.put(("n",), "b", value(v=5), None, T0)
            t.delete(("n",), "kept")
        assert self.keys(t.newest()) == [(("n",), "b"), (("n",), "a")]
        t.close()

    def test_any_text_round_trips(self, make_items: ItemsFactory) -> None:
        t = make_items()
        ns = ("Zoë 🙂", "a'b\"c", '["x", "y"]', "nul\x00label")
        key = "key \u200f\u05e9 𝔘 \x00 end"
        val = value(text=ODD_TEXT, nested={"ü": [True, False, {}]}, big=2**53 + 1)
        t.put(ns, key, val, ODD_TEXT, T0)
        got = t.get(ns, key)
        assert got is not None and got.namespace == ns and got.key == key
        assert got.value == json.loads(val)
        assert t.index_text(ns, key) == (ODD_TEXT, T0)
        assert t.unindexed() == [(ns, key)] and t.namespaces() == [ns]
        assert self.keys(t.newest(ns[:2])) == [(ns, key)]
        assert list(t.newest(("Zoë",))) == []  # a label is matched whole
        t.close()

    def test_persists_across_a_reopen(self, make_items: ItemsFactory) -> None:
        t = make_items()
        t.put(("n",), "a", value(v=1), "text", T0)
        t.put(("n", "m"), "b", value(v=2), None, T0 + timedelta(seconds=1))
        t.mark_indexed([(("n",), "a")])
        before = (list(t.newest()), t.indexed(("n",), "a"), len(t))
        t.close()
        again = make_items()
        assert (list(again.newest()), again.indexed(("n",), "a"), len(again)) == before
        again.close()


class LLMCacheRecordsTests:
    """What every store of LLM cache rows must do; subclass it once per implementation and
    give the ``make_records`` fixture (each test has rows of its own)."""

    @pytest.fixture
    def make_records(self) -> RecordsFactory:
        """Opens the test's LLM cache rows; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_records` fixture")

    def test_an_empty_cache(self, make_records: RecordsFactory) -> None:
        r = make_records()
        assert len(r) == 0 and r.get("k") is None and r.clear() == 0 and r.clear("m") == 0
        r.close()

    def test_put_get_replace_and_clear(self, make_records: RecordsFactory) -> None:
        r = make_records()
        r.put("k1", "model-a", "prompt one", '[{"text": "one"}]')
        r.put("k2", "model-a", "prompt two", '[{"text": "two"}]')
        r.put("k3", "model-b", "prompt three", '"three"')
        assert r.get("k1") == '[{"text": "one"}]' and len(r) == 3
        r.put("k1", "model-a", "prompt one", '[{"text": "uno"}]')  # the last write wins
        assert r.get("k1") == '[{"text": "uno"}]' and len(r) == 3
        assert r.clear("model-c") == 0 and r.clear("model-a") == 2
        assert r.get("k1") is None and r.get("k3") == '"three"' and len(r) == 1
        assert r.clear() == 1 and len(r) == 0
        r.close()

    def test_any_text_round_trips_and_persists(self, make_records: RecordsFactory) -> None:
        r = make_records()
        llm = "model \x00 {'temperature': 0.5} ü"
        r.put("k", llm, ODD_TEXT, json.dumps(ODD_TEXT, ensure_ascii=False))
        r.put("raw", llm, ODD_TEXT, ODD_TEXT)  # the rows keep any text, JSON or not
        r.close()
        again = make_records()
        assert again.get("k") == json.dumps(ODD_TEXT, ensure_ascii=False)
        assert again.get("raw") == ODD_TEXT
        assert again.clear(llm) == 2
        again.close()

    def test_the_cache_on_these_rows(self, make_records: RecordsFactory) -> None:
        """:class:`~pensive_core.llm_cache.LLMCache` over these rows: variants of a prompt
        share an entry, near misses do not."""
        cache = LLMCache(records=make_records())
        cache.put("What was revenue in Q3 2024?", "m", [{"text": "4.1bn \x00 ü"}])
        assert cache.get("what was revenue in q3 2024", "m") == [{"text": "4.1bn \x00 ü"}]
        assert cache.get("What was revenue in Q4 2024?", "m") is None
        assert cache.stats() == {"entries": 1, "hits": 1, "misses": 1}
        assert cache.clear("m") == 1 and len(cache) == 0
        cache.close()
