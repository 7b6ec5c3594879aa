"""PensiveMemoryMiddleware on a real create_agent with a fake chat model that records its input."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402

from pensive_core import render_turn  # noqa: E402
from pensive_core.errors import InputError  # noqa: E402
from pensive_langchain.middleware import PensiveMemoryMiddleware  # noqa: E402


class Recording(GenericFakeChatModel):
    """Answers from a script and keeps every message list it was given (the async path
    runs ``_generate`` too)."""

    seen: list = []

    def _generate(self, messages, *args, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _model(*replies: str) -> Recording:
    return Recording(messages=iter([AIMessage(r) for r in replies]), seen=[])


def _system(messages) -> str:
    return "\n".join(m.content for m in messages if m.type == "system")


def test_stores_the_exchange_and_recalls_it_next_time(hash_store):
    model = _model("Nice, Lisbon is lovely.", "You told me you live in Lisbon.")
    agent = create_agent(
        model=model,
        tools=[],
        system_prompt="You are helpful.",
        middleware=[PensiveMemoryMiddleware(hash_store, session_id="s1")],
    )
    agent.invoke({"messages": [{"role": "user", "content": "I moved to Lisbon last week"}]})
    chat = hash_store.conversation("s1")
    assert [(h.metadata["role"], h.text) for h in chat.history()] == [
        ("user", "I moved to Lisbon last week"),
        ("assistant", "Nice, Lisbon is lovely."),
    ]
    assert "Relevant memories" not in _system(model.seen[0])  # nothing to recall yet

    # a new run without the earlier messages: only the memory can bring Lisbon back
    out = agent.invoke({"messages": [{"role": "user", "content": "Where do I live now?"}]})
    assert out["messages"][-1].content == "You told me you live in Lisbon."
    system = _system(model.seen[1])
    assert system.startswith("You are helpful.")
    assert "Relevant memories:" in system and "I moved to Lisbon last week" in system
    # each recalled turn as every Pensive prompt shows it: "[date] user: text", the role once
    memories = system.split("Relevant memories:\n", 1)[1].splitlines()
    first = chat.history()[0]
    assert render_turn(first) in memories
    assert render_turn(first) == f"[{first.timestamp:%Y-%m-%d}] user: I moved to Lisbon last week"
    assert len(chat.history()) == 4
    # another session remembers nothing of this one
    assert not len(hash_store.conversation("s2"))


def test_session_from_thread_id_and_isolation(hash_store):
    model = _model("Noted.", "I don't know.", "Noted again.")
    agent = create_agent(
        model=model, tools=[], middleware=[PensiveMemoryMiddleware(hash_store, k=3)]
    )
    agent.invoke(
        {"messages": [{"role": "user", "content": "My cat is called Miso"}]},
        config={"configurable": {"thread_id": "t-alice"}},
    )
    agent.invoke(
        {"messages": [{"role": "user", "content": "What is my cat called?"}]},
        config={"configurable": {"thread_id": "t-bob"}},
    )
    assert "Miso" not in _system(model.seen[1])
    assert len(hash_store.conversation("t-alice")) == 2
    assert len(hash_store.conversation("t-bob")) == 2


def test_no_session_is_an_error(hash_store):
    agent = create_agent(
        model=_model("x"), tools=[], middleware=[PensiveMemoryMiddleware(hash_store)]
    )
    with pytest.raises(InputError, match="session"):
        agent.invoke({"messages": [{"role": "user", "content": "hello"}]})
    with pytest.raises(InputError):
        PensiveMemoryMiddleware(hash_store, k=0)


def test_async_path(hash_store):
    model = _model("Got it: blue.", "Your favourite colour is blue.")
    agent = create_agent(
        model=model,
        tools=[],
        middleware=[PensiveMemoryMiddleware(hash_store, session_id="a1")],
    )

    async def run():
        await agent.ainvoke(
            {"messages": [{"role": "user", "content": "My favourite colour is blue"}]}
        )
        return await agent.ainvoke(
            {"messages": [{"role": "user", "content": "What is my favourite colour?"}]}
        )

    out = asyncio.run(run())
    assert out["messages"][-1].content == "Your favourite colour is blue."
    assert "My favourite colour is blue" in _system(model.seen[1])
    assert len(hash_store.conversation("a1").history()) == 4


def test_with_a_user_a_new_session_remembers_the_old_ones(hash_store):
    model = _model("Noted.", "You live in Lisbon.")

    def agent(session):
        mw = PensiveMemoryMiddleware(hash_store, session_id=session, user="ana")
        return create_agent(model=model, tools=[], middleware=[mw])

    agent("monday").invoke({"messages": [{"role": "user", "content": "I moved to Lisbon"}]})
    agent("tuesday").invoke({"messages": [{"role": "user", "content": "Where do I live, Lisbon?"}]})
    assert "I moved to Lisbon" in _system(model.seen[1])
    stranger = PensiveMemoryMiddleware(hash_store, session_id="x", user="bob")
    model2 = _model("Hm?")
    create_agent(model=model2, tools=[], middleware=[stranger]).invoke(
        {"messages": [{"role": "user", "content": "Where do I live, Lisbon?"}]}
    )
    assert "I moved to Lisbon" not in _system(model2.seen[0])  # another user's memory
