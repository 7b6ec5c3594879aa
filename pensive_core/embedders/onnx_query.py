"""Query embedding through onnxruntime: the same model, exported once, without torch's
per-call overhead.

A question is a dozen word pieces; for so little work PyTorch's eager dispatch is most of the
time. The model's transformer is exported to ONNX (once per model and library versions, cached
on disk) and run by onnxruntime with one thread; mean pooling and normalisation follow in numpy.
Before it is used, the exported model must give the same vectors as the PyTorch model on probe
sentences (cosine >= 0.9999), so queries always match the passages PyTorch embedded; otherwise
the embedder keeps PyTorch and logs why.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["OnnxQueryEncoder", "cache_dir"]

_PROBES = (
    "How much do I pay now for a month of trams?",
    "Invoice INV-4471-KQ was paid in full by bank transfer on 3 March 2024.",
    "ok",
)


def cache_dir() -> Path:
    """Where exported models are kept: ``$PENSIVE_CACHE_DIR`` or ``~/.cache/pensive``."""
    base = os.environ.get("PENSIVE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "pensive",
    )
    return Path(base) / "onnx"


def _supported(st_model: Any) -> str | None:
    """Why the model cannot be exported as transformer + mean pooling (None: it can)."""
    names = [type(m).__name__ for m in st_model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return f"modules {names} (only Transformer, mean Pooling, Normalize are exported)"
    cfg = st_model[1].get_config_dict()
    mode = cfg.get("pooling_mode")
    if mode is None:  # older sentence-transformers: one flag per pooling mode
        on = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        mode = "mean" if on == ["pooling_mode_mean_tokens"] else str(on)
    if mode != "mean":
        return f"pooling {mode!r} (only mean pooling is exported)"
    if getattr(st_model[0], "auto_model", None) is None:
        return "no transformer model to export"
    return None


def _key(folder: Path, torch: Any, ort: Any) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.glob("*")):
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".json"):
            h.update(f.name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    h.update(f"torch {torch.__version__} ort {ort.__version__} v1".encode())
    return h.hexdigest()[:32]


def _export(auto_model: Any, tokenizer: Any, torch: Any) -> bytes:
    class _Hidden(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    enc = tokenizer(["a probe", "a longer probe sentence"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python control flow
        torch.onnx.export(
            _Hidden(auto_model.eval()),
            tuple(enc[n] for n in names),
            buf,
            input_names=names,
            output_names=["hidden"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "hidden"]},
            opset_version=17,
            dynamo=False,
        )
    return buf.getvalue()


class OnnxQueryEncoder:
    """One text in, one unit vector out, by onnxruntime on the exported transformer."""

    def __init__(self, session: Any, tokenizer: Any, max_length: int) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._max_length = max_length
        self._inputs = {i.name for i in session.get_inputs()}

    @classmethod
    def build(
        cls, folder: Path, st_model: Any, threads: int, reference: Any
    ) -> OnnxQueryEncoder | None:
        """The encoder for ``st_model``, or None (with the reason logged) when it cannot be
        built or does not reproduce ``reference(text)`` (the PyTorch query embedding)."""
        try:
            import onnxruntime as ort
            import torch
        except ImportError as exc:
            log.info("query embedding stays on PyTorch: %s", exc)
            return None
        why = _supported(st_model)
        if why:
            log.info("query embedding stays on PyTorch: %s", why)
            return None
        try:
            from transformers import AutoTokenizer

            # its own tokenizer: the batch path's may be in use on another thread
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            path = cache_dir() / f"{_key(folder, torch, ort)}.onnx"
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = max(1, threads)
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = None
            if path.exists():
                try:
                    session = ort.InferenceSession(
                        path.read_bytes(), opts, providers=["CPUExecutionProvider"]
                    )
                except Exception as exc:  # noqa: BLE001 - a torn cache file: export again
                    log.warning(
                        "the cached query model %s is unreadable (%s): exporting", path, exc
                    )
            if session is None:
                model = _export(st_model[0].auto_model, tokenizer, torch)
                log.info("exported the query model to ONNX (%.0f MB)", len(model) / 1e6)
                try:  # cached for the next process; an unwritable cache only costs a re-export
                    path.parent.mkdir(parents=True, exist_ok=True)
                    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(model)
                    os.replace(tmp, path)
                except OSError as exc:
                    log.info("could not cache the exported query model: %s", exc)
                session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            enc = cls(session, tokenizer, int(st_model.max_seq_length))
            for probe in _PROBES:
                cos = float(np.dot(enc(probe), np.asarray(reference(probe), dtype=np.float32)))
                if cos < 0.9999:
                    log.warning("query embedding stays on PyTorch: ONNX gave cosine %.5f", cos)
                    return None
            return enc
        except Exception as exc:  # noqa: BLE001 - any failure keeps the PyTorch path
            log.warning("query embedding stays on PyTorch: export failed: %s", exc)
            return None

    def __call__(self, text: str) -> np.ndarray:
        enc = self._tokenizer(
            [text], return_tensors="np", truncation=True, max_length=self._max_length
        )
        feed = {k: np.asarray(v, dtype=np.int64) for k, v in enc.items() if k in self._inputs}
        if "token_type_ids" in self._inputs and "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        hidden = self._session.run(None, feed)[0][0]
        mask = feed["attention_mask"][0].astype(np.float32)[:, None]
        vec = (hidden * mask).sum(axis=0) / max(float(mask.sum()), 1.0)
        norm = float(np.linalg.norm(vec))
        return (vec / norm if norm > 0 else vec).astype(np.float32)
