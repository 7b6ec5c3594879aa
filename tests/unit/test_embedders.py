import numpy as np
import pytest

from pensive_core import ConfigError
from pensive_core.config import EmbedderConfig
from pensive_core.embedders import Embedder, create_embedder


def test_hash_embedder_is_deterministic_and_normalised():
    e = create_embedder(EmbedderConfig(name="hash", dim=64))
    assert isinstance(e, Embedder)
    a = e.embed(["Invoice INV-4471 paid", "Invoice INV-4471 paid", ""])
    assert a.shape == (3, 64) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a[:2], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(a[0], a[1])
    np.testing.assert_array_equal(e.embed_query("Invoice INV-4471 paid"), a[0])
    assert e.count_tokens(["one two three"]) == [3]


def test_unknown_embedder_name():
    with pytest.raises(ConfigError, match="never downloaded"):
        create_embedder(EmbedderConfig(name="sentence-transformers/all-mpnet-base-v2"))


@pytest.mark.slow
def test_any_local_sentence_transformers_folder(tmp_path, minilm):
    from pensive_core.embedders.sentence_transformers import bundled_minilm_path

    folder = str(bundled_minilm_path())
    e = create_embedder(EmbedderConfig(name=folder))
    assert e.name == folder and e.dim == 384 and e.max_tokens == 254
    v = e.embed(["the night ferry leaves at ten", "a recipe for lentil soup"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    q = e.embed_query("when does the ferry depart?")
    assert q @ v[0] > q @ v[1]
    np.testing.assert_allclose(q, minilm.embed_query("when does the ferry depart?"), atol=1e-5)
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(ConfigError, match="not a sentence-transformers model folder"):
        create_embedder(EmbedderConfig(name=str(tmp_path / "not-a-model")))
