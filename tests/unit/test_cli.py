"""The CLI, run as a user would: a real subprocess, errors as one line; and in process
(typer's CliRunner), every command the HTTP service has a counterpart for (issue 10)."""

import json
import os
import subprocess
import sys
import types

import pytest
from typer.testing import CliRunner

from pensive_core import Document, Pensive
from pensive_core.cli import app, main
from pensive_core.errors import InputError, NotFoundError
from tests.conftest import HASH_CONFIG, docs_corpus


def run(*args, cwd, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PENSIVE_")}
    env.update({"PENSIVE_EMBEDDER__NAME": "hash", "COLUMNS": "160"})
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "pensive_core.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # a real `pensive` process per command
def test_ingest_query_stats(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Ferries\n\nThe night ferry leaves the harbour at 22:00.")
    (docs / "b.txt").write_text("Invoice INV-4471 was paid in full.")
    store = tmp_path / "store"
    out = run("ingest", str(docs), "--store", str(store), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "2 added" in out.stdout
    out = run("query", "when does the night ferry leave", "-s", str(store), "-k", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "tier L2 · confidence" in out.stdout
    lines = out.stdout.splitlines()
    assert any("rank" in line and "snippet" in line for line in lines)
    first_row = next(line for line in lines if line.strip("│ ").startswith("1 "))
    assert "a.md" in first_row and "L2" in first_row
    out = run("stats", "-s", str(store), cwd=tmp_path)
    assert out.returncode == 0 and "documents" in out.stdout


def cells(stdout, first):
    """The cells of the table row whose first cell is ``first``."""
    for line in stdout.splitlines():
        row = [c.strip() for c in line.split("│")[1:-1]]
        if row and row[0] == first:
            return row
    raise AssertionError(f"no row {first!r} in:\n{stdout}")


@pytest.mark.slow  # a real `pensive` process per command
def test_stats_shows_tiers_and_l1(tmp_path):
    store = tmp_path / "store"
    with Pensive(store, config={**HASH_CONFIG, "router": {"l1": True}}) as p:
        p.ingest(docs_corpus())
    for tier in ("L2", "L1"):  # the repeat, in another process, is served by the cache
        out = run("query", "Was invoice INV-4471 paid?", "-s", str(store), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert f"tier {tier} · confidence" in out.stdout
    out = run("stats", "-s", str(store), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert cells(out.stdout, "documents") == ["documents", "8"]
    assert cells(out.stdout, "L1")[1:3] == ["1", "50%"]
    assert cells(out.stdout, "L2")[1:3] == ["1", "50%"]
    assert "L1 cache: 1 / " in out.stdout
    assert "hit rate 50% (1 of 2 queries)" in out.stdout
    assert "L3 escalations" in out.stdout


@pytest.mark.slow  # a real `pensive` process per command
def test_stats_and_query_beside_a_writer(tmp_path):
    store = tmp_path / "store"
    (tmp_path / "more.txt").write_text("Invoice INV-9000 is due in June.")
    with Pensive(store, config=HASH_CONFIG) as writer:
        writer.ingest(docs_corpus())
        out = run("stats", "-s", str(store), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert cells(out.stdout, "documents") == ["documents", "8"]
        assert "L1 cache: 0 / 10000 entries" in out.stdout and "queries: none yet" in out.stdout
        out = run("query", "INV-4471", "-s", str(store), "-k", "1", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert cells(out.stdout, "1")[3] == "inv"
        out = run("ingest", str(tmp_path / "more.txt"), "-s", str(store), cwd=tmp_path)
        assert out.returncode == 1 and "open for writing" in out.stderr


@pytest.mark.slow  # a real `pensive` process per command
def test_errors_are_one_line(tmp_path):
    out = run("stats", "-s", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 1 and "no Pensive store at" in out.stderr
    assert not (tmp_path / "s").exists()  # looking does not create a store
    Pensive(tmp_path / "s", config=HASH_CONFIG).close()
    out = run("query", "", "-s", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 1 and "query is empty" in out.stderr
    assert out.stderr.strip().startswith("error:") and "Traceback" not in out.stderr
    out = run(
        "stats", "-s", str(tmp_path / "s"), cwd=tmp_path, env_extra={"PENSIVE_FUSION__METHD": "rrf"}
    )
    assert out.returncode == 1 and "unknown config key 'fusion.methd'" in out.stderr
    out = run("ingest", str(tmp_path / "missing"), "-s", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 1 and "no such file" in out.stderr


@pytest.mark.slow  # a real `pensive` process per command
def test_an_aggregation_question_prints_its_count(tmp_path):
    store = tmp_path / "store"
    diary = [
        Document(id="a", text="Caroline flew to Lisbon in May."),
        Document(id="b", text="Melanie stayed home."),
        Document(id="c", text="Caroline was back in Lisbon for June."),
    ]
    with Pensive(store, config=HASH_CONFIG) as p:
        p.ingest(diary)
    out = run("query", "How many times did Caroline go to Lisbon?", "-s", str(store), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "count: 2 passages in 2 documents name caroline + lisbon" in out.stdout
    out = run("stats", "-s", str(store), cwd=tmp_path)
    assert "entity graph: " in out.stdout and " in 3 passages" in out.stdout


@pytest.mark.slow  # a real `pensive` process per command
def test_a_superseded_hit_and_the_time_asked_about_are_shown(tmp_path):
    from datetime import datetime

    store = tmp_path / "store"
    with Pensive(store, config=HASH_CONFIG) as p:
        p.ingest(
            [
                Document("r19", "The CEO of Acme is John Smith.", timestamp=datetime(2019, 4, 1)),
                Document(
                    "r22", "Maria Lopez was appointed CEO of Acme.", timestamp=datetime(2022, 6, 15)
                ),
            ]
        )
    out = run("query", "Who is the current CEO of Acme?", "-s", str(store), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "(superseded on 2022-06-15 by r22)" in out.stdout
    assert "time asked about: latest (1 of 2 hits fit it)" in out.stdout


# -- in process: every command the HTTP service has a counterpart for (issue 10) ------------
#
# The typer app runs in this process (typer's CliRunner), a store per test in tmp_path, the
# hash embedder from a ./pensive.toml in the working folder, as a user's checkout has it.

TOML = '[embedder]\nname = "hash"\ndim = 256\n'


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A working folder with a pensive.toml (hash embedder) and a docs/ folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pensive.toml").write_text(TOML)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ferry.md").write_text("# Ferries\n\nThe night ferry leaves the harbour at 22:00.")
    rows = [
        {"id": "inv", "text": "Invoice INV-4471 was paid in full.", "metadata": {"year": 2021}},
        {"id": "tea", "text": "Green tea contains catechins.", "timestamp": "2019-05-01"},
    ]
    (docs / "more.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return tmp_path


def pensive(*args, ok=True):
    """Run ``pensive ARGS`` in this process; with ``ok``, assert it succeeded."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def as_json(*args):
    return json.loads(pensive(*args, "--json").stdout)


def fails(exc_type, text, *args):
    """``pensive ARGS`` exits 1 with a Pensive error of ``exc_type`` saying ``text``."""
    result = pensive(*args, ok=False)
    assert result.exit_code == 1
    assert isinstance(result.exception, exc_type), result.exception
    assert text in str(result.exception)


def test_namespaces_are_separate_stores(home):
    pensive("ingest", "docs", "-n", "a")
    assert (home / "pensive-data" / "namespaces" / "a" / "pensive.sqlite").is_file()
    assert as_json("get", "inv", "-n", "a")["metadata"]["year"] == 2021
    fails(NotFoundError, "no Pensive store at", "get", "inv", "-n", "b")
    fails(NotFoundError, "no Pensive store at", "query", "invoice", "-n", "b")
    pensive("ingest", "docs/ferry.md")  # the default namespace: the store folder itself
    fails(NotFoundError, "no document with id 'inv'", "get", "inv")
    hits = as_json("query", "invoice INV-4471", "-n", "a")["hits"]
    assert hits[0]["doc_id"] == "inv"
    assert {h["doc_id"] for h in as_json("query", "invoice INV-4471")["hits"]} == {"ferry.md"}
    assert as_json("stats", "-n", "a")["documents"] == 3
    assert as_json("stats")["documents"] == 1


@pytest.mark.parametrize("bad", ["../x", "A", "", "a/b", "default/../../etc"])
def test_a_bad_namespace_is_a_clean_error_and_touches_nothing(home, bad):
    for args in (
        ("ingest", "docs"),
        ("query", "ferry"),
        ("stats",),
        ("chat", "add", "s1", "hello"),
        ("health",),
    ):
        fails(InputError, "is not valid", *args, "-n", bad)
    # nothing written: no store root (where "../x" would have led), no namespace folder
    assert sorted(p.name for p in home.iterdir()) == ["docs", "pensive.toml"]


def test_errors_print_one_line_and_usage_errors_no_traceback(home, capsys):
    for args, code, text in (
        (["query", "x", "-n", "../x"], 1, "error: namespace '../x' is not valid"),
        (["get", "nope"], 1, "error: no Pensive store at pensive-data"),
        (["query"], 2, "Missing argument"),
        (["query", "x", "--bogus"], 2, "No such option"),
        ([], 2, "Usage:"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(args)
        assert stop.value.code == code, args
        out = capsys.readouterr()
        assert text in out.err + out.out and "Traceback" not in out.err + out.out
        if code == 1:
            assert out.err.count("\n") == 1 and out.err.startswith("error:")


def test_get_and_delete(home):
    pensive("ingest", "docs")
    doc = as_json("get", "inv")
    assert set(doc) == {"id", "text", "metadata", "timestamp"}
    assert doc["id"] == "inv" and doc["text"] == "Invoice INV-4471 was paid in full."
    assert doc["metadata"]["year"] == 2021
    assert as_json("get", "tea")["timestamp"] == "2019-05-01T00:00:00+00:00"
    table = pensive("get", "ferry.md").stdout
    assert "ferry.md" in table and "The night ferry leaves the harbour at 22:00." in table
    out = pensive("delete", "inv").stdout
    assert "deleted inv (1 passage)" in out  # singular for one
    fails(NotFoundError, "no document with id 'inv'", "delete", "inv")
    fails(NotFoundError, "no document with id 'inv'", "get", "inv")
    assert as_json("stats")["documents"] == 2
    fails(NotFoundError, "no Pensive store at", "delete", "inv", "-n", "empty")
    assert not (home / "pensive-data" / "namespaces").exists()  # deleting creates nothing


def test_query_as_of_filter_and_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Pensive(tmp_path / "st", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())  # timestamps 2024-01-01 .. 2024-08-01, metadata topic
    res = as_json("query", "Acme revenue invoice", "-s", "st", "-k", "8")
    assert set(res) >= {"text", "tier", "confidence", "latency_ms", "hits"}
    assert res["text"] == "Acme revenue invoice" and res["tier"] in ("L1", "L2", "L3")
    hit = res["hits"][0]
    assert set(hit) >= {
        "doc_id",
        "chunk_id",
        "text",
        "score",
        "metadata",
        "timestamp",
        "sources",
    }
    filtered = as_json("query", "Acme revenue", "-s", "st", "--filter", '{"topic": "inv"}')
    assert [h["doc_id"] for h in filtered["hits"]] == ["inv"]
    early = as_json("query", "Acme revenue invoice", "-s", "st", "-k", "8", "--as-of", "2024-02-15")
    assert early["hits"] and all(h["timestamp"] <= "2024-02-15" for h in early["hits"])
    assert {h["doc_id"] for h in early["hits"]} <= {"q3", "q4"}
    fails(InputError, "--filter must be a JSON object", "query", "x", "-s", "st", "--filter", "[1]")
    fails(InputError, "--filter is not valid JSON", "query", "x", "-s", "st", "--filter", "{")
    fails(InputError, "--as-of: timestamp 'soon'", "query", "x", "-s", "st", "--as-of", "soon")
    pinned = as_json(
        "query", "Acme revenue", "-s", "st", "-k", "1", "--pin", "tea", "--pin", "bird"
    )
    assert [(h["doc_id"], h["pinned"]) for h in pinned["hits"][:2]] == [
        ("tea", True),
        ("bird", True),
    ]
    assert len(pinned["hits"]) == 3 and not pinned["hits"][2]["pinned"]
    table = pensive("query", "Acme revenue", "-s", "st", "-k", "1", "--pin", "tea").stdout
    assert "pin" in table and "tea" in table
    fails(NotFoundError, "'nope'", "query", "x", "-s", "st", "--pin", "nope")


def test_ingest_archive_only(home):
    out = pensive("ingest", "docs", "--archive-only")
    assert "3 added" in out.stdout and "0 passages embedded" in out.stdout
    stats = as_json("stats")
    assert stats["documents"] == 3 and stats["vectors"] == 0
    assert as_json("get", "inv")["text"] == "Invoice INV-4471 was paid in full."
    res = as_json("query", "INV-4471")
    assert res["tier"] == "L3" and res["hits"][0]["doc_id"] == "inv"


def test_stats_config_and_health(home):
    fails(NotFoundError, "no Pensive store at", "health")
    fails(NotFoundError, "no Pensive store at", "config")
    fails(NotFoundError, "no Pensive store at", "stats", "--json")
    (home / "pensive.toml").write_text(
        TOML + '[backend.weaviate]\nurl = "http://ana:hunter2@db.example:8080"\n'
    )
    pensive("ingest", "docs")
    stats = as_json("stats")
    assert stats["documents"] == 3 and stats["queries"]["total"] == 0
    config = json.loads(pensive("config").stdout)
    assert config["embedder"]["name"] == "hash" and config["server"]["port"] == 8765
    assert config["backend"]["weaviate"]["url"] == "http://***@db.example:8080"
    assert "hunter2" not in pensive("config").stdout
    assert "ok: pensive-data (namespace default): 3 documents" in pensive("health").stdout
    report = as_json("health")
    assert report["status"] == "ok" and report["documents"] == 3 and report["sessions"] == 0
    (home / "damaged").mkdir()
    (home / "damaged" / "pensive.sqlite").write_text("not a database")
    result = pensive("health", "-s", "damaged", ok=False)
    assert result.exit_code == 1 and "cannot open the store at damaged" in str(result.exception)


def test_chat(home):
    add = as_json(
        "chat",
        "add",
        "s1",
        "I moved to Lisbon [last] week",
        "--user",
        "ana",
        "--timestamp",
        "2024-05-01T10:00:00",
        "--metadata",
        '{"mood": 3}',
    )
    assert add["session_id"] == "s1"  # the route's {"turn": ...}, and which session
    turn = add["turn"]
    assert turn["id"] == "t000000" and turn["seq"] == 0 and turn["role"] == "user"
    assert turn["timestamp"] == "2024-05-01T10:00:00+00:00" and turn["metadata"] == {"mood": 3}
    out = pensive("chat", "add", "s1", "Lisbon is sunny", "--role", "assistant").stdout
    assert "added turn t000001 (#1, assistant) to session s1" in out
    pensive("chat", "add", "s2", "My cat is called Tom", "-u", "ana")
    pensive("chat", "add", "s3", "Hello from Bob", "-u", "bob")
    pensive("chat", "add", "s9", "Another namespace", "-u", "ana", "-n", "other")

    pensive("chat", "add", "s4", "No user here")
    assert as_json("chat", "list") == {"sessions": ["s1", "s2", "s3", "s4"]}
    assert as_json("chat", "list", "--user", "bob") == {"sessions": ["s3"]}
    assert as_json("chat", "list", "-n", "other") == {"sessions": ["s9"]}
    assert cells(pensive("chat", "list").stdout, "s1") == ["s1", "ana", "2"]

    turns = as_json("chat", "turns", "s1")
    assert turns["user"] == "ana" and [t["text"] for t in turns["turns"]] == [
        "I moved to Lisbon [last] week",
        "Lisbon is sunny",
    ]
    assert [t["seq"] for t in as_json("chat", "turns", "s1", "--limit", "1")["turns"]] == [1]
    assert "I moved to Lisbon [last] week" in pensive("chat", "turns", "s1").stdout

    hits = as_json("chat", "recall", "s1", "where do I live", "-k", "1")["hits"]
    assert hits[0]["text"] == "I moved to Lisbon [last] week"
    assert hits[0]["metadata"]["role"] == "user" and hits[0]["metadata"]["mood"] == 3
    hits = as_json("chat", "recall", "s1", "what is my cat called", "--scope", "user")["hits"]
    assert hits[0]["text"] == "My cat is called Tom"
    assert all(h["metadata"]["session_id"] in ("s1", "s2") for h in hits)  # never bob's
    session_only = as_json("chat", "recall", "s1", "cat", "--scope", "session")["hits"]
    assert {h["metadata"]["session_id"] for h in session_only} == {"s1"}
    early = as_json("chat", "recall", "s1", "Lisbon", "--as-of", "2024-06-01")["hits"]
    assert [h["text"] for h in early] == ["I moved to Lisbon [last] week"]
    assert "Lisbon" in pensive("chat", "recall", "s1", "where do I live").stdout

    context = pensive("chat", "context", "s1", "where do I live", "--budget", "300").stdout
    assert "I moved to Lisbon [last] week" in context and "where do I live" in context
    built = as_json("chat", "context", "s1", "where do I live", "--budget", "300")
    assert built["text"] == context.rstrip("\n") and 0 < built["tokens"] <= built["budget"] == 300
    qa = pensive("chat", "context", "s1", "where do I live", "--template", "qa").stdout
    assert "Question: where do I live\nAnswer:" in qa
    fails(
        InputError,
        "unknown prompt strategy 'loud'",
        "chat",
        "context",
        "s1",
        "x",
        "--strategy",
        "loud",
    )

    fails(InputError, "has no user", "chat", "recall", "s4", "x", "--scope", "user")
    hits = as_json("chat", "recall", "s4", "user", "--scope", "user", "-u", "bob")["hits"]
    assert {h["metadata"]["session_id"] for h in hits} == {"s3", "s4"}  # s4 is bob's now
    assert as_json("chat", "list", "--user", "bob") == {"sessions": ["s3", "s4"]}

    fails(NotFoundError, "no session 'nope'", "chat", "turns", "nope")
    fails(NotFoundError, "no session 'nope'", "chat", "recall", "nope", "x")
    fails(NotFoundError, "no session 's3'", "chat", "turns", "s3", "-n", "other")
    fails(
        InputError,
        "scope must be 'session' or 'user'",
        "chat",
        "recall",
        "s1",
        "x",
        "--scope",
        "all",
    )
    fails(
        InputError, "--metadata must be a JSON object", "chat", "add", "s1", "x", "--metadata", "3"
    )
    fails(
        InputError,
        "--timestamp: timestamp 'later'",
        "chat",
        "add",
        "s1",
        "x",
        "--timestamp",
        "later",
    )
    fails(InputError, "belongs to another user", "chat", "add", "s1", "x", "-u", "bob")

    assert "cleared session s2: 1 turn forgotten" in pensive("chat", "clear", "s2").stdout
    assert as_json("chat", "turns", "s2")["turns"] == []
    assert as_json("chat", "clear", "s3") == {"cleared": 1}
    fails(NotFoundError, "no session 'nope'", "chat", "clear", "nope")
    fails(NotFoundError, "no Pensive store at", "chat", "clear", "s1", "-n", "none")
    assert as_json("health")["sessions"] == 4


def test_serve_calls_the_server_lazily(home, monkeypatch):
    assert "--no-auth" in pensive("serve", "--help").stdout
    calls = []
    fake = types.ModuleType("pensive_core.server")
    fake.run = lambda **kw: calls.append(kw)
    monkeypatch.setitem(sys.modules, "pensive_core.server", fake)  # whether or not it exists
    pensive("serve", "-s", "st", "--port", "0", "--host", "0.0.0.0", "--keys", "k.txt", "--no-auth")
    pensive("serve")
    paths = ("store", "config", "keys_file")
    assert [{k: str(v) if k in paths and v else v for k, v in kw.items()} for kw in calls] == [
        {
            "store": "st",
            "config": "pensive.toml",  # found in the working folder, as the store commands do
            "host": "0.0.0.0",
            "port": 0,
            "keys_file": "k.txt",
            "no_auth": True,
        },
        {
            "store": "pensive-data",
            "config": "pensive.toml",
            "host": None,
            "port": None,
            "keys_file": None,
            "no_auth": False,
        },
    ]


def test_the_cli_does_not_import_the_server_until_serve(tmp_path):
    code = (
        "import sys, pensive_core.cli; "
        "print(sorted(m for m in ('pensive_core.server', 'fastapi', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
