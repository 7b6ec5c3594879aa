"""The Postgres storage engine end to end, on a real Postgres 16 with pgvector (started by the
``postgres_dsn`` fixture): a store whose every part is in one schema answers as the embedded
engine does, replicas with different local folders share it, a commit on one is seen by the
next query on another, and a store moves between the engines without re-embedding."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import time

import pytest

from pensive_core import ConfigError, Document, Pensive, StorageError
from pensive_core.storage.postgres import SCHEMA_VERSION, namespace_of
from tests.conftest import docs_corpus

pytestmark = pytest.mark.integration

HASH = {"embedder": {"name": "hash", "dim": 64}}


def schema_for(node: str) -> str:
    """One schema per test: tests share the server, never each other's rows."""
    return "s" + hashlib.blake2b(node.encode(), digest_size=6).hexdigest()


@pytest.fixture
def pg_config(postgres_dsn, request):
    return {**HASH, "storage": {"engine": "postgres", "dsn": postgres_dsn,
                                "schema_name": schema_for(request.node.nodeid)}}  # fmt: skip


def test_answers_as_the_embedded_engine_does(tmp_path, pg_config):
    questions = ["Acme revenue Q3 2024", "who is the chief executive", "INV-4471", "green tea"]
    with (
        Pensive(tmp_path / "emb", config=HASH) as emb,
        Pensive(tmp_path / "pg", config=pg_config) as pg,
    ):
        emb.ingest(docs_corpus())
        pg.ingest(docs_corpus())
        assert pg.components.storage.name == "postgres"
        assert pg.config.backend.name == "pgvector"  # vectors in the shared engine by default
        for q in questions:
            a, b = emb.query(q, k=5), pg.query(q, k=5)
            assert [h.chunk_id for h in a.hits] == [h.chunk_id for h in b.hits], q
            for x, y in zip(a.hits, b.hits):
                assert x.score == pytest.approx(y.score, abs=1e-4), q
        stats = pg.stats()
        assert (stats["documents"], stats["chunks"], stats["vectors"]) == (8, 8, 8)
    assert not any((tmp_path / "pg").iterdir())  # the local folder holds nothing


def test_replicas_share_one_store_and_see_each_others_commits(tmp_path, pg_config):
    a = Pensive(tmp_path / "replica-a", config=pg_config)
    b = Pensive(tmp_path / "replica-b", config=pg_config)  # another folder, the same store
    try:
        a.ingest(docs_corpus())
        first = b.query("arctic tern migration", k=1)  # b sees a's commit at once
        assert first.hits[0].doc_id == "bird"
        assert b.query("arctic tern migration", k=1).tier == "L1"
        b.ingest([Document("bird", "The arctic tern now winters in Patagonia instead.")])
        again = a.query("arctic tern migration", k=1)  # never the answer cached before
        assert "Patagonia" in again.hits[0].text  # (from L1 when b refreshed it at its commit)
        a.delete("tea")
        assert all(h.doc_id != "tea" for h in b.query("green tea catechins", k=5).hits)
        b.query("anything", k=1)
        assert a.commit_number == b.commit_number
        assert a.stats()["documents"] == b.stats()["documents"] == 7
    finally:
        a.close()
        b.close()


def test_the_saved_config_holds_no_dsn(tmp_path, pg_config):
    with Pensive(tmp_path / "s", config=pg_config) as p:
        p.ingest(docs_corpus()[:1])
        assert p.components.archive.get_meta("config")["storage"]["dsn"] == ""


def test_a_local_backend_is_refused_before_anything_is_saved(tmp_path, pg_config):
    cfg = {**pg_config, "backend": {"name": "faiss"}}
    with pytest.raises(ConfigError, match="pgvector"):
        Pensive(tmp_path / "s", config=cfg)
    with Pensive(tmp_path / "s", config=pg_config) as p:  # the store was not wedged
        p.ingest(docs_corpus()[:1])
        assert p.config.backend.name == "pgvector"


def test_an_unreachable_server_names_host_and_database_never_the_password(tmp_path, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "hunter2")
    cfg = {**HASH, "storage": {"engine": "postgres", "connect_timeout_s": 2,
                               "dsn": "postgresql://app:hunter2@127.0.0.1:1/pensivedb"}}  # fmt: skip
    with pytest.raises(StorageError) as err:
        Pensive(tmp_path / "s", config=cfg)
    assert "127.0.0.1:1/pensivedb" in str(err.value) and "hunter2" not in str(err.value)


def test_no_dsn_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="PENSIVE_STORAGE__DSN"):
        Pensive(tmp_path / "s", config={**HASH, "storage": {"engine": "postgres"}})


