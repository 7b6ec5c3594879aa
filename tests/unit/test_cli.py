"""The CLI, run as a user would: a real subprocess, errors as one line."""

import os
import subprocess
import sys


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
    lines = out.stdout.splitlines()
    assert any("rank" in line and "snippet" in line for line in lines)
    first_row = next(line for line in lines if line.strip("│ ").startswith("1 "))
    assert "a.md" in first_row and "L2" in first_row
    out = run("stats", "-s", str(store), cwd=tmp_path)
    assert out.returncode == 0 and "documents" in out.stdout


def test_errors_are_one_line(tmp_path):
    out = run("query", "", "-s", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip().startswith("error:") and "Traceback" not in out.stderr
    out = run(
        "stats", "-s", str(tmp_path / "s"), cwd=tmp_path, env_extra={"PENSIVE_FUSION__METHD": "rrf"}
    )
    assert out.returncode == 1 and "unknown config key 'fusion.methd'" in out.stderr
    out = run("ingest", str(tmp_path / "missing"), "-s", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 1 and "no such file" in out.stderr
