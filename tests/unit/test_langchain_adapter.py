"""LangChain adapters: retriever, chat message history, LLM cache (and the core LLM cache)."""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
import warnings
from datetime import datetime, timezone
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document as LCDocument  # noqa: E402
from langchain_core.globals import get_llm_cache, set_llm_cache  # noqa: E402
from langchain_core.language_models.fake import FakeListLLM  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402
from langchain_core.vectorstores import VectorStore  # noqa: E402
from pydantic import ValidationError  # noqa: E402

import pensive_langchain  # noqa: E402
from pensive_core import Pensive  # noqa: E402
from pensive_core.errors import InputError  # noqa: E402
from pensive_core.llm_cache import LLMCache, prompt_key  # noqa: E402
from pensive_langchain import (  # noqa: E402
    PensiveCache,
    PensiveChatMessageHistory,
    PensiveLangChainRetriever,
)
from tests.conftest import HASH_CONFIG, docs_corpus  # noqa: E402

NEAR_MISSES = [
    ("What was revenue in Q3 2024?", "What was revenue in Q4 2024?"),
    ("Was invoice INV-4471 paid?", "Was invoice INV-4472 paid?"),
    ("Did Acme ship the order?", "Did Acme not ship the order?"),
    ("Who ran Acme in 2021?", "Who ran Globex in 2021?"),
    ("Meeting on 2024-05-02", "Meeting on 2024-05-03"),
    ("?", "!"),
]
VARIANTS = [
    ("What was revenue in Q3 2024?", "  what WAS revenue in q3 2024 "),
    ("Was invoice INV-4471 paid?", "was invoice inv-4471 paid!!"),
]


@pytest.fixture
def store(hash_store):
    hash_store.ingest(docs_corpus())
    return hash_store


@pytest.fixture
def llm_cache_reset():
    """Whatever a test sets as the global LLM cache is undone after it."""
    before = get_llm_cache()
    yield
    set_llm_cache(before)


# -- public names -----------------------------------------------------------------------------
def test_public_names_are_pinned():
    assert pensive_langchain.__all__ == [
        "PensiveLangChainRetriever",
        "PensiveChatMessageHistory",
        "PensiveCache",
        "PensiveStore",
        "PensiveMemoryMiddleware",
    ]
    for name in ("PensiveLangChainRetriever", "PensiveChatMessageHistory", "PensiveCache"):
        assert getattr(pensive_langchain, name).__module__.startswith("pensive_langchain.")
    with pytest.raises(AttributeError):
        pensive_langchain.NoSuchName  # noqa: B018


def test_retriever_defaults_are_pinned(store):
    r = PensiveLangChainRetriever(pensive=store)
    assert (r.k, r.as_of, r.filters) == (4, None, None)
    # LangChain's own default: what VectorStore.as_retriever() gives (similarity_search's k)
    assert r.k == inspect.signature(VectorStore.similarity_search).parameters["k"].default
    assert len(r.invoke("Acme revenue")) == 4


def test_old_retriever_name_is_a_deprecated_alias():
    import pensive_langchain.retriever as module

    for owner in (pensive_langchain, module):
        with pytest.warns(DeprecationWarning, match="PensiveLangChainRetriever"):
            assert owner.PensiveRetriever is PensiveLangChainRetriever
    with pytest.warns(DeprecationWarning):
        from pensive_langchain import PensiveRetriever  # noqa: F401
    assert "PensiveRetriever" not in pensive_langchain.__all__


