"""The archive's full-text search as the storage seam states it: every phrase of ``all_of``,
one of ``any_of``, one word of ``rank_by`` (each when given); the engine's own full-text
language (FTS5 here) stays inside the archive."""

import pytest

from pensive_core import Document, Pensive
from pensive_core.archive import fts_match
from tests.conftest import HASH_CONFIG

DOCS = [
    Document("inv", "Invoice INV-4471 was paid in March by Acme."),
    Document("inv2", "Invoice INV-4471 is overdue; Acme was reminded."),
    Document("po", "Purchase order PO-88 for Acme was approved."),
    Document("tea", 'Green tea holds "catechins", an antioxidant.'),
]


@pytest.fixture
def archive(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(DOCS)
        yield p.components.archive


def ids(found):
    return [d for d, _ in found]


def test_all_of_any_of_and_rank_by(archive):
    assert set(ids(archive.search_documents(["INV-4471"], (), (), 10))) == {"inv", "inv2"}
    # every phrase of all_of, and one word of rank_by, which also ranks
    assert ids(archive.search_documents(["INV-4471"], (), ["paid"], 10)) == ["inv"]
    assert set(ids(archive.search_documents(["INV-4471", "Acme"], (), (), 10))) == {"inv", "inv2"}
    assert archive.search_documents(["INV-4471", "PO-88"], (), (), 10) == []
    assert set(ids(archive.search_documents((), ["INV-4471", "PO-88"], ["acme"], 10))) == {
        "inv",
        "inv2",
        "po",
    }
    assert ids(archive.search_documents((), (), ["catechins"], 10)) == ["tea"]
    assert archive.search_documents((), (), (), 10) == []  # nothing asked: nothing found
    scores = [s for _, s in archive.search_documents((), (), ["acme", "paid"], 10)]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3


def test_quotes_in_a_phrase_cannot_change_the_query(archive):
    assert archive.search_documents(['"catechins" OR acme'], (), (), 10) == []
    assert fts_match(['a"b'], (), ()) == '"a""b"'
