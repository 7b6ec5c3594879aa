"""``pensive explain``: the text report and ``--json`` (what ``POST /v1/explain`` returns), on a
real store opened read-only; bad input is one error line and changes nothing."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pensive_core import NotFoundError, Pensive
from pensive_core.cli import app
from tests.conftest import docs_corpus

TOML = '[embedder]\nname = "hash"\ndim = 256\n'
Q3 = "Acme revenue in Q3 2024"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pensive.toml").write_text(TOML)
    with Pensive(tmp_path / "pensive-data", config=str(tmp_path / "pensive.toml")) as p:
        p.ingest(docs_corpus())
    return tmp_path


def pensive(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_text_report_names_each_stage_and_the_verdict(home):
    out = pensive("explain", Q3, "--expect", "q3", "-e", "tea", "-k", "2", "--budget", "500")
    assert out.exit_code == 0, (out.output, out.exception)
    text = out.stdout
    assert "verdict: 1 of 2 expected in the final hits and the prompt" in text
    assert "tea lost at hits (cut_by_k)" in text
    assert "q3 (document, 1 passage): found, in the prompt (rank 1)" in text
    for stage in ("dense", "bm25", "fused", "hits", "final", "prompt"):
        assert f"\n  {stage} " in text


def test_json_is_the_explanation(home):
    out = pensive("explain", Q3, "-e", "tea", "-k", "2", "--json")
    assert out.exit_code == 0, (out.output, out.exception)
    data = json.loads(out.stdout)
    (tea,) = data["items"]
    assert tea["lost_at"] == "hits" and tea["reason"] == "cut_by_k"
    with Pensive(home / "pensive-data", config=str(home / "pensive.toml")) as p:
        hits = p.query(Q3, k=2).hits
    assert [h["chunk_id"] for h in data["hits"]] == [h.chunk_id for h in hits]


def test_unknown_ids_are_one_error(home):
    before = (home / "pensive-data" / "pensive.sqlite").read_bytes()
    out = pensive("explain", Q3, "-e", "nothing-like-it")
    assert out.exit_code == 1 and isinstance(out.exception, NotFoundError)
    assert "none of the expected ids" in str(out.exception)
    assert (home / "pensive-data" / "pensive.sqlite").read_bytes() == before
    out = pensive("explain", Q3)  # --expect is required
    assert out.exit_code != 0
