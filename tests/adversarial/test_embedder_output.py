"""What a plug-in embedder returns is checked before anything is stored: a NaN vector used to
be stored and made every query near it fail (NaN confidence, refused by the cache's table),
also after reopening."""

from __future__ import annotations

import numpy as np
import pytest

from pensive_core import Document, Pensive
from pensive_core.embedders.hash import HashEmbedder
from pensive_core.errors import EmbedderError

pytestmark = pytest.mark.adversarial

CFG = {"embedder": {"name": "hash", "dim": 64}}


class Poisoned(HashEmbedder):
    """The hash embedder, but a passage or question with 'poison' in it gets a NaN vector
    (or, with ``shape``, one row too few)."""

    def __init__(self, shape: bool = False) -> None:
        super().__init__(dim=64)
        self.shape = shape

    def embed(self, texts):
        out = np.array(super().embed(texts))
        bad = [i for i, t in enumerate(texts) if "poison" in t]
        if bad and self.shape:
            return out[1:]
        out[bad] = np.nan
        return out

    def embed_query(self, text):
        out = np.array(super().embed_query(text))
        if "poison" in text:
            out[:] = np.inf
        return out


def _counts(p):
    s = p.stats(disk=False)
    return s["documents"], s["chunks"], s["vectors"], len(p.components.sparse.ids())


@pytest.mark.parametrize("shape", [False, True], ids=["nan", "short"])
def test_a_bad_vector_is_refused_and_nothing_of_it_searchable(tmp_path, shape):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest([Document(id="a", text="The lantern hangs by the north door.")])
    with Pensive(tmp_path, config=CFG, embedder=Poisoned(shape)) as p:
        with pytest.raises(EmbedderError, match="hash"):
            p.ingest([Document(id="b", text="A poison thing sits on the shelf.")])
        assert not [h for h in p.query("shelf thing", k=5).hits if h.doc_id == "b"]
        res = p.query("lantern north door", k=5)  # queries go on working
        assert res.hits and res.hits[0].doc_id == "a"
        assert 0.0 <= res.confidence <= 1.0
    with Pensive(tmp_path, config=CFG) as p:  # a sane embedder indexes it on reopen
        assert _counts(p) == (2, 2, 2, 2)
        assert p.query("poison thing shelf", k=1).hits[0].doc_id == "b"


def test_a_non_finite_query_vector_is_an_embedder_error(tmp_path):
    with Pensive(tmp_path, config=CFG, embedder=Poisoned()) as p:
        p.ingest([Document(id="a", text="The lantern hangs by the north door.")])
        with pytest.raises(EmbedderError, match="non-finite"):
            p.query("poison lantern")
        assert p.query("lantern").hits[0].doc_id == "a"
