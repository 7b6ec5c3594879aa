"""The LLM context generator and its SQLite cache, against real LlamaIndex and LangChain classes.

No network: LlamaIndex's MockLLM and LangChain's fake models stand in for a provider. A
framework's tests are skipped when it is not installed (the fixtures ``li`` and ``lc``).
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from pensive_core.chunking import content_hash
from pensive_core.context.base import ContextRequest
from pensive_core.context.cache import SUMMARY_KEY, ContextCache
from pensive_core.context.heuristic import HeuristicContextGenerator
from pensive_core.context.llm import (
    CONTEXT_PROMPT,
    PROMPT_VERSION,
    SUMMARY_PROMPT,
    LLMContextGenerator,
    as_completion,
    model_id,
)
from pensive_core.errors import ConfigError, InputError
from pensive_core.types import Chunk, Document

OWL = [
    "The barn owl hunts at night over open fields.",
    "Its heart-shaped face funnels sound to its ears.",
    "It swallows voles whole and coughs up pellets.",
]
RIVER = [
    "The Severn is the longest river in Britain.",
    "Its tidal bore can reach two metres.",
]


def _request(doc_id: str, passages: Sequence[str], doc_hash: str = "") -> ContextRequest:
    text = " ".join(passages)
    chunks, pos = [], 0
    for i, passage in enumerate(passages):
        start = text.index(passage, pos)
        pos = start + len(passage)
        h = content_hash(passage)
        chunks.append(Chunk(f"{doc_id}#{h}", doc_id, i, passage, start, pos, h))
    return ContextRequest(Document(doc_id, text), chunks, doc_hash)


def _passage(prompt: str) -> str:
    match = re.search(r"<passage>\n(.*)\n</passage>", prompt, re.S)
    assert match, prompt
    return match.group(1)


def _is_summary_prompt(prompt: str) -> bool:
    return prompt.startswith(SUMMARY_PROMPT.split("{", 1)[0])


class FixedFallback:
    """A fallback that says which passage it stood in for."""

    name = "fixed"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, requests: Sequence[ContextRequest]) -> list[list[str]]:
        self.calls.append([r.document.id for r in requests])
        return [[f"fallback {r.document.id} {c.ordinal}" for c in r.chunks] for r in requests]


class Recorder:
    """A plain ``str -> str`` model: records prompts and threads, answers from the passage."""

    def __init__(self, fail: Callable[[str], bool] = lambda p: False, sleep: float = 0.0) -> None:
        self.prompts: list[str] = []
        self.threads: set[int] = set()
        self.fail = fail
        self.sleep = sleep
        self.lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0  # the most calls in flight at once

    def __call__(self, prompt: str) -> str:
        with self.lock:
            self.prompts.append(prompt)
            self.threads.add(threading.get_ident())
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            if self.sleep:
                time.sleep(self.sleep)
        finally:
            with self.lock:
                self.inside -= 1
        if self.fail(prompt):
            raise RuntimeError("model overloaded")
        if _is_summary_prompt(prompt):
            return "Summary: A field guide to owls."
        return f"Context: about {_passage(prompt)}"

    def chunk_prompts(self) -> list[str]:
        return [p for p in self.prompts if not _is_summary_prompt(p)]


@pytest.fixture
def db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    yield conn
    conn.close()


@pytest.fixture
def cache(db: sqlite3.Connection) -> ContextCache:
    return ContextCache(db)


def _gen(llm: Any, **kwargs: Any) -> LLMContextGenerator:
    kwargs.setdefault("fallback", FixedFallback())
    return LLMContextGenerator(llm, **kwargs)


# ---------------------------------------------------------------------------------------------
# ContextCache


def test_cache_round_trip_count_and_clear(cache: ContextCache) -> None:
    cache.put_many([("d1", "c1", "g", "ctx 1"), ("d1", "c2", "g", "ctx 2"), ("d1", "c1", "h", "x")])
    assert cache.count() == 3
    got = cache.get_many(
        [("d1", "c1", "g"), ("d1", "c2", "g"), ("d1", "c3", "g"), ("d2", "c1", "g")]
    )
    assert got == {("d1", "c1", "g"): "ctx 1", ("d1", "c2", "g"): "ctx 2"}
    cache.put_many([("d1", "c1", "g", "ctx 1 again")])  # replaced, not duplicated
    assert cache.get_many([("d1", "c1", "g")]) == {("d1", "c1", "g"): "ctx 1 again"}
    assert cache.count() == 3
    assert cache.clear("h") == 1
    assert cache.get_many([("d1", "c1", "h")]) == {}
    assert cache.clear() == 2
    assert cache.count() == 0


def test_cache_many_keys_in_batches(cache: ContextCache, db: sqlite3.Connection) -> None:
    rows = [(f"d{i}", f"c{j}", "g", f"{i}/{j}") for i in range(1200) for j in range(3)]
    cache.put_many(rows)
    keys = [(d, c, g) for d, c, g, _ in rows] + [("d5", "nope", "g")]
    got = cache.get_many(keys)
    assert len(got) == 3600 and got[("d1199", "c2", "g")] == "1199/2"
    assert ContextCache(db).count() == 3600  # a second cache on the same table sees the rows


# ---------------------------------------------------------------------------------------------
# Plain callables, errors, name


def test_plain_callable_prompt_and_contexts(cache: ContextCache) -> None:
    model = Recorder()
    gen = _gen(model, cache=cache)
    request = _request("owl", OWL)
    assert gen.generate([request]) == [[f"about {p}" for p in OWL]]
    assert len(model.prompts) == 3
    assert sorted(_passage(p) for p in model.chunk_prompts()) == sorted(OWL)
    for prompt in model.prompts:
        assert request.document.text in prompt
        assert "Here is the document:" in prompt
    assert gen.counts == {
        "llm_calls": 3,
        "summaries": 0,
        "cached": 0,
        "generated": 3,
        "fallback": 0,
    }


def test_cache_hit_makes_no_call(cache: ContextCache) -> None:
    first = _gen(Recorder(), cache=cache).generate([_request("owl", OWL)])
    again = Recorder()
    gen = _gen(again, cache=cache)
    # Same text under another id, and an empty doc_hash: the key is the content hash.
    assert gen.generate([_request("owl-copy", OWL)]) == first
    assert again.prompts == []
    assert gen.counts["cached"] == 3 and gen.counts["llm_calls"] == 0
    doc_hash = content_hash(" ".join(OWL))
    assert cache.get_many([(doc_hash, content_hash(OWL[0]), gen.name)])


def test_changed_passage_only_is_asked(cache: ContextCache) -> None:
    _gen(Recorder(), cache=cache).generate([_request("owl", OWL, doc_hash="v1")])
    model = Recorder()
    edited = [OWL[0], "It nests in old barns and church towers.", OWL[2]]
    out = _gen(model, cache=cache).generate([_request("owl", edited, doc_hash="v1")])
    assert [_passage(p) for p in model.prompts] == [edited[1]]
    assert out == [[f"about {p}" for p in edited]]


def test_repeated_passage_is_asked_once() -> None:
    model = Recorder()
    gen = _gen(model)
    out = gen.generate([_request("a", OWL), _request("b", OWL)])
    assert len(model.prompts) == 3
    assert out[0] == out[1] == [f"about {p}" for p in OWL]
    assert gen.counts["generated"] == 6


def test_use_cache_attaches_a_cache_later(cache: ContextCache) -> None:
    gen = _gen(Recorder())
    gen.generate([_request("owl", OWL)])
    assert cache.count() == 0
    gen.use_cache(cache)
    gen.generate([_request("owl", OWL)])
    assert cache.count() == 3


def test_not_a_model_is_an_input_error() -> None:
    for bad in (object(), "gpt-4o", 42, Recorder):  # Recorder: a class, not an instance
        with pytest.raises(InputError, match="LlamaIndex LLM .*LangChain .*callable"):
            as_completion(bad)
    with pytest.raises(InputError, match="builtins.object"):
        LLMContextGenerator(object(), fallback=FixedFallback())
    with pytest.raises(InputError, match="pass an instance"):
        as_completion(Recorder)


def test_no_framework_is_imported() -> None:
    code = (
        "import sys, pensive_core.context as c; c.LLMContextGenerator(lambda p: p, concurrency=1);"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'llama_index', 'langchain_core'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_callable_must_answer_text() -> None:
    with pytest.raises(TypeError, match="returned int"):
        as_completion(lambda prompt: 3)("hi")


@pytest.mark.parametrize(
    "kwargs", [{"concurrency": 0}, {"max_chars": 5}, {"document_chars": 0}, {"generator_id": ""}]
)
def test_settings_are_checked(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        _gen(Recorder(), **kwargs)


def test_default_fallback_is_the_heuristic(caplog: Any) -> None:
    gen = LLMContextGenerator(Recorder(fail=lambda p: True))
    assert isinstance(gen.fallback, HeuristicContextGenerator)
    request = _request("owl", OWL)
    expected = HeuristicContextGenerator().generate([request])
    with caplog.at_level(logging.WARNING, logger="pensive_core.context.llm"):
        assert gen.generate([request]) == expected
    assert gen.counts["fallback"] == 3 and "3 of 3 passages" in caplog.text


def _answer_a(prompt: str) -> str:
    return "a"


def _answer_b(prompt: str) -> str:
    return "b"


def test_name_is_model_and_prompt_version() -> None:
    assert model_id(_answer_a) == f"{__name__}._answer_a"
    assert _gen(_answer_a).name == f"llm:{__name__}._answer_a:{PROMPT_VERSION}"
    assert _gen(_answer_a).name != _gen(_answer_b).name
    assert _gen(_answer_a, generator_id="mine").name == "mine"
    # Settings that change what is cached change the name too.
    assert _gen(_answer_a, max_chars=300).name.endswith(":max300")
    assert _gen(_answer_a, document_chars=1000).name.endswith(":doc1000")
    assert re.fullmatch(r"[0-9a-f]{8}", PROMPT_VERSION)


def test_prompts_ask_for_situating_sentences() -> None:
    assert "{document}" in CONTEXT_PROMPT and "{chunk}" in CONTEXT_PROMPT
    assert "one or two sentences" in CONTEXT_PROMPT and "search" in CONTEXT_PROMPT
    assert "Answer only" in CONTEXT_PROMPT and "Answer only" in SUMMARY_PROMPT


# ---------------------------------------------------------------------------------------------
# Long documents: one summary per document


def test_long_document_is_summarised_once(cache: ContextCache) -> None:
    model = Recorder()
    gen = _gen(model, cache=cache, document_chars=100)
    long_doc, short_doc = _request("owl", OWL), _request("river", RIVER[:1])
    out = gen.generate([long_doc, short_doc])
    summaries = [p for p in model.prompts if _is_summary_prompt(p)]
    assert len(summaries) == 1 and long_doc.document.text in summaries[0]
    chunk_prompts = model.chunk_prompts()
    assert len(chunk_prompts) == 4
    for prompt in chunk_prompts:
        if RIVER[0] in prompt:  # short enough: the whole document
            assert "Here is the document:" in prompt
        else:
            assert "A field guide to owls." in prompt
            assert "a summary of the document" in prompt
            assert long_doc.document.text not in prompt
    assert out[0] == [f"about {p}" for p in OWL]
    assert gen.counts["summaries"] == 1 and gen.counts["llm_calls"] == 5
    doc_hash = content_hash(long_doc.document.text)
    assert cache.get_many([(doc_hash, SUMMARY_KEY, gen.name)]) == {
        (doc_hash, SUMMARY_KEY, gen.name): "A field guide to owls."
    }
    # A new passage of the same document reuses the cached summary.
    model.prompts.clear()
    extra = _request("owl", [*OWL, "Owls are older than most songbirds."], doc_hash=doc_hash)
    gen.generate([extra])
    assert len(model.prompts) == 1 and "A field guide to owls." in model.prompts[0]


def test_failed_summary_falls_back_for_the_whole_document(caplog: Any) -> None:
    model = Recorder(fail=_is_summary_prompt)
    fallback = FixedFallback()
    gen = _gen(model, document_chars=100, fallback=fallback)
    with caplog.at_level(logging.WARNING, logger="pensive_core.context.llm"):
        out = gen.generate([_request("owl", OWL), _request("river", RIVER[:1])])
    assert out == [[f"fallback owl {i}" for i in range(3)], [f"about {RIVER[0]}"]]
    assert len(model.chunk_prompts()) == 1  # the long document's passages are never asked
    assert gen.counts["fallback"] == 3 and gen.counts["summaries"] == 0
    assert "3 of 4 passages" in caplog.text and "model overloaded" in caplog.text


# ---------------------------------------------------------------------------------------------
# Failures fall back, are counted and are retried


def test_failures_fall_back_counted_logged_and_retried(cache: ContextCache, caplog: Any) -> None:
    def fails(prompt: str) -> bool:
        return not _is_summary_prompt(prompt) and "voles" in prompt.split("<passage>")[-1]

    model = Recorder(fail=fails)
    fallback = FixedFallback()
    gen = _gen(model, cache=cache, fallback=fallback)
    with caplog.at_level(logging.WARNING, logger="pensive_core.context.llm"):
        out = gen.generate([_request("owl", OWL), _request("river", RIVER)])
    assert out == [
        [f"about {OWL[0]}", f"about {OWL[1]}", "fallback owl 2"],
        [f"about {p}" for p in RIVER],
    ]
    assert gen.counts["fallback"] == 1 and gen.counts["generated"] == 4
    assert fallback.calls == [["owl"]]  # only the affected document, with all its passages
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "1 of 5 passages" in warnings[0].getMessage()
    assert "RuntimeError: model overloaded" in warnings[0].getMessage()
    assert cache.count() == 4  # the fallback context is not cached

    model.prompts.clear()
    model.fail = lambda p: False
    again = gen.generate([_request("owl", OWL), _request("river", RIVER)])
    assert [_passage(p) for p in model.prompts] == [OWL[2]]
    assert again[0][2] == f"about {OWL[2]}"


def test_empty_answer_falls_back(caplog: Any) -> None:
    gen = _gen(lambda prompt: "  Context:  \n ")
    with caplog.at_level(logging.WARNING, logger="pensive_core.context.llm"):
        out = gen.generate([_request("river", RIVER)])
    assert out == [["fallback river 0", "fallback river 1"]]
    assert gen.counts["fallback"] == 2
    assert "empty" in caplog.text


def test_answer_is_cleaned_and_clipped() -> None:
    gen = _gen(lambda prompt: "**Context:**  The passage\n describes  owls.  ")
    assert gen.generate([_request("owl", OWL[:1])]) == [["The passage describes owls."]]
    sentence = "The owl passage sits in a field guide's chapter on hunting. "
    long_gen = _gen(lambda prompt: sentence * 40, max_chars=200)
    [[context]] = long_gen.generate([_request("owl", OWL[:1])])
    assert len(context) <= 200 and context.endswith("hunting.")
    words_gen = _gen(lambda prompt: "word " * 100, max_chars=42)
    [[context]] = words_gen.generate([_request("owl", OWL[:1])])
    assert len(context) <= 42 and context.endswith("word") and "  " not in context


# ---------------------------------------------------------------------------------------------
# Concurrency


def test_calls_run_concurrently_and_keep_order() -> None:
    model = Recorder(sleep=0.05)
    passages = [f"Passage number {i} is about owls." for i in range(12)]
    gen = _gen(model, concurrency=4)
    out = gen.generate([_request("a", passages[:7]), _request("b", passages[7:])])
    assert len(model.threads) > 1 and threading.get_ident() not in model.threads
    assert out == [[f"about {p}" for p in passages[:7]], [f"about {p}" for p in passages[7:]]]
    # overlap counted, not timed: calls in flight together, never more than the limit
    assert 1 < model.most_inside <= 4


def test_summary_precedes_its_passages_under_concurrency() -> None:
    model = Recorder(sleep=0.01)
    gen = _gen(model, concurrency=4, document_chars=100)
    gen.generate([_request("owl", OWL), _request("river", RIVER)])
    owl_positions = [i for i, p in enumerate(model.prompts) if "owl" in p.casefold()]
    # The passages are submitted only once the summary is back, so it is asked first.
    assert _is_summary_prompt(model.prompts[owl_positions[0]])
    assert len(owl_positions) == 4


# ---------------------------------------------------------------------------------------------
# LlamaIndex


@functools.cache
def _llamaindex() -> SimpleNamespace:
    from llama_index.core.llms import CompletionResponse, LLMMetadata, MockLLM
    from llama_index.core.llms.callbacks import llm_completion_callback
    from pydantic import Field

    class RecordingLLM(MockLLM):
        """MockLLM that records prompts, names a model and answers from the passage."""

        model: str = "mock-model"
        prompts: list[str] = Field(default_factory=list)

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name=self.model)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            self.prompts.append(prompt)
            if _is_summary_prompt(prompt):
                return CompletionResponse(text="Summary:\nA field guide to owls.")
            return CompletionResponse(text=f"Context: about {_passage(prompt)}")

    return SimpleNamespace(MockLLM=MockLLM, RecordingLLM=RecordingLLM)


@pytest.fixture
def li() -> SimpleNamespace:
    pytest.importorskip("llama_index.core")
    return _llamaindex()


def test_llamaindex_mock_llm_answer_is_the_context(li: SimpleNamespace) -> None:
    gen = _gen(li.MockLLM(max_tokens=3))  # MockLLM answers "text" max_tokens times
    assert gen.generate([_request("river", RIVER)]) == [["text text text"] * 2]
    assert gen.name == f"llm:llama_index.core.llms.mock.MockLLM:{PROMPT_VERSION}"
    # Without max_tokens MockLLM echoes the prompt: the context is it, clipped.
    [[echo, _]] = _gen(li.MockLLM(), max_chars=120).generate([_request("river", RIVER)])
    assert echo.startswith("Here is the document: <document> The Severn") and len(echo) <= 120


def test_llamaindex_prompt_cache_and_model_id(li: SimpleNamespace, cache: ContextCache) -> None:
    llm = li.RecordingLLM()
    gen = _gen(llm, cache=cache)
    request = _request("owl", OWL)
    out = gen.generate([request])
    assert out == [[f"about {p}" for p in OWL]]
    assert len(llm.prompts) == 3
    assert sorted(_passage(p) for p in llm.prompts) == sorted(OWL)
    assert all(request.document.text in p for p in llm.prompts)
    assert gen.name == f"llm:mock-model:{PROMPT_VERSION}"
    other = li.RecordingLLM()  # MockLLM.__init__ takes no model fields
    other.model = "other-model"
    assert _gen(other).name == f"llm:other-model:{PROMPT_VERSION}"

    second = li.RecordingLLM()
    gen2 = _gen(second, cache=cache)
    assert gen2.generate([request]) == out
    assert second.prompts == [] and gen2.counts["llm_calls"] == 0 and gen2.counts["cached"] == 3


def test_llamaindex_long_document_uses_one_summary(li: SimpleNamespace) -> None:
    llm = li.RecordingLLM()
    request = _request("owl", OWL)
    gen = _gen(llm, document_chars=60, concurrency=2)
    assert gen.generate([request]) == [[f"about {p}" for p in OWL]]
    assert sum(_is_summary_prompt(p) for p in llm.prompts) == 1
    chunk_prompts = [p for p in llm.prompts if not _is_summary_prompt(p)]
    assert len(chunk_prompts) == 3
    for prompt in chunk_prompts:
        assert "A field guide to owls." in prompt and request.document.text not in prompt
        assert "a summary of the document" in prompt


# ---------------------------------------------------------------------------------------------
# LangChain


@functools.cache
def _langchain() -> SimpleNamespace:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import FakeListChatModel, FakeListLLM
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    class PromptRecorder(BaseCallbackHandler):
        """Keeps the prompt of every chat model and LLM call."""

        def __init__(self) -> None:
            self.prompts: list[str] = []

        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            self.prompts.extend(str(m.content) for batch in messages for m in batch)

        def on_llm_start(self, serialized: Any, prompts: list[str], **kwargs: Any) -> None:
            self.prompts.extend(prompts)

    class NamedFakeChatModel(FakeListChatModel):
        model_name: str = "fake-chat-1"

    return SimpleNamespace(
        AIMessage=AIMessage,
        FakeListChatModel=FakeListChatModel,
        FakeListLLM=FakeListLLM,
        GenericFakeChatModel=GenericFakeChatModel,
        NamedFakeChatModel=NamedFakeChatModel,
        PromptRecorder=PromptRecorder,
        RunnableLambda=RunnableLambda,
    )


@pytest.fixture
def lc() -> SimpleNamespace:
    pytest.importorskip("langchain_core")
    return _langchain()


def test_langchain_chat_model_messages_are_contexts(
    lc: SimpleNamespace, cache: ContextCache
) -> None:
    recorder = lc.PromptRecorder()
    blocks = [
        {"type": "reasoning", "reasoning": "think"},
        {"type": "text", "text": "Second passage: "},
        {"type": "text", "text": "the bore."},
    ]
    model = lc.GenericFakeChatModel(
        messages=iter(
            [lc.AIMessage(content="Context: First passage."), lc.AIMessage(content=blocks)]
        ),
        callbacks=[recorder],
    )
    gen = _gen(model, cache=cache, concurrency=1)  # one at a time: the answers come in order
    request = _request("river", RIVER)
    out = gen.generate([request])
    assert out == [["First passage.", "Second passage: the bore."]]
    assert len(recorder.prompts) == 2
    for prompt, passage in zip(recorder.prompts, RIVER):
        assert request.document.text in prompt and passage in prompt
    assert (
        gen.name
        == f"llm:langchain_core.language_models.fake_chat_models.GenericFakeChatModel:{PROMPT_VERSION}"
    )

    # The model has no answers left: a second ingest must not ask it.
    again = _gen(model, cache=cache, concurrency=1)
    assert again.generate([request]) == out
    assert len(recorder.prompts) == 2 and again.counts["cached"] == 2


def test_langchain_llm_and_list_chat_model(lc: SimpleNamespace) -> None:
    llm = lc.FakeListLLM(responses=["Context: an LLM answer."])
    assert _gen(llm).generate([_request("river", RIVER[:1])]) == [["an LLM answer."]]
    chat = lc.NamedFakeChatModel(responses=["same answer"])
    gen = _gen(chat)
    assert gen.generate([_request("owl", OWL)]) == [["same answer"] * 3]
    assert model_id(chat) == "fake-chat-1" and gen.name == f"llm:fake-chat-1:{PROMPT_VERSION}"
    assert (
        model_id(lc.NamedFakeChatModel(responses=["x"], model_name="fake-chat-2")) == "fake-chat-2"
    )


def test_langchain_runnable_and_its_failures(lc: SimpleNamespace, caplog: Any) -> None:
    def answer(prompt: str) -> str:
        if RIVER[1] in _passage(prompt):
            raise ValueError("rate limited")
        return "A river passage."

    gen = _gen(lc.RunnableLambda(answer))
    with caplog.at_level(logging.WARNING, logger="pensive_core.context.llm"):
        out = gen.generate([_request("river", RIVER)])
    assert out == [["A river passage.", "fallback river 1"]]
    assert gen.counts["fallback"] == 1 and "ValueError: rate limited" in caplog.text
