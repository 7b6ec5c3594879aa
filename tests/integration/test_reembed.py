"""Blue/green re-embedding with the bundled MiniLM: ``hash`` -> ``minilm`` killed by SIGKILL in
the middle (a real child process), resumed and published, answers equal to a store built fresh
with each model, then back to ``hash``, and a rollback; and the server's job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pensive_core import Pensive
from pensive_core.ingest.reembed import CHECKPOINT, reembed_status
from tests.conftest import HASH_CONFIG
from tests.unit.test_reembed import answers, corpus, derived_tables, same_answers

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MINILM = {"embedder": {"name": "minilm"}}

# re-embeds the store given, killing itself (SIGKILL: no cleanup of any kind) once the
# progress callback says 6 documents are checkpointed
CHILD = """
import os, signal, sys
from pensive_core import Pensive

def progress(done, total):
    print(done, total, flush=True)
    if done >= 6:
        os.kill(os.getpid(), signal.SIGKILL)

with Pensive(sys.argv[1]) as p:
    p.reembed("minilm", batch_size=3, progress=progress)
print("not killed", flush=True)
"""


def fresh(tmp_path, name: str, config: dict) -> list:
    with Pensive(tmp_path / name, config=config) as p:
        p.ingest(corpus())
        return answers(p)


def test_hash_to_minilm_killed_resumed_then_back_to_hash(tmp_path):
    pytest.importorskip("sentence_transformers")
    store = tmp_path / "store"
    with Pensive(store, config=HASH_CONFIG) as p:
        p.ingest(corpus())
        as_hash = answers(p)
    tables = derived_tables(store)
    want_minilm = fresh(tmp_path, "fresh-minilm", MINILM)
    want_hash = fresh(tmp_path, "fresh-hash", HASH_CONFIG)
    same_answers(as_hash, want_hash)

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(store)], capture_output=True, text=True, env=env,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr[-2000:]  # it died by SIGKILL
    assert proc.stdout.split("\n")[-2] == "6 14" and "not killed" not in proc.stdout
    assert (store / CHECKPOINT).exists()

    with Pensive(store) as p:
        # killed mid-run: still the old model, the old index, the old answers
        assert p.config.embedder.name == "hash"
        same_answers(answers(p), as_hash)
        status = reembed_status(p.components)
        assert status["run"]["to"] == "minilm" and status["run"]["done"] == 6
        t0 = time.perf_counter()
        report = p.reembed("minilm", batch_size=3)
        assert report["published"] and report["failed"] == []
        assert report["resumed_from"] == 6 and report["embedded"] == 8  # nothing redone
        assert time.perf_counter() - t0 < 120
        same_answers(answers(p), want_minilm)
    assert derived_tables(store) == tables  # contexts, graph, temporal: untouched

    with Pensive(store) as p:  # reopened on the new model
        assert p.config.embedder.name == "minilm"
        same_answers(answers(p), want_minilm)
        back = p.reembed("hash")
        assert back["published"] and back["from"] == "minilm" and back["to"] == "hash-256"
        same_answers(answers(p), want_hash)
        p.reembed(rollback=True)  # one call back to the MiniLM index kept
        same_answers(answers(p), want_minilm)
    assert derived_tables(store) == tables


KEY_A, KEY_B = "key-a-" + "a" * 26, "key-b-" + "b" * 26


def _ask(c, headers: dict, questions) -> list:
    return [
        [(h["chunk_id"], h["score"]) for h in c.post("/v1/query", json={"text": q, "k": 5},
         headers=headers).json()["hits"]]
        for q in questions
    ]  # fmt: skip


def test_the_server_runs_it_as_a_job_and_its_readers_follow(tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from pensive_core.server import create_app

    want_minilm = fresh(tmp_path, "fresh-minilm", MINILM)
    want_hash = fresh(tmp_path, "fresh-hash", HASH_CONFIG)
    questions = ("Was invoice INV-4471 paid?", "Acme revenue Q3 2024")
    docs = [
        {"id": d.id, "text": d.text, "metadata": d.metadata}
        | ({"timestamp": d.timestamp.isoformat()} if d.timestamp else {})
        for d in corpus()
    ]
    a, b = {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}
    cfg = {**HASH_CONFIG, "server": {"readers": 1}}
    with TestClient(create_app(tmp_path / "served", cfg, keys={KEY_A: "default", KEY_B: "b"})) as c:
        assert c.post("/v1/documents", json={"documents": docs}, headers=a).status_code == 200
        bad = c.post("/v1/reembed", json={"embedder": "os:system"}, headers=a)
        assert bad.status_code == 400
        same = c.post("/v1/reembed", json={"embedder": "hash", "wait": True}, headers=a)
        assert same.status_code == 400 and "already uses" in same.json()["error"]["message"]
        started = c.post("/v1/reembed", json={"embedder": "minilm", "batch_size": 2}, headers=a)
        assert started.status_code == 202
        job = started.json()["job"]
        assert job["kind"] == "reembed" and job["total"] == 14
        deadline = time.monotonic() + 300
        while job["state"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
            job = c.get(f"/v1/jobs/{job['id']}", headers=a).json()
        assert job["state"] == "done", job
        assert job["done"] == 14 and job["report"]["published"]
        same_answers(_ask(c, a, questions), want_minilm[:2])
        # a namespace opened after the switch keeps the configured model (hash), not the one
        # the re-embedded namespace now uses
        assert c.post("/v1/documents", json={"documents": docs}, headers=b).status_code == 200
        same_answers(_ask(c, b, questions), want_hash[:2])