def test_a_newer_schema_is_refused(tmp_path, pg_config):
    import psycopg

    with Pensive(tmp_path / "s", config=pg_config) as p:
        p.ingest(docs_corpus()[:1])
        schema = p.components.storage.schema
    with psycopg.connect(pg_config["storage"]["dsn"], autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".pensive_schema (version) VALUES (%s)',
                     (SCHEMA_VERSION + 1,))  # fmt: skip
    with pytest.raises(StorageError, match="newer Pensive"):
        Pensive(tmp_path / "s", config=pg_config)


def test_namespaces_are_schemas_of_their_own(tmp_path, pg_config):
    root = tmp_path / "root"
    assert namespace_of(root) == "default" and namespace_of(root / "namespaces" / "t-1") == "t-1"
    with (
        Pensive(root, config=pg_config) as d,
        Pensive(root / "namespaces" / "t-1", config=pg_config) as t,
    ):
        d.ingest(docs_corpus())
        t.ingest([Document("mine", "Tenant one keeps its own arctic tern notes.")])
        assert {h.doc_id for h in t.query("arctic tern", k=10).hits} == {"mine"}
        assert "mine" not in {h.doc_id for h in d.query("arctic tern", k=10).hits}
        assert t.components.storage.schema.endswith("__t-1")


def _ingest_forever(cfg, folder, ready):
    p = Pensive(folder, config=cfg)
    ready.set()
    i = 0
    while True:  # killed in the middle of one of these
        p.ingest([Document(f"k{i}", f"Killed replica note number {i} about herons " * 20)])
        i += 1


