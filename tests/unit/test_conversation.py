"""Conversation memory through ``Pensive.conversation``: isolation, persistence, recall,
drift segments, summaries, follow-up reuse, prompts within budget, and bad input."""

from __future__ import annotations

import os
import shutil
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pensive_core import Document, InputError, Pensive, PensiveError
from tests.conftest import HASH_CONFIG

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)

PASTA = [
    ("user", "I want to cook pasta carbonara tonight for my family."),
    ("assistant", "Carbonara needs spaghetti, eggs, pecorino cheese, guanciale and black pepper."),
    ("user", "I will salt the pasta water before I add the spaghetti."),
    ("assistant", "Yes, salt the pasta water generously and cook the spaghetti al dente."),
    ("user", "Last time the eggs scrambled in the carbonara sauce."),
    ("assistant", "Take the pasta off the heat and toss the eggs and cheese with a little water."),
]
CAR = [
    ("user", "Unrelated question: my car's check engine light came on and the engine stutters."),
    (
        "assistant",
        "A stuttering engine with the check engine light often means a misfiring spark plug or ignition coil.",
    ),
    ("user", "Can I replace the spark plugs in the car myself?"),
]


def store(tmp_path, **memory):
    cfg = {**HASH_CONFIG, "memory": memory} if memory else HASH_CONFIG
    return Pensive(tmp_path / "store", cfg)


def fill(chat, turns, start=T0):
    return [
        chat.add(role, text, timestamp=start + timedelta(minutes=i))
        for i, (role, text) in enumerate(turns)
    ]


def open_files_under(folder: Path) -> list[str]:
    """The files this process holds open under ``folder`` (Linux's /proc/self/fd)."""
    root = str(folder.resolve()) + os.sep
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith(root):
            held.append(target)
    return held


