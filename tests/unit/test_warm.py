"""A read-only store makes ready what its first question needs while it opens (``[router]
warm``): the query model once, the graph and statement views once, each used by the first
question instead of made again; closing at any point stops it and leaves no thread behind."""

from __future__ import annotations

import threading

import pytest

from pensive_core import Pensive
from pensive_core.components import EmbedderSlot
from pensive_core.embedders.hash import HashEmbedder
from pensive_core.errors import InputError
from pensive_core.temporal.store import TemporalStore
from pensive_core.views import GraphViews
from pensive_core.warm import THREAD
from tests.conftest import HASH_CONFIG, docs_corpus

QUESTION = "Who became chief executive of Acme in 2021?"


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    with Pensive(path, config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
    return path


def _warm_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


@pytest.fixture
def loads(monkeypatch):
    """Which thread loaded a graph view, a statement view, or made an embedder."""
    seen: list[tuple[str, str]] = []

    def spy(cls, name, what):
        real = getattr(cls, name)

        def wrapper(*a, **k):
            seen.append((what, threading.current_thread().name))
            return real(*a, **k)

        monkeypatch.setattr(cls, name, wrapper)

    spy(GraphViews, "_view", "graph")
    spy(TemporalStore, "load", "statements")
    spy(EmbedderSlot, "make", "embedder")
    return seen


def test_the_first_question_uses_what_the_warm_up_made(store, loads):
    with Pensive(store, config=HASH_CONFIG, read_only=True) as p:
        assert p.components.warmer is not None
        assert p.components.warmer.wait(30)
        warmed = sorted(loads)
        assert warmed == [("embedder", THREAD), ("graph", THREAD), ("statements", THREAD)]
        first = p.query(QUESTION, k=3)
        assert sorted(loads) == warmed  # nothing made again
        assert p.components.embedder.get() is p.components.embedder.get()
    with Pensive(store, config={**HASH_CONFIG, "router": {"warm": False}}, read_only=True) as p:
        assert p.components.warmer is None
        cold = p.query(QUESTION, k=3)
    assert [h.chunk_id for h in first.hits] == [h.chunk_id for h in cold.hits]
    assert [h.score for h in first.hits] == pytest.approx([h.score for h in cold.hits])
    assert not _warm_threads()


def test_a_question_asked_at_once_waits_for_the_model_instead_of_making_another(store, loads):
    for _ in range(5):
        with Pensive(store, config=HASH_CONFIG, read_only=True) as p:
            assert p.query(QUESTION, k=3).hits
        assert [w for w, _ in loads].count("embedder") == 1
        loads.clear()


def test_writers_do_not_warm(store, loads):
    with Pensive(store, config=HASH_CONFIG) as p:
        assert p.components.warmer is None
    assert not [t for _, t in loads if t == THREAD]


def test_a_given_embedder_is_warmed_not_replaced(store, loads):
    class Warmable(HashEmbedder):
        warmed = 0

        def warm_query(self):
            Warmable.warmed += 1

    given = Warmable(dim=256)
    with Pensive(store, config=HASH_CONFIG, read_only=True, embedder=given) as p:
        assert p.components.warmer.wait(30)
        assert Warmable.warmed == 1
        assert p.components.embedder.get() is given
        assert p.query(QUESTION, k=3).hits
    assert "embedder" not in [w for w, _ in loads]


def test_closing_at_once_stops_it_and_leaves_no_thread(store):
    for _ in range(20):
        Pensive(store, config=HASH_CONFIG, read_only=True).close()
        assert not _warm_threads()
    with Pensive(store, config=HASH_CONFIG, read_only=True) as p:  # the store is unharmed
        assert p.query(QUESTION, k=3).hits


def test_closing_while_it_waits_for_the_lock(store, loads, monkeypatch):
    """The warm-up waits for the store's lock in short waits: a close holding the lock stops
    it there, and the views are never loaded."""
    release = threading.Event()
    real = EmbedderSlot.make

    def slow_make(self):
        release.wait(30)
        return real(self)

    monkeypatch.setattr(EmbedderSlot, "make", slow_make)
    p = Pensive(store, config=HASH_CONFIG, read_only=True)
    lock = p.components.lock
    with lock:  # (a close holds it too: it is reentrant)
        release.set()  # the warm-up goes on to the views and waits for the lock held here
        assert not p.components.warmer.wait(0.3)  # waiting for the lock
        p.close()
    assert not _warm_threads()
    assert [w for w, _ in loads if w != "embedder"] == []


def test_a_failed_warm_up_costs_nothing_but_time(store, monkeypatch):
    calls = []
    real = EmbedderSlot.make

    def flaky(self):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            raise RuntimeError("model folder unreadable for a moment")
        return real(self)

    monkeypatch.setattr(EmbedderSlot, "make", flaky)
    with Pensive(store, config=HASH_CONFIG, read_only=True) as p:
        p.components.warmer.wait(30)
        assert p.query(QUESTION, k=3).hits  # made again by the question
    assert calls == [THREAD, "MainThread"]


def test_an_embedder_that_cannot_be_made_still_fails_the_question(store, monkeypatch):
    def broken(self):
        raise RuntimeError("no model here")

    monkeypatch.setattr(EmbedderSlot, "make", broken)
    with (
        Pensive(store, config=HASH_CONFIG, read_only=True) as p,
        pytest.raises(RuntimeError, match="no model here"),
    ):
        p.query(QUESTION, k=3)
    assert not _warm_threads()


def test_an_open_that_fails_after_it_started_stops_it(store):
    with pytest.raises(InputError, match="embedder must implement"):
        Pensive(store, config=HASH_CONFIG, read_only=True, embedder=object())
    assert not _warm_threads()