def test_a_replica_killed_mid_change_loses_nothing_acknowledged(tmp_path, pg_config):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_ingest_forever, args=(pg_config, tmp_path / "dead", ready))
    proc.start()
    assert ready.wait(120)
    time.sleep(1.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    with Pensive(tmp_path / "alive", config=pg_config) as p:
        p.ingest([Document("after", "Written after the kill by another replica.")])
        s = p.stats()
        assert s["chunks"] == s["vectors"]  # nothing half indexed
        assert p.components.archive.unindexed() == []
        assert p.query("Written after the kill", k=1).hits[0].doc_id == "after"


def test_a_conversation_is_shared_by_replicas_and_cleared_everywhere(tmp_path, pg_config):
    with (
        Pensive(tmp_path / "a", config=pg_config) as a,
        Pensive(tmp_path / "b", config=pg_config) as b,
    ):
        chat = a.conversation("s-1")
        chat.add("user", "I moved to Lisbon last week, near the river.")
        chat.add("assistant", "Lisbon is lovely; which district?")
        assert not any((tmp_path / "a").rglob("*.sqlite"))  # nothing of it on local disk
        other = b.conversation("s-1")  # another replica, another folder: the same session
        assert len(other) == 2
        hits = other.recall("where do I live?", k=2)
        assert hits and "Lisbon" in hits[0].text
        other.add("user", "My sister Marta visits in June.")
        assert len(chat) == 3
        assert "Marta" in chat.recall("who visits in June?", k=1)[0].text  # b's turn, from a
        chat.close()  # (a replica holding the session open while another clears it: README)
        assert other.clear() == 3
        assert len(b.conversation("s-1")) == 0
        assert b.conversation("s-1").recall("Lisbon", k=2) == []
        assert len(a.conversation("s-1")) == 0


def test_langgraph_items_and_the_llm_cache_are_shared(tmp_path, pg_config):
    from langchain_core.outputs import Generation

    from pensive_langchain import PensiveCache, PensiveStore

    with (
        Pensive(tmp_path / "a", config=pg_config) as a,
        Pensive(tmp_path / "b", config=pg_config) as b,
    ):
        PensiveStore(a).put(("users", "ana"), "home", {"text": "Ana lives in Porto"})
        item = PensiveStore(b).get(("users", "ana"), "home")
        assert item is not None and item.value == {"text": "Ana lives in Porto"}
        found = PensiveStore(b).search(("users", "ana"), query="where does she live?")
        assert found and found[0].key == "home"
        PensiveCache(a).update("2 + 2?", "llm-x", [Generation(text="4")])
        cached = PensiveCache(b).lookup("2 + 2?", "llm-x")
        assert cached is not None and cached[0].text == "4"
        assert PensiveCache(b).path is None


def test_migrate_to_postgres_and_back_without_embedding(tmp_path, pg_config):
    from pensive_core.storage.migrate import migrate_store

    folder = tmp_path / "store"
    questions = ["Acme revenue Q3 2024", "INV-4471", "who is the chief executive", "green tea"]
    from pensive_langchain import PensiveStore

    with Pensive(folder, config=HASH) as p:
        p.ingest(docs_corpus())
        p.ingest([Document("old", "An archived memo about ferry timetables.")], archive_only=True)
        chat = p.conversation("s-9", user="ana")
        chat.add("user", "My bike is a blue Gazelle.")
        chat.add("assistant", "Noted: a blue Gazelle.")
        chat.pin("Ana prefers short answers.")
        PensiveStore(p).put(("users", "ana"), "home", {"text": "Ana lives in Porto"})
        before = {q: [h.chunk_id for h in p.query(q, k=3).hits] for q in questions}
    report = migrate_store(folder, "postgres", storage=dict(pg_config["storage"]))
    # 8 documents, the archived one and the item's document; 8 passages had vectors, 1 more
    # for the item
    assert report["documents"] == 10 and report["vectors"] == 9 and report["embedded"] == 0
    assert report["questions"] > 0 and report["turns"] == 2 and report["items"] == 1
    with Pensive(tmp_path / "replica", config=pg_config) as pg:
        moved = pg.conversation("s-9")
        assert moved.user == "ana" and len(moved) == 2
        assert moved.pins() == ["Ana prefers short answers."]
        assert "Gazelle" in moved.recall("what bike do I ride?", k=1)[0].text
        item = PensiveStore(pg).get(("users", "ana"), "home")
        assert item is not None and item.value == {"text": "Ana lives in Porto"}
        assert PensiveStore(pg).search(("users",), query="where does Ana live?")[0].key == "home"
    with pytest.raises(ConfigError, match="moved to the postgres engine"):
        Pensive(folder, config=HASH)  # the copy left behind takes no writes
    with Pensive(folder, config=HASH, read_only=True) as old:  # but still reads
        assert old.stats()["documents"] == 10
    with Pensive(tmp_path / "elsewhere", config=pg_config) as pg:
        assert {q: [h.chunk_id for h in pg.query(q, k=3).hits] for q in questions} == before
        assert pg.get("old").text.startswith("An archived memo")
    back = tmp_path / "back"  # and back, into a new folder (the default namespace's store)
    report = migrate_store(back, "embedded", config=pg_config)
    assert report["vectors"] == 9 and report["embedded"] == 0 and report["turns"] == 2
    with Pensive(back, config=HASH) as emb:
        assert emb.components.storage.name == "embedded"
        assert {q: [h.chunk_id for h in emb.query(q, k=3).hits] for q in questions} == before
    with pytest.raises(ConfigError, match="moved to the embedded engine"):
        Pensive(tmp_path / "x", config=pg_config)


def test_every_connection_dropped_at_once_is_survived(tmp_path, pg_config):
    import psycopg

    with Pensive(tmp_path / "s", config=pg_config) as p:
        p.ingest(docs_corpus())
        p.conversation("s").add("user", "I keep bees on the roof.")
        with psycopg.connect(pg_config["storage"]["dsn"], autocommit=True) as conn:
            gone = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'pensive' AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        assert gone >= 5  # (as a server restart does to every part's connection)
        assert p.query("arctic tern", k=1).hits[0].doc_id == "bird"
        p.ingest([Document("new", "Written after the connections were cut.")])
        assert p.get("new").text.startswith("Written after")
        assert "bees" in p.conversation("s").recall("what is on the roof?", k=1)[0].text
        s = p.stats()
        assert s["documents"] == 9 and s["chunks"] == s["vectors"]


def test_the_migrate_command_moves_a_store_and_the_cli_reads_it(tmp_path, pg_config):
    from typer.testing import CliRunner

    from pensive_core.cli import app

    folder = tmp_path / "data"
    with Pensive(folder, config=HASH) as p:
        p.ingest(docs_corpus())
    st = pg_config["storage"]
    result = CliRunner().invoke(
        app,
        [
            "migrate",
            "--to",
            "postgres",
            "--dsn",
            st["dsn"],
            "--schema",
            st["schema_name"],
            "--store",
            str(folder),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "8 documents" in said and "(0 embedded again)" in said
    toml = tmp_path / "pg.toml"
    toml.write_text(
        f'[storage]\nengine = "postgres"\ndsn = "{st["dsn"]}"\n'
        f'schema_name = "{st["schema_name"]}"\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["query", "arctic tern", "--store", str(tmp_path / "empty"), "--config", str(toml)]
    )
    assert result.exit_code == 0, result.output
    assert "bird" in result.output
    (tmp_path / "note.txt").write_text("A note for the old copy.", encoding="utf-8")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "note.txt"), "--store", str(folder)])
    said = " ".join(f"{result.output} {result.exception}".split())
    assert result.exit_code != 0 and "moved to the postgres engine" in said, said


