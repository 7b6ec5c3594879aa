"""Passage batches in bfloat16: the same model at half the arithmetic width, where the CPU
multiplies bfloat16 natively.

On a CPU with AMX or AVX-512 BF16 (Intel Sapphire Rapids and later, AMD Zen 4 and later), a
bfloat16 copy of MiniLM embedded SciFact passages 2x as fast as float32 PyTorch or onnxruntime
(82.9 against 41.2 passages/s, 2 threads) with vectors at cosine >= 0.9999 to float32's
(benchmarks/ingest_speed; quality: benchmarks/results/scifact_bf16_ingest). Without native
support bfloat16 is emulated and slower, so ``auto`` keeps float32 there.

The copy is checked before use: on probe sentences its vectors must agree with the float32
model's at cosine >= 0.999, else passages stay in float32 (and the reason is logged).
Questions are still embedded in float32 (onnxruntime or PyTorch): a question's vector and a
passage's agree as closely as two float32 runs of different batch shapes do.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["BFloat16Encoder", "native_bfloat16"]

#: Below this cosine to the float32 vectors (on any probe) the copy is not used.
MIN_COSINE = 0.999

_PROBES = (
    "How much do I pay now for a month of trams?",
    "Invoice INV-4471-KQ was paid in full by bank transfer on 3 March 2024.",
    "ok",
    "Naïve café in Malmö, 東京 and São Paulo — 😀 CAPITALS, tabs\tand\u200bzero widths",
    "Mitochondria regulate apoptosis through the release of cytochrome c, "
    "which activates caspase-9 in the apoptosome. " * 6,
    "word " * 300,  # past the window: truncated alike
)


@functools.cache
def native_bfloat16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bfloat16 natively (the ``amx_bf16`` or ``avx512_bf16``
    flag in ``/proc/cpuinfo``); False where that file cannot be read (not Linux). Read once
    per file: a small ingest asks at every call until PyTorch is loaded."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[-1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        return False
    return False


class BFloat16Encoder:
    """A bfloat16 copy of a sentence-transformers model, embedding passage batches.

    Args:
        model: The bfloat16 ``SentenceTransformer`` (see :meth:`build`).
    """

    def __init__(self, model: Any) -> None:
        self._model = model

    @classmethod
    def build(
        cls, st_model: Any, reference: Callable[[list[str]], np.ndarray]
    ) -> BFloat16Encoder | None:
        """A checked bfloat16 copy of ``st_model``, or None (reason logged) when it cannot be
        made or its vectors disagree with ``reference(texts)`` (the float32 vectors).

        Raises:
            Nothing: every failure keeps passages in float32.
        """
        try:
            import torch

            copied = copy.deepcopy(st_model).to(torch.bfloat16)
            enc = cls(copied)
            got = enc.embed(list(_PROBES), batch_size=len(_PROBES))
            want = np.asarray(reference(list(_PROBES)), dtype=np.float32)
            cos = float(np.min(np.sum(got * want, axis=1)))
            if not np.isfinite(cos) or cos < MIN_COSINE:
                log.warning("passages stay in float32: bfloat16 gave cosine %.5f", cos)
                return None
            return enc
        except Exception as exc:  # noqa: BLE001 - any failure keeps float32
            log.warning("passages stay in float32: the bfloat16 copy failed: %s", exc)
            return None

    def embed(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Unit float32 vectors of ``texts``, in order (the library sorts by length)."""
        import torch

        with torch.inference_mode():
            vecs = self._model.encode(
                list(texts),
                batch_size=batch_size,
                normalize_embeddings=False,
                convert_to_tensor=True,
                show_progress_bar=False,
            )
        out = vecs.float().cpu().numpy()  # normalised in float32: a norm of 1 to 1e-7
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)
