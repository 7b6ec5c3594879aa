"""Blue/green re-embedding with model-free embedders (fast): the switch, what it leaves alone,
refusals, failed documents, changes during a run, readers, rollback and the CLI. The bundled
MiniLM and a real SIGKILL are in tests/integration/test_reembed.py."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from pensive_core import ConfigError, Document, InputError, NotFoundError, Pensive, PensiveError
from pensive_core.backends.memory import MemoryBackend
from pensive_core.cli import app
from pensive_core.embedders.hash import HashEmbedder
from pensive_core.ingest.reembed import CHECKPOINT, reembed_status
from tests.conftest import HASH_CONFIG, docs_corpus

NEW = "tests.unit.test_reembed:Hash128"
QUESTIONS = [
    "Was invoice INV-4471 paid?",
    "Acme revenue Q3 2024",
    "Who is the CEO of Acme?",
    "longest bird migration",
    "antioxidants in tea",
]


class Hash128(HashEmbedder):
    """Another model (another name and dimension) that needs no download."""

    def __init__(self) -> None:
        super().__init__(dim=128)


class Picky(HashEmbedder):
    """A model that refuses one document's text (as a plug-in's service might)."""

    def __init__(self) -> None:
        super().__init__(dim=64)

    def embed(self, texts):
        if any("arctic tern" in t for t in texts):
            raise RuntimeError("the service refused this text")
        return super().embed(texts)


class Elsewhere(MemoryBackend):
    """A backend resolved by ``module:Class`` (not one re-embedding supports)."""


def corpus() -> list[Document]:
    extra = [
        Document(
            id=f"n{i}", text=f"Note {i}: the warehouse in city {i % 3} shipped {i * 7} crates."
        )
        for i in range(6)
    ]
    return docs_corpus() + extra


def answers(p: Pensive) -> list[list[tuple[str, float]]]:
    return [[(h.chunk_id, h.score) for h in p.query(q, k=5).hits] for q in QUESTIONS]


def same_answers(a, b) -> None:
    for x, y in zip(a, b):
        assert [c for c, _ in x] == [c for c, _ in y]
        assert [s for _, s in x] == pytest.approx([s for _, s in y], abs=1e-5)


def fresh(tmp_path, name: str, config: dict) -> Pensive:
    p = Pensive(tmp_path / name, config=config)
    p.ingest(corpus())
    return p


def derived_tables(folder) -> dict[str, list]:
    """Everything re-embedding must leave alone: passages with their contexts, documents, the
    graph and the temporal rows."""
    db = sqlite3.connect(folder / "pensive.sqlite")
    try:
        names = [
            r[0]
            for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if r[0] in ("chunks", "documents") or r[0].startswith(("graph_", "temporal_"))
            if not r[0].startswith("graph_log")  # which commits changed what: not content
        ]
        return {n: sorted(map(repr, db.execute(f"SELECT * FROM {n}"))) for n in names}
    finally:
        db.close()


@pytest.fixture
def built(tmp_path):
    folder = tmp_path / "store"
    with Pensive(folder, config=HASH_CONFIG) as p:
        p.ingest(corpus())
    return folder


def test_switch_answers_like_a_fresh_store_and_recomputes_nothing_else(built, tmp_path):
    before = derived_tables(built)
    with fresh(tmp_path, "fresh-new", {"embedder": {"name": NEW}}) as want:
        expected = answers(want)
    with Pensive(built) as p:
        old = answers(p)
        seen = []
        report = p.reembed(NEW, batch_size=3, progress=lambda d, n: seen.append((d, n)))
        assert report["published"] and report["failed"] == []
        assert (report["documents"], report["passages"], report["embedded"]) == (14, 14, 14)
        assert report["resumed_from"] == 0 and report["from"] == "hash-256"
        assert seen[0] == (0, 14) and seen[-1] == (14, 14) and len(seen) > 3
        same_answers(answers(p), expected)
        assert p.embedder.dim == 128 and p.stats()["vectors"] == 14
    assert derived_tables(built) == before
    assert not (built / CHECKPOINT).exists()
    with Pensive(built) as p:  # the switch is saved: it reopens on the new model
        assert p.config.embedder.name == NEW
        same_answers(answers(p), expected)
        back = p.reembed(rollback=True)
        assert back["embedded"] == 0
        same_answers(answers(p), old)
    with Pensive(built) as p:
        assert p.components.archive.get_meta("embedder") == {"name": "hash-256", "dim": 256}
        same_answers(answers(p), old)


def test_same_model_is_refused_and_changes_nothing(built):
    listing = sorted(f.name for f in built.iterdir())
    with Pensive(built) as p:
        meta = dict(p.components.archive.db.execute("SELECT key, value FROM meta"))
        with pytest.raises(InputError, match="already uses the embedder 'hash'"):
            p.reembed("hash")
        with pytest.raises(InputError, match="already uses the embedder 'hash-256'"):
            p.reembed(HashEmbedder(dim=256))
        assert dict(p.components.archive.db.execute("SELECT key, value FROM meta")) == meta
    assert sorted(f.name for f in built.iterdir()) == listing


def test_bad_requests_are_refused(built, tmp_path):
    with Pensive(built) as p:
        with pytest.raises(InputError, match="needs an embedder"):
            p.reembed()
        with pytest.raises(InputError, match="rollback=True takes no embedder"):
            p.reembed(NEW, rollback=True)
        with pytest.raises(InputError, match="batch_size"):
            p.reembed(NEW, batch_size=0)
        with pytest.raises(InputError, match="Embedder"):
            p.reembed(42)
        with pytest.raises(NotFoundError, match="no previous index"):
            p.reembed(rollback=True)
        assert p.reembed(discard_old=True) == {"discarded": None}
    with Pensive(built, read_only=True) as r, pytest.raises(PensiveError, match="read-only"):
        r.reembed(NEW)
    other = tmp_path / "elsewhere"
    with Pensive(other, config={**HASH_CONFIG, "backend": {"name": f"{__name__}:Elsewhere"}}) as p:
        p.ingest(docs_corpus()[:2])
        with pytest.raises(ConfigError, match="embedded engine with the faiss or memory"):
            p.reembed(NEW)


def test_a_failed_document_is_named_and_nothing_is_published(built):
    with Pensive(built) as p:
        old = answers(p)
        report = p.reembed("tests.unit.test_reembed:Picky", batch_size=4)
        assert not report["published"]
        assert [f["doc_id"] for f in report["failed"]] == ["bird"]
        assert "refused this text" in report["failed"][0]["error"]
        assert report["embedded"] == 13  # the others of its batch went on
        same_answers(answers(p), old)
        assert p.components.archive.get_meta("embedder")["name"] == "hash-256"
        p.delete("bird")
        again = p.reembed("tests.unit.test_reembed:Picky", batch_size=4)
        assert again["published"] and again["resumed_from"] == 13 and again["embedded"] == 0
        assert p.components.archive.get_meta("embedder") == {"name": "hash-64", "dim": 64}
        assert p.query("arctic tern", k=3).hits[0].doc_id != "bird"


def test_changes_during_a_run_are_caught_up_at_the_switch(built, tmp_path):
    late = Document(id="late", text="The lighthouse keeper logged 41 ships in the storm of 1899.")
    with Pensive(built) as p:

        def meanwhile(done, total):
            if done == 4:  # an ingest and a delete while the run is half way
                p.ingest([late])
                p.delete("tea")

        report = p.reembed(NEW, batch_size=2, progress=meanwhile)
        assert report["published"] and report["caught_up"] == 1
        assert p.stats()["vectors"] == 14
        assert p.query("lighthouse keeper ships storm", k=1).hits[0].doc_id == "late"


def test_l1_is_cleared_at_the_switch(built):
    with Pensive(built) as p:
        p.query(QUESTIONS[0])
        assert p.query(QUESTIONS[0]).tier == "L1"
        p.reembed(NEW)
        assert p.query(QUESTIONS[0]).tier != "L1"


def test_a_reader_keeps_the_old_index_until_the_switch_then_follows(built, tmp_path):
    with fresh(tmp_path, "fresh-new", {"embedder": {"name": NEW}}) as want:
        expected = answers(want)
    with Pensive(built) as p, Pensive(built, read_only=True) as reader:
        old = answers(reader)
        during = []
        p.reembed(NEW, batch_size=4, progress=lambda d, n: during.append(answers(reader)))
        for seen in during:
            same_answers(seen, old)
        same_answers(answers(reader), expected)


def test_rollback_embeds_what_changed_since_the_switch_and_discard_drops_it(built):
    with Pensive(built) as p:
        p.reembed(NEW)
        kept = p.components.archive.get_meta("reembed_previous")["place"]
        assert (built / kept).is_dir()
        p.ingest([Document(id="late", text="The lighthouse keeper logged 41 ships in 1899.")])
        p.delete("tea")
        back = p.reembed(rollback=True)
        assert back["embedded"] == 1 and p.stats()["vectors"] == 14
        assert p.embedder.dim == 256
        assert p.query("lighthouse keeper ships", k=1).hits[0].doc_id == "late"
        forward = p.reembed(rollback=True)  # rolling back twice goes forward again
        assert forward["embedded"] == 0 and p.embedder.dim == 128
        assert (built / f"{kept}.keys.sqlite").is_file()  # what the kept index was made from
        gone = p.reembed(discard_old=True)["discarded"]
        assert not (built / gone).exists() and not (built / f"{gone}.keys.sqlite").exists()
        with pytest.raises(NotFoundError):
            p.reembed(rollback=True)


def test_discard_old_at_the_switch_keeps_no_old_index(built):
    with Pensive(built) as p:
        report = p.reembed(NEW, discard_old=True)
        assert report["published"] and report["previous"] is None
    assert sorted(f.name for f in built.iterdir() if f.name.startswith("vectors")) == [
        report["place"]
    ]


def test_cli_progress_status_failure_and_rollback(built):
    runner = CliRunner()
    out = runner.invoke(app, ["reembed", "--store", str(built), "--embedder", NEW])
    assert out.exit_code == 0, out.output
    assert "re-embedded 14 documents" in out.output and "published" in out.output
    status = runner.invoke(app, ["reembed", "--store", str(built), "--status", "--json"])
    got = json.loads(status.output)
    assert got["embedder"]["name"] == "hash-128" and got["previous"]["place"] == "vectors"
    bad = runner.invoke(
        app, ["reembed", "--store", str(built), "--embedder", "tests.unit.test_reembed:Picky"]
    )
    assert bad.exit_code == 1 and "bird" in str(bad.exception)
    same = runner.invoke(app, ["reembed", "--store", str(built), "--embedder", NEW])
    assert same.exit_code == 1 and "already uses" in str(same.exception)
    back = runner.invoke(app, ["reembed", "--store", str(built), "--rollback"])
    assert back.exit_code == 0 and "rolled back to vectors" in back.output
    with Pensive(built) as p:
        assert p.embedder.dim == 256


def test_a_model_shared_by_other_stores_is_passed_over_after_a_switch(built):
    # the server shares one loaded model among its namespaces' stores: one re-embedded to
    # another model must keep its own (the same dimension would otherwise mix them silently)
    with Pensive(built) as p:
        p.reembed(NEW)
        expected = answers(p)
    with Pensive(built, embedder=HashEmbedder(dim=256)) as p:
        assert p.embedder.name == "hash-128"
        same_answers(answers(p), expected)


def test_a_model_name_too_long_for_a_path_is_a_config_error_and_changes_nothing(built):
    """A name longer than a path may be (the server's reembed route takes one from a
    client) is a model that does not exist, not an OSError from the file system."""
    with Pensive(built) as p:
        before = reembed_status(p.components)
        with pytest.raises(ConfigError, match="is not 'minilm', 'hash'"):
            p.reembed("m" * 5000)
        assert reembed_status(p.components) == before
        assert not (built / "reembed.sqlite").exists()


def test_a_damaged_checkpoint_vector_is_embedded_again_not_a_stuck_run(built, tmp_path):
    """A checkpoint row whose vector is not a vector of the new model (a damaged file)
    must not stop every resume with a numpy error: the passage is embedded again."""

    class Stop(Exception):
        pass

    def stop_after_two(done, total):
        if done >= 2:
            raise Stop

    with Pensive(built) as p:
        with pytest.raises(Stop):
            p.reembed(NEW, batch_size=2, progress=stop_after_two)
        db = sqlite3.connect(built / CHECKPOINT)
        with db:
            (cid,) = db.execute("SELECT chunk_id FROM vecs LIMIT 1").fetchone()
            db.execute("UPDATE vecs SET vec = substr(vec, 1, 100) WHERE chunk_id = ?", (cid,))
        db.close()
        report = p.reembed(NEW, batch_size=2)
        assert report["published"] and report["caught_up"] >= 1
        got = answers(p)
    with fresh(tmp_path, "fresh-new", {"embedder": {"name": NEW}}) as want:
        same_answers(got, answers(want))


def test_a_damaged_keys_file_of_the_kept_index_is_treated_as_lost(built, tmp_path):
    """What the kept index was made from, damaged, is trusted for nothing (as when it is
    lost): the rollback embeds every passage again instead of failing with an SQLite error."""
    with Pensive(built) as p:
        p.reembed(NEW)
        kept = p.components.archive.get_meta("reembed_previous")["place"]
        (built / f"{kept}.keys.sqlite").write_bytes(b"not a database " * 100)
        back = p.reembed(rollback=True)
        assert back["embedded"] == p.stats()["vectors"] == len(corpus())
        got = answers(p)
    with fresh(tmp_path, "fresh-old", HASH_CONFIG) as want:
        same_answers(got, answers(want))


def test_a_damaged_checkpoint_file_starts_the_run_over(built, tmp_path):
    """A checkpoint that is not a database (a damaged file) must not stop every resume with
    an SQLite error: its work is of no use, the run starts over."""
    with Pensive(built) as p:
        with pytest.raises(RuntimeError):
            p.reembed(NEW, batch_size=2, progress=_stop_at(2))
        (built / CHECKPOINT).write_bytes(b"not a database " * 100)
        for side in ("-wal", "-shm"):
            (built / f"{CHECKPOINT}{side}").unlink(missing_ok=True)
        report = p.reembed(NEW, batch_size=2)
        assert report["published"] and report["resumed_from"] == 0
        got = answers(p)
    with fresh(tmp_path, "fresh-new", {"embedder": {"name": NEW}}) as want:
        same_answers(got, answers(want))


def _stop_at(n):
    def progress(done, total):
        if done >= n:
            raise RuntimeError("stopped")

    return progress


def test_status_of_a_run_with_a_damaged_checkpoint_says_so(built):
    with Pensive(built) as p:
        with pytest.raises(RuntimeError):
            p.reembed(NEW, batch_size=2, progress=_stop_at(2))
        (built / CHECKPOINT).write_bytes(b"not a database " * 100)
        for side in ("-wal", "-shm"):
            (built / f"{CHECKPOINT}{side}").unlink(missing_ok=True)
        run = reembed_status(p.components)["run"]
        assert run["done"] == 0 and run["damaged"] is True
