"""The LlamaIndex adapters against the real LlamaIndex classes (MockLLM, no network)."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
import warnings
from datetime import datetime, timezone

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.chat_engine import CondensePlusContextChatEngine  # noqa: E402
from llama_index.core.constants import DEFAULT_SIMILARITY_TOP_K  # noqa: E402
from llama_index.core.llms import ChatMessage, MockLLM  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import (  # noqa: E402
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    TextNode,
)

import pensive_llamaindex  # noqa: E402
from pensive_core import Document, InputError, MissingDependencyError, Pensive  # noqa: E402
from pensive_core import render_turn as core_render_turn  # noqa: E402
from pensive_llamaindex import (  # noqa: E402
    GraphBoostPostprocessor,
    PensiveLlamaIndexRetriever,
    PensiveMemoryBlock,
    RerankPostprocessor,
    TemporalPostprocessor,
    TokenBudgetPostprocessor,
)
from tests.conftest import HASH_CONFIG, docs_corpus  # noqa: E402

UTC = timezone.utc


@pytest.fixture
def store(hash_store):
    hash_store.ingest(docs_corpus())
    return hash_store


def _node(text: str, score: float | None, node_id: str, **meta) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=text, metadata=meta), score=score)


def _words(text: str) -> int:
    return len(text.split())


# -- public surface -------------------------------------------------------------------------


def test_public_names_pinned():
    assert set(pensive_llamaindex.__all__) == {
        "GraphBoostPostprocessor",
        "PensiveLlamaIndexRetriever",
        "PensiveMemoryBlock",
        "RerankPostprocessor",
        "TemporalPostprocessor",
        "TokenBudgetPostprocessor",
        "hit_to_node",
        "render_turn",
    }
    for name in pensive_llamaindex.__all__:
        assert getattr(pensive_llamaindex, name) is not None


@pytest.mark.parametrize("module", ["retriever", "postprocessors", "memory"])
def test_missing_llamaindex_names_the_extra(monkeypatch, module):
    for name in list(sys.modules):
        if name == "llama_index" or name.startswith("llama_index."):
            monkeypatch.setitem(sys.modules, name, None)  # import of it now fails
    monkeypatch.delitem(sys.modules, f"pensive_llamaindex.{module}")
    with pytest.raises(MissingDependencyError) as info:
        importlib.import_module(f"pensive_llamaindex.{module}")
    assert info.value.extra == "llamaindex"
    assert "pensive[llamaindex]" in str(info.value)


# -- retriever ------------------------------------------------------------------------------


def test_retriever_converts_hits_to_nodes(store):
    nodes = PensiveLlamaIndexRetriever(store, similarity_top_k=3).retrieve(
        "Acme revenue in Q3 2024"
    )
    res = store.query("Acme revenue in Q3 2024", k=3)  # the same answer, now from L1
    assert res.tier == "L1"
    assert len(nodes) == len(res.hits) == 3
    for n, h in zip(nodes, res.hits):
        assert isinstance(n, NodeWithScore) and isinstance(n.node, TextNode)
        assert n.node.node_id == h.chunk_id
        assert n.node.get_content(metadata_mode=MetadataMode.NONE) == h.text
        assert n.score == pytest.approx(h.score)
        meta = n.node.metadata
        assert meta["doc_id"] == h.doc_id
        assert meta["topic"] == h.metadata["topic"]  # the caller's metadata is carried
        assert meta["tier"] == "L2"  # the tier that answered the retriever
        assert meta["sources"] == dict(h.sources) and type(meta["sources"]) is dict
        assert meta["timestamp"] == h.timestamp.isoformat()
        assert datetime.fromisoformat(meta["timestamp"]) == h.timestamp
        assert "valid_to" not in meta  # unknown times are absent, not None
        assert meta["superseded_by"] is None
        assert n.node.relationships[NodeRelationship.SOURCE].node_id == h.doc_id
        assert n.node.ref_doc_id == h.doc_id
        assert {"sources", "tier"} <= set(n.node.excluded_llm_metadata_keys)
        llm_text = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "sources" not in llm_text and "tier:" not in llm_text and h.text in llm_text
    assert nodes[0].node.metadata["doc_id"] == "q3"


def test_an_at_mention_in_the_question_pins_its_document(store):
    nodes = PensiveLlamaIndexRetriever(store, similarity_top_k=2).retrieve(
        "Acme revenue in Q3 2024, compare @tea"
    )
    assert nodes[0].node.metadata["doc_id"] == "tea" and nodes[0].node.metadata["pinned"]
    assert "pinned" in nodes[0].node.excluded_llm_metadata_keys
    assert len(nodes) == 3 and not any("pinned" in n.node.metadata for n in nodes[1:])


def test_retriever_carries_supersession(hash_store):
    hash_store.ingest(
        [
            Document("old", "John Smith is the CEO of Acme.", timestamp=datetime(2019, 1, 1)),
            Document("new", "Jane Doe is the new CEO of Acme.", timestamp=datetime(2024, 3, 1)),
        ]
    )
    nodes = PensiveLlamaIndexRetriever(hash_store, similarity_top_k=2).retrieve(
        "Who is the CEO of Acme?"
    )
    by_doc = {n.node.metadata["doc_id"]: n for n in nodes}
    old, new = by_doc["old"].node.metadata, by_doc["new"].node.metadata
    assert old["superseded_by"] == by_doc["new"].node.node_id
    assert datetime.fromisoformat(old["valid_to"]) == datetime(2024, 3, 1, tzinfo=UTC)
    assert datetime.fromisoformat(old["valid_from"]) == datetime(2019, 1, 1, tzinfo=UTC)
    assert new["superseded_by"] is None and "valid_to" not in new
    # the LLM sees when the old statement stopped holding, not Pensive's bookkeeping
    llm_text = by_doc["old"].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "valid_to: 2024-03-01" in llm_text and "superseded_by" not in llm_text


def test_retriever_options_reach_the_store(store):
    r = PensiveLlamaIndexRetriever(store, similarity_top_k=2, filters={"topic": "tea"})
    assert [n.node.metadata["doc_id"] for n in r.retrieve("revenue")] == ["tea"]
    early = PensiveLlamaIndexRetriever(
        store, similarity_top_k=8, as_of=datetime(2024, 2, 15, tzinfo=UTC)
    )
    docs = {n.node.metadata["doc_id"] for n in early.retrieve("Acme revenue")}
    assert docs and docs <= {"q3", "q4"}
    with pytest.raises(TypeError, match=r"from_defaults\(path="):
        PensiveLlamaIndexRetriever("not a store")  # type: ignore[arg-type]


def test_from_path_opens_and_closes(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
    r = PensiveLlamaIndexRetriever.from_path(tmp_path / "s", config=HASH_CONFIG, similarity_top_k=1)
    try:
        nodes = r.retrieve("arctic tern migration")
        assert [n.node.metadata["doc_id"] for n in nodes] == ["bird"]
    finally:
        r.close()
    with pytest.raises(Exception, match="closed"):
        r.retrieve("arctic tern")


def test_query_engine_answers_over_pensive(store):
    engine = RetrieverQueryEngine.from_args(
        PensiveLlamaIndexRetriever(store, similarity_top_k=2), llm=MockLLM()
    )
    resp = engine.query("When did John Smith become chief executive of Acme?")
    ids = [n.node.node_id for n in resp.source_nodes]
    assert ids == [
        h.chunk_id
        for h in store.query("When did John Smith become chief executive of Acme?", k=2).hits
    ]
    assert resp.source_nodes[0].node.metadata["doc_id"] == "ceo"
    # MockLLM echoes its prompt: the passage from Pensive reached the LLM, its tier did not
    assert "John Smith became chief executive officer" in str(resp)
    assert "tier:" not in str(resp)


def test_query_engine_with_pensive_postprocessors(store):
    engine = RetrieverQueryEngine.from_args(
        PensiveLlamaIndexRetriever(store, similarity_top_k=5),
        llm=MockLLM(),
        node_postprocessors=[
            TemporalPostprocessor(),
            GraphBoostPostprocessor(),
            TokenBudgetPostprocessor(40, tokenizer=_words),
        ],
    )
    resp = engine.query("Acme revenue Q3 2024")
    assert resp.source_nodes
    assert sum(_words(n.node.get_content()) for n in resp.source_nodes) <= 40
    assert resp.source_nodes[0].node.metadata["doc_id"] == "q3"


def test_condense_plus_context_chat_engine(store):
    chat = CondensePlusContextChatEngine.from_defaults(
        PensiveLlamaIndexRetriever(store, similarity_top_k=2), llm=MockLLM()
    )
    first = chat.chat("Which invoice did Globex pay?")
    assert first.source_nodes[0].node.metadata["doc_id"] == "inv"
    assert "INV-4471" in str(first)
    # MockLLM "condenses" the follow-up by echoing its prompt: the query is odd, the path real
    second = chat.chat("Tell me about the arctic tern")
    assert second.source_nodes
    assert {n.node.metadata["doc_id"] for n in second.source_nodes} <= {d.id for d in docs_corpus()}
    assert len(chat.chat_history) == 4


def test_aretrieve_matches_retrieve(store):
    r = PensiveLlamaIndexRetriever(store, similarity_top_k=3)

    async def both():
        return await asyncio.gather(r.aretrieve("Acme revenue"), r.aretrieve("green tea"))

    a, b = asyncio.run(both())
    assert [n.node.node_id for n in a] == [n.node.node_id for n in r.retrieve("Acme revenue")]
    assert b[0].node.metadata["doc_id"] == "tea"


def test_concurrent_aretrieves_overlap(store, monkeypatch):
    real = store.query
    threads: set[int] = set()
    # both queries must be inside the store at once to pass the barrier: proof of overlap that
    # does not depend on wall time (a 0.55 s bound failed in CI when a GC pause stalled the loop)
    both_inside = threading.Barrier(2, timeout=30)

    def slow_query(*args, **kwargs):
        threads.add(threading.get_ident())
        both_inside.wait()  # a query that blocks (I/O, a model) must not block the event loop
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "query", slow_query)
    r = PensiveLlamaIndexRetriever(store, similarity_top_k=1)

    async def two():
        loop = threading.get_ident()
        out = await asyncio.gather(r.aretrieve("arctic tern"), r.aretrieve("green tea"))
        return out, loop

    (a, b), loop = asyncio.run(two())
    assert a[0].node.metadata["doc_id"] == "bird" and b[0].node.metadata["doc_id"] == "tea"
    assert loop not in threads and len(threads) == 2
    assert not both_inside.broken


def test_retriever_follows_llamaindex_conventions(store):
    # LlamaIndex's name and default for how many nodes: what index.as_retriever() gives
    r = PensiveLlamaIndexRetriever(store)
    assert r.similarity_top_k == DEFAULT_SIMILARITY_TOP_K == 2
    assert len(r.retrieve("Acme revenue")) == DEFAULT_SIMILARITY_TOP_K
    assert "similarity_top_k=2" in repr(r)
    for bad in (0, -1, 1001, 2.5, True, "3"):
        with pytest.raises(InputError, match="similarity_top_k"):
            PensiveLlamaIndexRetriever(store, similarity_top_k=bad)  # type: ignore[arg-type]
    # the other options fail at construction too, not at the first query
    with pytest.raises(InputError, match="as_of"):
        PensiveLlamaIndexRetriever(store, as_of="2024-01-01")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="not an identifier"):
        PensiveLlamaIndexRetriever(store, filters={"bad field": 1})


def test_from_defaults_over_a_store_or_a_path(store, tmp_path):
    r = PensiveLlamaIndexRetriever.from_defaults(store, similarity_top_k=3)
    assert r.pensive is store and r.similarity_top_k == 3
    r.close()  # not its store: left open
    assert len(store.query("tea").hits) > 0
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
    owned = PensiveLlamaIndexRetriever.from_defaults(path=tmp_path / "s", config=HASH_CONFIG)
    try:
        assert owned.similarity_top_k == DEFAULT_SIMILARITY_TOP_K
        assert owned.retrieve("arctic tern migration")[0].node.metadata["doc_id"] == "bird"
    finally:
        owned.close()
    with pytest.raises(Exception, match="closed"):
        owned.retrieve("arctic tern")
    with pytest.raises(InputError, match="exactly one of pensive"):
        PensiveLlamaIndexRetriever.from_defaults()
    with pytest.raises(InputError, match="exactly one of pensive"):
        PensiveLlamaIndexRetriever.from_defaults(store, path=tmp_path / "s")
    with pytest.raises(InputError, match="config"):
        PensiveLlamaIndexRetriever.from_defaults(store, config=HASH_CONFIG)
    with pytest.raises(InputError, match="similarity_top_k"):
        PensiveLlamaIndexRetriever.from_defaults(path=tmp_path / "new", similarity_top_k=0)
    assert not (tmp_path / "new").exists()  # refused before a store was created


def test_k_is_a_deprecated_alias_of_similarity_top_k(store, tmp_path):
    with pytest.warns(DeprecationWarning, match="similarity_top_k"):
        r = PensiveLlamaIndexRetriever(store, k=3)
    assert r.similarity_top_k == 3 and len(r.retrieve("Acme revenue")) == 3
    with pytest.warns(DeprecationWarning, match="similarity_top_k"):
        assert r.k == 3
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="disagree"):
        PensiveLlamaIndexRetriever(store, similarity_top_k=4, k=3)
    with pytest.warns(DeprecationWarning):
        owned = PensiveLlamaIndexRetriever.from_path(tmp_path / "s", config=HASH_CONFIG, k=1)
    assert owned.similarity_top_k == 1
    owned.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns about nothing
        PensiveLlamaIndexRetriever(store, similarity_top_k=3).retrieve("tea")


def test_old_retriever_name_is_a_deprecated_alias():
    import pensive_llamaindex.retriever as module

    for owner in (pensive_llamaindex, module):
        with pytest.warns(DeprecationWarning, match="PensiveLlamaIndexRetriever"):
            assert owner.PensiveRetriever is PensiveLlamaIndexRetriever
    with pytest.warns(DeprecationWarning):
        from pensive_llamaindex import PensiveRetriever  # noqa: F401
    assert "PensiveRetriever" not in pensive_llamaindex.__all__
    with pytest.raises(AttributeError):
        pensive_llamaindex.NoSuchName  # noqa: B018


# -- postprocessors on nodes from any retriever -----------------------------------------------


def _ceo_nodes():
    return [
        _node("John Smith is the CEO of Acme.", 0.9, "a", timestamp="2019-01-01"),
        _node("Jane Doe is the new CEO of Acme.", 0.8, "b", date="2024-03-01"),
        _node("Green tea contains catechins.", 0.5, "c"),
    ]


def test_temporal_postprocessor_demotes_superseded():
    nodes = _ceo_nodes()
    out = TemporalPostprocessor().postprocess_nodes(nodes, query_str="Who is the CEO of Acme?")
    assert [n.node.node_id for n in out] == ["b", "c", "a"]
    old = out[-1]
    assert old.score == pytest.approx(0.45)
    assert old.node.metadata["superseded_by"] == "b"
    assert old.node.metadata["valid_to"].startswith("2024-03-01")
    # inputs untouched
    assert nodes[0].score == 0.9 and "superseded_by" not in nodes[0].node.metadata


def test_temporal_postprocessor_as_of_drops_later_nodes():
    as_of = datetime(2020, 1, 1, tzinfo=UTC)
    out = TemporalPostprocessor(as_of=as_of).postprocess_nodes(_ceo_nodes())
    assert [n.node.node_id for n in out] == ["a", "c"]  # undated "c" stays
    assert out[0].score == 0.9 and "superseded_by" not in out[0].node.metadata


def test_temporal_postprocessor_leaves_unrelated_nodes():
    nodes = [_node("Green tea contains catechins.", 0.2, "x"), _node("Tern.", None, "y")]
    out = TemporalPostprocessor(demote=0.1).postprocess_nodes(nodes)
    assert [(n.node.node_id, n.score) for n in out] == [("x", 0.2), ("y", None)]


def test_graph_boost_postprocessor():
    nodes = [
        _node("The weather in Paris was mild.", 0.50, "w"),
        _node("Acme hired Jane Doe as chief executive.", 0.48, "a1"),
        _node("Jane Doe spoke about Acme cloud sales.", 0.30, "a2"),
        _node("Negative scores stay put or rise.", -1.0, "n"),
    ]
    out = GraphBoostPostprocessor(boost=0.1).postprocess_nodes(nodes, query_str="what does acme do")
    scores = {n.node.node_id: n.score for n in out}
    assert scores["w"] == pytest.approx(0.50)  # no shared entity: unchanged
    assert scores["a1"] > 0.48 * 1.1  # names the query's entity and shares with a2
    assert scores["a2"] > 0.30
    assert scores["n"] >= -1.0
    assert [n.node.node_id for n in out][:2] == ["a1", "w"]
    assert all(o.score >= i.score for o in out for i in nodes if i.node.node_id == o.node.node_id)
    assert max(scores.values()) <= 0.48 * 1.2 + 1e-9


def test_token_budget_postprocessor_clips_around_the_query():
    filler = " ".join(f"Filler sentence {i} says nothing at all." for i in range(20))
    long = f"{filler} The arctic tern migrates from pole to pole. {filler}"
    nodes = [
        _node("Green tea contains catechins.", 0.9, "tea"),
        _node(long, 0.7, "tern"),
        _node("Invoice INV-4471 was paid.", 0.1, "inv"),
    ]
    post = TokenBudgetPostprocessor(token_budget=30, tokenizer=_words)
    out = post.postprocess_nodes(nodes, query_str="arctic tern migration")
    assert [n.node.node_id for n in out] == ["tea", "tern"]
    assert sum(_words(n.node.get_content()) for n in out) <= 30
    clipped = out[1].node
    assert "The arctic tern migrates from pole to pole." in clipped.get_content()
    assert not clipped.get_content().startswith("Filler sentence 0")  # never the head
    assert clipped.metadata["clipped"] is True
    assert nodes[1].node.get_content() == long  # input untouched
    # the default tokenizer (tiktoken, offline) keeps everything when it fits
    whole = TokenBudgetPostprocessor(10_000).postprocess_nodes(nodes, query_str="tern")
    assert [n.node.node_id for n in whole] == ["tea", "tern", "inv"]


class _ByLength:
    """A reranker that prefers short texts (any object with ``score`` is a Reranker)."""

    def score(self, query, texts):
        return [-float(len(t)) for t in texts]


def test_rerank_postprocessor_with_any_reranker():
    nodes = [_node("a long text here", 0.9, "l"), _node("s", 0.1, "s"), _node("mid t", 0.5, "m")]
    out = RerankPostprocessor(_ByLength(), top_n=2).postprocess_nodes(nodes, query_str="q")
    assert [(n.node.node_id, n.score) for n in out] == [("s", -1.0), ("m", -5.0)]
    plain = RerankPostprocessor(top_n=2).postprocess_nodes(nodes, query_str="q")
    assert [n.node.node_id for n in plain] == ["l", "s"]  # no model: the first top_n as given


@pytest.mark.slow
def test_rerank_postprocessor_real_cross_encoder():
    pytest.importorskip("sentence_transformers")
    from pensive_core.embedders.sentence_transformers import bundled_minilm_path
    from pensive_core.rerank import CrossEncoderReranker

    # MiniLM with a fresh one-label head: the scores mean nothing, the code path is real
    reranker = CrossEncoderReranker(str(bundled_minilm_path()), num_labels=1)
    nodes = [_node(t, 0.0, str(i)) for i, t in enumerate(["tea", "tern", "invoice"])]
    out = RerankPostprocessor(reranker, top_n=2).postprocess_nodes(nodes, query_str="bird")
    assert len(out) == 2
    assert {n.node.node_id for n in out} <= {"0", "1", "2"}
    assert out[0].score >= out[1].score
    assert all(isinstance(n.score, float) for n in out)


# -- memory block ---------------------------------------------------------------------------


def test_memory_block_recovers_flushed_fact(hash_store):
    block = PensiveMemoryBlock(pensive=hash_store, session_id="s1")
    memory = Memory.from_defaults(
        session_id="chat-1",
        token_limit=60,
        chat_history_token_ratio=0.5,
        token_flush_size=20,
        memory_blocks=[block],
    )
    memory.put(ChatMessage(role="user", content="My cat is called Miso and I live in Lisbon."))
    memory.put(ChatMessage(role="assistant", content="Noted, Miso in Lisbon."))
    for i in range(5):
        memory.put(ChatMessage(role="user", content=f"Tell me about topic {i} in detail."))
        memory.put(ChatMessage(role="assistant", content=f"Topic {i} is interesting."))
    turns = hash_store.conversation("s1").history()
    assert turns[0].text == "My cat is called Miso and I live in Lisbon."
    assert turns[0].metadata["role"] == "user" and turns[1].metadata["role"] == "assistant"
    messages = memory.get(input="What is my cat called?")
    system, short_term = messages[0], messages[1:]
    assert short_term and not any("Miso" in (m.content or "") for m in short_term)  # flushed
    assert system.role.value == "system"
    assert "<pensive_memory>" in system.content and "Miso" in system.content


def test_memory_block_direct_put_get_and_recall_mode(hash_store):
    block = PensiveMemoryBlock(pensive=hash_store, mode="recall", k=2)

    async def run():
        await block.aput(
            [
                ChatMessage(role="user", content="I moved to Lisbon last week."),
                ChatMessage(role="assistant", content=""),  # nothing said: not a turn
                ChatMessage(role="assistant", content="Lisbon is lovely in spring."),
            ],
            session_id="direct",
        )
        got = await block.aget(
            [ChatMessage(role="user", content="Where do I live now?")], session_id="direct"
        )
        empty = await block.aget([], session_id="direct")
        return got, empty

    got, empty = asyncio.run(run())
    turns = hash_store.conversation("direct").history()
    assert len(turns) == 2
    # recalled turns read as in every Pensive prompt: "[date] user: text", the role once
    assert set(got.splitlines()) == {core_render_turn(t) for t in turns}
    assert f"[{turns[0].timestamp:%Y-%m-%d}] user: I moved to Lisbon last week." in got
    assert empty == ""
    with pytest.raises(Exception, match="session"):
        asyncio.run(block.aget([ChatMessage(role="user", content="hi")]))


def test_postprocessors_accept_query_bundle():
    nodes = _ceo_nodes()
    out = GraphBoostPostprocessor().postprocess_nodes(nodes, QueryBundle("Acme CEO"))
    assert {n.node.node_id for n in out} == {"a", "b", "c"}


def test_memory_block_context_does_not_repeat_the_question(hash_store):
    block = PensiveMemoryBlock(pensive=hash_store, session_id="q1")
    question = "Where does my sister Marta live?"

    async def run():
        await block.aput(
            [
                ChatMessage(role="user", content="My sister Marta lives in Porto."),
                ChatMessage(role="assistant", content="Porto is a lovely city."),
            ]
        )
        return await block.aget([ChatMessage(role="user", content=question)])

    text = asyncio.run(run())
    assert "My sister Marta lives in Porto." in text
    # Memory sends the user's message itself: the block does not echo it as a section
    assert "## Question" not in text and question not in text
    assert "assistant: [" not in text and "user: [" not in text  # each role written once
    # the real Memory: the user's latest message is in the chat, once
    memory = Memory.from_defaults(session_id="chat-q", token_limit=2000, memory_blocks=[block])
    memory.put(ChatMessage(role="user", content=question))
    messages = memory.get()
    assert sum(question in (m.content or "") for m in messages) == 1


def test_query_fusion_retriever_fuses_pensive_with_its_own_top_k(store):
    from llama_index.core.retrievers import QueryFusionRetriever

    fusion = QueryFusionRetriever(
        [PensiveLlamaIndexRetriever(store, similarity_top_k=4)],
        llm=MockLLM(),
        num_queries=1,  # the question alone: no LLM-written variants
        similarity_top_k=2,
        use_async=False,
    )
    nodes = fusion.retrieve("arctic tern migration")
    assert len(nodes) == 2 and nodes[0].node.metadata["doc_id"] == "bird"


def test_memory_block_passes_its_prompt_strategy_through(hash_store):
    block = PensiveMemoryBlock(pensive=hash_store, session_id="strat", strategy="weighted")
    chat = hash_store.conversation("strat")
    chat.add("user", "My sister Marta lives in Porto.")
    for i in range(8):  # push the fact out of the recent turns, so it is recalled
        chat.add("user", f"Unrelated remark number {i} about the weather.")
    text = asyncio.run(block.aget([ChatMessage(role="user", content="Where does Marta live?")]))
    assert "relevant) " in text and "Marta lives in Porto" in text
    plain = PensiveMemoryBlock(pensive=hash_store, session_id="strat")
    assert "relevant) " not in asyncio.run(
        plain.aget([ChatMessage(role="user", content="Where does Marta live?")])
    )