def test_a_change_whose_lock_was_cut_is_not_committed_and_is_finished_later(tmp_path, pg_config):
    import psycopg

    from pensive_core import hooks

    with Pensive(tmp_path / "a", config=pg_config) as p:
        p.ingest(docs_corpus())
        storage = p.components.storage

        def cut(point, event):  # mid-change: the lock's session dies (a Postgres restart)
            if point == "ingest-batch" and event == "enter":
                with psycopg.connect(pg_config["storage"]["dsn"], autocommit=True) as conn:
                    conn.execute("SELECT pg_terminate_backend(%s)", (storage.lock_holder,))

        remove = hooks.add_listener(cut)
        try:
            with pytest.raises(StorageError, match="change lock was cut.*retry"):
                p.ingest([Document("late", "A document whose change lost its lock.")])
        finally:
            remove()
        # not shown until finished (a reader: a writer opening would finish it at once)
        with Pensive(tmp_path / "b", config=pg_config, read_only=True) as other:
            assert all(h.doc_id != "late" for h in other.query("lost its lock", k=5).hits)
        p.ingest([Document("next", "The next change finishes the one before.")])
        assert p.query("document whose change lost its lock", k=1).hits[0].doc_id == "late"
        assert p.components.archive.unindexed() == []


def test_a_replica_open_when_the_store_moves_takes_no_more_writes(tmp_path, pg_config):
    from pensive_core.storage.migrate import migrate_store

    live = Pensive(tmp_path / "live", config=pg_config)
    try:
        live.ingest(docs_corpus()[:2])
        chat = live.conversation("s")
        chat.add("user", "before the move")
        migrate_store(tmp_path / "new", "embedded", config=pg_config)
        with pytest.raises(ConfigError, match="moved to the embedded engine"):
            live.ingest([Document("lost", "Would be written to the copy left behind.")])
        with pytest.raises(ConfigError, match="moved to the embedded engine"):
            chat.add("user", "after the move")
        assert live.query("before the move", k=1).hits  # it still reads
    finally:
        live.close()  # and closes without error
    with Pensive(tmp_path / "new", config=HASH) as moved:
        assert moved.stats()["documents"] == 2 and len(moved.conversation("s")) == 1


def test_a_replica_closing_never_hides_a_failed_writers_documents(tmp_path, pg_config):
    from pensive_core import hooks

    a = Pensive(tmp_path / "a", config=pg_config)
    b = Pensive(tmp_path / "b", config=pg_config)
    try:
        a.ingest(docs_corpus())

        def fail(point, event):  # b's change dies half way (its documents written, pending)
            if point == "commit" and event == "enter":
                raise RuntimeError("killed")

        remove = hooks.add_listener(fail)
        try:
            with pytest.raises(RuntimeError):
                b.ingest(
                    [Document(f"x{i}", f"Pending passage number {i} on herons.") for i in range(5)]
                )
        finally:
            remove()
        assert b.components.archive.is_dirty() and b.components.archive.unindexed()
        a.close()  # closing another replica finishes the change rather than clearing its mark
        with Pensive(tmp_path / "c", config=pg_config, read_only=True) as c:
            assert c.components.archive.unindexed() == []
            assert {h.doc_id for h in c.query("passage number on herons", k=10).hits} >= {
                f"x{i}" for i in range(5)
            }
    finally:
        a.close()
        b.close()


def test_migrating_into_a_store_that_has_sessions_is_refused(tmp_path, pg_config):
    from pensive_core.storage.migrate import MigrationError, migrate_store

    with Pensive(tmp_path / "dest", config=pg_config) as dest:
        dest.conversation("chat").add("user", "DEST: my name is Bob")
    with Pensive(tmp_path / "src", config=HASH) as src:
        src.conversation("chat").add("user", "SRC: my name is Alice")
    with pytest.raises(MigrationError, match="1 conversation sessions.*DROP SCHEMA"):
        migrate_store(tmp_path / "src", "postgres", storage=dict(pg_config["storage"]))
    with Pensive(tmp_path / "src", config=HASH) as src:  # the original was left as it was
        src.ingest([Document("ok", "still writable")])


def test_migrate_takes_the_schema_and_dsn_from_the_config(tmp_path, pg_config, monkeypatch):
    from typer.testing import CliRunner

    from pensive_core.cli import app

    st = pg_config["storage"]
    toml = tmp_path / "p.toml"
    toml.write_text(
        f'[embedder]\nname = "hash"\ndim = 64\n[storage]\nengine = "embedded"\n'
        f'dsn = "{st["dsn"]}"\nschema_name = "{st["schema_name"]}"\n',
        encoding="utf-8",
    )
    with Pensive(tmp_path / "data", config=str(toml)) as p:
        p.ingest(docs_corpus()[:3])
    result = CliRunner().invoke(
        app, ["migrate", "--to", "postgres", "--store", str(tmp_path / "data"), "-c", str(toml)]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    with Pensive(tmp_path / "elsewhere", config=pg_config) as pg:
        assert pg.stats()["documents"] == 3