# -- retriever --------------------------------------------------------------------------------
def test_documents_carry_the_hit(store):
    r = PensiveLangChainRetriever(pensive=store, k=3)
    docs = r.invoke("What was Acme revenue in Q3 2024?")
    hits = store.query("What was Acme revenue in Q3 2024?", k=3).hits
    assert len(docs) == 3 and all(isinstance(d, LCDocument) for d in docs)
    assert [d.id for d in docs] == [h.chunk_id for h in hits]
    top, hit = docs[0], hits[0]
    assert top.page_content == hit.text
    assert top.metadata["doc_id"] == "q3" == hit.doc_id
    assert top.metadata["chunk_id"] == hit.chunk_id
    assert top.metadata["score"] == pytest.approx(hit.score)
    assert top.metadata["topic"] == "q3"  # the document's own metadata is kept
    assert top.metadata["tier"] in {"L1", "L2", "L3"}
    assert top.metadata["sources"] == dict(hit.sources)
    assert top.metadata["timestamp"] == "2024-01-01T00:00:00+00:00"
    json.dumps([d.metadata for d in docs])  # plain JSON: safe for any LangChain vector store


def test_an_at_mention_in_the_question_pins_its_document(store):
    docs = PensiveLangChainRetriever(pensive=store, k=2).invoke("Acme revenue, and @tea?")
    assert docs[0].metadata["doc_id"] == "tea" and docs[0].metadata["pinned"] is True
    assert len(docs) == 3 and not any("pinned" in d.metadata for d in docs[1:])


def test_k_from_constructor_and_per_call(store):
    r = PensiveLangChainRetriever(pensive=store, k=3)
    assert len(r.invoke("Acme revenue")) == 3
    assert len(r.invoke("Acme revenue", k=1)) == 1
    assert len(r.invoke("Acme revenue", k=5)) == 5
    assert r.k == 3  # a per-call k does not stick


def test_filters_and_as_of(store):
    r = PensiveLangChainRetriever(pensive=store, k=5, filters={"topic": "q4"})
    assert {d.metadata["doc_id"] for d in r.invoke("Acme revenue")} == {"q4"}
    assert {d.metadata["doc_id"] for d in r.invoke("Acme revenue", filters={"topic": "tea"})} == {
        "tea"
    }
    early = PensiveLangChainRetriever(
        pensive=store, k=8, as_of=datetime(2024, 2, 15, tzinfo=timezone.utc)
    )
    assert {d.metadata["doc_id"] for d in early.invoke("Acme revenue")} <= {"q3", "q4"}
    assert "q4" not in {
        d.metadata["doc_id"]
        for d in early.invoke("Acme revenue", as_of=datetime(2024, 1, 15, tzinfo=timezone.utc))
    }


def test_a_repeated_question_is_served_by_l1(store):
    r = PensiveLangChainRetriever(pensive=store, k=2)
    first = r.invoke("Who is the chief executive of Acme?")
    again = r.invoke("who is the chief executive of acme")
    assert [d.id for d in again] == [d.id for d in first]
    assert again[0].metadata["tier"] == "L1"


def test_async_and_batch(store):
    r = PensiveLangChainRetriever(pensive=store, k=2)
    queries = ["Acme revenue Q3 2024", "arctic tern migration", "green tea"]
    expected = [d[0].metadata["doc_id"] for d in r.batch(queries)]
    assert expected == ["q3", "bird", "tea"]

    async def run() -> tuple[list[LCDocument], list[list[LCDocument]]]:
        one = await r.ainvoke("arctic tern migration", k=1)
        many = await r.abatch(queries)
        return one, many

    one, many = asyncio.run(run())
    assert [d.metadata["doc_id"] for d in one] == ["bird"]
    assert [d[0].metadata["doc_id"] for d in many] == expected
    assert all(len(d) == 2 for d in many)


def test_async_path_runs_off_the_event_loop(store, monkeypatch):
    r = PensiveLangChainRetriever(pensive=store, k=1)
    loop_threads: list[bool] = []
    real = store.query

    def query(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            loop_threads.append(True)
        except RuntimeError:
            loop_threads.append(False)
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "query", query)
    asyncio.run(r.ainvoke("green tea"))
    assert loop_threads == [False]  # the store was queried in a worker thread