def test_add_recall_history_and_metadata(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("s1")
        t = chat.add("user", "My sister Ana lives in Lisbon.", metadata={"turn": 17})
        chat.add("assistant", "Lisbon is lovely in spring.")
        assert t.seq == 0 and t.id == "t000000" and t.timestamp.tzinfo is not None
        hits = chat.recall("Where does my sister live?", k=2)
        assert hits[0].doc_id == t.id
        assert dict(hits[0].metadata) == {"turn": 17, "role": "user", "session_id": "s1", "seq": 0}
        assert hits[0].timestamp == t.timestamp
        hist = chat.history()
        assert [h.text for h in hist] == [
            "My sister Ana lives in Lisbon.",
            "Lisbon is lovely in spring.",
        ]
        assert [h.metadata["role"] for h in hist] == ["user", "assistant"]
        assert [h.text for h in chat.history(limit=1)] == ["Lisbon is lovely in spring."]


def test_sessions_are_isolated_physically(tmp_path):
    with store(tmp_path) as p:
        a, b = p.conversation("alpha"), p.conversation("beta")
        a.add("user", "The launch code word is pelican.")
        b.add("user", "I planted tomatoes in the garden.")
        # a query matching only beta's turn, asked of alpha, never returns beta's turn
        for h in a.recall("tomatoes garden planted", k=5):
            assert h.metadata["session_id"] == "alpha"
        assert a.folder != b.folder and a.folder.is_dir() and b.folder.is_dir()
        assert not set(a.folder.rglob("*")) & set(b.folder.rglob("*"))
        # the same id in another namespace is another session
        other = p.conversation("alpha", namespace="tenant-2")
        assert len(other) == 0 and other.folder != a.folder
        assert other.recall("launch code word", k=3) == []
        assert p.conversations() == ["alpha", "beta"]
        assert p.conversations("tenant-2") == ["alpha"]


def test_hostile_session_ids_stay_inside_the_store(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("../../etc/passwd")
        chat.add("user", "hello")
        root = (tmp_path / "store" / "conversations").resolve()
        assert root in chat.folder.resolve().parents
        assert not (tmp_path / "etc").exists()
        for bad in ("", "   ", 42, "a\x00b"):
            with pytest.raises(InputError):
                p.conversation(bad)  # type: ignore[arg-type]


def test_persistence_across_reopen(tmp_path):
    with store(tmp_path) as p:
        turns = fill(p.conversation("s", user="u1"), PASTA)
    with Pensive(tmp_path / "store") as p:
        chat = p.conversation("s")
        assert chat.user == "u1"
        again = chat.turns()
        assert [(t.text, t.role, t.timestamp, t.segment) for t in again] == [
            (t.text, t.role, t.timestamp, t.segment) for t in turns
        ]
        assert turns[2].id in [h.doc_id for h in chat.recall("salted pasta water", k=2)]
        nxt = chat.add("user", "Thanks!")
        assert nxt.seq == len(PASTA)


def test_turn_logged_before_indexing_is_never_lost(tmp_path, monkeypatch):
    with store(tmp_path) as p:
        chat = p.conversation("s")
        chat.add("user", "first turn about violins")
        index = chat.index()

        def crash(*a, **k):
            raise RuntimeError("killed mid-ingest")

        monkeypatch.setattr(index, "ingest", crash)
        with pytest.raises(RuntimeError):
            chat.add("user", "The cello was tuned to a low C string.")
    monkeypatch.undo()
    with Pensive(tmp_path / "store") as p:
        chat = p.conversation("s")
        assert [t.text for t in chat.turns()][-1] == "The cello was tuned to a low C string."
        assert chat.recall("cello low C string", k=1)[0].doc_id == "t000001"


def test_cross_session_recall_for_one_user(tmp_path):
    with store(tmp_path) as p:
        one = p.conversation("monday", user="ana")
        two = p.conversation("tuesday", user="ana")
        stranger = p.conversation("wednesday", user="bob")
        one.add("user", "My dog Rex is a border collie.")
        two.add("user", "I am planning a trip to Kyoto.")
        stranger.add("user", "My dog Fido is a poodle.")
        mine = two.recall("what breed is my dog", k=5, scope="user")
        assert {h.metadata["session_id"] for h in mine} <= {"monday", "tuesday"}
        assert "My dog Rex is a border collie." in [h.text for h in mine]
        assert all(h.metadata["session_id"] == "tuesday" for h in two.recall("dog breed", k=5))
        with pytest.raises(InputError):
            p.conversation("nouser").recall("dog", scope="user")
        with pytest.raises(InputError):
            p.conversation("monday", user="bob")  # a session keeps its user


def test_bad_input_is_refused_and_stores_nothing(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("s")
        bad = [
            ("user", ""),
            ("user", "   "),
            ("", "text"),
            ("user", b"bytes"),
            ("user", "x" * 1_000_001),
        ]
        for role, text in bad:
            with pytest.raises(InputError):
                chat.add(role, text)  # type: ignore[arg-type]
        with pytest.raises(InputError):
            chat.add("user", "hi", metadata={"role": "admin"})
        with pytest.raises(InputError):
            chat.add("user", "hi", metadata={"x": object()})
        with pytest.raises(InputError):
            chat.add("user", "hi", timestamp="not a date")
        with pytest.raises(InputError):  # one bad turn in a batch: none stored
            chat.add_many([("user", "fine"), ("user", "")])
        assert len(chat) == 0
        chat.add("user", "ok now")
        for kwargs in ({"k": 0}, {"k": "3"}, {"scope": "world"}, {"method": "magic"}):
            with pytest.raises(InputError):
                chat.recall("ok", **kwargs)
        with pytest.raises(InputError):
            chat.recall("")
        with pytest.raises(InputError):
            chat.build("ok", token_budget=0)


def test_clear_forgets_one_session_only(tmp_path):
    with store(tmp_path) as p:
        a, b = p.conversation("a"), p.conversation("b")
        fill(a, PASTA)
        b.add("user", "keep me")
        folder = a.folder
        assert a.clear() == len(PASTA)
        assert len(a) == 0 and a.recall("carbonara", k=3) == [] and a.summaries() == []
        assert not (folder / "index").exists()
        assert [h.text for h in b.history()] == ["keep me"]
        a.add("user", "a fresh start")
        assert len(a) == 1


def test_read_only_store_reads_conversations(tmp_path):
    with store(tmp_path) as p:
        p.conversation("s").add("user", "The wifi password is swordfish.")
    with Pensive(tmp_path / "store", read_only=True) as r:
        chat = r.conversation("s")
        assert chat.recall("wifi password", k=1)[0].text == "The wifi password is swordfish."
        with pytest.raises(PensiveError):
            chat.add("user", "nope")
        assert r.conversation("never-made").recall("anything", k=2) == []


@pytest.mark.slow  # the bundled MiniLM
def test_drift_marks_a_segment_boundary_and_summarises_it(tmp_path):
    with Pensive(tmp_path / "store") as p:  # the bundled model: drift on real embeddings
        chat = p.conversation("s")
        turns = fill(chat, PASTA + CAR)
        switch = turns[len(PASTA)]
        assert switch.shift, [(t.seq, t.drift) for t in turns]
        assert not any(t.shift for t in turns[1 : len(PASTA)])
        assert switch.segment == turns[0].segment + 1
        assert turns[len(PASTA) + 1].segment == switch.segment  # the answer stays in it
        story = chat.summaries()
        assert "turns 0-5" in story[0]
        assert "carbonara" in story[0].lower() or "spaghetti" in story[0].lower()
        assert chat.stats()["shifts"] >= 1


def test_follow_up_reuses_the_previous_recall(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("s")
        fill(
            chat, [("user", "My neighbour Marta breeds Siamese cats."), ("assistant", "How many?")]
        )
        fill(chat, PASTA, start=T0 + timedelta(hours=1))
        chat.add("user", "Tell me about Marta and her Siamese cats")  # the usual flow: add, recall
        first = chat.recall("Tell me about Marta and her Siamese cats", k=3)
        chat.add("assistant", "Marta breeds Siamese cats.")
        chat.add("user", "what about her?")
        again = chat.recall("what about her?", k=3)
        assert [h.doc_id for h in again] == [h.doc_id for h in first]
        assert all(h.metadata.get("reused") for h in again)
        assert chat.stats()["followups_reused"] == 1
        fresh = chat.recall("how do I salt pasta water?", k=3)  # a new subject: a new search
        assert not any(h.metadata.get("reused") for h in fresh)
        assert not chat.recall("what about her?", k=3, reuse=False)[0].metadata.get("reused")
        assert chat.is_followup("and why did she do that?")
        assert not chat.is_followup("How long has Caroline had her dog Rex?")
        assert not chat.is_followup("What is carbonara?")


def test_methods_hypervector_and_recent(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("s")
        turns = fill(chat, PASTA + CAR)
        hv = chat.recall("spark plugs replace", k=2, method="hypervector")
        assert hv[0].doc_id == turns[-1].id and hv[0].metadata["session_id"] == "s"
        recent = chat.recall("anything", k=3, method="recent")
        assert [h.doc_id for h in recent] == [t.id for t in turns[-1:-4:-1]]
        cutoff = turns[2].timestamp
        assert all(h.timestamp <= cutoff for h in chat.recall("pasta", k=5, as_of=cutoff))


def test_context_within_budget_with_stable_prefix(tmp_path):
    from pensive_core.memory.tokens import token_counter

    count = token_counter("cl100k_base").count
    with store(tmp_path, recent_turns=2) as p:
        chat = p.conversation("s")
        fill(chat, PASTA * 3)  # long enough for a summary block to age out
        chat.pin("The user is vegetarian: never suggest meat.")
        assert chat.summaries(), "aged-out turns should have been summarised"
        one = chat.build("How long should spaghetti cook?", 600, system="You are a chef.")
        two = chat.build("Which cheese goes in carbonara?", 600, system="You are a chef.")
        for built in (one, two):
            assert built.tokens <= 600 - built.headroom
            assert count(built.text) == built.tokens
            assert "never suggest meat" in built.text
            assert built.text.startswith(built.prefix)
            assert PASTA[-1][1] in built.text  # the last turn verbatim
        assert one.prefix == two.prefix and "never suggest meat" in one.prefix
        tight = chat.build("How long should spaghetti cook?", 120)
        assert tight.tokens <= 120 - tight.headroom and "never suggest meat" in tight.text
        with pytest.raises(InputError):
            chat.build("x", 10, pins=["a pinned note far too long " * 20])
        assert isinstance(chat.context("cheese?", 500), str)


def test_context_can_bring_main_store_passages(tmp_path):
    with store(tmp_path, drift=False) as p:  # no topic shift: no passages unless asked
        p.ingest(
            [
                Document(
                    id="menu",
                    text="The restaurant's carbonara uses smoked tofu instead of guanciale.",
                )
            ]
        )
        chat = p.conversation("s")
        fill(chat, PASTA[:2])
        built = chat.build("what replaces guanciale in the carbonara?", 800, documents_k=1)
        assert "smoked tofu" in built.text
        assert "smoked tofu" not in chat.build("what replaces guanciale?", 800).text


def test_a_turn_is_embedded_for_the_index_its_window_and_once_raw_for_drift(tmp_path):
    with store(tmp_path) as base:
        inner = base.embedder
    calls = []

    class Counting:
        name, dim, max_tokens = inner.name, inner.dim, inner.max_tokens

        def embed(self, texts):
            calls.append(len(texts))
            return inner.embed(texts)

        def embed_query(self, text):
            return inner.embed_query(text)

        def count_tokens(self, texts):
            return inner.count_tokens(texts)

    # the sessions share the model their owner was given
    with Pensive(tmp_path / "counted", HASH_CONFIG, embedder=Counting()) as p:
        chat = p.conversation("s")
        chat.add("user", "one turn, embedded with its context and raw for drift")
        chat.add("user", "another turn")
        assert sum(calls) == 6
    no_drift = {**HASH_CONFIG, "memory": {"drift": False}}
    with Pensive(tmp_path / "other", no_drift, embedder=Counting()) as q:
        calls.clear()
        q.conversation("s").add("user", "no drift: the turn and its window")
        assert sum(calls) == 2


def test_log_schema_is_plain_sqlite(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("s")
        chat.add("user", "hello there")
        folder = chat.folder
    db = sqlite3.connect(folder / "memory.sqlite")
    assert db.execute("SELECT role, text FROM turns").fetchall() == [("user", "hello there")]


def test_windows_are_indexed_beside_turns_and_caught_up(tmp_path):
    with store(tmp_path) as p:
        chat = p.conversation("s")
        fill(chat, PASTA)
        windows = chat.windows()
        assert windows is not None and windows.stats()["documents"] == len(PASTA)
        last = windows.get(f"w{len(PASTA) - 1:06d}")  # the 5 turns ending with the last one
        assert last.text.count("\n") == 4 and last.text.endswith(PASTA[-1][1])
        folder = chat.folder
    import shutil

    shutil.rmtree(folder / "windows")  # a store from before windows, or a lost folder
    with Pensive(tmp_path / "store") as p:
        chat = p.conversation("s")
        assert chat.recall("scrambled eggs", k=2)
        assert chat.windows().stats()["documents"] == len(PASTA)
    with store(tmp_path / "off", window_turns=0) as p:
        chat = p.conversation("s")
        fill(chat, PASTA[:2])
        assert chat.windows() is None and not (chat.folder / "windows").exists()


def test_llm_summaries_and_their_fallback(tmp_path):
    prompts = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return "The user is cooking carbonara for the family and asked about eggs and salt."

    cfg = {**HASH_CONFIG, "memory": {"recent_turns": 2}}
    with Pensive(tmp_path / "a", cfg, llm=llm) as p:
        chat = p.conversation("s")
        fill(chat, PASTA * 2)
        story = chat.summaries()
        assert story and "cooking carbonara for the family" in story[0]
        assert any("pecorino" in pr for pr in prompts)  # the transcript reached the model

    def broken(prompt: str) -> str:
        raise RuntimeError("model down")

    with Pensive(tmp_path / "b", cfg, llm=broken) as p:
        chat = p.conversation("s")
        fill(chat, PASTA * 2)  # the model failing loses no turn
        assert len(chat) == 2 * len(PASTA)
        story = chat.summaries()
        assert story and "carbonara" in story[0].lower()  # the extractive summary stood in


def test_old_summaries_fold_into_a_story_so_far(tmp_path):
    with store(tmp_path, recent_turns=1, drift=False) as p:  # a block every 2 aged turns
        chat = p.conversation("s")
        fill(chat, PASTA * 5)  # 30 turns: more blocks than are shown apart
        story = chat.summaries()
        assert story[0].startswith("[story so far, turns 0-")
        assert 1 < len(story) <= 1 + 8
        folded_to = int(story[0].split("-")[1].split(",")[0])
        first_block = int(story[1].split()[1].split("-")[0])
        assert first_block == folded_to + 1  # nothing shown twice, nothing left out
    db = sqlite3.connect(chat.folder / "memory.sqlite")
    assert db.execute("SELECT COUNT(*) FROM summaries WHERE level=1").fetchone()[0] == 1


def test_stats_count_what_is_stored_across_reopen(tmp_path):
    with store(tmp_path, recent_turns=1, drift=False) as p:
        fill(p.conversation("s"), PASTA * 2)
    with Pensive(tmp_path / "store") as p:
        st = p.conversation("s").stats()
        assert st["turns"] == 2 * len(PASTA) and st["summaries"] >= 1 and st["shifts"] == 0
        assert st["recalls"] == 0 and st["followups_reused"] == 0  # this process's counters


def test_idle_sessions_release_their_files_and_reopen_on_use(tmp_path):
    with store(tmp_path, max_open_sessions=2) as p:
        a = p.conversation("a", user="u")
        a.add("user", "The spare key is under the blue flowerpot.")
        b = p.conversation("b", user="u")
        b.add("user", "My bike is a red Bianchi.")
        c = p.conversation("c", user="u")  # a third open session: the oldest is released
        assert a.suspended and not b.suspended and not c.suspended
        if Path("/proc/self/fd").is_dir():  # its log and its indexes are closed, not just marked
            assert not open_files_under(a.folder)
            assert open_files_under(b.folder)
        assert a.recall("where is the spare key?", k=1)[0].text.startswith("The spare key")
        assert not a.suspended
        a.add("user", "And the garage code is 4471.")
        assert len(a) == 2
        # cross-session recall opens the others (suspending some) and still finds them all
        found = {h.text for h in c.recall("spare key bike garage code", k=5, scope="user")}
        assert {"The spare key is under the blue flowerpot.", "My bike is a red Bianchi."} <= found
        live = [x for x in (a, b, c) if not x.suspended]
        assert len(live) <= 2


def test_sessions_used_from_threads_past_the_open_limit_never_deadlock(tmp_path):
    import threading

    errors: list[BaseException] = []
    with store(tmp_path, max_open_sessions=1, drift=False) as p:

        def work(name: str) -> None:
            try:
                for i in range(4):
                    chat = p.conversation(name, user="u")
                    chat.add("user", f"{name} note {i}: the {name} project uses port {8000 + i}")
                    assert chat.recall(f"{name} port", k=2, scope="user")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(f"s{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "deadlocked"
        assert not errors, errors
        assert all(len(p.conversation(f"s{i}")) == 4 for i in range(4))


def test_a_session_needs_nothing_of_its_owner_but_a_session_host(tmp_path):
    from pensive_core import load_config
    from pensive_core.embedders import create_embedder
    from pensive_core.memory.conversation import Conversation
    from pensive_core.memory.sessions import SessionRegistry
    from pensive_core.memory.turns import TurnLog

    class Host:  # a SessionHost with no Pensive owner behind it
        config = load_config(HASH_CONFIG)
        read_only = False
        llm = None

        def __init__(self):
            self.embedder = create_embedder(self.config.embedder)
            self.registry = SessionRegistry(tmp_path / "conversations")
            self.chats = {}
            self.used = []

        def open_store(self, folder, config, *, context_generator=None):
            return Pensive(
                folder, config, context_generator=context_generator, embedder=self.embedder
            )

        def check_writable(self):
            pass

        def store_exists(self, folder, config):
            return (folder / "pensive.sqlite").is_file()

        def open_turn_log(self, info):
            return TurnLog.open(info.folder, self.read_only)

        def drop_session(self, info):
            shutil.rmtree(info.folder, ignore_errors=True)

        def sessions(self, namespace, user=None):
            return self.registry.sessions(namespace, user)

        def session(self, session_id, namespace):
            return self.chats[(namespace, session_id)]

        def mark_used(self, conversation):
            self.used.append(conversation.session_id)

        def documents(self):
            return 0

        def query(self, text, k):
            raise AssertionError("no main store to ask")

        def expand(self, hit, window=1):
            raise AssertionError("no main store to ask")

    host = Host()
    for sid in ("mon", "tue"):
        info = host.registry.register("default", sid, "ana")
        host.chats[("default", sid)] = Conversation(host, info)
    mon, tue = host.chats[("default", "mon")], host.chats[("default", "tue")]
    mon.add("user", "My dog Rex is a border collie.")
    fill(tue, PASTA)
    assert mon.recall("what breed is my dog", k=1)[0].text == "My dog Rex is a border collie."
    mine = tue.recall("what breed is my dog", k=3, scope="user")
    assert "My dog Rex is a border collie." in [h.text for h in mine]
    built = tue.build("How do I salt the pasta water?", 600)
    assert PASTA[-1][1] in built.text
    assert mon.suspend() and mon.suspended
    assert len(mon) == 1 and host.used == ["mon"]  # woken on use, and the host told
    for chat in (mon, tue):
        chat.close()
    host.registry.close()
