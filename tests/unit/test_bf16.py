"""Passage batches in bfloat16 where the CPU multiplies it natively (issue 29: ingest speed):
the copy is checked against float32 before use, ``auto`` takes it only where it is native and
only for calls that repay loading PyTorch, and ``float32`` never builds it."""

from __future__ import annotations

import numpy as np
import pytest

from pensive_core.embedders.bf16 import BFloat16Encoder, native_bfloat16

PASSAGES = [
    "Mitochondrial DNA mutations accumulate with age in human muscle fibres.",
    "ok",
    "Naïve café in Malmö, 東京 and São Paulo — 😀 CAPITALS, tabs\tand\u200bzero widths.",
    "The arctic tern migrates from pole to pole every year. " * 40,  # past the window
    *[f"Passage {i} about tram fares, ferries and the night bus." * (1 + i % 5) for i in range(29)],
]


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu sse2 avx2 avx512f amx_bf16 amx_tile", True),
        ("fpu sse2 avx2 avx512f avx512_bf16", True),
        ("fpu sse2 avx2 avx512f avx512_vnni", False),  # int8 only: bfloat16 would be emulated
        ("", False),
    ],
)
def test_native_bfloat16_reads_the_cpu_flags(tmp_path, flags, native):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n")
    assert native_bfloat16(info) is native


def test_native_bfloat16_is_false_where_the_cpu_cannot_be_read(tmp_path):
    assert native_bfloat16(tmp_path / "missing") is False
    (tmp_path / "binary").write_bytes(b"\xff\xfe flags : amx_bf16")  # no "flags" line start
    assert native_bfloat16(tmp_path / "binary") is False


@pytest.mark.slow
def test_the_bfloat16_copy_agrees_with_float32_and_keeps_the_order(minilm):
    half = BFloat16Encoder.build(minilm.model, minilm.embed_torch)
    assert half is not None
    got = half.embed(PASSAGES, batch_size=8)
    want = minilm.embed_torch(PASSAGES)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(got * want, axis=1))) >= 0.999
    # each row is its own passage's vector: the nearest float32 vector of row i is row i
    assert (np.argmax(got @ want.T, axis=1) == np.arange(len(PASSAGES))).all()
    assert str(minilm.model.dtype) == "torch.float32"  # a copy: the model itself is unchanged


@pytest.mark.slow
def test_a_copy_that_disagrees_with_float32_is_not_used(minilm, caplog):
    rng = np.random.default_rng(0)

    def wrong(texts):
        v = rng.normal(size=(len(texts), 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    assert BFloat16Encoder.build(minilm.model, wrong) is None
    assert "stay in float32" in caplog.text


@pytest.mark.slow
def test_float32_never_builds_the_copy_and_small_calls_stay_on_onnx(minilm):
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder

    f32 = create_embedder(EmbedderConfig(batch_dtype="float32"))
    f32.embed(PASSAGES)
    assert not getattr(f32, "inner", f32).bfloat16
    auto = create_embedder(EmbedderConfig())
    inner = getattr(auto, "inner", auto)
    if not native_bfloat16():
        pytest.skip("this CPU has no native bfloat16: auto keeps float32")
    pytest.importorskip("onnxruntime")
    inner.embed(PASSAGES)  # 33 passages, PyTorch not loaded: onnxruntime embeds them
    assert not inner.bfloat16
    inner.embed(PASSAGES * 8)  # 264 passages: worth loading PyTorch for
    assert inner.bfloat16 and inner.loaded
    vecs = inner.embed(PASSAGES)  # loaded now: every call takes the copy
    assert float(np.min(np.sum(vecs * minilm.embed_torch(PASSAGES), axis=1))) >= 0.999


@pytest.mark.slow
def test_bfloat16_forced_on_any_cpu_is_used(minilm):
    from pensive_core.config import EmbedderConfig
    from pensive_core.embedders import create_embedder

    forced = create_embedder(EmbedderConfig(batch_dtype="bfloat16"))
    inner = getattr(forced, "inner", forced)
    vecs = inner.embed(PASSAGES[:3])
    assert inner.bfloat16
    assert float(np.min(np.sum(vecs * minilm.embed_torch(PASSAGES[:3]), axis=1))) >= 0.999