def test_constructor_validates(store):
    for bad in ("./not-a-store", 42):
        with pytest.raises(InputError, match="pensive must be a pensive_core.Pensive store"):
            PensiveLangChainRetriever(pensive=bad)
        with pytest.raises(InputError, match="from_path"):
            PensiveLangChainRetriever(bad)
    with pytest.raises(InputError, match="needs pensive"):
        PensiveLangChainRetriever()
    with pytest.raises(InputError, match="twice"):
        PensiveLangChainRetriever(store, pensive=store)
    with pytest.raises(ValidationError, match=r"(?s)\bk\b.*greater than or equal to 1"):
        PensiveLangChainRetriever(pensive=store, k=0)
    with pytest.raises(ValidationError, match=r"(?s)\bk\b.*less than or equal to 1000"):
        PensiveLangChainRetriever(store, k=1001)
    with pytest.raises(ValidationError, match=r"(?s)as_of.*datetime"):
        PensiveLangChainRetriever(store, as_of="soon")
    with pytest.raises(ValidationError, match=r"(?s)filters.*not an identifier"):
        PensiveLangChainRetriever(store, filters={"bad field": 1})
    # a misspelt field is named, not silently dropped
    with pytest.raises(ValidationError, match=r"(?s)top_k.*Extra inputs are not permitted"):
        PensiveLangChainRetriever(store, top_k=3)
    with pytest.raises(InputError, match="top_k"):
        PensiveLangChainRetriever(pensive=store).invoke("tea", top_k=3)


def test_store_by_position_or_keyword(store):
    by_position = PensiveLangChainRetriever(store, k=2, tags=["pensive"])
    by_keyword = PensiveLangChainRetriever(pensive=store, k=2, tags=["pensive"])
    assert by_position.pensive is by_keyword.pensive is store
    assert by_position.tags == ["pensive"]
    ids = [d.id for d in by_position.invoke("arctic tern")]
    assert ids == [d.id for d in by_keyword.invoke("arctic tern")] and len(ids) == 2
    # LangChain rebuilds retrievers from keywords (configurable fields): that path still works
    from langchain_core.runnables import ConfigurableField

    flexible = by_position.configurable_fields(k=ConfigurableField(id="k"))
    assert len(flexible.with_config(configurable={"k": 1}).invoke("arctic tern")) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns about nothing
        PensiveLangChainRetriever(store).invoke("tea")


def test_from_path_closes_the_store_it_opened_on_bad_options(tmp_path):
    with pytest.raises(ValidationError, match="k"):
        PensiveLangChainRetriever.from_path(tmp_path / "s", HASH_CONFIG, k=0)
    # the store it opened was closed again: another writer can open it
    with Pensive(tmp_path / "s", HASH_CONFIG) as p:
        assert p.stats()["documents"] == 0


def test_from_path(tmp_path):
    r = PensiveLangChainRetriever.from_path(tmp_path / "s", HASH_CONFIG, k=1)
    try:
        assert isinstance(r.pensive, Pensive) and r.k == 1
        r.pensive.ingest(docs_corpus())
        assert r.invoke("green tea antioxidants")[0].metadata["doc_id"] == "tea"
    finally:
        r.pensive.close()


# -- chat message history ---------------------------------------------------------------------
def test_messages_round_trip_with_roles(store):
    h = PensiveChatMessageHistory(store, "s1")
    h.add_messages(
        [
            SystemMessage("Be brief."),
            HumanMessage("I moved to Lisbon", name="ana", id="m1"),
            AIMessage("Noted."),
            ChatMessage(role="critic", content="Too brief."),
            ToolMessage("42", tool_call_id="call-1"),
        ]
    )
    msgs = h.messages
    assert [type(m) for m in msgs] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ChatMessage,
        ChatMessage,
    ]
    assert [m.content for m in msgs] == [
        "Be brief.",
        "I moved to Lisbon",
        "Noted.",
        "Too brief.",
        "42",
    ]
    assert (msgs[1].name, msgs[1].id) == ("ana", "m1")
    assert (msgs[3].role, msgs[4].role) == ("critic", "tool")
    # the same turns serve Pensive's own conversation memory
    assert (
        store.conversation("s1").recall("where does ana live?", k=1)[0].text == "I moved to Lisbon"
    )


