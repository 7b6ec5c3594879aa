"""The CLI, run as a user would: a real subprocess, errors as one line."""

import os
import subprocess
import sys

from pensive_core import Document, Pensive
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
