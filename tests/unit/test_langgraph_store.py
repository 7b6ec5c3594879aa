"""PensiveStore: LangGraph's BaseStore on Pensive, checked against langgraph's InMemoryStore."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import GetOp, PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from pensive_langchain.store import PensiveStore, similarity  # noqa: E402
from tests.conftest import HASH_CONFIG  # noqa: E402

MEMORIES = {
    ("users", "alice"): {
        "home": {"text": "Alice moved to Lisbon and lives near the river", "kind": "fact", "n": 3},
        "food": {"text": "Alice loves spicy ramen noodles", "kind": "pref", "n": 5},
        "pet": {"text": "Alice has a grey cat called Miso", "kind": "fact", "n": 1},
    },
    ("users", "bob"): {
        "home": {"text": "Bob lives in Porto by the sea", "kind": "fact", "n": 2},
        "work": {"text": "Bob works as a carpenter building tables", "kind": "job", "n": 4},
    },
    ("docs",): {"readme": {"text": "Install with pip", "kind": "doc", "n": 0}},
    ("users", "alice", "notes"): {"n1": {"text": "Alice plays chess", "kind": "note", "n": 7}},
}


@pytest.fixture
def store(tmp_path):
    s = PensiveStore.from_path(tmp_path / "store", config=HASH_CONFIG)
    yield s
    s.close()


def _fill(*stores):
    for s in stores:
        for ns, items in MEMORIES.items():
            for key, value in items.items():
                s.put(ns, key, value)


def test_put_get_update_delete(store):
    assert store.get(("users", "alice"), "home") is None
    store.put(("users", "alice"), "home", {"text": "Alice lives in Porto"})
    first = store.get(("users", "alice"), "home")
    assert first is not None and first.value == {"text": "Alice lives in Porto"}
    assert first.namespace == ("users", "alice") and first.key == "home"
    time.sleep(0.002)
    store.put(("users", "alice"), "home", {"text": "Alice lives in Lisbon"})
    second = store.get(("users", "alice"), "home")
    assert second.value == {"text": "Alice lives in Lisbon"}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    store.delete(("users", "alice"), "home")
    assert store.get(("users", "alice"), "home") is None
    # its Pensive document is gone too
    assert store.pensive.stats().get("documents", 0) == 0


def test_same_answers_as_in_memory_store(store):
    mem = InMemoryStore()
    _fill(store, mem)

    def same(a, b):
        if a is None or b is None:
            assert a is b
            return
        assert (a.namespace, a.key, a.value) == (b.namespace, b.key, b.value)

    for ns, key in [(("users", "alice"), "home"), (("users", "bob"), "pet"), (("docs",), "readme")]:
        same(store.get(ns, key), mem.get(ns, key))

    def keys(found):
        return sorted((it.namespace, it.key) for it in found)

    for prefix, flt in [
        (("users",), None),
        (("users", "alice"), None),
        ((), None),
        (("users",), {"kind": "fact"}),
        (("users",), {"n": {"$gte": 3}}),
        (("users",), {"n": {"$gt": 1, "$lt": 5}}),
        (("users",), {"kind": {"$ne": "fact"}}),
        (("nobody",), None),
    ]:
        assert keys(store.search(prefix, filter=flt, limit=100)) == keys(
            mem.search(prefix, filter=flt, limit=100)
        ), (prefix, flt)

    for kwargs in [
        {},
        {"prefix": ("users",)},
        {"suffix": ("alice",)},
        {"prefix": ("users", "*")},
        {"suffix": ("*", "notes")},
        {"max_depth": 1},
        {"prefix": ("users",), "max_depth": 2},
        {"limit": 2, "offset": 1},
    ]:
        assert store.list_namespaces(**kwargs) == mem.list_namespaces(**kwargs), kwargs

    # a batch: ops answered in order, deletes through PutOp(value=None)
    ops = [
        PutOp(("users", "carol"), "home", {"text": "Carol lives in Oslo"}),
        GetOp(("users", "carol"), "home"),
        PutOp(("users", "carol"), "home", None),
        GetOp(("users", "carol"), "home"),
    ]
    got = store.batch(ops)
    assert got[1].value == {"text": "Carol lives in Oslo"} and got[3] is None


def test_search_without_query_newest_first_and_pages(store):
    for i in range(5):
        store.put(("log",), f"k{i}", {"text": f"entry number {i}", "i": i})
        time.sleep(0.002)
    found = store.search(("log",), limit=10)
    assert [it.key for it in found] == ["k4", "k3", "k2", "k1", "k0"]
    assert all(it.score is None for it in found)
    assert [it.key for it in store.search(("log",), limit=2, offset=1)] == ["k3", "k2"]
    assert [it.key for it in store.search(("log",), filter={"i": {"$lte": 1}})] == ["k1", "k0"]


def test_semantic_search_finds_the_right_memory(store):
    _fill(store)
    top = store.search(("users", "alice"), query="what is the name of her cat?", limit=3)
    assert top[0].key == "pet"
    assert top[0].score is not None and top[0].score >= (top[1].score or 0)
    top = store.search(("users",), query="who works as a carpenter?", limit=1)
    assert [(it.namespace, it.key) for it in top] == [(("users", "bob"), "work")]
    # a filter on the value applies to semantic search too
    top = store.search(("users",), query="where does she live", filter={"kind": "pref"})
    assert [it.key for it in top] == ["food"]


def test_namespace_isolation(store):
    _fill(store)
    for q in ["Bob lives in Porto by the sea", "carpenter", "where does he live?"]:
        found = store.search(("users", "alice"), query=q, limit=10)
        assert found, q
        assert all(it.namespace[:2] == ("users", "alice") for it in found), q
    # a label that only starts like another namespace's is another namespace
    store.put(("users", "alicex"), "home", {"text": "Alicex lives in Lisbon"})
    found = store.search(("users", "alice"), query="lives in Lisbon", limit=10)
    assert ("users", "alicex") not in {it.namespace for it in found}
    assert ("users", "alicex") not in {it.namespace for it in store.search(("users", "alice"))}


def test_index_fields_and_unindexed_items(tmp_path):
    s = PensiveStore.from_path(tmp_path / "s", config=HASH_CONFIG, index={"fields": ["memo"]})
    try:
        s.put(("m",), "a", {"memo": "the boat is painted blue", "other": "zebra"})
        s.put(("m",), "b", {"memo": "the kite flies high", "other": "boat"})
        s.put(("m",), "c", {"memo": "zebra crossings"}, index=False)
        top = s.search(("m",), query="zebra", limit=3)
        # "c" is kept out of the index: it comes after the scored items, unscored
        assert [it.key for it in top if it.score is None] == ["c"]
        assert s.search(("m",), query="painted boat", limit=1)[0].key == "a"
        assert s.search(("m",), query="kite", limit=1)[0].key == "b"
    finally:
        s.close()


def test_persists_across_reopening(tmp_path):
    s = PensiveStore.from_path(tmp_path / "s", config=HASH_CONFIG)
    _fill(s)
    s.close()
    s = PensiveStore.from_path(tmp_path / "s", config=HASH_CONFIG)
    try:
        assert s.get(("users", "bob"), "work").value == MEMORIES[("users", "bob")]["work"]
        assert s.search(("users", "bob"), query="carpenter", limit=1)[0].key == "work"
        assert ("docs",) in s.list_namespaces()
    finally:
        s.close()


def test_async_api(store):
    async def run():
        await store.aput(("users", "alice"), "home", {"text": "Alice lives in Lisbon"})
        await store.aput(("users", "alice"), "pet", {"text": "Alice has a cat"})
        got = await store.aget(("users", "alice"), "home")
        found = await store.asearch(("users", "alice"), query="cat", limit=1)
        await store.adelete(("users", "alice"), "pet")
        gone = await store.aget(("users", "alice"), "pet")
        return got, found, gone, await store.alist_namespaces()

    got, found, gone, spaces = asyncio.run(run())
    assert got.value == {"text": "Alice lives in Lisbon"}
    assert found[0].key == "pet"
    assert gone is None
    assert spaces == [("users", "alice")]


def test_bad_input_is_refused(store):
    from langgraph.store.base import InvalidNamespaceError

    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"x": 1})
    from pensive_core.errors import ConfigError, InputError

    with pytest.raises(InputError):
        store.search(("users",), filter={"n": {"$regex": "x"}})
    with pytest.raises(ConfigError):
        PensiveStore(store.pensive, index={"fields": "text"})


def test_graph_node_reads_and_writes_through_the_store(store):
    from typing import TypedDict

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langgraph.graph import START, StateGraph
    from langgraph.runtime import Runtime

    seen: list[list] = []

    class Recording(GenericFakeChatModel):
        def _generate(self, messages, *args, **kwargs):
            seen.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    model = Recording(messages=iter([AIMessage("Noted."), AIMessage("You live in Lisbon.")]))

    class State(TypedDict):
        user: str
        text: str
        reply: str

    def node(state: State, runtime: Runtime) -> dict:
        ns = ("users", state["user"])
        found = runtime.store.search(ns, query=state["text"], limit=1)
        memo = "\n".join(it.value["text"] for it in found)
        reply = model.invoke([SystemMessage(f"Memories: {memo}"), HumanMessage(state["text"])])
        runtime.store.put(ns, f"m{len(seen)}", {"text": state["text"]})
        return {"reply": reply.text}

    graph = StateGraph(State).add_node("chat", node).add_edge(START, "chat").compile(store=store)
    graph.invoke({"user": "alice", "text": "I live in Lisbon now"})
    out = graph.invoke({"user": "alice", "text": "Where do I live?"})
    assert out["reply"] == "You live in Lisbon."
    assert "I live in Lisbon now" in seen[1][0].content
    assert store.get(("users", "alice"), "m1").value == {"text": "I live in Lisbon now"}
    # bob's memories stay out of alice's
    graph2 = StateGraph(State).add_node("chat", node).add_edge(START, "chat").compile(store=store)
    model.messages = iter([AIMessage("Hi Bob.")])
    graph2.invoke({"user": "bob", "text": "Where do I live?"})
    assert "Lisbon" not in seen[2][0].content


def test_search_scores_are_similarities_in_unit_range_and_keep_the_order(store):
    _fill(store)
    mem = InMemoryStore()
    _fill(mem)
    for query in ["where does Alice live?", "Alice", "chess", "pip install", "zzz unrelated"]:
        found = store.search((), query=query, limit=20)
        raw = store.pensive.query(query, k=20, filters={"lg_item": True}).hits
        assert found and raw
        scores = [it.score for it in found if it.score is not None]
        assert scores and all(0.0 <= s <= 1.0 for s in scores), (query, scores)
        assert scores == sorted(scores, reverse=True), query  # best first, as ranked
        # Pensive's own scores exceed 1 where both retrievers agree: they are mapped, not cut
        assert max(h.score for h in raw) > 1.0 or query == "zzz unrelated"
        assert max(scores) == pytest.approx(similarity(max(h.score for h in raw)))
        # the same range as LangGraph's own store (cosine) for the same question
        assert all(
            it.score is None or -1.0 <= it.score <= 1.0
            for it in mem.search((), query=query, limit=20)
        )


def test_similarity_is_monotone_into_the_unit_range():
    raw = [-3.0, -0.1, 0.0, 1e-9, 0.04, 0.5, 1.0, 1.7, 2.7, 50.0, float("inf")]
    mapped = [similarity(s) for s in raw]
    assert all(0.0 <= m <= 1.0 for m in mapped)
    assert mapped == sorted(mapped)  # never reorders
    positive = [similarity(s) for s in raw if 0 < s < 30]
    assert all(a < b for a, b in zip(positive, positive[1:]))  # strictly above 0
    assert similarity(0.0) == 0.0 and similarity(-2.0) == 0.0 and similarity(float("nan")) == 0.0
    assert similarity(float("inf")) == 1.0
    assert similarity(1.7) == pytest.approx(0.8173, abs=1e-4)
    assert similarity(0.01) == pytest.approx(0.01, rel=0.01)  # weak matches keep their score