def test_add_messages_is_one_batch(store, monkeypatch):
    h = PensiveChatMessageHistory(store, "s1")
    calls: list[int] = []
    real = h.conversation.add_many
    monkeypatch.setattr(h.conversation, "add_many", lambda t: calls.append(len(t)) or real(t))
    h.add_messages([HumanMessage("a"), AIMessage("b"), HumanMessage("c")])
    h.add_messages([])
    assert calls == [3]
    with pytest.raises(InputError):
        h.add_messages([HumanMessage("fine"), AIMessage("")])  # nothing stored on a bad one
    assert len(h.messages) == 3


def test_clear_and_async(store):
    h = PensiveChatMessageHistory(store, "s1")
    other = PensiveChatMessageHistory(store, "s2")
    other.add_user_message("kept")

    async def run() -> list[Any]:
        await h.aadd_messages([HumanMessage("hello"), AIMessage("hi")])
        got = await h.aget_messages()
        await h.aclear()
        return got

    assert [m.content for m in asyncio.run(run())] == ["hello", "hi"]
    assert h.messages == []
    assert [m.content for m in other.messages] == ["kept"]
    with pytest.raises(InputError):
        PensiveChatMessageHistory(object(), "s1")


# deprecated in langchain-core 1.x in favour of LangGraph persistence, still widely used
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_across_sessions_and_reopen(tmp_path):
    seen: list[list[str]] = []

    def capture(prompt_value: Any) -> Any:
        seen.append([m.content for m in prompt_value.to_messages()])
        return prompt_value

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = GenericFakeChatModel(
        messages=iter(["Lisbon noted.", "Hello Bo.", "You live in Lisbon."])
    )
    chain = prompt | RunnableLambda(capture) | model

    store = Pensive(tmp_path / "s", config=HASH_CONFIG)
    try:
        with_history = RunnableWithMessageHistory(
            chain,
            lambda session_id: PensiveChatMessageHistory(store, session_id),
            input_messages_key="question",
            history_messages_key="history",
        )

        def ask(session: str, question: str) -> str:
            cfg = {"configurable": {"session_id": session}}
            return str(with_history.invoke({"question": question}, config=cfg).content)

        assert ask("ana", "I live in Lisbon.") == "Lisbon noted."
        assert ask("bo", "Hi, I am Bo.") == "Hello Bo."
        assert ask("ana", "Where do I live?") == "You live in Lisbon."
    finally:
        store.close()
    # each session's prompt held its own history only
    assert seen[1] == ["You are terse.", "Hi, I am Bo."]
    assert seen[2] == [
        "You are terse.",
        "I live in Lisbon.",
        "Lisbon noted.",
        "Where do I live?",
    ]

    reopened = Pensive(tmp_path / "s", config=HASH_CONFIG)
    try:
        ana = PensiveChatMessageHistory(reopened, "ana").messages
        assert [(m.type, m.content) for m in ana] == [
            ("human", "I live in Lisbon."),
            ("ai", "Lisbon noted."),
            ("human", "Where do I live?"),
            ("ai", "You live in Lisbon."),
        ]
        assert [m.content for m in PensiveChatMessageHistory(reopened, "bo").messages] == [
            "Hi, I am Bo.",
            "Hello Bo.",
        ]
    finally:
        reopened.close()


# -- LLM cache: the core keys -----------------------------------------------------------------
@pytest.mark.parametrize("a,b", NEAR_MISSES)
def test_near_miss_prompts_never_share_a_key(a, b):
    assert prompt_key(a, "m") != prompt_key(b, "m")
    assert prompt_key([("human", a)], "m") != prompt_key([("human", b)], "m")


@pytest.mark.parametrize("a,b", VARIANTS)
def test_surface_variants_share_a_key(a, b):
    assert prompt_key(a, "m") == prompt_key(b, "m")
    assert prompt_key(a, "m") != prompt_key(a, "other model")
    assert prompt_key([("human", a)], "m") != prompt_key([("ai", a)], "m")


