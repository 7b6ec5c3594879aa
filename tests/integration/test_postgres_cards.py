"""Entity cards on the Postgres engine: none are kept there, nothing is raised, entity
questions go to L2 and document summaries are made from the archive (a real Postgres from the
``postgres_dsn`` fixture)."""

from __future__ import annotations

import hashlib

import pytest

from pensive_core import Document, NotFoundError, Pensive

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_config(postgres_dsn, request):
    schema = "s" + hashlib.blake2b(request.node.nodeid.encode(), digest_size=6).hexdigest()
    return {"embedder": {"name": "hash", "dim": 64},
            "storage": {"engine": "postgres", "dsn": postgres_dsn, "schema_name": schema}}  # fmt: skip


def test_postgres_serves_no_card_and_summaries_come_from_the_archive(tmp_path, pg_config):
    doc = Document(
        id="ada",
        text="Ada Lovelace\n\nAda Lovelace was an English mathematician. She wrote the first "
        "published program. She died in 1852.",
        metadata={"title": "Ada Lovelace"},
    )
    with Pensive(tmp_path / "pg", config=pg_config) as p:
        p.ingest([doc])
        res = p.query("who is Ada Lovelace?", k=1)
        assert res.card is None and res.tier == "L2" and res.hits[0].doc_id == "ada"
        assert p.router.cards.card("Ada Lovelace") is None
        assert p.summary("ada") == (
            "Ada Lovelace was an English mathematician. She wrote the first published program."
        )
        with pytest.raises(NotFoundError):
            p.summary("nope")
