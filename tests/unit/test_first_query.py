"""A process that only answers questions does not load PyTorch: the first question of a new
process is embedded by a verified ONNX export from the cache (issue 29: first query <= 1 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pensive_core.embedders.sentence_transformers import bundled_minilm_path, model_layout

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, cache: Path) -> dict:
    env = {**os.environ, "PENSIVE_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


QUERY = """
    import json, sys
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder
    e = create_embedder(EmbedderConfig())
    v = e.embed_query("Has invoice INV-4471-KQ been settled? naïve café 東京")
    print(json.dumps({"torch": "torch" in sys.modules, "loaded": e.loaded,
                      "transformers": "transformers" in sys.modules, "v": v.tolist()}))
"""


def test_the_first_question_of_a_new_process_needs_no_torch(minilm, tmp_path):
    pytest.importorskip("onnxruntime")
    first = _run(QUERY, tmp_path)  # nothing cached: the model loads, exports, verifies
    assert first["torch"] and first["loaded"]
    assert len(list((tmp_path / "onnx").glob("*.ok"))) == 1
    second = _run(QUERY, tmp_path)  # verified export cached: no torch, no transformers
    assert not second["torch"] and not second["loaded"] and not second["transformers"]
    want = minilm.embed_torch(["Has invoice INV-4471-KQ been settled? naïve café 東京"], 1)[0]
    assert float(np.asarray(second["v"], dtype=np.float32) @ want) >= 0.9999
    assert float(np.asarray(first["v"], dtype=np.float32) @ want) >= 0.9999


def test_an_export_without_its_verification_mark_is_not_trusted(minilm, tmp_path):
    pytest.importorskip("onnxruntime")
    _run(QUERY, tmp_path)
    (mark,) = (tmp_path / "onnx").glob("*.ok")
    mark.unlink()
    got = _run(QUERY, tmp_path)
    assert got["torch"] and got["loaded"]  # checked against PyTorch again, then marked
    assert mark.exists()


def test_a_torn_cached_export_falls_back_to_the_model(minilm, tmp_path):
    pytest.importorskip("onnxruntime")
    _run(QUERY, tmp_path)
    (model,) = (tmp_path / "onnx").glob("*.onnx")
    size = model.stat().st_size
    model.write_bytes(model.read_bytes()[: size // 2])
    got = _run(QUERY, tmp_path)
    assert got["loaded"] and model.stat().st_size == size  # exported again
    want = minilm.embed_torch(["Has invoice INV-4471-KQ been settled? naïve café 東京"], 1)[0]
    assert float(np.asarray(got["v"], dtype=np.float32) @ want) >= 0.9999


def test_a_cached_export_changed_in_place_is_not_trusted(minilm, tmp_path):
    """An export whose weights changed after it was verified (bit rot, a partial overwrite,
    tampering; same size, still a loadable model) must not answer questions: its vectors
    no longer match the passages PyTorch embedded."""
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    _run(QUERY, tmp_path)
    (model,) = (tmp_path / "onnx").glob("*.onnx")
    data = model.read_bytes()
    # the last feed-forward weight negated, in place: the file parses and runs as before
    inits = onnx.load_from_string(data).graph.initializer
    raw = sorted(inits, key=lambda t: len(t.raw_data))[-2].raw_data
    at = data.find(raw)
    assert at > 0
    flipped = (-np.frombuffer(raw, dtype=np.float32)).tobytes()
    model.write_bytes(data[:at] + flipped + data[at + len(raw) :])
    got = _run(QUERY, tmp_path)
    want = minilm.embed_torch(["Has invoice INV-4471-KQ been settled? naïve café 東京"], 1)[0]
    assert float(np.asarray(got["v"], dtype=np.float32) @ want) >= 0.9999


def test_a_mark_without_the_exports_hash_is_verified_again_not_exported_again(minilm, tmp_path):
    pytest.importorskip("onnxruntime")
    _run(QUERY, tmp_path)
    (mark,) = (tmp_path / "onnx").glob("*.ok")
    (model,) = (tmp_path / "onnx").glob("*.onnx")
    mark.write_bytes(b"verified\n")  # as written before marks held the export's hash
    made = model.stat().st_mtime_ns
    got = _run(QUERY, tmp_path)
    assert got["loaded"]  # checked against PyTorch, as any unmarked export
    assert model.stat().st_mtime_ns == made  # the same file, not exported again
    assert mark.read_bytes().startswith(b"verified sha256 ")
    assert not _run(QUERY, tmp_path)["torch"]  # and trusted from then on


def test_a_store_answers_its_first_question_without_torch_and_as_with_it(minilm, tmp_path):
    pytest.importorskip("onnxruntime")
    from pensive_core import Document, Pensive

    store = tmp_path / "store"
    with Pensive(store, embedder=minilm) as p:
        p.ingest(
            [
                Document(id="inv", text="Invoice INV-4471 was paid by Globex on 2 May 2024."),
                Document(id="ferry", text="The night ferry to Lisbon leaves at eleven."),
                Document(id="tea", text="Green tea is steeped at eighty degrees."),
            ]
        )
        want = [h.chunk_id for h in p.query("when does the boat to Lisbon go?", k=3).hits]
    code = f"""
        import json, sys
        from pensive_core import Pensive
        with Pensive({str(store)!r}, read_only=True) as p:
            res = p.query("when does the boat to Lisbon go?", k=3)
        print(json.dumps({{"torch": "torch" in sys.modules,
                          "hits": [h.chunk_id for h in res.hits]}}))
    """
    _run(QUERY, tmp_path)  # the export, verified
    got = _run(code, tmp_path)
    assert got["hits"] == want and not got["torch"]


def test_model_layout_reads_the_shape_from_the_files(tmp_path):
    assert model_layout(bundled_minilm_path()) == (384, 256)
    folder = tmp_path / "m"
    (folder / "1_Pooling").mkdir(parents=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    pool = {"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pool))
    assert model_layout(folder) == (768, 128)
    pool = {"word_embedding_dimension": 768, "pooling_mode_cls_token": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pool))
    assert model_layout(folder) is None  # CLS pooling: loaded, not guessed
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "x.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    assert model_layout(folder) is None
    (folder / "modules.json").write_text("{broken")
    assert model_layout(folder) is None


PASSAGES = [
    "Invoice INV-4471 for 3,200 euros was paid by Globex on 2 May 2024.",
    "",
    "ok",
    "Naïve café in Malmö, 東京 and São Paulo — 😀 CAPITALS, tabs\tand\u200bzero widths.",
    "The arctic tern migrates from pole to pole every year. " * 40,  # past the window
    *[f"Passage {i} about tram fares, ferries and the night bus." * (1 + i % 5) for i in range(37)],
]


def test_passages_embedded_through_onnx_match_pytorch_and_keep_their_order(minilm):
    pytest.importorskip("onnxruntime")
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder

    # float32: the shared fixture may have loaded PyTorch, whose bfloat16 copy would answer
    onnx = create_embedder(EmbedderConfig(batch_dtype="float32"))
    fast = onnx.embed(PASSAGES)
    assert onnx.batch_encoder is not None  # the default batch_runtime "auto" took it
    slow = minilm.embed_torch(PASSAGES)
    assert fast.shape == slow.shape == (len(PASSAGES), 384) and fast.dtype == np.float32
    assert float(np.min(np.sum(fast * slow, axis=1))) >= 0.9999


def test_token_counts_without_the_model_equal_the_models(minilm):
    want = [
        len(ids)
        for ids in minilm.model.tokenizer(
            PASSAGES, add_special_tokens=False, truncation=False, verbose=False
        )["input_ids"]
    ]
    assert minilm.count_tokens(PASSAGES) == want


def test_a_new_process_ingests_and_answers_without_torch_as_torch_does(minilm, tmp_path):
    pytest.importorskip("onnxruntime")
    from pensive_core import Document, Pensive

    docs = [Document(id=f"d{i}", text=t) for i, t in enumerate(PASSAGES) if t]
    question = "when does the night bus run past the ferries?"
    with Pensive(
        tmp_path / "torch",
        config={"embedder": {"batch_runtime": "torch", "batch_dtype": "float32"}},
    ) as p:
        p.ingest(docs)
        want = [(h.chunk_id, round(h.score, 4)) for h in p.query(question, k=5).hits]
    _run(QUERY, tmp_path)  # the export, verified
    code = f"""
        import json, sys
        from pensive_core import Document, Pensive
        texts = {[d.text for d in docs]!r}
        with Pensive({str(tmp_path / "onnx-store")!r}) as p:
            p.ingest([Document(id=f"d{{i}}", text=t) for i, t in zip({[d.id[1:] for d in docs]!r}, texts)])
            res = p.query({question!r}, k=5)
        print(json.dumps({{"torch": "torch" in sys.modules,
                          "hits": [[h.chunk_id, round(h.score, 4)] for h in res.hits]}}))
    """
    got = _run(code, tmp_path)
    assert not got["torch"]
    # the same passages in the same order; scores as close as the vectors (cosine >= 0.9999)
    assert [h[0] for h in got["hits"]] == [w[0] for w in want]
    assert all(abs(h[1] - w[1]) < 2e-3 for h, w in zip(got["hits"], want))