def test_core_llm_cache_round_trip_and_persistence(tmp_path):
    with LLMCache(tmp_path / "c.sqlite") as c:
        c.put("What was revenue in Q3 2024?", "m", [{"text": "4.1bn"}])
        assert c.get("what was revenue in q3 2024", "m") == [{"text": "4.1bn"}]
        assert c.get("What was revenue in Q4 2024?", "m") is None
        with pytest.raises(InputError):
            c.put("x", "m", [object()])
    with LLMCache(tmp_path / "c.sqlite") as c:
        assert len(c) == 1
        assert c.clear("other") == 0 and c.clear("m") == 1 and len(c) == 0


# -- LLM cache: the LangChain adapter ---------------------------------------------------------
def test_llm_served_from_cache_for_variants_not_near_misses(store, llm_cache_reset):
    cache = PensiveCache(store)
    set_llm_cache(cache)
    llm = FakeListLLM(responses=["r1", "r2", "r3", "r4", "unused"])  # i wraps at the end
    assert llm.invoke("What was revenue in Q3 2024?") == "r1"
    assert llm.invoke("What was revenue in Q3 2024?") == "r1"
    assert llm.invoke("  what WAS revenue in q3 2024 ") == "r1"
    assert llm.i == 1  # one model call so far
    assert llm.invoke("What was revenue in Q4 2024?") == "r2"
    assert llm.invoke("Was invoice INV-4471 paid?") == "r3"
    assert llm.invoke("Was invoice INV-4472 paid?") == "r4"
    assert llm.i == 4
    assert cache.path == store.path / "llm_cache.sqlite"


def test_chat_model_served_from_cache(tmp_path, llm_cache_reset):
    set_llm_cache(PensiveCache(path=tmp_path))

    def model() -> GenericFakeChatModel:
        return GenericFakeChatModel(messages=iter(["first", "second", "third"]))

    chat = model()
    q3 = [SystemMessage("Answer from the report."), HumanMessage("Revenue in Q3 2024?")]
    assert chat.invoke(q3).content == "first"
    assert chat.invoke(q3).content == "first"
    variant = [SystemMessage("answer from the report"), HumanMessage("revenue in q3 2024 ?!")]
    assert chat.invoke(variant).content == "first"
    q4 = [SystemMessage("Answer from the report."), HumanMessage("Revenue in Q4 2024?")]
    assert chat.invoke(q4).content == "second"
    # the same words spoken by another role are another prompt
    assert (
        chat.invoke(
            [SystemMessage("Answer from the report."), AIMessage("Revenue in Q3 2024?")]
        ).content
        == "third"
    )

    async def run() -> tuple[Any, Any]:
        again = model()  # a fresh model: any answer it gives from the cache costs no call
        return await again.ainvoke(variant), await again.ainvoke(q4)

    a, b = asyncio.run(run())
    assert (a.content, b.content) == ("first", "second")


def test_cache_is_json_and_persists(tmp_path, llm_cache_reset):
    cache = PensiveCache(path=tmp_path / "lc.sqlite")
    set_llm_cache(cache)
    llm = FakeListLLM(responses=["r1", "r2"])
    llm.invoke("Who is the CEO of Acme?")
    cache.close()

    rows = sqlite3.connect(tmp_path / "lc.sqlite").execute("SELECT value FROM llm_cache").fetchall()
    assert len(rows) == 1 and json.loads(rows[0][0])[0]["kwargs"]["text"] == "r1"

    reopened = PensiveCache(path=tmp_path / "lc.sqlite")
    set_llm_cache(reopened)
    fresh = FakeListLLM(responses=["r1", "r2"])  # the same model: its responses are its params
    assert fresh.invoke("who is the ceo of acme") == "r1"
    assert fresh.i == 0  # served from the reopened file
    reopened.clear()
    assert len(reopened) == 0
    fresh.invoke("who is the ceo of acme")
    assert fresh.i == 1


def test_cache_needs_a_place():
    with pytest.raises(InputError, match="path"):
        PensiveCache()
